"""PyBullet backend: a Panda (pybullet_data ``franka_panda/panda.urdf``) on a table plus the
task's objects, at the same world poses and sizes as the MuJoCo scene
(sim/assets/panda/scene.xml), so the same tasks and the same scripted expert run unchanged.

Every instance owns its own physics client (``p.connect(p.DIRECT)``) and passes its id on
every call, so several backends coexist in one process and step independently.
"""

from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from tether.core.errors import ConfigError, MissingDependency
from tether.core.protocols import Task
from tether.core.types import IMAGE_PREFIX, Observation, StepResult
from tether.sim.pybullet.config_pybullet import PybulletConfig
from tether.sim.robots.panda import (
    ARM_JOINTS,
    ARM_LOWER,
    ARM_UPPER,
    FINGER_JOINTS,
    FINGER_RANGE,
    HOME_ARM,
    HOME_FINGER,
    panda_spec,
)
from tether.sim.robots.panda_kinematics import TCP_D
from tether.sim.scoring import score_step

try:
    import pybullet as pb
    import pybullet_data
except ImportError as exc:  # pragma: no cover - depends on the install
    raise MissingDependency("pybullet", "pybullet", "The PyBullet backend") from exc

URDF = "franka_panda/panda.urdf"
TASK_BODIES = ("cube", "target")
HAND_LINK = "panda_hand"

# Franka's torque limits (N m) per arm joint and the URDF's finger effort (N), as the
# MuJoCo actuators' forcerange
ARM_FORCE = (87.0, 87.0, 87.0, 87.0, 12.0, 12.0, 12.0)
FINGER_FORCE = 20.0
# time constant (s) of PyBullet's position servo: its positionGain is the fraction of the
# position error corrected per physics step, so gain = dt / tau keeps the response the same
# at every physics step (about the MuJoCo servos' kp/kv response)
SERVO_TAU = 0.01
# the URDF's 0.1 kg m^2 inertia placeholders make the wrist sluggish; use the MuJoCo scene's
# diagonal inertias (kg m^2) instead
LINK_INERTIA = {
    "panda_link1": (0.02, 0.02, 0.008),
    "panda_link2": (0.02, 0.008, 0.02),
    "panda_link3": (0.01, 0.01, 0.005),
    "panda_link4": (0.01, 0.01, 0.005),
    "panda_link5": (0.02, 0.02, 0.005),
    "panda_link6": (0.004, 0.004, 0.004),
    "panda_link7": (0.002, 0.002, 0.002),
    "panda_hand": (0.003, 0.001, 0.003),
    "panda_leftfinger": (1e-5, 1e-5, 1e-5),
    "panda_rightfinger": (1e-5, 1e-5, 1e-5),
}
# contact friction: lateral (Coulomb), spinning (N m per N), rolling; the MuJoCo scene's
# pad/cube values (1.5, 0.02, 0.001); spinning friction keeps the grasped cube from pivoting
GRIP_FRICTION = {"lateralFriction": 1.5, "spinningFriction": 0.02, "rollingFriction": 0.001}
TABLE_FRICTION = {"lateralFriction": 1.0, "spinningFriction": 0.005, "rollingFriction": 1e-4}

# scene geometry (m), world frame, from the MuJoCo scene
TABLE_HALF = (0.55, 0.75, 0.02)
TABLE_POS = (0.4, 0.0, -0.02)
LEG_HALF = (0.5, 0.7, 0.355)
LEG_POS = (0.4, 0.0, -0.395)
FLOOR_Z = -0.75
CUBE_HALF = 0.025
CUBE_MASS = 0.1
CUBE_POS = (0.5, 0.0, 0.025)
TARGET_RADIUS = 0.02
TARGET_POS = (0.5, 0.0, 0.3)

# cameras as MuJoCo defines them: position and the camera's x and y axes (it looks along
# -x cross y); "front" in the world frame, "wrist" in the panda_hand frame
CAMERAS = {
    "front": ((1.5, -0.95, 0.95), (0.6369, 0.7710, 0.0), (-0.3463, 0.2861, 0.8934), False),
    "wrist": ((0.055, 0.0, 0.02), (0.0, 1.0, 0.0), (1.0, 0.0, 0.0), True),
}
NEAR, FAR = 0.01, 10.0


def _wxyz(q_xyzw: Any) -> np.ndarray:
    """PyBullet quaternion (x, y, z, w) -> (w, x, y, z), float64."""
    x, y, z, w = q_xyzw
    return np.array([w, x, y, z], dtype=np.float64)


