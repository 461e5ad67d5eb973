"""The table-top scene every arm works in: table, floor, the task bodies (``cube``, ``target``),
the world-fixed ``front`` camera and the contact friction, as facts both engines share.

World frame: z up, the robot base at the origin on the table top (z = 0), x forward (toward
the table's far edge). Metres, kilograms; quaternions wxyz. PyBullet builds this scene from
these numbers; a MuJoCo arm's scene file (``robots/<name>/assets/scene.xml``) states them in
MJCF, and tests/sim/test_scene.py checks every registered arm's file against them.

Bodies a newer task needs (a peg, a hole fixture) are not in any scene file: the task declares
them (``task.bodies``, tether.core.protocols.TaskBody) and every arm backend creates them
(:func:`task_bodies`).

Light: no simulator import.
"""

from __future__ import annotations

from typing import Any

from tether.core.errors import ConfigError
from tether.core.protocols import TaskBody
from tether.core.robot import PybulletCamera

Vec3 = tuple[float, float, float]
Rgba = tuple[float, float, float, float]

# table top: a box whose top face is z = 0
TABLE_HALF: Vec3 = (0.55, 0.75, 0.02)
TABLE_POS: Vec3 = (0.4, 0.0, -0.02)
# the table's legs as one block under the top (visual only)
LEG_HALF: Vec3 = (0.5, 0.7, 0.355)
LEG_POS: Vec3 = (0.4, 0.0, -0.395)
# floor height (m) and its half-size in x and y
FLOOR_Z = -0.75
FLOOR_HALF = 3.0

# task bodies and where they sit before the task's reset moves them
TASK_BODIES = ("cube", "target")
# lift's cube: a free 5 cm box of 0.1 kg resting on the table
CUBE_HALF = 0.025
CUBE_MASS = 0.1
CUBE_POS: Vec3 = (0.5, 0.0, CUBE_HALF)
# reach's target: a visual-only sphere (MuJoCo: a mocap body), teleported by the task
TARGET_RADIUS = 0.02
TARGET_POS: Vec3 = (0.5, 0.0, 0.3)

# contact friction: lateral (Coulomb), torsional / spinning (N m per N), rolling, as MuJoCo's
# geom ``friction`` triple. Grip: the finger pads and the cube (spinning friction keeps a
# grasped cube from pivoting); table: the table top.
GRIP_FRICTION: Vec3 = (1.5, 0.02, 0.001)
TABLE_FRICTION: Vec3 = (1.0, 0.005, 0.0001)

# colours (rgba)
TABLE_RGBA: Rgba = (0.62, 0.48, 0.33, 1.0)
LEG_RGBA: Rgba = (0.25, 0.25, 0.27, 1.0)
FLOOR_RGBA: Rgba = (0.35, 0.37, 0.4, 1.0)
CUBE_RGBA: Rgba = (0.85, 0.2, 0.15, 1.0)
TARGET_RGBA: Rgba = (0.1, 0.8, 0.2, 0.6)

# world-fixed cameras, as MuJoCo defines one (position and the camera's x and y axes; it
# looks along -x cross y); their field of view comes from the experiment's CameraSpec.
# Cameras on a robot are the robot's (its MuJoCo scene, its PybulletArmAssets.cameras).
WORLD_CAMERAS: dict[str, PybulletCamera] = {
    "front": PybulletCamera(
        pos=(1.5, -0.95, 0.95), x_axis=(0.6369, 0.7710, 0.0), y_axis=(-0.3463, 0.2861, 0.8934)
    ),
    # across the table from the robot, 53 degrees down onto the middle of the reach (x 0.5 m):
    # at 45 degrees fovy the multi-task layout area fills the image, a 5 cm cube about 8 px
    # of 96 where ``front`` gives it 3-4 (docs/vla.md, 'The table camera')
    "table": PybulletCamera(
        pos=(1.05, 0.0, 0.75), x_axis=(0.0, 1.0, 0.0), y_axis=(-0.7987, 0.0, 0.6018)
    ),
}


def friction_kwargs(friction: Vec3) -> dict[str, float]:
    """A friction triple as PyBullet's ``changeDynamics`` keywords."""
    lateral, spinning, rolling = friction
    return {"lateralFriction": lateral, "spinningFriction": spinning, "rollingFriction": rolling}


def task_bodies(task: Any) -> dict[str, TaskBody]:
    """The bodies ``task`` declares (its optional ``bodies``), by name; ConfigError when the
    task observes an object that is neither declared nor one of the scene's TASK_BODIES."""
    if task is None:
        return {}
    declared = {b.name: b for b in getattr(task, "bodies", ())}
    unknown = [o for o in task.objects if o not in TASK_BODIES and o not in declared]
    if unknown:
        raise ConfigError(
            f"task '{task.name}' observes object(s) {unknown} that the scene lacks and the task "
            f"does not declare (scene: {', '.join(TASK_BODIES)}; declared: "
            f"{', '.join(declared) or 'none'})"
        )
    return declared


def shape_volume(shape: str, size: tuple[float, ...]) -> float:
    """Volume (m^3) of a BodyShape (size as MuJoCo's: half-extents, radius + half-length)."""
    import math

    if shape == "box":
        return 8.0 * size[0] * size[1] * size[2]
    if shape == "cylinder":
        return math.pi * size[0] ** 2 * 2.0 * size[1]
    return 4.0 / 3.0 * math.pi * size[0] ** 3
