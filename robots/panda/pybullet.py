"""Load the Panda into PyBullet from pybullet_data's ``franka_panda/panda.urdf``."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

URDF = "franka_panda/panda.urdf"


def load_panda(pb: Any, client: int) -> int:
    """Load the URDF with its low-poly collision meshes as visuals too (as the MuJoCo scene
    does): the detailed visual meshes cost ~30 ms per 96x96 TinyRenderer frame and ~9 MB of
    parsing per instance; the low-poly ones ~3 ms. Returns the body id."""
    import pybullet_data

    urdf = Path(pybullet_data.getDataPath()) / URDF
    meshes = (urdf.parent / "meshes").as_posix()
    text = urdf.read_text().replace("package://meshes/visual/", "package://meshes/collision/")
    text = text.replace("package://meshes/", meshes + "/")
    with tempfile.TemporaryDirectory(prefix="tether_pybullet_") as tmp:
        path = Path(tmp) / "panda.urdf"
        path.write_text(text)
        return int(
            pb.loadURDF(
                str(path),
                basePosition=(0.0, 0.0, 0.0),
                useFixedBase=True,
                flags=pb.URDF_USE_INERTIA_FROM_FILE,
                physicsClientId=client,
            )
        )
