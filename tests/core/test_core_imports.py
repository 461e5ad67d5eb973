"""tether.core must import without heavy dependencies; the check runs in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("rclpy", "torch", "mujoco", "pybullet", "matplotlib", "av", "pyarrow")


def _loaded_after(stmt: str) -> set[str]:
    code = f"import sys; {stmt}; print(','.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(out.stdout.strip().split(","))


def test_core_imports_nothing_heavy():
    loaded = _loaded_after(
        "import tether.core, tether.core.config, tether.core.safety, tether.core.timing, "
        "tether.core.registry, tether.core.experiment, tether.core.policies, tether.core.data.lerobot, "
        "tether.core.data.video"
    )
    heavy = sorted(m for m in HEAVY if m in loaded)
    assert heavy == [], f"tether.core pulled in {heavy}"


def test_loading_a_config_imports_no_simulator(repo):
    # validating a config resolves the registry's config classes (every engine, kind, task,
    # policy, trainer and hardware type the shipped experiments use): those must stay light
    loaded = _loaded_after(
        "from pathlib import Path; from tether.core.config import load_config; "
        f"[load_config(p) for p in Path('{repo}/configs/experiments').glob('*.yaml')]"
    )
    heavy = sorted(m for m in HEAVY if m in loaded)
    assert heavy == [], f"loading a config pulled in {heavy}"
