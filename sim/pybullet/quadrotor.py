"""PyBullet quadrotor backend: N drones of one multirotor description (its folder's URDF,
``MultirotorDescription.pybullet``) over a floor plane, behind the SimBackend contract
(``tether.sim.quadrotor.world`` holds the engine-independent part and documents actions and
observations).

Each rotor's thrust is an external force along body +z at the rotor's position
(``applyExternalForce`` in LINK_FRAME); the remaining body torque (rotor reaction yaw
torque) and the drag force go in per physics step too. Every instance owns its physics
client (``p.connect(p.DIRECT)``) and passes its id on every call.
"""

from __future__ import annotations

import os

import numpy as np

from tether.core.errors import ConfigError, MissingDependency
from tether.core.robot import RobotDescription
from tether.core.robot_kinds import GRAVITY
from tether.sim.pybullet.config_pybullet import PybulletQuadrotorConfig
from tether.sim.quadrotor.dynamics import quat_rotate
from tether.sim.quadrotor.loads import rotate
from tether.sim.quadrotor.world import CAMERAS, FAR, NEAR, QuadrotorWorld

try:
    import pybullet as pb
except ImportError as exc:  # pragma: no cover - depends on the install
    raise MissingDependency("pybullet", "pybullet", "The PyBullet backend") from exc

TARGET_RADIUS = 0.03
FLOOR_HALF = 6.0  # m


