"""PyBullet arm backend: any arm on the table-top scene, from the robot's description (its
URDF or loader, TCP link, servo and friction settings, cameras). The table, task bodies and
world cameras are built from tether.sim.scene, the numbers the MuJoCo scenes state, so the
same tasks and the same scripted expert run unchanged on both engines.

Every instance owns its own physics client (``p.connect(p.DIRECT)``) and passes its id on
every call, so several backends coexist in one process and step independently.
"""

from __future__ import annotations

import importlib
import math
import os
import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tether.core.errors import ConfigError, MissingDependency
from tether.core.protocols import Task, restore_task_attributes, task_attributes
from tether.core.robot import ArmDescription, PybulletCamera, RobotDescription
from tether.core.types import Observation, StepResult
from tether.sim import scene
from tether.sim.pybullet.config_pybullet import PybulletConfig
from tether.sim.pybullet.task_bodies import create_task_body
from tether.sim.scoring import arm_observation, score_step

try:
    import pybullet as pb
except ImportError as exc:  # pragma: no cover - depends on the install
    raise MissingDependency("pybullet", "pybullet", "The PyBullet backend") from exc

# clipping planes of the cameras (m)
NEAR, FAR = 0.01, 10.0


def _remove_state(cid: int, state: int) -> None:
    """Free a saved state of a client that is still connected (a snapshot's finaliser)."""
    try:
        if pb.getConnectionInfo(cid)["isConnected"]:
            pb.removeState(state, physicsClientId=cid)
    except pb.error:  # the client went away first
        pass


@dataclass(eq=False)
class PybulletSnapshot:
    """PybulletBackend.snapshot(): a state saved in the physics client's memory (freed
    with the snapshot) and what the backend counts. The motor targets are not in it: every
    step sets them before it simulates."""

    cid: int
    state: int
    # the backend that took it (a closed client's id may be given to a new one)
    owner: object
    steps: int
    task: dict[str, Any]
    _free: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self._free = weakref.finalize(self, _remove_state, self.cid, self.state)


def _wxyz(q_xyzw: Any) -> np.ndarray:
    """PyBullet quaternion (x, y, z, w) -> (w, x, y, z), float64."""
    x, y, z, w = q_xyzw
    return np.array([w, x, y, z], dtype=np.float64)


