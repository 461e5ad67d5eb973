"""MuJoCo backend for any differential-drive base (a ``MobileBaseDescription``: its folder's
MJCF, wheels, lidar and cameras) on a flat floor with the task's goal marker and obstacles
(tether.sim.base_scene).

A twist action becomes left/right wheel speed targets through the diff-drive kinematics;
the wheels are velocity servos with a torque limit, so the base skids as a real skid-steer
base does. Wheel odometry integrates the encoder angles; the 2D lidar is ``mj_multiRay``.
Every instance owns its model and data, so several coexist in one process.
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np

from tether.core.errors import ConfigError, MissingDependency
from tether.core.protocols import Task
from tether.core.robot import RobotDescription
from tether.core.robot_kinds import MobileBaseDescription
from tether.core.types import IMAGE_PREFIX, Observation, StepResult
from tether.sim import base_scene as scene
from tether.sim.base_scene import BASE_BODY, mobile_base
from tether.sim.mujoco.config_mujoco import MujocoMobileBaseConfig
from tether.sim.robots import diff_drive as dd
from tether.sim.scoring import score_step

if "MUJOCO_GL" not in os.environ and not os.environ.get("DISPLAY"):
    os.environ["MUJOCO_GL"] = "egl"

try:
    import mujoco
except ImportError as exc:  # pragma: no cover - depends on the install
    raise MissingDependency("mujoco", "mujoco", "The MuJoCo backend") from exc

# lidar rays see geom groups 0 and 1 (collision geoms), not the visual-only group 2
RAY_GROUPS = np.array([1, 1, 0, 0, 0, 0], dtype=np.uint8)


class MujocoMobileBase:
    """SimBackend on MuJoCo for a mobile base. Action (2,): twist (vx m/s, wz rad/s).

    Observation keys as ``PybulletMobileBase``: ``state`` (13,), ``scan`` (n_beams,),
    ``base_pose`` (7,), ``env_state`` (7 * len(task.objects),), ``images/<cam>``.
    """

    def __init__(
        self, cfg: MujocoMobileBaseConfig, robot: RobotDescription, task: Task | None = None
    ) -> None:
        desc = self.robot = mobile_base(robot, "MuJoCo")
        objects = tuple(task.objects) if task is not None else ()
        scene.check_objects(objects, "MuJoCo")
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
        self._renderers: dict[tuple[int, int], Any] = {}
        self._viewer: Any = None
        mb = cfg.mobile_base
        mult = mb.wheel_separation_multiplier or desc.mujoco.separation_multiplier
        self.track = desc.track_width * mult
        gyro = dd.Gyro(mb.gyro_bias, mb.gyro_noise) if mb.odometry_heading == "imu" else None
        self.odometry = dd.WheelOdometry(self.track, desc.wheel_radius, gyro)
        self.limiter = dd.TwistLimiter(desc.max_linear_accel, desc.max_angular_accel)
        self._angles = dd.beam_angles(mb.lidar.n_beams, mb.lidar.fov_deg)
        self._noise = np.random.default_rng(0)

        self.model = self._compile(desc, objects, cfg)
        self.data = mujoco.MjData(self.model)
        control_dt = 1.0 / cfg.control_hz
        self.substeps = max(1, math.ceil(control_dt / cfg.physics_dt - 1e-9))
        self.model.opt.timestep = control_dt / self.substeps
        m = self.model
        self._base = self._id(mujoco.mjtObj.mjOBJ_BODY, desc.mujoco.base_body, "body")
        jnt = m.body_jntadr[self._base]
        self._free_q, self._free_v = m.jnt_qposadr[jnt], m.jnt_dofadr[jnt]
        jids = [self._id(mujoco.mjtObj.mjOBJ_JOINT, n, "joint") for n in desc.wheel_joints]
        self._wq = np.array([m.jnt_qposadr[j] for j in jids])
        self._wv = np.array([m.jnt_dofadr[j] for j in jids])
        self._act = np.array(
            [self._id(mujoco.mjtObj.mjOBJ_ACTUATOR, n, "actuator") for n in desc.wheel_joints]
        )
        self._side = desc.wheel_side
        self.reset(0)
        if not cfg.headless:
            self._viewer = self._open_viewer()

    def _open_viewer(self) -> Any:
        """MuJoCo's passive viewer window, synced after every step."""
        if not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"):
            raise ConfigError(
                "sim.headless=false needs a display (DISPLAY is not set); "
                "run headless or under a desktop session"
            )
        import mujoco.viewer

        return mujoco.viewer.launch_passive(self.model, self.data)

    def _id(self, kind: Any, name: str, what: str) -> int:
        """Id of a named element of the model, or a one-line ConfigError naming it."""
        i = int(mujoco.mj_name2id(self.model, kind, name))
        if i < 0:
            raise ConfigError(
                f"robot '{self.robot.name}': its MuJoCo model "
                f"({self.robot.mujoco.model}) has no {what} '{name}'"
            )
        return i

    @staticmethod
    def _compile(
        desc: MobileBaseDescription, objects: tuple[str, ...], cfg: MujocoMobileBaseConfig
    ) -> Any:
        """The robot's model plus the task's bodies (mocap: static but teleportable) and the
        base-mounted cameras."""
        path = desc.asset(desc.mujoco.model)
        if not path.is_file():
            raise ConfigError(f"robot '{desc.name}': MuJoCo model {path} not found")
        spec = mujoco.MjSpec.from_file(str(path))
        for name in objects:
            body = spec.worldbody.add_body(name=name, mocap=True, pos=[*scene.PARKING, 0.0])
            if name == "goal":
                body.add_geom(
                    type=mujoco.mjtGeom.mjGEOM_CYLINDER,
                    size=[scene.GOAL_RADIUS, 0.005, 0],
                    rgba=[0.1, 0.8, 0.2, 0.6],
                    group=2,
                    contype=0,
                    conaffinity=0,
                )
            else:
                # contact bit 2 only: obstacles meet the robot geoms that have it (the
                # outline: chassis and tyres' faces), not the wheels' collision spheres
                body.add_geom(
                    type=mujoco.mjtGeom.mjGEOM_CYLINDER,
                    size=[scene.OBSTACLE_RADIUS, scene.OBSTACLE_HEIGHT / 2, 0],
                    rgba=[0.8, 0.35, 0.1, 1.0],
                    contype=scene.OBSTACLE_CONTACT_BIT,
                    conaffinity=scene.OBSTACLE_CONTACT_BIT,
                )
        base = spec.body(desc.mujoco.base_body)
        if base is None:
            raise ConfigError(
                f"robot '{desc.name}': its MuJoCo model ({desc.mujoco.model}) has no body "
                f"'{desc.mujoco.base_body}'"
            )
        for cam in cfg.cameras:
            mount = desc.cameras[cam.name]
            eye, target = (np.asarray(v, dtype=np.float64) for v in (mount.eye, mount.target))
            fwd = (target - eye) / np.linalg.norm(target - eye)
            x = np.cross(fwd, [0.0, 0.0, 1.0])
            x /= np.linalg.norm(x)
            y = np.cross(x, fwd)
            quat = np.empty(4)
            # a MuJoCo camera looks along its -z with x right and y up
            mujoco.mju_mat2Quat(quat, np.stack([x, y, -fwd], axis=1).ravel())
            base.add_camera(name=cam.name, pos=eye.tolist(), quat=quat.tolist(), fovy=cam.fovy_deg)
        return spec.compile()

    # ---- SimBackend -------------------------------------------------------------------

    def reset(self, seed: int | None = None) -> Observation:
        """Base at the origin facing +x plus uniform yaw noise (``cfg.reset_noise`` rad),
        wheels at rest, odometry at the true pose; then the task's reset, all from ``seed``."""
        rng = np.random.default_rng(seed)
        self._noise = np.random.default_rng(None if seed is None else [seed, 1])
        m, d = self.model, self.data
        mujoco.mj_resetData(m, d)
        yaw = float(rng.uniform(-self.cfg.reset_noise, self.cfg.reset_noise))
        d.qpos[self._free_q : self._free_q + 3] = (0.0, 0.0, 0.001)
        d.qpos[self._free_q + 3 : self._free_q + 7] = dd.yaw_quat(yaw)
        d.ctrl[self._act] = 0.0
        for name in self._objects:
            self.set_body_pose(name, np.array([*scene.PARKING, 0.0]), np.array([1.0, 0, 0, 0]))
        if self.task is not None:
            self.task.reset(self, rng)
        # settle the chassis on its wheels before time starts
        mujoco.mj_step(m, d, nstep=round(0.2 / m.opt.timestep))
        d.time = 0.0
        pos, quat = self.body_pose(BASE_BODY)
        self.limiter.reset()
        self.odometry.reset(float(pos[0]), float(pos[1]), dd.yaw_of(quat), seed)
        self.odometry.update(*dd.side_angles(d.qpos[self._wq], self._side), 0.0)
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
        d = self.data
        d.ctrl[self._act] = [left if s > 0 else right for s in self._side]
        mujoco.mj_step(self.model, d, nstep=self.substeps)
        self._steps += 1
        true_yaw = None
        if self.odometry.gyro is not None:
            true_yaw = dd.yaw_of(self.body_pose(BASE_BODY)[1])
        self.odometry.update(*dd.side_angles(d.qpos[self._wq], self._side), dt, true_yaw)
        if self._viewer is not None:
            self._viewer.sync()
        return score_step(self, self.observe(), self._max_duration)

    def render(self, camera: str) -> np.ndarray:
        """Image (H, W, 3) uint8 from a camera fixed to the base."""
        cam = self.spec.camera(camera)
        key = (cam.height, cam.width)
        renderer = self._renderers.get(key)
        if renderer is None:
            vis = self.model.vis.global_
            vis.offwidth = max(vis.offwidth, cam.width)
            vis.offheight = max(vis.offheight, cam.height)
            renderer = self._renderers[key] = mujoco.Renderer(self.model, cam.height, cam.width)
        renderer.update_scene(self.data, camera=camera)
        return np.asarray(renderer.render())

    @property
    def sim_time(self) -> float:
        """Seconds since the last reset (counted in control steps, so it is exact)."""
        return self._steps / self.cfg.control_hz

    def observe(self) -> Observation:
        d = self.data
        pos, quat = self.body_pose(BASE_BODY)
        env = [np.concatenate(self.body_pose(name)) for name in self._objects]
        state = np.concatenate([self.odometry.as_array(), d.qpos[self._wq], d.qvel[self._wv]])
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
        """Lidar ranges (m), shape (n_beams,), float32 (``mj_multiRay`` from the lidar origin
        in the base's horizontal plane, the robot's own body excluded); no hit: range_max."""
        lidar = self.cfg.mobile_base.lidar
        d = self.data
        R = d.xmat[self._base].reshape(3, 3)
        origin = d.xpos[self._base] + R @ np.asarray(self.robot.lidar_xyz)
        local = np.stack([np.cos(self._angles), np.sin(self._angles), np.zeros_like(self._angles)])
        vec = np.ascontiguousarray((R @ local).T).ravel()
        n = len(self._angles)
        dist = np.empty(n)
        geomid = np.empty(n, dtype=np.int32)
        mujoco.mj_multiRay(
            self.model,
            d,
            origin,
            vec,
            RAY_GROUPS,
            1,
            self._base,
            geomid,
            dist,
            None,
            n,
            lidar.range_max,
        )
        ranges = np.where(geomid >= 0, dist, lidar.range_max)
        return dd.finish_scan(
            ranges, lidar.range_min, lidar.range_max, lidar.noise_std, self._noise
        )

    def body_pose(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """World pose of ``base_footprint`` (the robot) or a task body: position (3,) m,
        quaternion (4,) wxyz (float64)."""
        if name == BASE_BODY:
            bid = self._base
        elif name in self._objects:
            bid = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_BODY, name)
        else:
            raise KeyError(f"the scene has no body '{name}'")
        return self.data.xpos[bid].copy(), self.data.xquat[bid].copy()

    def set_body_pose(self, name: str, pos: np.ndarray, quat: np.ndarray) -> None:
        """Teleport a task body; obstacles stand on the floor at ``pos``'s x, y; the goal
        marker lies flat on it."""
        if name not in self._objects:
            raise ValueError(f"body '{name}' is not a task body ({', '.join(self._objects)})")
        m, d = self.model, self.data
        bid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, name)
        p = np.asarray(pos, dtype=np.float64).copy()
        p[2] = 0.005 if name == "goal" else scene.OBSTACLE_HEIGHT / 2
        q = np.asarray(quat, dtype=np.float64)
        d.mocap_pos[m.body_mocapid[bid]] = p
        d.mocap_quat[m.body_mocapid[bid]] = q / np.linalg.norm(q)
        mujoco.mj_forward(m, d)

    def ee_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """A base has no end effector: the base_footprint pose."""
        return self.body_pose(BASE_BODY)

    def close(self) -> None:
        if self._viewer is not None:
            self._viewer.close()
            self._viewer = None
        for renderer in self._renderers.values():
            renderer.close()
        self._renderers.clear()

    def __enter__(self) -> MujocoMobileBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
