"""PyBullet backend for any differential-drive base (a ``MobileBaseDescription``: its URDF or
loader, wheels, lidar and cameras) on a flat floor with the task's goal marker and obstacles
(tether.sim.base_scene).

A twist action becomes left/right wheel speed targets through the diff-drive kinematics
(the description's track width and wheel radius); the wheels run in velocity control with a torque
limit, so the base skids and slips as a real skid-steer base does. Wheel odometry integrates
the encoder angles; a 2D lidar is a batch of ray casts (``rayTestBatch``).

Every instance owns its physics client (``p.connect(p.DIRECT)``) and passes its id on every
call, so several backends coexist in one process.
"""

from __future__ import annotations

import importlib
import math
import os
from typing import Any

import numpy as np

from tether.core.errors import ConfigError, MissingDependency
from tether.core.protocols import Task
from tether.core.robot import RobotDescription
from tether.core.types import IMAGE_PREFIX, Observation, StepResult
from tether.sim import base_scene as scene
from tether.sim.base_scene import BASE_BODY, mobile_base
from tether.sim.pybullet.config_pybullet import PybulletMobileBaseConfig
from tether.sim.robots import diff_drive as dd
from tether.sim.scoring import score_step

try:
    import pybullet as pb
except ImportError as exc:  # pragma: no cover - depends on the install
    raise MissingDependency("pybullet", "pybullet", "The PyBullet backend") from exc

FLOOR_FRICTION = 1.0
NEAR, FAR = 0.05, 50.0


def _wxyz(q_xyzw: Any) -> np.ndarray:
    x, y, z, w = q_xyzw
    return np.array([w, x, y, z], dtype=np.float64)