class PybulletBackend:
    """SimBackend on PyBullet. Action (8,): 7 arm joint targets (rad) + per-finger opening (m).

    Observation keys (as MujocoBackend): ``state`` (9,) joint positions, ``velocity`` (9,)
    joint velocities, ``env_state`` (7 * len(task.objects),) position + wxyz quaternion of
    each task object, ``ee_pose`` (7,) TCP position + wxyz quaternion, and
    ``images/<cam>`` (H, W, 3) uint8 when ``cfg.render_in_obs``. All float32, world frame,
    SI units.
    """

    def __init__(self, cfg: PybulletConfig, robot: str = "panda", task: Task | None = None) -> None:
        if robot != "panda":
            raise ConfigError(f"the PyBullet backend has no robot '{robot}' (available: panda)")
        objects = tuple(task.objects) if task is not None else ()
        unknown = [o for o in objects if o not in TASK_BODIES]
        if unknown:
            raise ConfigError(
                f"the PyBullet scene has no task object(s) {unknown} "
                f"(available: {', '.join(TASK_BODIES)})"
            )
        for cam in cfg.cameras:
            if cam.name not in CAMERAS:
                raise ConfigError(
                    f"sim.cameras: the scene has no camera '{cam.name}' "
                    f"(available: {', '.join(CAMERAS)})"
                )
        self.cfg = cfg
        self.task = task
        self.spec = panda_spec(cfg.control_hz, cfg.cameras)
        self._objects = objects
        self._max_duration = getattr(task, "max_duration_s", None)
        self._steps = 0
        # the largest physics step <= physics_dt that divides the control period evenly
        control_dt = 1.0 / cfg.control_hz
        self.substeps = max(1, math.ceil(control_dt / cfg.physics_dt - 1e-9))
        self.physics_dt = control_dt / self.substeps

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

    # ---- scene ------------------------------------------------------------------------

    def _build_scene(self) -> None:
        cid = self._cid
        pb.setGravity(0.0, 0.0, -9.81, physicsClientId=cid)
        pb.setTimeStep(self.physics_dt, physicsClientId=cid)
        # the same contact-pair order in every run; the solver's warm start still carries
        # over a reset, so a replayed seed differs by ~1e-5 m after 2 s (not bit-exact)
        pb.setPhysicsEngineParameter(deterministicOverlappingPairs=1, physicsClientId=cid)
        self._robot = self._load_robot()
        self._links: dict[str, int] = {}
        joints: dict[str, int] = {}
        for j in range(pb.getNumJoints(self._robot, physicsClientId=cid)):
            info = pb.getJointInfo(self._robot, j, physicsClientId=cid)
            joints[info[1].decode()] = j
            self._links[info[12].decode()] = j  # link j is the child of joint j
        self._arm = [joints[n] for n in ARM_JOINTS]
        self._fingers = [joints[n] for n in FINGER_JOINTS]
        self._joints = self._arm + self._fingers
        self._hand = self._links[HAND_LINK]
        for name, inertia in LINK_INERTIA.items():
            pb.changeDynamics(
                self._robot,
                self._links[name],
                localInertiaDiagonal=inertia,
                linearDamping=0.0,
                angularDamping=0.0,
                physicsClientId=cid,
            )
        for link in self._fingers:
            pb.changeDynamics(self._robot, link, **GRIP_FRICTION, physicsClientId=cid)
        gain = min(1.0, self.physics_dt / SERVO_TAU)
        self._forces = [*ARM_FORCE, FINGER_FORCE, FINGER_FORCE]
        self._gains = [gain] * len(self._joints)

        self._table = self._box(TABLE_HALF, TABLE_POS, 0.0, (0.62, 0.48, 0.33, 1.0), True)
        pb.changeDynamics(self._table, -1, **TABLE_FRICTION, physicsClientId=cid)
        self._box(LEG_HALF, LEG_POS, 0.0, (0.25, 0.25, 0.27, 1.0), False)
        self._box((3.0, 3.0, 0.001), (0.0, 0.0, FLOOR_Z - 0.001), 0.0, (0.35, 0.37, 0.4, 1), False)

        self._bodies: dict[str, int] = {}
        if "cube" in self._objects:
            cube = self._box((CUBE_HALF,) * 3, CUBE_POS, CUBE_MASS, (0.85, 0.2, 0.15, 1.0), True)
            pb.changeDynamics(cube, -1, **GRIP_FRICTION, physicsClientId=cid)
            self._bodies["cube"] = cube
        if "target" in self._objects:
            vis = pb.createVisualShape(
                pb.GEOM_SPHERE,
                radius=TARGET_RADIUS,
                rgbaColor=(0.1, 0.8, 0.2, 0.6),
                physicsClientId=cid,
            )
            # visual only (no collision shape) and massless: a marker the task teleports
            self._bodies["target"] = pb.createMultiBody(
                baseMass=0.0,
                baseCollisionShapeIndex=-1,
                baseVisualShapeIndex=vis,
                basePosition=TARGET_POS,
                physicsClientId=cid,
            )

    def _load_robot(self) -> int:
        """Load the URDF with its low-poly collision meshes as visuals too (as the MuJoCo
        scene does): the detailed visual meshes cost ~30 ms per 96x96 TinyRenderer frame
        and ~9 MB of parsing per instance; the low-poly ones ~3 ms."""
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
                    physicsClientId=self._cid,
                )
            )

    def _box(
        self,
        half: tuple[float, ...],
        pos: tuple[float, ...],
        mass: float,
        rgba: tuple[float, ...],
        collide: bool,
    ) -> int:
        """A box body of half-extents ``half`` (m) at ``pos`` (m, world); mass 0 = static."""
        cid = self._cid
        col = (
            pb.createCollisionShape(pb.GEOM_BOX, halfExtents=half, physicsClientId=cid)
            if collide
            else -1
        )
        vis = pb.createVisualShape(
            pb.GEOM_BOX, halfExtents=half, rgbaColor=rgba, physicsClientId=cid
        )
        return int(
            pb.createMultiBody(
                baseMass=mass,
                baseCollisionShapeIndex=col,
                baseVisualShapeIndex=vis,
                basePosition=pos,
                physicsClientId=cid,
            )
        )

    # ---- SimBackend -------------------------------------------------------------------

    def reset(self, seed: int | None = None) -> Observation:
        """Home pose plus uniform noise (``cfg.reset_noise`` rad), fingers open, then the
        task's reset distribution, all drawn from ``seed``; sim time restarts at 0."""
        rng = np.random.default_rng(seed)
        cid = self._cid
        q = np.asarray(HOME_ARM) + rng.uniform(-self.cfg.reset_noise, self.cfg.reset_noise, 7)
        q = np.clip(q, ARM_LOWER, ARM_UPPER)
        targets = [*q.tolist(), HOME_FINGER, HOME_FINGER]
        for j, qj in zip(self._joints, targets, strict=True):
            pb.resetJointState(self._robot, j, qj, 0.0, physicsClientId=cid)
        self._command(targets)
        for name, pos in (("cube", CUBE_POS), ("target", TARGET_POS)):
            if name in self._bodies:
                self.set_body_pose(name, np.asarray(pos), np.array([1.0, 0.0, 0.0, 0.0]))
        if self.task is not None:
            self.task.reset(self, rng)
        self._steps = 0
        return self.observe()

    def step(self, action: np.ndarray) -> StepResult:
        """Hold ``action`` (8,) for one control period (``self.substeps`` physics steps)."""
        a = np.asarray(action, dtype=np.float64)
        if a.shape != self.spec.action.shape:
            raise ValueError(f"action must have shape {self.spec.action.shape}, got {a.shape}")
        # clamp like MuJoCo's actuator ctrlrange (the URDF's limits are wider than Franka's)
        arm = np.clip(a[:7], ARM_LOWER, ARM_UPPER)
        grip = float(np.clip(a[7], *FINGER_RANGE))
        self._command([*arm.tolist(), grip, grip])  # both fingers get the same opening
        for _ in range(self.substeps):
            pb.stepSimulation(physicsClientId=self._cid)
        self._steps += 1
        return score_step(self, self.observe(), self._max_duration)

    def render(self, camera: str) -> np.ndarray:
        """Image (H, W, 3) uint8 from ``camera`` at the size its CameraSpec gives (CPU
        TinyRenderer, so it needs no display and no GPU)."""
        cam = self.spec.camera(camera)
        pos, x_axis, y_axis, on_hand = CAMERAS[camera]
        eye, xa, ya = np.asarray(pos), np.asarray(x_axis), np.asarray(y_axis)
        if on_hand:
            hp, hq = self._link_pose(self._hand)
            R = np.asarray(pb.getMatrixFromQuaternion(hq), dtype=np.float64).reshape(3, 3)
            eye, xa, ya = hp + R @ eye, R @ xa, R @ ya
        forward = -np.cross(xa, ya)  # a MuJoCo camera looks along its -z
        view = pb.computeViewMatrix(
            eye.tolist(), (eye + forward).tolist(), ya.tolist(), physicsClientId=self._cid
        )
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

    @property
    def sim_time(self) -> float:
        """Seconds since the last reset (counted in control steps, so it is exact)."""
        return self._steps / self.cfg.control_hz

    def observe(self) -> Observation:
        states = pb.getJointStates(self._robot, self._joints, physicsClientId=self._cid)
        env = [np.concatenate(self.body_pose(name)) for name in self._objects]
        pos, quat = self.ee_pose()
        data = {
            "state": np.array([s[0] for s in states], dtype=np.float32),
            "velocity": np.array([s[1] for s in states], dtype=np.float32),
            "env_state": (np.concatenate(env) if env else np.zeros(0)).astype(np.float32),
            "ee_pose": np.concatenate([pos, quat]).astype(np.float32),
        }
        if self.cfg.render_in_obs:
            for cam in self.spec.cameras:
                data[IMAGE_PREFIX + cam.name] = self.render(cam.name)
        return Observation(data, stamp_ns=round(self.sim_time * 1e9))

    def body_pose(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """World pose of a task body or robot link ``name``: position (3,) m, quaternion
        (4,) wxyz (float64)."""
        if name in self._bodies:
            p, q = pb.getBasePositionAndOrientation(self._bodies[name], physicsClientId=self._cid)
            return np.array(p, dtype=np.float64), _wxyz(q)
        if name in self._links:
            pos, q = self._link_pose(self._links[name])
            return pos, _wxyz(q)
        raise KeyError(f"the scene has no body '{name}'")

    def set_body_pose(self, name: str, pos: np.ndarray, quat: np.ndarray) -> None:
        """Teleport a task body (cube or target marker) and zero its velocity."""
        if name not in self._bodies:
            raise ValueError(f"body '{name}' is not a task body ({', '.join(self._bodies)})")
        w, x, y, z = np.asarray(quat, dtype=np.float64) / np.linalg.norm(quat)
        body, cid = self._bodies[name], self._cid
        pos_l = np.asarray(pos, dtype=np.float64).tolist()
        pb.resetBasePositionAndOrientation(body, pos_l, (x, y, z, w), physicsClientId=cid)
        pb.resetBaseVelocity(body, (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), physicsClientId=cid)

    def ee_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """TCP world pose: position (3,) m, quaternion (4,) wxyz. The TCP sits ``TCP_D``
        (0.1034 m) along the panda_hand z axis, as the MuJoCo ``tcp`` site and
        panda_kinematics.fk (the URDF's panda_grasptarget, 0.105 m, is not Franka's TCP)."""
        hp, hq = self._link_pose(self._hand)
        R = np.asarray(pb.getMatrixFromQuaternion(hq), dtype=np.float64).reshape(3, 3)
        return hp + TCP_D * R[:, 2], _wxyz(hq)

    def close(self) -> None:
        """Disconnect the physics client; safe to call twice."""
        if self._cid >= 0 and pb.getConnectionInfo(self._cid)["isConnected"]:
            pb.disconnect(physicsClientId=self._cid)
        self._cid = -1

    # ---- helpers ----------------------------------------------------------------------

    def _command(self, targets: list[float]) -> None:
        """Position targets (9,) for the arm joints (rad) and both fingers (m)."""
        pb.setJointMotorControlArray(
            self._robot,
            self._joints,
            pb.POSITION_CONTROL,
            targetPositions=targets,
            targetVelocities=[0.0] * len(targets),
            forces=self._forces,
            positionGains=self._gains,
            velocityGains=[1.0] * len(targets),
            physicsClientId=self._cid,
        )

    def _link_pose(self, link: int) -> tuple[np.ndarray, tuple[float, ...]]:
        """World position (3,) and xyzw quaternion of a robot link's URDF frame."""
        s = pb.getLinkState(
            self._robot, link, computeForwardKinematics=True, physicsClientId=self._cid
        )
        # indices 4, 5: the link frame (0, 1 would be its centre of mass)
        return np.array(s[4], dtype=np.float64), tuple(s[5])

    def __enter__(self) -> PybulletBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
