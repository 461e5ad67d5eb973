"""Where the relative paths of an experiment point: one rule for every entry point.

An experiment's **root** is the folder that holds its ``configs/`` folder when the file sits
in ``<root>/configs/experiments/`` (the repository, or ``share/tether_ros`` of a colcon
install), else the experiment file's own folder. A relative path in the experiment (in the
YAML or in a ``section.field=value`` override) names a file under that root; when nothing is
there, it names the file Tether ships (``configs/``, ``models/``) in Tether's data folders:
the source checkout this module runs from, and ``share/tether_ros`` of every ROS prefix on
``AMENT_PREFIX_PATH`` (what ``source install/setup.bash`` sets). No current-directory
lookups, so ``ros2 launch``, ``tether up`` and a node started from ``/tmp`` agree.
"""

from __future__ import annotations

import os
from pathlib import Path

ROS_PACKAGE = "tether_ros"


def experiment_root(experiment: str | Path) -> Path:
    """The base of an experiment file's relative paths (see the module docstring)."""
    folder = Path(experiment).resolve().parent
    if folder.name == "experiments" and folder.parent.name == "configs":
        return folder.parent.parent
    return folder


def data_dirs() -> list[Path]:
    """Tether's data folders (holding ``configs/`` and ``models/``), in lookup order:
    ``$TETHER_HOME``, the source checkout, then ``share/tether_ros`` of each ROS prefix."""
    out: list[Path] = []
    home = os.environ.get("TETHER_HOME")
    if home:
        out.append(Path(home))
    checkout = Path(__file__).resolve().parents[1]  # core/ -> the repository
    if (checkout / "configs" / "experiments").is_dir():
        out.append(checkout)
    for prefix in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
        if prefix:
            share = Path(prefix) / "share" / ROS_PACKAGE
            if share.is_dir():
                out.append(share)
    return list(dict.fromkeys(p.resolve() for p in out))


def resolve_path(path: str | Path, root: Path | None) -> Path:
    """An experiment's path made absolute: under ``root`` when it exists there, else the
    first of Tether's data folders that has it, else under ``root`` (the caller reports it
    missing there)."""
    p = Path(path).expanduser()
    if p.is_absolute():
        return p
    bases = [root] if root is not None else []
    for base in [*bases, *data_dirs()]:
        if (base / p).exists():
            return (base / p).resolve()
    return (bases[0] if bases else Path.cwd()) / p


def find_extended(name: str | Path, extending: Path) -> Path | None:
    """The experiment file that ``extending`` names in its ``extends:`` field, or None: next
    to ``extending`` (so a colcon install, which copies configs/ whole, keeps working), else
    under its root or Tether's data folders (``configs/experiments/x.yaml``), else a file
    Tether ships under ``configs/experiments/`` (a project's experiment extends a shipped one
    by its bare name)."""
    p = Path(name).expanduser()
    if p.is_absolute():
        return p if p.is_file() else None
    root = experiment_root(extending)
    candidates = [extending.parent / p, root / p]
    candidates += [base / p for base in data_dirs()]
    candidates += [base / "configs" / "experiments" / p for base in data_dirs()]
    return next((c.resolve() for c in candidates if c.is_file()), None)


def find_given(path: str | Path) -> Path:
    """A file or folder named on a command line or in a launch argument (an experiment, a
    model folder): as given (absolute or from the current directory), else under Tether's
    data folders (``configs/experiments/x.yaml``, ``models/x`` work from any directory)."""
    p = Path(path).expanduser()
    if p.is_absolute() or p.exists():
        return p.resolve()
    for base in data_dirs():
        if (base / p).exists():
            return (base / p).resolve()
    return p
