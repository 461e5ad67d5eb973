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

Arms only so far (a mobile base's cmd_vel / odom / scan would follow the same pattern).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
import rclpy
from geometry_msgs.msg import PoseStamped
from rcl_interfaces.msg import Parameter as ParameterMsg
from rcl_interfaces.srv import SetParametersAtomically
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import Image, JointState

from tether.core.errors import ConfigError, TetherError
from tether.core.kinematics import mat_to_quat
from tether.core.robot import ArmDescription, RobotDescription
from tether.core.types import IMAGE_PREFIX, Observation, StepResult
from tether.sim.isaac.config_isaac import IsaacRosConfig
from tether.sim.scoring import score_step
from tether_ros import conversions as conv
from tether_ros.isaac import interface as isaac

# the reset is seen once Isaac's arm joints are this close to the start sent (rad)
RESET_TOLERANCE = 0.02


def build_isaac_ros(
    cfg: IsaacRosConfig,
    robot: str | RobotDescription = "panda",
    task: Any = None,
    node: Node | None = None,
) -> IsaacRosBackend:
    """The registered sim type ``isaac_ros``; it lives in a ROS 2 graph (``node``: the sim
    bridge it serves)."""
    from tether.sim.factory import robot_description

    if node is None:
        raise ConfigError(
            "sim.type isaac_ros drives a running Isaac Sim over ROS 2: run it in the node "
            "graph (`tether up`, `tether demo --config`, `ros2 launch`), not in process "
            "(`tether eval --ros` evaluates over ROS 2)"
        )
    return IsaacRosBackend(cfg, robot_description(robot), task, node)


def _stamp(msg: Any) -> int:
    return conv.from_time(msg.header.stamp)


class IsaacRosBackend:
    """SimBackend over a running Isaac Sim (module docstring)."""

    external_clock = True  # Isaac publishes /clock: the sim bridge must not
    realtime_only = True  # Isaac plays in real time: no lockstep

    def __init__(self, cfg: IsaacRosConfig, robot: RobotDescription, task: Any, node: Node) -> None:
        if not isinstance(robot, ArmDescription):
            raise ConfigError(
                f"sim.type isaac_ros drives arms so far; robot '{robot.name}' is a {robot.kind}"
            )
        self.cfg = cfg
        self.robot = robot
        self.task = task
        self.spec = robot.spec(cfg.control_hz, cfg.cameras)
        self.objects = tuple(task.objects) if task is not None else ()
        self._max_duration = getattr(task, "max_duration_s", None)
        self._dof = robot.dof
        self._home = np.asarray(robot.home, np.float64)
        self._lower = np.asarray(robot.lower, np.float64)
        self._upper = np.asarray(robot.upper, np.float64)
        self._lock = threading.Lock()
        self._js: JointState | None = None
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
        self.io.create_subscription(JointState, t.joint_states, self._on_js, qos)
        self.io.create_subscription(Clock, t.clock, self._on_clock, qos)
        for name in self.objects:
            self.io.create_subscription(
                PoseStamped, t.object_pose.format(name=name), self._on_pose(name), qos
            )
        for cam in self.spec.cameras:
            self.io.create_subscription(
                Image, t.image.format(camera=cam.name), self._on_image(cam.name), qos
            )
        self.pub_command = self.io.create_publisher(JointState, t.joint_command, qos)
        self.scene: Any = self.io.create_client(
            SetParametersAtomically, f"{cfg.scene_node}/set_parameters_atomically"
        )
        self._names = isaac.command_joints(robot)
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

    def _on_js(self, msg: JointState) -> None:
        with self._lock:
            self._js = msg

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
        """Wait for Isaac's first joint_states and its scene node; one sentence if either
        is missing."""
        t = self.cfg.topics
        how = (
            "start Isaac Sim with sim/isaac/isaac_ros_scene.py and this experiment YAML "
            "(docs/isaac_sim.md), or set sim.standin=true to run the MuJoCo stand-in"
        )
        if not self._wait(lambda: self._js is not None, self.cfg.connect_timeout_s):
            raise TetherError(
                f"no Isaac Sim answered: nothing on {self.io.resolve_topic_name(t.joint_states)} "
                f"within {self.cfg.connect_timeout_s:g} s ({how})"
            )
        missing = [n for n in self._names if n not in self._js.name]  # type: ignore[union-attr]
        if missing:
            raise TetherError(
                f"Isaac's {t.joint_states} has no joint {missing[0]!r} (it names "
                f"{list(self._js.name)}); robot '{self.robot.name}' needs {list(self._names)}"  # type: ignore[union-attr]
            )
        if not self.scene.wait_for_service(timeout_sec=self.cfg.connect_timeout_s):
            raise TetherError(
                f"Isaac's scene node '{self.cfg.scene_node}' offers no "
                f"set_parameters_atomically within {self.cfg.connect_timeout_s:g} s ({how})"
            )

    def reset(self, seed: int | None = None) -> Observation:
        """Draw the start from ``seed`` (module docstring), have the Isaac scene place it, and
        return the first observation that shows it; time restarts at 0."""
        rng = np.random.default_rng(seed)
        noise = self.cfg.reset_noise
        q = np.clip(self._home + rng.uniform(-noise, noise, self._dof), self._lower, self._upper)
        self._layout = {}
        if self.task is not None:
            self.task.reset(self, rng)
        start = isaac.command_positions(self.robot, np.r_[q, self.robot.gripper.home])
        names = [n for n in self.objects if n in self._layout]
        poses = [float(v) for n in names for v in self._layout[n]]
        T = Parameter.Type
        params = [
            Parameter(isaac.SEED, T.INTEGER, int(seed or 0)),
            Parameter(isaac.JOINT_POSITIONS, T.DOUBLE_ARRAY, start.tolist()),
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
                js, poses_now = self._js, dict(self._poses)
            if js is None or _stamp(js) <= after:
                return False
            arm = self._read(js, js.position)[: self._dof]
            fresh = all(n in poses_now and poses_now[n][0] > after for n in self.objects)
            return bool(np.abs(arm - q).max() < RESET_TOLERANCE) and fresh

        if not self._wait(shows_start, timeout):
            raise TetherError(
                f"Isaac's state did not show the new episode's start within {timeout:g} s "
                f"(joint_states and the object poses after the reset of seed {seed})"
            )
        with self._lock:
            self._t0 = _stamp(self._js)
        self._last_stamp = -1
        self.resets += 1
        return self.observe()

    def episode_started(self) -> None:
        """The episode starts now (Isaac played on since the reset): its time counts from
        Isaac's latest state."""
        with self._lock:
            if self._js is not None:
                self._t0 = _stamp(self._js)

    # --- SimBackend ----------------------------------------------------------------------
    def step(self, action: np.ndarray) -> StepResult:
        """Send ``action`` (dof + 1) to Isaac as position targets; the observation is Isaac's
        latest (one control period later on the bridge's timer)."""
        a = np.asarray(action, np.float64)
        if a.shape != self.spec.action.shape:
            raise ValueError(f"action must have shape {self.spec.action.shape}, got {a.shape}")
        with self._lock:
            stamp = self._clock_ns
        msg = conv.joint_state_msg(stamp, self._names, isaac.command_positions(self.robot, a))
        self.pub_command.publish(msg)
        return score_step(self, self.observe(), self._max_duration)

    def _read(self, js: JointState, values: Any) -> np.ndarray:
        index = {n: i for i, n in enumerate(js.name)}
        vals = list(values)
        return np.array(
            [vals[index[n]] if n in index and index[n] < len(vals) else 0.0 for n in self._state],
            np.float64,
        )

    @property
    def _state(self) -> tuple[str, ...]:
        return tuple(self.spec.state_names)

    def observe(self) -> Observation:
        with self._lock:
            js = self._js
        if js is None:
            raise TetherError("Isaac Sim is not connected")
        q = self._read(js, js.position)
        data = {"state": q.astype(np.float32)}
        data["velocity"] = (
            self._read(js, js.velocity).astype(np.float32)
            if len(js.velocity) == len(js.name)
            else np.zeros(len(q), np.float32)
        )
        env = [np.concatenate(self.body_pose(n)) for n in self.objects]
        data["env_state"] = (np.concatenate(env) if env else np.zeros(0)).astype(np.float32)
        pos, quat = self._fk(q)
        data["ee_pose"] = np.concatenate([pos, quat]).astype(np.float32)
        if self.cfg.render_in_obs:
            for cam in self.spec.cameras:
                data[IMAGE_PREFIX + cam.name] = self.render(cam.name)
        # strictly increasing: the policy server answers each observation once
        stamp = max(_stamp(js), self._last_stamp + 1)
        self._last_stamp = stamp
        return Observation(
            data, stamp_ns=stamp, instruction=getattr(self.task, "instruction", None)
        )

    @property
    def sim_time(self) -> float:
        """Seconds of Isaac's time since the episode's start showed."""
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
        first); anything else is the robot's base, at the origin."""
        with self._lock:
            got = self._poses.get(name)
        pose = got[1] if got is not None else self._layout.get(name)
        if pose is None:
            return np.zeros(3), np.array([1.0, 0, 0, 0])
        return pose[:3].copy(), pose[3:7].copy()

    def set_body_pose(self, name: str, pos: np.ndarray, quat: np.ndarray) -> None:
        """Where the task's reset wants an object: sent with the episode's start."""
        self._layout[name] = np.concatenate([pos, quat]).astype(np.float64)

    def ee_pose(self) -> tuple[np.ndarray, np.ndarray]:
        with self._lock:
            js = self._js
        if js is None:
            raise TetherError("Isaac Sim is not connected")
        return self._fk(self._read(js, js.position))

    def _fk(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The TCP pose from the joints (the robot's base at the world origin, as the scene
        script places it)."""
        p, R = self.robot.kinematics.fk(q[: self._dof])
        return np.asarray(p, np.float64), mat_to_quat(R)

    def close(self) -> None:
        self._spinning = False
        self._thread.join(timeout=2.0)
        self._executor.shutdown()
        self.io.destroy_node()