class PybulletBackend:
    """SimBackend on PyBullet for an arm with a parallel gripper (``robot``: its description).

    With dof = the arm's joints and f = its finger joints: action (dof + 1,) = one target per
    arm joint (rad) + the opening of each finger (m), clipped to the limits. Observation keys
    (as MujocoBackend): ``state`` (dof + f,) arm then finger joint positions, ``velocity``
    (dof + f,) their velocities, ``env_state`` (7 * len(task.objects),) position + wxyz
    quaternion of each task object, ``ee_pose`` (7,) TCP position + wxyz quaternion, and
    ``images/<cam>`` (H, W, 3) uint8 when ``cfg.render_in_obs``. All float32, world frame,
    SI units.
    """

    def __init__(
        self, cfg: PybulletConfig, robot: RobotDescription, task: Task | None = None
    ) -> None:
        if not isinstance(robot, ArmDescription):
            raise ConfigError(
                f"the PyBullet arm backend simulates arms; robot '{robot.name}' is a {robot.kind}"
            )
        objects = tuple(task.objects) if task is not None else ()
        self._declared = scene.task_bodies(task)
        # world cameras, then the robot's (a robot camera of the same name wins)
        self._cameras: dict[str, PybulletCamera] = {
            **scene.WORLD_CAMERAS,
            **robot.pybullet.cameras,
        }
        for cam in cfg.cameras:
            if cam.name not in self._cameras:
                raise ConfigError(
                    f"sim.cameras: robot '{robot.name}' on PyBullet has no camera '{cam.name}' "
                    f"(available: {', '.join(self._cameras)})"
                )
        self.cfg = cfg
        self.robot = robot
        self.task = task
        self.spec = robot.spec(cfg.control_hz, cfg.cameras)
        self._objects = objects
        self._max_duration = getattr(task, "max_duration_s", None)
        self._steps = 0
        self._owner = object()  # what its snapshots name as theirs
        self._dof = robot.dof
        self._lower = np.asarray(robot.lower, dtype=np.float64)
        self._upper = np.asarray(robot.upper, dtype=np.float64)
        self._home = np.asarray(robot.home, dtype=np.float64)
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
        cid, robot = self._cid, self.robot
        assets, g = robot.pybullet, robot.gripper
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
        self._arm = [self._index(joints, "joint", n) for n in robot.arm_joints]
        self._fingers = [self._index(joints, "joint", n) for n in g.joints]
        self._joints = self._arm + self._fingers
        self._tcp_link = self._index(self._links, "link", assets.tcp_link)
        for name, inertia in assets.inertia.items():
            pb.changeDynamics(
                self._robot,
                self._index(self._links, "link", name),
                localInertiaDiagonal=inertia,
                linearDamping=0.0,
                angularDamping=0.0,
                physicsClientId=cid,
            )
        grip = scene.friction_kwargs(scene.GRIP_FRICTION)
        for name in assets.grip_links:
            link = self._index(self._links, "link", name)
            pb.changeDynamics(self._robot, link, **grip, physicsClientId=cid)
        self._camera_links = {
            name: self._index(self._links, "link", cam.link)
            for name, cam in self._cameras.items()
            if cam.link is not None
        }
        # PyBullet's positionGain is the fraction of the position error corrected per
        # physics step, so gain = dt / tau keeps the response the same at every physics step
        gain = min(1.0, self.physics_dt / assets.servo_tau)
        self._forces = [*robot.effort, *[g.effort] * len(self._fingers)]
        if self.cfg.coupled_fingers:
            # every finger follows the first (the same opening, as the real mechanisms)
            for finger in self._fingers[1:]:
                gear = pb.createConstraint(
                    self._robot,
                    self._fingers[0],
                    self._robot,
                    finger,
                    jointType=pb.JOINT_GEAR,
                    jointAxis=(1.0, 0.0, 0.0),
                    parentFramePosition=(0.0, 0.0, 0.0),
                    childFramePosition=(0.0, 0.0, 0.0),
                    physicsClientId=cid,
                )
                pb.changeConstraint(
                    gear, gearRatio=-1.0, erp=0.1, maxForce=5.0 * g.effort, physicsClientId=cid
                )
        self._gains = [gain] * len(self._joints)

        self._table = self._box(scene.TABLE_HALF, scene.TABLE_POS, 0.0, scene.TABLE_RGBA, True)
        table = scene.friction_kwargs(scene.TABLE_FRICTION)
        pb.changeDynamics(self._table, -1, **table, physicsClientId=cid)
        self._box(scene.LEG_HALF, scene.LEG_POS, 0.0, scene.LEG_RGBA, False)
        floor_half = (scene.FLOOR_HALF, scene.FLOOR_HALF, 0.001)
        floor_pos = (0.0, 0.0, scene.FLOOR_Z - 0.001)
        self._box(floor_half, floor_pos, 0.0, scene.FLOOR_RGBA, False)

        self._bodies: dict[str, int] = {}
        if "cube" in self._objects:
            half = (scene.CUBE_HALF,) * 3
            cube = self._box(half, scene.CUBE_POS, scene.CUBE_MASS, scene.CUBE_RGBA, True)
            pb.changeDynamics(cube, -1, **grip, physicsClientId=cid)
            self._bodies["cube"] = cube
        if "target" in self._objects:
            vis = pb.createVisualShape(
                pb.GEOM_SPHERE,
                radius=scene.TARGET_RADIUS,
                rgbaColor=scene.TARGET_RGBA,
                physicsClientId=cid,
            )
            # visual only (no collision shape) and massless: a marker the task teleports
            self._bodies["target"] = pb.createMultiBody(
                baseMass=0.0,
                baseCollisionShapeIndex=-1,
                baseVisualShapeIndex=vis,
                basePosition=scene.TARGET_POS,
                physicsClientId=cid,
            )
        for body in self._declared.values():
            if body.name not in self._bodies:
                self._bodies[body.name] = create_task_body(pb, self._cid, body)

    def _load_robot(self) -> int:
        """The robot's body id: its URDF (fixed base at the origin) or its loader."""
        robot, assets = self.robot, self.robot.pybullet
        if assets.loader is not None:
            module, _, attr = assets.loader.partition(":")
            try:
                loader = getattr(importlib.import_module(module), attr)
            except (ImportError, AttributeError):
                raise ConfigError(
                    f"robot '{robot.name}': pybullet.loader '{assets.loader}' cannot be imported"
                ) from None
            return int(loader(pb, self._cid))
        assert assets.urdf is not None  # PybulletArmAssets validates one of the two
        path = robot.asset(assets.urdf)
        if not path.is_file():
            raise ConfigError(f"robot '{robot.name}': its URDF {path} is missing")
        return int(
            pb.loadURDF(
                str(path),
                basePosition=(0.0, 0.0, 0.0),
                useFixedBase=True,
                flags=pb.URDF_USE_INERTIA_FROM_FILE,
                physicsClientId=self._cid,
            )
        )

    def _index(self, table: dict[str, int], kind: str, name: str) -> int:
        """A joint or link index by name; ConfigError naming the robot if missing."""
        if name not in table:
            raise ConfigError(
                f"robot '{self.robot.name}': its PyBullet model has no {kind} '{name}'"
            )
        return table[name]

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
        """The robot's home pose plus uniform noise (``cfg.reset_noise`` rad, clipped to the
        limits), fingers at the gripper's home opening, then the task's reset distribution,
        all drawn from ``seed``; sim time restarts at 0."""
        rng = np.random.default_rng(seed)
        cid = self._cid
        noise = self.cfg.reset_noise
        q = self._home + rng.uniform(-noise, noise, self._dof)
        q = np.clip(q, self._lower, self._upper)
        targets = [*q.tolist(), *[self.robot.gripper.home] * len(self._fingers)]
        for j, qj in zip(self._joints, targets, strict=True):
            pb.resetJointState(self._robot, j, qj, 0.0, physicsClientId=cid)
        self._command(targets)
        for name, pos in (("cube", scene.CUBE_POS), ("target", scene.TARGET_POS)):
            if name in self._bodies:
                self.set_body_pose(name, np.asarray(pos), np.array([1.0, 0.0, 0.0, 0.0]))
        for body in self._declared.values():
            if body.name not in ("cube", "target"):
                self.set_body_pose(body.name, np.asarray(body.pos), np.array([1.0, 0, 0, 0]))
        if self.task is not None:
            self.task.reset(self, rng)
        self._steps = 0
        return self.observe()

    def step(self, action: np.ndarray) -> StepResult:
        """Hold ``action`` (dof + 1,) for one control period (``self.substeps`` physics
        steps)."""
        a = np.asarray(action, dtype=np.float64)
        if a.shape != self.spec.action.shape:
            raise ValueError(f"action must have shape {self.spec.action.shape}, got {a.shape}")
        # clamp like MuJoCo's actuator ctrlrange (a URDF's limits may be wider than the
        # maker's, e.g. the Panda's)
        g = self.robot.gripper
        arm = np.clip(a[: self._dof], self._lower, self._upper)
        grip = float(np.clip(a[self._dof], g.lower, g.upper))
        # every finger gets the same opening
        self._command([*arm.tolist(), *[grip] * len(self._fingers)])
        for _ in range(self.substeps):
            pb.stepSimulation(physicsClientId=self._cid)
        self._steps += 1
        return score_step(self, self.observe(), self._max_duration)

    def render(self, camera: str) -> np.ndarray:
        """Image (H, W, 3) uint8 from ``camera`` at the size its CameraSpec gives (CPU
        TinyRenderer, so it needs no display and no GPU)."""
        cam = self.spec.camera(camera)
        mount = self._cameras[camera]
        eye, xa, ya = np.asarray(mount.pos), np.asarray(mount.x_axis), np.asarray(mount.y_axis)
        if camera in self._camera_links:
            hp, hq = self._link_pose(self._camera_links[camera])
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
        state = np.array([st[0] for st in states])
        velocity = np.array([st[1] for st in states])
        return arm_observation(self, state, velocity, self._objects)

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
        """Teleport a task body (cube, target marker, a body the task declares; a static one
        too) and zero its velocity."""
        if name not in self._bodies:
            raise ValueError(f"body '{name}' is not a task body ({', '.join(self._bodies)})")
        w, x, y, z = np.asarray(quat, dtype=np.float64) / np.linalg.norm(quat)
        body, cid = self._bodies[name], self._cid
        pos_l = np.asarray(pos, dtype=np.float64).tolist()
        pb.resetBasePositionAndOrientation(body, pos_l, (x, y, z, w), physicsClientId=cid)
        pb.resetBaseVelocity(body, (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), physicsClientId=cid)

    def ee_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """TCP world pose: position (3,) m, quaternion (4,) wxyz. The TCP is the frame of the
        description's ``pybullet.tcp_link`` moved ``tcp_offset`` m along its z (as the MuJoCo
        TCP site and the description's chain)."""
        hp, hq = self._link_pose(self._tcp_link)
        R = np.asarray(pb.getMatrixFromQuaternion(hq), dtype=np.float64).reshape(3, 3)
        return hp + self.robot.pybullet.tcp_offset * R[:, 2], _wxyz(hq)

    def snapshot(self) -> PybulletSnapshot:
        """The physics state (pybullet.saveState: poses, velocities, contacts), the control
        step count and the task's episode attributes (Snapshotting)."""
        state = pb.saveState(physicsClientId=self._cid)
        return PybulletSnapshot(
            self._cid, state, self._owner, self._steps, task_attributes(self.task)
        )

    def restore(self, snapshot: PybulletSnapshot) -> Observation:
        """Back to ``snapshot`` (taken by this backend); the observation there."""
        if not isinstance(snapshot, PybulletSnapshot) or snapshot.owner is not self._owner:
            raise ValueError("restore: the snapshot was not taken by this backend")
        pb.restoreState(stateId=snapshot.state, physicsClientId=self._cid)
        self._steps = snapshot.steps
        restore_task_attributes(self.task, snapshot.task)
        return self.observe()

    def close(self) -> None:
        """Disconnect the physics client; safe to call twice."""
        if self._cid >= 0 and pb.getConnectionInfo(self._cid)["isConnected"]:
            pb.disconnect(physicsClientId=self._cid)
        self._cid = -1

    # ---- helpers ----------------------------------------------------------------------

    def _command(self, targets: list[float]) -> None:
        """Position targets (dof + f,) for the arm joints (rad) and every finger (m)."""
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
