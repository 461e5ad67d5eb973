"""Tether's side of ``sim.type: isaac_ros``: a SimBackend whose world is a running Isaac Sim,
reached through the topics of Isaac's ROS 2 bridge (docs/isaac_sim.md).

The sim bridge runs it like any backend (tether_ros.kinds.runner.RunnerBridge): each control
step's safe command (the SafetyFilter's output) goes to Isaac as a sensor_msgs/JointState of
position targets on ``topics.joint_command``; Isaac's ``joint_states``, each task object's
pose and the camera images come back and are relayed onto Tether's own topics, so the policy
server, chunk executor, recorder and teleop see what they see with MuJoCo.

- **Time** is Isaac's: observations are stamped with the header stamps of Isaac's
  joint_states (its simulation time), and Isaac publishes ``/clock``, so the bridge does not
  (``external_clock``). The bridge steps on the wall clock at ``control_hz``, as Isaac plays
  in real time (``realtime_only``: lockstep would need Isaac to step on request).
- **Episodes**: ``reset(seed)`` draws the start (the home pose plus ``reset_noise``, then the
  task's reset distribution, from ``seed``, as the MuJoCo and PyBullet backends draw it) and
  sends it to the Isaac side's scene node in one rcl_interfaces/SetParametersAtomically call
  (tether_ros.isaac.interface). It then waits for Isaac's joint_states to show the new start.
  Success and reward come from the task, reading the object poses Isaac publishes.
- Its subscriptions live on a node of their own, spun by a thread of their own, so a reset
  can wait for Isaac's answer from inside the bridge's callbacks.

Two kinds: an arm (:class:`IsaacRosArm`: JointState position targets, ``joint_states``) and a
mobile base (:class:`IsaacRosBase`: ``cmd_vel`` Twist out; ``odom``, ``scan`` and the wheels'
``joint_states`` in), on one body (:class:`IsaacRosWorld`: the clock, object poses, cameras,
episode starts).
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from typing import Any

import numpy as np
import rclpy
from geometry_msgs.msg import PoseStamped, Twist
from nav_msgs.msg import Odometry
from rcl_interfaces.msg import Parameter as ParameterMsg
from rcl_interfaces.srv import SetParametersAtomically
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import Image, JointState, LaserScan

from tether.core.errors import ConfigError, TetherError
from tether.core.kinematics import mat_to_quat
from tether.core.robot import ArmDescription, RobotDescription
from tether.core.robot_kinds import MobileBaseDescription
from tether.core.types import IMAGE_PREFIX, Observation, StepResult
from tether.sim.base_scene import BASE_BODY
from tether.sim.isaac.config_isaac import IsaacRosConfig
from tether.sim.robots import diff_drive as dd
from tether.sim.scoring import score_step
from tether_ros import conversions as conv
from tether_ros.isaac import interface as isaac
from tether_ros.kinds.mobile_base import (
    base_odometry_to_array,
    scan_to_array,
    wheel_state_from_msg,
)

# the reset is seen once Isaac's arm joints are this close to the start sent (rad)
RESET_TOLERANCE = 0.02


def build_isaac_ros(
    cfg: IsaacRosConfig,
    robot: str | RobotDescription = "panda",
    task: Any = None,
    node: Node | None = None,
) -> IsaacRosWorld:
    """The registered sim type ``isaac_ros``; it lives in a ROS 2 graph (``node``: the sim
    bridge it serves)."""
    from tether.sim.factory import robot_description

    if node is None:
        raise ConfigError(
            "sim.type isaac_ros drives a running Isaac Sim over ROS 2: run it in the node "
            "graph (`tether up`, `tether demo --config`, `ros2 launch`), not in process "
            "(`tether eval --ros` evaluates over ROS 2)"
        )
    desc = robot_description(robot)
    if isinstance(desc, ArmDescription):
        return IsaacRosArm(cfg, desc, task, node)
    if isinstance(desc, MobileBaseDescription):
        return IsaacRosBase(cfg, desc, task, node)
    raise ConfigError(
        f"sim.type isaac_ros drives arms and mobile bases so far; robot '{desc.name}' is a "
        f"{desc.kind}"
    )


def _stamp(msg: Any) -> int:
    return conv.from_time(msg.header.stamp)


class IsaacRosWorld:
    """What every kind shares (module docstring); a kind adds its state topics, its command,
    its start and its observation."""

    external_clock = True  # Isaac publishes /clock: the sim bridge must not
    realtime_only = True  # Isaac plays in real time: no lockstep

    def __init__(self, cfg: IsaacRosConfig, robot: RobotDescription, task: Any, node: Node) -> None:
        self.cfg = cfg
        self.robot = robot
        self.task = task
        options = getattr(cfg, "robot_options", None)
        self.spec = robot.spec(
            cfg.control_hz, cfg.cameras, **(options(robot.kind) if options else {})
        )
        self.objects = tuple(task.objects) if task is not None else ()
        self._max_duration = getattr(task, "max_duration_s", None)
        self._lock = threading.Lock()
        self._state: Any = None  # the kind's latest state message (it marks the time)
        self._clock_ns = 0
        self._poses: dict[str, tuple[int, np.ndarray]] = {}
        self._images: dict[str, Image] = {}
        self._layout: dict[str, np.ndarray] = {}  # what the task's reset asked for
        self._t0 = 0
        self._last_stamp = -1
        self._blank_said: set[str] = set()
        self.resets = 0

        t = cfg.topics
        self.io = Node(
            f"{node.get_name()}_isaac",
            namespace=node.get_namespace(),
            context=node.context,
            start_parameter_services=False,
        )
        self.log = self.io.get_logger()
        qos = isaac.ISAAC_QOS
        self.io.create_subscription(Clock, t.clock, self._on_clock, qos)
        for name in self.objects:
            self.io.create_subscription(
                PoseStamped, t.object_pose.format(name=name), self._on_pose(name), qos
            )
        for cam in self.spec.cameras:
            self.io.create_subscription(
                Image, t.image.format(camera=cam.name), self._on_image(cam.name), qos
            )
        self._endpoints(qos)
        self.scene: Any = self.io.create_client(
            SetParametersAtomically, f"{cfg.scene_node}/set_parameters_atomically"
        )
        self._executor = SingleThreadedExecutor(context=node.context)
        self._executor.add_node(self.io)
        self._spinning = True
        self._thread = threading.Thread(target=self._spin, name="isaac_ros_io", daemon=True)
        self._thread.start()
        try:
            self._connect()
        except BaseException:
            self.close()  # no thread left spinning on a context about to go
            raise

    # --- what a kind provides ------------------------------------------------------------
    def _endpoints(self, qos: Any) -> None:
        """Subscribe the kind's state topics (the one that marks the time sets
        ``self._state``) and create its command publisher."""
        raise NotImplementedError

    def _state_topic(self) -> str:
        """The topic whose first message means Isaac answered."""
        raise NotImplementedError

    def _check_state(self) -> None:
        """TetherError when Isaac's first state lacks what the robot needs."""

    def _draw_start(self, rng: np.random.Generator) -> tuple[list[float], list[float], Any]:
        """The start from ``rng`` before the task's reset: joint positions for the scene's
        articulation, the base pose (7: x y z qw qx qy qz; empty for an arm), and a check
        ``shows(state_msg) -> bool`` that Isaac's state shows it."""
        raise NotImplementedError

    def _state_stamp(self, msg: Any) -> int:
        return _stamp(msg)

    def observe(self) -> Observation:
        """The kind's observation of Isaac's latest state."""
        raise NotImplementedError

    # --- the io thread -----------------------------------------------------------------
    def _spin(self) -> None:
        while self._spinning and rclpy.ok(context=self.io.context):
            try:
                self._executor.spin_once(timeout_sec=0.05)
            except ExternalShutdownException:  # the context went first
                return
            except Exception:
                if self._spinning:
                    raise
                return

    def _keep(self, attr: str) -> Any:
        def on(msg: Any) -> None:
            with self._lock:
                setattr(self, attr, msg)

        return on

    def _on_clock(self, msg: Clock) -> None:
        with self._lock:
            self._clock_ns = conv.from_time(msg.clock)

    def _on_pose(self, name: str) -> Any:
        def on(msg: PoseStamped) -> None:
            with self._lock:
                self._poses[name] = (_stamp(msg), conv.pose_to_array(msg).astype(np.float64))

        return on

    def _on_image(self, camera: str) -> Any:
        def on(msg: Image) -> None:
            with self._lock:
                self._images[camera] = msg

        return on

    # --- connecting and resetting --------------------------------------------------------
    def _wait(self, predicate: Any, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while not predicate():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.005)
        return True

    def _connect(self) -> None:
        """Wait for Isaac's first state and its scene node; one sentence if either is
        missing."""
        how = (
            "start Isaac Sim with sim/isaac/isaac_ros_scene.py and this experiment YAML "
            "(docs/isaac_sim.md), or set sim.standin=true to run the MuJoCo stand-in"
        )
        if not self._wait(lambda: self._state is not None, self.cfg.connect_timeout_s):
            raise TetherError(
                f"no Isaac Sim answered: nothing on "
                f"{self.io.resolve_topic_name(self._state_topic())} within "
                f"{self.cfg.connect_timeout_s:g} s ({how})"
            )
        self._check_state()
        if not self.scene.wait_for_service(timeout_sec=self.cfg.connect_timeout_s):
            raise TetherError(
                f"Isaac's scene node '{self.cfg.scene_node}' offers no "
                f"set_parameters_atomically within {self.cfg.connect_timeout_s:g} s ({how})"
            )

    def reset(self, seed: int | None = None) -> Observation:
        """Draw the start from ``seed`` (module docstring), have the Isaac scene place it, and
        return the first observation that shows it; time restarts at 0."""
        rng = np.random.default_rng(seed)
        joints, base_pose, shows = self._draw_start(rng)
        self._layout = {}
        if self.task is not None:
            self.task.reset(self, rng)
        names = [n for n in self.objects if n in self._layout]
        poses = [float(v) for n in names for v in self._layout[n]]
        T = Parameter.Type
        params: list[Any] = [
            Parameter(isaac.SEED, T.INTEGER, int(seed or 0)),
            Parameter(isaac.JOINT_POSITIONS, T.DOUBLE_ARRAY, [float(v) for v in joints]),
            Parameter(isaac.BASE_POSE, T.DOUBLE_ARRAY, [float(v) for v in base_pose]),
            Parameter(isaac.OBJECT_NAMES, T.STRING_ARRAY, names),
            Parameter(isaac.OBJECT_POSES, T.DOUBLE_ARRAY, poses),
        ]
        req = SetParametersAtomically.Request()
        req.parameters = [ParameterMsg(name=p.name, value=p.get_parameter_value()) for p in params]
        future = self.scene.call_async(req)
        timeout = self.cfg.reset_timeout_s
        reply = future.result() if self._wait(future.done, timeout) else None
        if reply is None:
            raise TetherError(
                f"the Isaac scene node '{self.cfg.scene_node}' did not answer a reset within "
                f"{timeout:g} s"
            )
        result = reply.result
        if not result.successful:
            raise TetherError(f"the Isaac scene refused the reset: {result.reason}")
        with self._lock:
            after = self._clock_ns

        def shows_start() -> bool:
            with self._lock:
                state, poses_now = self._state, dict(self._poses)
            if state is None or self._state_stamp(state) <= after:
                return False
            fresh = all(n in poses_now and poses_now[n][0] > after for n in self.objects)
            return fresh and bool(shows(state))

        if not self._wait(shows_start, timeout):
            raise TetherError(
                f"Isaac's state did not show the new episode's start within {timeout:g} s "
                f"({self._state_topic()} and the object poses after the reset of seed {seed})"
            )
        with self._lock:
            self._t0 = self._state_stamp(self._state)
        self._last_stamp = -1
        self.resets += 1
        return self.observe()

    def episode_started(self) -> None:
        """The episode starts now (Isaac played on since the reset): its time counts from
        Isaac's latest state."""
        with self._lock:
            if self._state is not None:
                self._t0 = self._state_stamp(self._state)

    # --- SimBackend ----------------------------------------------------------------------
    def _check_action(self, action: np.ndarray) -> np.ndarray:
        a = np.asarray(action, np.float64)
        if a.shape != self.spec.action.shape:
            raise ValueError(f"action must have shape {self.spec.action.shape}, got {a.shape}")
        return a

    def _stamped(self, data: dict[str, np.ndarray], state: Any) -> Observation:
        """The observation of ``data``, the cameras added, stamped with Isaac's time of
        ``state`` (strictly increasing: the policy server answers each observation once)."""
        if self.cfg.render_in_obs:
            for cam in self.spec.cameras:
                data[IMAGE_PREFIX + cam.name] = self.render(cam.name)
        stamp = max(self._state_stamp(state), self._last_stamp + 1)
        self._last_stamp = stamp
        return Observation(
            data, stamp_ns=stamp, instruction=getattr(self.task, "instruction", None)
        )

    def _latest(self) -> Any:
        with self._lock:
            state = self._state
        if state is None:
            raise TetherError("Isaac Sim is not connected")
        return state

    def _env_state(self) -> np.ndarray:
        env = [np.concatenate(self.body_pose(n)) for n in self.objects]
        return (np.concatenate(env) if env else np.zeros(0)).astype(np.float32)

    @property
    def sim_time(self) -> float:
        """Seconds of Isaac's time since the episode's start."""
        return max(self._last_stamp - self._t0, 0) * 1e-9

    def render(self, camera: str) -> np.ndarray:
        """Isaac's latest image of ``camera`` (black until the first one arrives)."""
        cam = self.spec.camera(camera)
        with self._lock:
            msg = self._images.get(camera)
        if msg is None:
            if camera not in self._blank_said:
                self._blank_said.add(camera)
                topic = self.cfg.topics.image.format(camera=camera)
                self.log.warning(f"no image on {topic} yet: camera '{camera}' is black until one")
            return np.zeros((cam.height, cam.width, 3), np.uint8)
        img = conv.image_to_array(msg)
        if img.shape[:2] != (cam.height, cam.width):
            raise TetherError(
                f"Isaac's camera '{camera}' sends {img.shape[1]}x{img.shape[0]} images, the "
                f"experiment's cameras say {cam.width}x{cam.height}"
            )
        return img

    def body_pose(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """A task object's pose as Isaac last published it (the layout sent, before the
        first)."""
        with self._lock:
            got = self._poses.get(name)
        pose = got[1] if got is not None else self._layout.get(name)
        if pose is None:
            return np.zeros(3), np.array([1.0, 0, 0, 0])
        return pose[:3].copy(), pose[3:7].copy()

    def set_body_pose(self, name: str, pos: np.ndarray, quat: np.ndarray) -> None:
        """Where the task's reset wants an object: sent with the episode's start."""
        self._layout[name] = np.concatenate([pos, quat]).astype(np.float64)

    def close(self) -> None:
        """Stop the io thread, then its executor and node (in that order: an executor shut
        down under a thread still waiting in it aborts the process)."""
        self._spinning = False
        with contextlib.suppress(Exception):
            self._executor.wake()
        self._thread.join(timeout=10.0)
        if self._thread.is_alive():  # left to the process's exit rather than risk an abort
            self.log.error("the Isaac io thread did not stop within 10 s")
            return
        self._executor.shutdown()
        self.io.destroy_node()


class IsaacRosArm(IsaacRosWorld):
    """An arm in Isaac Sim: JointState position targets out, ``joint_states`` in."""

    def __init__(self, cfg: IsaacRosConfig, robot: ArmDescription, task: Any, node: Node) -> None:
        self.arm = robot
        self._names = isaac.command_joints(robot)
        self._dof = robot.dof
        self._home = np.asarray(robot.home, np.float64)
        self._lower = np.asarray(robot.lower, np.float64)
        self._upper = np.asarray(robot.upper, np.float64)
        super().__init__(cfg, robot, task, node)

    def _endpoints(self, qos: Any) -> None:
        t = self.cfg.topics
        self.io.create_subscription(JointState, t.joint_states, self._keep("_state"), qos)
        self.pub_command = self.io.create_publisher(JointState, t.joint_command, qos)

    def _state_topic(self) -> str:
        return self.cfg.topics.joint_states

    def _check_state(self) -> None:
        names = list(self._state.name)
        missing = [n for n in self._names if n not in names]
        if missing:
            raise TetherError(
                f"Isaac's {self.cfg.topics.joint_states} has no joint {missing[0]!r} (it names "
                f"{names}); robot '{self.robot.name}' needs {list(self._names)}"
            )

    def _draw_start(self, rng: np.random.Generator) -> tuple[list[float], list[float], Any]:
        """The home pose plus ``reset_noise``, as the MuJoCo and PyBullet backends draw it."""
        noise = self.cfg.reset_noise
        q = np.clip(self._home + rng.uniform(-noise, noise, self._dof), self._lower, self._upper)
        start = isaac.command_positions(self.arm, np.r_[q, self.arm.gripper.home])

        def shows(js: JointState) -> bool:
            arm = self._read(js, js.position)[: self._dof]
            return bool(np.abs(arm - q).max() < RESET_TOLERANCE)

        return start.tolist(), [], shows

    def step(self, action: np.ndarray) -> StepResult:
        """Send ``action`` (dof + 1) to Isaac as position targets; the observation is Isaac's
        latest (one control period later on the bridge's timer)."""
        a = self._check_action(action)
        with self._lock:
            stamp = self._clock_ns
        msg = conv.joint_state_msg(stamp, self._names, isaac.command_positions(self.arm, a))
        self.pub_command.publish(msg)
        return score_step(self, self.observe(), self._max_duration)

    def _read(self, js: JointState, values: Any) -> np.ndarray:
        index = {n: i for i, n in enumerate(js.name)}
        vals = list(values)
        return np.array(
            [
                vals[index[n]] if n in index and index[n] < len(vals) else 0.0
                for n in self.spec.state_names
            ],
            np.float64,
        )

    def observe(self) -> Observation:
        js = self._latest()
        q = self._read(js, js.position)
        velocity = (
            self._read(js, js.velocity) if len(js.velocity) == len(js.name) else np.zeros(len(q))
        )
        pos, quat = self._fk(q)
        data = {
            "state": q.astype(np.float32),
            "velocity": velocity.astype(np.float32),
            "env_state": self._env_state(),
            "ee_pose": np.concatenate([pos, quat]).astype(np.float32),
        }
        return self._stamped(data, js)

    def ee_pose(self) -> tuple[np.ndarray, np.ndarray]:
        js = self._latest()
        return self._fk(self._read(js, js.position))

    def _fk(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The TCP pose from the joints (the robot's base at the world origin, as the scene
        script places it)."""
        p, R = self.arm.kinematics.fk(q[: self._dof])
        return np.asarray(p, np.float64), mat_to_quat(R)


class IsaacRosBase(IsaacRosWorld):
    """A mobile base in Isaac Sim: ``cmd_vel`` (Twist) out; ``odom`` (Isaac's ROS2 Publish
    Odometry: the chassis pose in the odom frame, the body-frame twist), ``scan``
    (LaserScan) and the wheels' ``joint_states`` in. The odometry is also the base's pose
    (``base_pose``, ``body_pose("base_footprint")``): Isaac's odometry node reports the
    simulated chassis, not integrated wheel angles."""

    def __init__(
        self, cfg: IsaacRosConfig, robot: MobileBaseDescription, task: Any, node: Node
    ) -> None:
        self.base = robot
        self._scan: LaserScan | None = None
        self._wheels: JointState | None = None
        super().__init__(cfg, robot, task, node)

    def _endpoints(self, qos: Any) -> None:
        t = self.cfg.topics
        self.io.create_subscription(Odometry, t.odom, self._keep("_state"), qos)
        self.io.create_subscription(LaserScan, t.scan, self._keep("_scan"), qos)
        self.io.create_subscription(JointState, t.joint_states, self._keep("_wheels"), qos)
        self.pub_command = self.io.create_publisher(Twist, t.cmd_vel, qos)

    def _state_topic(self) -> str:
        return self.cfg.topics.odom

    def _check_state(self) -> None:
        lidar = self.cfg.mobile_base.lidar  # type: ignore[attr-defined]
        if not self._wait(lambda: self._scan is not None, self.cfg.connect_timeout_s):
            raise TetherError(f"Isaac publishes no scan on {self.cfg.topics.scan}")
        n = len(self._scan.ranges)  # type: ignore[union-attr]
        if n != lidar.n_beams:
            raise TetherError(
                f"Isaac's {self.cfg.topics.scan} has {n} beams, sim.mobile_base.lidar.n_beams "
                f"says {lidar.n_beams}"
            )

    def _draw_start(self, rng: np.random.Generator) -> tuple[list[float], list[float], Any]:
        """At the origin facing +x plus uniform yaw noise, as the MuJoCo and PyBullet
        backends draw it."""
        yaw = float(rng.uniform(-self.cfg.reset_noise, self.cfg.reset_noise))
        quat = dd.yaw_quat(yaw)

        def shows(odom: Odometry) -> bool:
            x, y, th = (float(v) for v in base_odometry_to_array(odom)[:3])
            return math.hypot(x, y) < 0.02 and abs(dd.wrap_angle(th - yaw)) < RESET_TOLERANCE

        return [], [0.0, 0.0, 0.0, *(float(v) for v in quat)], shows

    def step(self, action: np.ndarray) -> StepResult:
        """Send the twist ``action`` (linear_x, angular_z) on cmd_vel."""
        a = self._check_action(action)
        msg = Twist()
        msg.linear.x, msg.angular.z = float(a[0]), float(a[1])
        self.pub_command.publish(msg)
        return score_step(self, self.observe(), self._max_duration)

    def observe(self) -> Observation:
        odom = self._latest()
        with self._lock:
            scan, wheels = self._scan, self._wheels
        n = len(self.base.wheel_joints)
        wheel = np.zeros(2 * n)
        if wheels is not None and len(wheels.velocity) == len(wheels.name):
            wheel = np.asarray(wheel_state_from_msg(wheels, self.base.wheel_joints), np.float64)
        lidar = self.cfg.mobile_base.lidar  # type: ignore[attr-defined]
        ranges = (
            np.nan_to_num(scan_to_array(scan), posinf=lidar.range_max)
            if scan is not None
            else np.full(lidar.n_beams, lidar.range_max)
        )
        pos, quat = self.body_pose(BASE_BODY)
        data = {
            "state": np.r_[base_odometry_to_array(odom), wheel].astype(np.float32),
            "scan": np.clip(ranges, lidar.range_min, lidar.range_max).astype(np.float32),
            "base_pose": np.concatenate([pos, quat]).astype(np.float32),
            "env_state": self._env_state(),
        }
        return self._stamped(data, odom)

    def body_pose(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """The base (``base_footprint``) from Isaac's odometry; a task object as published."""
        if name != BASE_BODY:
            return super().body_pose(name)
        x, y, yaw = (float(v) for v in base_odometry_to_array(self._latest())[:3])
        return np.array([x, y, 0.0]), np.asarray(dd.yaw_quat(yaw), np.float64)

    def ee_pose(self) -> tuple[np.ndarray, np.ndarray]:
        raise TetherError("a mobile base has no end effector")
