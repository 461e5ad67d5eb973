"""Insert: pick up a square peg standing on the table and push it into a square hole of a fixed
fixture (docs/insert.md). A precision task: with 2 mm total clearance the peg must be placed
within 1 mm, where a behaviour-cloned policy saturates.

The task declares its two bodies (``bodies``), so no robot's scene file names them:

- ``peg``: a free box ``peg_size`` x ``peg_size`` x ``peg_length`` (m) of ``peg_mass`` kg,
  origin at its centre;
- ``hole``: a fixture fixed to the world (four boxes around a square hole of side
  ``peg_size + clearance``, ``fixture_height`` tall), origin at the hole's centre on the
  table top, so the fixture's top is at ``hole.z + fixture_height``.
"""

from __future__ import annotations

import math

import numpy as np

from tether.core.kinematics import quat_to_mat
from tether.core.protocols import BodyShape, SimBackend, TaskBody
from tether.sim.scene import GRIP_FRICTION, TABLE_FRICTION
from tether.sim.tasks.arith import clip01
from tether.sim.tasks.config_tasks import InsertConfig

PEG_RGBA = (0.2, 0.45, 0.85, 1.0)
FIXTURE_RGBA = (0.75, 0.75, 0.72, 1.0)


def _yaw_quat(yaw: float) -> np.ndarray:
    """wxyz quaternion of a rotation ``yaw`` (rad) about world z."""
    return np.array([np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2)])


def fixture_shapes(hole: float, wall: float, height: float) -> tuple[BodyShape, ...]:
    """Four walls around a square hole of side ``hole`` (m), ``wall`` thick and ``height``
    tall, in the frame of the hole's centre on the table top."""
    h, w, z = hole / 2, wall / 2, height / 2
    return (
        BodyShape(shape="box", size=(h + wall, w, z), pos=(0.0, h + w, z)),
        BodyShape(shape="box", size=(h + wall, w, z), pos=(0.0, -h - w, z)),
        BodyShape(shape="box", size=(w, h, z), pos=(h + w, 0.0, z)),
        BodyShape(shape="box", size=(w, h, z), pos=(-h - w, 0.0, z)),
    )