class PybulletQuadrotorBackend(QuadrotorWorld):
    """SimBackend on PyBullet for a quadcopter robot; see QuadrotorWorld for the layout."""

    engine = "PyBullet"

    def __init__(
        self, cfg: PybulletQuadrotorConfig, robot: RobotDescription, task: object = None
    ) -> None:
        super().__init__(cfg, robot, task)
        self._urdf = self.robot.asset(self.robot.pybullet.urdf)
        if not self._urdf.is_file():
            raise ConfigError(f"robot '{self.robot.name}': URDF {self._urdf} not found")
        if not cfg.headless and not os.environ.get("DISPLAY"):
            raise ConfigError(
                "sim.headless=false needs a display (DISPLAY is not set); "
                "run headless or under a desktop session"
            )
        self._cid: int = pb.connect(pb.DIRECT if cfg.headless else pb.GUI)
        if self._cid < 0:
            raise ConfigError("PyBullet could not start a physics client")
        try:
            self._build_scene()
            self.reset(0)
        except Exception:
            self.close()
            raise

    def _build_scene(self) -> None:
        cid = self._cid
        pb.setGravity(0.0, 0.0, -GRAVITY, physicsClientId=cid)
        pb.setTimeStep(self.physics_dt, physicsClientId=cid)
        pb.setPhysicsEngineParameter(deterministicOverlappingPairs=1, physicsClientId=cid)
        half = (FLOOR_HALF, FLOOR_HALF, 0.05)
        col = pb.createCollisionShape(pb.GEOM_BOX, halfExtents=half, physicsClientId=cid)
        vis = pb.createVisualShape(
            pb.GEOM_BOX, halfExtents=half, rgbaColor=(0.55, 0.58, 0.62, 1), physicsClientId=cid
        )
        pb.createMultiBody(0.0, col, vis, (0.0, 0.0, -0.05), physicsClientId=cid)
        self._drones = [
            int(
                pb.loadURDF(
                    str(self._urdf),
                    basePosition=(0.0, 0.0, 1.0),
                    flags=pb.URDF_USE_INERTIA_FROM_FILE,
                    physicsClientId=cid,
                )
            )
            for _ in range(self.num_drones)
        ]
        for body in self._drones:
            # PyBullet damps every body by default (0.04); drag is ours to model
            pb.changeDynamics(body, -1, linearDamping=0.0, angularDamping=0.0, physicsClientId=cid)
        tvis = pb.createVisualShape(
            pb.GEOM_SPHERE,
            radius=TARGET_RADIUS,
            rgbaColor=(0.1, 0.8, 0.2, 0.6),
            physicsClientId=cid,
        )
        # visual only (no collision shape) and massless: markers the task moves
        self._targets = [
            int(
                pb.createMultiBody(
                    baseMass=0.0,
                    baseCollisionShapeIndex=-1,
                    baseVisualShapeIndex=tvis,
                    basePosition=(0.0, 0.0, 1.0),
                    physicsClientId=cid,
                )
            )
            for _ in range(self.num_drones)
        ]
        self._rotor_pos = self.params.rotor_positions().tolist()

    # ---- engine interface ---------------------------------------------------------------

    def _engine_state_lists(self) -> list[list[float]]:
        out = []
        cid = self._cid
        for body in self._drones:
            p, (x, y, z, w) = pb.getBasePositionAndOrientation(body, physicsClientId=cid)
            v, om = pb.getBaseVelocity(body, physicsClientId=cid)
            # PyBullet reports the angular velocity in the world: rotate it into the body
            out.append([*p, w, x, y, z, *v, *_rotate_inverse((w, x, y, z), om)])
        return out

    def _engine_set_states(self, states: np.ndarray) -> None:
        cid = self._cid
        w_world = quat_rotate(states[:, 3:7], states[:, 10:13])
        for i, body in enumerate(self._drones):
            s = states[i]
            quat = (s[4], s[5], s[6], s[3])
            pb.resetBasePositionAndOrientation(body, s[0:3].tolist(), quat, physicsClientId=cid)
            pb.resetBaseVelocity(body, s[7:10].tolist(), w_world[i].tolist(), physicsClientId=cid)

    def _engine_apply(
        self,
        i: int,
        rot: tuple[float, ...],
        thrust: list[float],
        torque: tuple[float, float, float],
        drag: tuple[float, float, float],
    ) -> None:
        cid, body, link = self._cid, self._drones[i], pb.LINK_FRAME
        for r in range(4):
            pb.applyExternalForce(
                body, -1, (0.0, 0.0, thrust[r]), self._rotor_pos[r], link, physicsClientId=cid
            )
        if self.dynamics.drag or self.downwash.enabled:  # drag (+ downwash), body frame
            pb.applyExternalForce(body, -1, drag, (0.0, 0.0, 0.0), link, physicsClientId=cid)
        # roll/pitch moments come from where the rotor forces act; the yaw reaction torque is
        # the rest, applied in the world frame (a base's LINK_FRAME torque is not reliable
        # across PyBullet versions)
        yaw = rotate(rot, (0.0, 0.0, torque[2]))
        pb.applyExternalTorque(body, -1, yaw, pb.WORLD_FRAME, physicsClientId=cid)

    def _engine_step(self) -> None:
        pb.stepSimulation(physicsClientId=self._cid)

    def _engine_target(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        p, q = pb.getBasePositionAndOrientation(self._targets[i], physicsClientId=self._cid)
        return np.array(p, dtype=np.float64), np.array([q[3], q[0], q[1], q[2]])

    def _engine_set_target(self, i: int, pos: np.ndarray, quat: np.ndarray) -> None:
        w, x, y, z = quat
        pb.resetBasePositionAndOrientation(
            self._targets[i], np.asarray(pos).tolist(), (x, y, z, w), physicsClientId=self._cid
        )

    # ---- rendering and lifetime ---------------------------------------------------------

    def render(self, camera: str) -> np.ndarray:
        """Image (H, W, 3) uint8 from a world camera (CPU TinyRenderer: no display, no GPU)."""
        cam = self.spec.camera(camera)
        eye, look = CAMERAS[camera]
        view = pb.computeViewMatrix(eye, look, (0.0, 0.0, 1.0), physicsClientId=self._cid)
        proj = pb.computeProjectionMatrixFOV(
            cam.fovy_deg, cam.width / cam.height, NEAR, FAR, physicsClientId=self._cid
        )
        _, _, rgba, _, _ = pb.getCameraImage(
            cam.width,
            cam.height,
            view,
            proj,
            shadow=0,
            renderer=pb.ER_TINY_RENDERER,
            flags=pb.ER_NO_SEGMENTATION_MASK,
            physicsClientId=self._cid,
        )
        img = np.asarray(rgba, dtype=np.uint8).reshape(cam.height, cam.width, 4)
        return np.ascontiguousarray(img[:, :, :3])

    def close(self) -> None:
        """Disconnect the physics client; safe to call twice."""
        cid = getattr(self, "_cid", -1)
        if cid >= 0 and pb.getConnectionInfo(cid)["isConnected"]:
            pb.disconnect(physicsClientId=cid)
        self._cid = -1


def _rotate_inverse(q: tuple[float, ...], v: tuple[float, ...]) -> tuple[float, float, float]:
    """Body vector of world vector v for the unit quaternion q (w, x, y, z)."""
    w, x, y, z = q
    # v + 2 u x (u x v + w' v) with u = -(x, y, z), w' = w (the conjugate's rotation)
    ux, uy, uz = -x, -y, -z
    tx = 2.0 * (uy * v[2] - uz * v[1])
    ty = 2.0 * (uz * v[0] - ux * v[2])
    tz = 2.0 * (ux * v[1] - uy * v[0])
    return (
        v[0] + w * tx + (uy * tz - uz * ty),
        v[1] + w * ty + (uz * tx - ux * tz),
        v[2] + w * tz + (ux * ty - uy * tx),
    )
