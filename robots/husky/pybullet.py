"""Load the Husky into PyBullet from pybullet_data's ``husky/husky.urdf``."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Any

from tether.robots.husky.robot import CHASSIS_SIZE, OUTLINE_WIDTH, WHEEL_RADIUS, WHEEL_WIDTH

URDF = "husky/husky.urdf"
# a 1 g inertial for the URDF's frame-only links (PyBullet would give each 1 kg and the robot
# 6 kg too many)
TINY = (
    '<inertial><mass value="0.001"/><origin xyz="0 0 0"/>'
    '<inertia ixx="1e-6" ixy="0" ixz="0" iyy="1e-6" iyz="0" izz="1e-6"/></inertial>'
)


def load_husky(pb: Any, client: int) -> int:
    """Load the URDF with absolute mesh paths, a 1 g inertial on its frame-only links,
    sphere wheels and the chassis collision box as wide as the wheels' outer faces; returns
    the body id (base at the origin)."""
    import pybullet_data

    urdf = Path(pybullet_data.getDataPath()) / URDF
    text = urdf.read_text().replace('filename="meshes/', f'filename="{urdf.parent}/meshes/')
    text = re.sub(r'<link name="([^"]+)"/>', rf'<link name="\1">{TINY}</link>', text)
    # one contact point per wheel (as the MuJoCo model): Bullet's cylinder-plane contact
    # jumps between 1 and 4 points, which makes skid-steer turning erratic
    text = text.replace(
        f'<cylinder length="{WHEEL_WIDTH}" radius="{WHEEL_RADIUS}"/>',
        f'<sphere radius="{WHEEL_RADIUS}"/>',
    )

    # the chassis collision box out to the wheels' outer faces (the footprint): obstacles
    # collide with it, not with the sphere wheels (the backend filters those pairs), whose
    # equators reach 12 cm beyond the real tyres' faces
    chassis = "{} {} {}".format(*CHASSIS_SIZE)
    if f'<box size="{chassis}"/>' not in text:
        raise ValueError(f"{urdf}: no chassis collision box of size {chassis}")
    text = text.replace(
        f'<box size="{chassis}"/>',
        f'<box size="{CHASSIS_SIZE[0]} {OUTLINE_WIDTH:.4f} {CHASSIS_SIZE[2]}"/>',
    )

    def add_inertial(m: re.Match[str]) -> str:
        body = m.group(0)
        return body if "<inertial>" in body else body.replace("</link>", TINY + "</link>")

    text = re.sub(r"<link name=\"[^\"]+\">.*?</link>", add_inertial, text, flags=re.S)
    with tempfile.TemporaryDirectory(prefix="tether_husky_") as tmp:
        path = Path(tmp) / "husky.urdf"
        path.write_text(text)
        return int(
            pb.loadURDF(
                str(path),
                (0.0, 0.0, 0.0),
                flags=pb.URDF_USE_INERTIA_FROM_FILE,
                physicsClientId=client,
            )
        )