class InsertTask:
    """Reads and writes state only through ``body_pose`` / ``set_body_pose`` / ``ee_pose``."""

    name = "insert"
    objects: tuple[str, ...] = ("peg", "hole")

    def __init__(self, cfg: InsertConfig | None = None) -> None:
        self.cfg = c = cfg or InsertConfig()
        # episode time limit (s of sim time); backends report truncated from then on
        self.max_duration_s = c.max_duration_s
        # side of the square hole (m)
        self.hole_size = c.peg_size + c.clearance
        # the first two rows of the fixture's world-to-hole rotation, cached with its
        # quaternion's bytes
        self._hole_key = b""
        self._hole_rows: list[list[float]] = []
        self.bodies: tuple[TaskBody, ...] = (
            TaskBody(
                name="peg",
                shapes=(
                    BodyShape(shape="box", size=(c.peg_size / 2, c.peg_size / 2, c.peg_length / 2)),
                ),
                mass=c.peg_mass,
                rgba=PEG_RGBA,
                friction=GRIP_FRICTION,
                pos=(0.5, 0.15, c.peg_length / 2),
            ),
            TaskBody(
                name="hole",
                shapes=fixture_shapes(self.hole_size, c.wall, c.fixture_height),
                mass=0.0,
                rgba=FIXTURE_RGBA,
                friction=TABLE_FRICTION,
                pos=(0.5, -0.15, 0.0),
            ),
        )

    def reset(self, sim: SimBackend, rng: np.random.Generator) -> None:
        """Stand the peg on the table and put the fixture on it: x, y and yaw of each uniform
        in the configured ranges, redrawn (both) until their centres are ``min_separation``
        apart."""
        c = self.cfg
        while True:
            peg = rng.uniform(
                (c.peg_x_range[0], c.peg_y_range[0]), (c.peg_x_range[1], c.peg_y_range[1])
            )
            hole = rng.uniform(
                (c.hole_x_range[0], c.hole_y_range[0]), (c.hole_x_range[1], c.hole_y_range[1])
            )
            if np.linalg.norm(peg - hole) >= c.min_separation:
                break
        peg_yaw = rng.uniform(*c.peg_yaw_range)
        hole_yaw = rng.uniform(*c.hole_yaw_range)
        sim.set_body_pose("hole", np.array([*hole, 0.0]), _yaw_quat(hole_yaw))
        sim.set_body_pose("peg", np.array([*peg, c.peg_length / 2]), _yaw_quat(peg_yaw))

    # ---- measures ---------------------------------------------------------------------

    def peg_bottom(self, sim: SimBackend) -> np.ndarray:
        """World position (3,) of the centre of the peg's bottom face (m)."""
        pos, quat = sim.body_pose("peg")
        return pos - quat_to_mat(quat)[:, 2] * (self.cfg.peg_length / 2)

    def tilt(self, sim: SimBackend) -> float:
        """Angle (rad) between the peg's axis and world z (0 = upright; either end down)."""
        return float(np.arccos(min(1.0, abs(quat_to_mat(sim.body_pose("peg")[1])[2, 2]))))

    def offset_in_hole(self, sim: SimBackend) -> np.ndarray:
        """The peg bottom's (x, y) from the hole's centre in the fixture's frame (m)."""
        hole, quat = sim.body_pose("hole")
        return (quat_to_mat(quat).T @ (self.peg_bottom(sim) - hole))[:2]

    def insertion(self, sim: SimBackend) -> float:
        """How far (m) the peg's bottom is below the fixture's top (negative: above it)."""
        top = sim.body_pose("hole")[0][2] + self.cfg.fixture_height
        return float(top - self.peg_bottom(sim)[2])

    # ---- Task -------------------------------------------------------------------------

    def reward(self, sim: SimBackend) -> float:
        """Dense reward in [0, 4], for debugging and shaping (the sparse reward is success):
        reaching ``1 - tanh(10 * |tcp - peg top|)``; while the TCP is within 3 cm of the
        peg's top, aligning ``1 - tanh(10 * |peg bottom - hole entry|)`` plus inserting
        ``2 * clip(insertion / depth, 0, 1)`` (only with the peg's bottom inside the
        hole); with ``align_fine`` > 0 the alignment adds ``align_fine * (1 - tanh(100 *
        |peg bottom - hole entry|))``, a term that tells millimetres apart (the first changes
        by < 0.05 between a centred peg and one 3 mm off, this one by 0.29)."""
        return self.score(sim)[0]

    def success(self, sim: SimBackend) -> bool:
        """The peg's bottom is inside the hole, at least ``depth`` (2 cm) below the fixture's
        top, and the peg is tilted by at most ``max_tilt`` from upright."""
        return self.score(sim)[1]

    def score(self, sim: SimBackend) -> tuple[float, bool]:
        """``(reward(sim), success(sim))`` from one read of the poses (a backend's step):
        the measures above, each computed once and only where the result depends on it, in
        Python float arithmetic (numpy's dispatch costs more than these 3- and 4-element
        operations; the results agree with the numpy formulas to rounding,
        tests/sim/test_backend_hot_path.py)."""
        c = self.cfg
        half = c.peg_length / 2
        pos, quat = sim.body_pose("peg")
        px, py, pz = pos.tolist()
        w, x, y, z = quat.tolist()
        n = math.sqrt(w * w + x * x + y * y + z * z)
        w, x, y, z = w / n, x / n, y / n, z / n
        # the peg's axis (its frame's z in the world), times half its length
        dx = 2 * (x * z + w * y) * half
        dy = 2 * (y * z - w * x) * half
        az = 1 - 2 * (x * x + y * y)
        dz = az * half
        bx, by, bz = px - dx, py - dy, pz - dz  # the peg's bottom
        hole, hole_quat = sim.body_pose("hole")
        hx, hy, hz = hole.tolist()
        top_z = hz + c.fixture_height
        insertion = top_z - bz
        ex, ey, ez = sim.ee_pose()[0].tolist()
        tx, ty, tz = ex - (px + dx), ey - (py + dy), ez - (pz + dz)
        reach = math.sqrt(tx * tx + ty * ty + tz * tz)
        reward = 1.0 - math.tanh(10.0 * reach)
        inside: bool | None = None  # the peg's bottom inside the hole: computed when needed
        if reach < 0.03:
            gx, gy, gz = bx - hx, by - hy, bz - top_z
            gap = math.sqrt(gx * gx + gy * gy + gz * gz)
            reward += 1.0 - math.tanh(10.0 * gap)
            if c.align_fine:
                reward += c.align_fine * (1.0 - math.tanh(100.0 * gap))
            inside = self._inside(gx, gy, bz - hz, hole_quat)
            if inside:
                reward += 2.0 * clip01(insertion / c.depth)
        # success's three conditions, cheapest first (all pure: the order changes no result)
        success = (
            insertion >= c.depth
            and (
                inside if inside is not None else self._inside(bx - hx, by - hy, bz - hz, hole_quat)
            )
            and math.acos(min(1.0, abs(az))) <= c.max_tilt
        )
        return reward, success

    def _inside(self, ox: float, oy: float, oz: float, hole_quat: np.ndarray) -> bool:
        """Whether the offset (ox, oy, oz) (peg bottom - hole centre, world frame, m) lies
        inside the hole's square (:meth:`offset_in_hole`'s measure)."""
        key = hole_quat.tobytes()
        if key != self._hole_key:
            # the fixture is fixed: its frame changes at resets only
            self._hole_key = key
            self._hole_rows = quat_to_mat(hole_quat).T[:2].tolist()
        (r00, r01, r02), (r10, r11, r12) = self._hole_rows
        ox, oy = r00 * ox + r01 * oy + r02 * oz, r10 * ox + r11 * oy + r12 * oz
        return abs(ox) <= self.hole_size / 2 and abs(oy) <= self.hole_size / 2