class PybulletMobileBase:
    """SimBackend on PyBullet for a mobile base. Action (2,): twist (vx m/s, wz rad/s).

    Observation keys: ``state`` (5 + 2 wheels,) wheel odometry + wheel angles/speeds (see
    ``MobileBaseDescription``), ``scan`` (n_beams,) lidar ranges (m), ``base_pose`` (7,) the true
    base_footprint position + wxyz quaternion (ground truth, for tasks and logs; a policy
    meant for hardware should use the odometry), ``env_state`` (7 * len(task.objects),) pose
    of each task object, ``images/<cam>`` when ``cfg.render_in_obs``. All float32.
    """

    def __init__(
        self, cfg: PybulletMobileBaseConfig, robot: RobotDescription, task: Task | None = None
    ) -> None:
        desc = self.robot = mobile_base(robot, "PyBullet")
        objects = tuple(task.objects) if task is not None else ()
        scene.check_objects(objects, "PyBullet")
        for cam in cfg.cameras:
            if cam.name not in desc.cameras:
                raise ConfigError(
                    f"sim.cameras: robot '{desc.name}' has no camera '{cam.name}' "
                    f"(available: {', '.join(desc.cameras)})"
                )
        self.cfg = cfg
        self.task = task
        self.spec = desc.spec(cfg.control_hz, cfg.cameras)
        self._objects = objects
        self._max_duration = getattr(task, "max_duration_s", None)
        self._steps = 0
        control_dt = 1.0 / cfg.control_hz
        self.substeps = max(1, math.ceil(control_dt / cfg.physics_dt - 1e-9))
        self.physics_dt = control_dt / self.substeps
        mb = cfg.mobile_base
        mult = mb.wheel_separation_multiplier or desc.pybullet.separation_multiplier
        self.track = desc.track_width * mult
        gyro = dd.Gyro(mb.gyro_bias, mb.gyro_noise) if mb.odometry_heading == "imu" else None
        self.odometry = dd.WheelOdometry(self.track, desc.wheel_radius, gyro)
        self.limiter = dd.TwistLimiter(desc.max_linear_accel, desc.max_angular_accel)
        self._side = desc.wheel_side
        self._angles = dd.beam_angles(mb.lidar.n_beams, mb.lidar.fov_deg)
        self._noise = np.random.default_rng(0)

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
        # friction pyramid: Bullet's cone friction makes skid-steer turning stall at some headings
        pb.setPhysicsEngineParameter(
            deterministicOverlappingPairs=1, enableConeFriction=0, physicsClientId=cid
        )
        floor_col = pb.createCollisionShape(pb.GEOM_PLANE, physicsClientId=cid)
        floor_vis = pb.createVisualShape(
            pb.GEOM_BOX,
            halfExtents=(50, 50, 0.001),
            rgbaColor=(0.55, 0.57, 0.6, 1),
            physicsClientId=cid,
        )
        self._floor = pb.createMultiBody(0.0, floor_col, floor_vis, (0, 0, 0), physicsClientId=cid)
        pb.changeDynamics(self._floor, -1, lateralFriction=FLOOR_FRICTION, physicsClientId=cid)
        self._robot = self._load_robot()
        joints = {
            pb.getJointInfo(self._robot, j, physicsClientId=cid)[1].decode(): j
            for j in range(pb.getNumJoints(self._robot, physicsClientId=cid))
        }
        missing = [n for n in self.robot.wheel_joints if n not in joints]
        if missing:
            raise ConfigError(
                f"robot '{self.robot.name}': its PyBullet model has no joint '{missing[0]}'"
            )
        self._wheels = [joints[n] for n in self.robot.wheel_joints]
        for w in self._wheels:
            pb.changeDynamics(
                self._robot,
                w,
                lateralFriction=1.0,
                rollingFriction=0.0,
                spinningFriction=0.0,
                physicsClientId=cid,
            )
        # wheels hold still (velocity 0, torque-limited) until commanded, as motor drivers do
        self._drive([0.0] * len(self._wheels))

        self._bodies: dict[str, int] = {}
        for name in self._objects:
            if name == "goal":
                vis = pb.createVisualShape(
                    pb.GEOM_CYLINDER,
                    radius=scene.GOAL_RADIUS,
                    length=0.01,
                    rgbaColor=(0.1, 0.8, 0.2, 0.6),
                    physicsClientId=cid,
                )
                col = -1
            else:
                col = pb.createCollisionShape(
                    pb.GEOM_CYLINDER,
                    radius=scene.OBSTACLE_RADIUS,
                    height=scene.OBSTACLE_HEIGHT,
                    physicsClientId=cid,
                )
                vis = pb.createVisualShape(
                    pb.GEOM_CYLINDER,
                    radius=scene.OBSTACLE_RADIUS,
                    length=scene.OBSTACLE_HEIGHT,
                    rgbaColor=(0.8, 0.35, 0.1, 1.0),
                    physicsClientId=cid,
                )
            self._bodies[name] = pb.createMultiBody(
                0.0, col, vis, (*scene.PARKING, 0.0), physicsClientId=cid
            )
            # obstacles meet the chassis (the outline), not the wheels' spheres (base_scene)
            if col >= 0:
                for w in self._wheels:
                    pb.setCollisionFilterPair(
                        self._robot, self._bodies[name], w, -1, 0, physicsClientId=cid
                    )

    def _load_robot(self) -> int:
        """The robot's body id: its URDF (base at the origin) or its loader."""
        desc, cid = self.robot, self._cid
        assets = desc.pybullet
        if assets.loader is not None:
            module, _, attr = assets.loader.partition(":")
            try:
                loader = getattr(importlib.import_module(module), attr)
            except (ImportError, AttributeError):
                raise ConfigError(
                    f"robot '{desc.name}': pybullet.loader '{assets.loader}' cannot be imported"
                ) from None
            return int(loader(pb, cid))
        assert assets.urdf is not None
        path = desc.asset(assets.urdf)
        if not path.is_file():
            raise ConfigError(f"robot '{desc.name}': URDF {path} not found")
        return int(
            pb.loadURDF(
                str(path), (0.0, 0.0, 0.0), flags=pb.URDF_USE_INERTIA_FROM_FILE, physicsClientId=cid
            )
        )

    # ---- SimBackend -------------------------------------------------------------------

    def reset(self, seed: int | None = None) -> Observation:
        """Base at the origin facing +x plus uniform yaw noise (``cfg.reset_noise`` rad),
        wheels at rest, odometry at the true pose; then the task's reset, all from ``seed``."""
        rng = np.random.default_rng(seed)
        self._noise = np.random.default_rng(None if seed is None else [seed, 1])
        cid = self._cid
        yaw = float(rng.uniform(-self.cfg.reset_noise, self.cfg.reset_noise))
        q = dd.yaw_quat(yaw)
        pb.resetBasePositionAndOrientation(
            self._robot, (0.0, 0.0, 0.001), (q[1], q[2], q[3], q[0]), physicsClientId=cid
        )
        pb.resetBaseVelocity(self._robot, (0, 0, 0), (0, 0, 0), physicsClientId=cid)
        for w in self._wheels:
            pb.resetJointState(self._robot, w, 0.0, 0.0, physicsClientId=cid)
        self._drive([0.0] * len(self._wheels))
        for name in self._bodies:
            self.set_body_pose(name, np.array([*scene.PARKING, 0.0]), np.array([1.0, 0, 0, 0]))
        if self.task is not None:
            self.task.reset(self, rng)
        # settle the suspension-less chassis on its wheels before time starts
        for _ in range(round(0.2 / self.physics_dt)):
            pb.stepSimulation(physicsClientId=cid)
        pos, quat = self.body_pose(BASE_BODY)
        self.limiter.reset()
        self.odometry.reset(float(pos[0]), float(pos[1]), dd.yaw_of(quat), seed)
        self.odometry.update(*self._side_angles(), 0.0)
        self._steps = 0
        return self.observe()

    def step(self, action: np.ndarray) -> StepResult:
        """Hold the twist ``action`` (2,) for one control period: the acceleration-limited
        twist sets the wheel speed targets, then ``self.substeps`` physics steps."""
        a = np.asarray(action, dtype=np.float64)
        if a.shape != self.spec.action.shape:
            raise ValueError(f"action must have shape {self.spec.action.shape}, got {a.shape}")
        a = np.clip(a, self.spec.action.low_array(), self.spec.action.high_array())
        dt = self.spec.dt
        twist = self.limiter.step(a, dt) if self.cfg.mobile_base.limit_acceleration else a
        left, right = dd.wheel_speeds(twist[0], twist[1], self.track, self.robot.wheel_radius)
        self._drive([left if s > 0 else right for s in self._side])
        for _ in range(self.substeps):
            pb.stepSimulation(physicsClientId=self._cid)
        self._steps += 1
        true_yaw = None
        if self.odometry.gyro is not None:
            true_yaw = dd.yaw_of(self.body_pose(BASE_BODY)[1])
        self.odometry.update(*self._side_angles(), dt, true_yaw)
        return score_step(self, self.observe(), self._max_duration)

    def render(self, camera: str) -> np.ndarray:
        """Image (H, W, 3) uint8 from a camera fixed to the base (CPU TinyRenderer)."""
        cam = self.spec.camera(camera)
        mount = self.robot.cameras[camera]
        eye_l, target_l = mount.eye, mount.target
        pos, quat = self.body_pose(BASE_BODY)
        R = _rot(quat)
        eye, target = pos + R @ np.asarray(eye_l), pos + R @ np.asarray(target_l)
        cid = self._cid
        view = pb.computeViewMatrix(
            eye.tolist(), target.tolist(), (R @ [0, 0, 1.0]).tolist(), physicsClientId=cid
        )
        proj = pb.computeProjectionMatrixFOV(
            cam.fovy_deg, cam.width / cam.height, NEAR, FAR, physicsClientId=cid
        )
        _, _, rgba, _, _ = pb.getCameraImage(
            cam.width,
            cam.height,
            view,
            proj,
            shadow=0,
            renderer=pb.ER_TINY_RENDERER,
            flags=pb.ER_NO_SEGMENTATION_MASK,
            physicsClientId=cid,
        )
        img = np.asarray(rgba, dtype=np.uint8).reshape(cam.height, cam.width, 4)
        return np.ascontiguousarray(img[:, :, :3])

    @property
    def sim_time(self) -> float:
        """Seconds since the last reset (counted in control steps, so it is exact)."""
        return self._steps / self.cfg.control_hz

    def observe(self) -> Observation:
        states = pb.getJointStates(self._robot, self._wheels, physicsClientId=self._cid)
        pos, quat = self.body_pose(BASE_BODY)
        env = [np.concatenate(self.body_pose(name)) for name in self._objects]
        state = np.concatenate(
            [self.odometry.as_array(), [s[0] for s in states], [s[1] for s in states]]
        )
        data = {
            "state": state.astype(np.float32),
            "scan": self.scan(),
            "base_pose": np.concatenate([pos, quat]).astype(np.float32),
            "env_state": (np.concatenate(env) if env else np.zeros(0)).astype(np.float32),
        }
        if self.cfg.render_in_obs:
            for cam in self.spec.cameras:
                data[IMAGE_PREFIX + cam.name] = self.render(cam.name)
        return Observation(data, stamp_ns=round(self.sim_time * 1e9))

    def scan(self) -> np.ndarray:
        """Lidar ranges (m), shape (n_beams,), float32: one ray per beam from the lidar origin
        in the base's horizontal plane; no hit reads range_max."""
        lidar = self.cfg.mobile_base.lidar
        pos, quat = self.body_pose(BASE_BODY)
        R = _rot(quat)
        origin = pos + R @ np.asarray(self.robot.lidar_xyz)
        dirs = np.stack([np.cos(self._angles), np.sin(self._angles), np.zeros_like(self._angles)])
        dirs = (R @ dirs).T
        start = np.broadcast_to(origin, dirs.shape)
        end = start + lidar.range_max * dirs
        hits = pb.rayTestBatch(start.tolist(), end.tolist(), physicsClientId=self._cid)
        frac = np.array([h[2] if h[0] >= 0 else 1.0 for h in hits])
        return dd.finish_scan(
            frac * lidar.range_max, lidar.range_min, lidar.range_max, lidar.noise_std, self._noise
        )

    def body_pose(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """World pose of ``base_footprint`` (the robot) or a task body: position (3,) m,
        quaternion (4,) wxyz (float64)."""
        if name == BASE_BODY:
            p, q = pb.getBasePositionAndOrientation(self._robot, physicsClientId=self._cid)
        elif name in self._bodies:
            p, q = pb.getBasePositionAndOrientation(self._bodies[name], physicsClientId=self._cid)
        else:
            raise KeyError(f"the scene has no body '{name}'")
        return np.array(p, dtype=np.float64), _wxyz(q)

    def set_body_pose(self, name: str, pos: np.ndarray, quat: np.ndarray) -> None:
        """Teleport a task body; obstacles stand on the floor at ``pos``'s x, y; the goal
        marker lies flat on it."""
        if name not in self._bodies:
            raise ValueError(f"body '{name}' is not a task body ({', '.join(self._bodies)})")
        w, x, y, z = np.asarray(quat, dtype=np.float64) / np.linalg.norm(quat)
        p = np.asarray(pos, dtype=np.float64).copy()
        p[2] = 0.005 if name == "goal" else scene.OBSTACLE_HEIGHT / 2
        pb.resetBasePositionAndOrientation(
            self._bodies[name], p.tolist(), (x, y, z, w), physicsClientId=self._cid
        )

    def ee_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """A base has no end effector: the base_footprint pose."""
        return self.body_pose(BASE_BODY)

    def close(self) -> None:
        """Disconnect the physics client; safe to call twice."""
        if self._cid >= 0 and pb.getConnectionInfo(self._cid)["isConnected"]:
            pb.disconnect(physicsClientId=self._cid)
        self._cid = -1

    # ---- helpers ----------------------------------------------------------------------

    def _drive(self, speeds: list[float]) -> None:
        """Wheel speed targets (rad/s) in the description's wheel_joints order."""
        pb.setJointMotorControlArray(
            self._robot,
            self._wheels,
            pb.VELOCITY_CONTROL,
            targetVelocities=speeds,
            forces=[self.robot.wheel_torque] * len(speeds),
            physicsClientId=self._cid,
        )

    def _side_angles(self) -> tuple[float, float]:
        """Mean encoder angle (rad) of the left and of the right wheels."""
        states = pb.getJointStates(self._robot, self._wheels, physicsClientId=self._cid)
        return dd.side_angles(np.array([s[0] for s in states]), self._side)

    def __enter__(self) -> PybulletMobileBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _rot(quat_wxyz: np.ndarray) -> np.ndarray:
    w, x, y, z = quat_wxyz
    return np.asarray(pb.getMatrixFromQuaternion((x, y, z, w)), dtype=np.float64).reshape(3, 3)
