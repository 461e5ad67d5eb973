"""What the recorder takes in for each robot kind: topics, message types, decoders, and how
their values form the dataset's features (LeRobot v3: ``observation.state``, ``action``,
``observation.environment_state``, extras, ``observation.images.<camera>``).

=============  ==================================  ===============================  ==========
kind           observation.state                   action                           extras
=============  ==================================  ===============================  ==========
arm            joint_states                        joint_trajectory (chunks)        -
mobile_base    odom (5) + wheel joint_states (2N)  joint_trajectory or cmd_vel      scan
quadcopter     <drone>/odom (13 per drone)         <drone>/cmd_low_level in the     imu
                                                   spec's mode (+ cmd_vel for
                                                   velocity_setpoint)
=============  ==================================  ===============================  ==========

Extras are features of their own: ``observation.scan`` (lidar ranges, m; when the experiment
says how many beams: a simulated lidar) and ``observation.imu`` (specific force m/s^2 then
body rates rad/s, body frame, per drone). Every kind also records the task's object poses (``objects/<name>/pose``, a drone's
``<drone>/objects/target/pose``) and every camera of the spec (``camera/<name>/image_raw``).
State names are the spec's ``state_names``, action names ``spec.action.names``. A decoder
turns a message into (stamp ns, value) and raises InvalidCommand on a malformed one; a
stamp of None means the message is unstamped (a Twist; a cmd_low_level stamped 0, which in sim
time is also the first observation's stamp): the recorder stamps it with the robot's latest
time (the clock stream's), in lockstep an episode's first one with the episode's start
(tether.core.data.align).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from geometry_msgs.msg import PoseStamped, Twist
from nav_msgs.msg import Odometry
from sensor_msgs.msg import Image, Imu, JointState, LaserScan
from trajectory_msgs.msg import JointTrajectory

from tether.core.config import ExperimentConfig
from tether.core.data.align import Feature
from tether.core.errors import ConfigError, InvalidCommand
from tether.core.spec import RobotSpec
from tether.sim.drone_bridge import drone_names
from tether_ros import conversions as conv
from tether_ros import interface as itf
from tether_ros.kinds import mobile_base as base

# message -> (stamp ns or None when unstamped, value); ``latest``: the latest value of each
# stream key (a drone's cmd_vel needs its heading)
Decode = Callable[[Any, Mapping[str, Any]], tuple[int | None, Any]]
POSE_FIELDS = ("x", "y", "z", "qw", "qx", "qy", "qz")
IMU_FIELDS = ("accel_x", "accel_y", "accel_z", "gyro_x", "gyro_y", "gyro_z")
STATE, ACTION, ENV = "observation.state", "action", "observation.environment_state"
DRONE_STATE_DIM = 13
# the topics that carry a drone's commands in each action mode: every mode has its
# cmd_low_level channels (what the drone policies send); cmd_vel is a velocity setpoint
DRONE_COMMAND_TOPICS = {
    "rotor_rpm": (itf.CMD_LOW_LEVEL,),
    "thrust_rates": (itf.CMD_LOW_LEVEL,),
    "velocity_setpoint": (itf.CMD_LOW_LEVEL, itf.CMD_VEL),
}


@dataclass(frozen=True)
class Stream:
    """One topic the recorder subscribes. ``key``: its stream in the aligner; ``command``:
    a command (reliable QoS, not acknowledged on recorder_ack) rather than a sensor stream;
    ``max_age_s``: how old its value may be in a frame (None: two frames); ``every_step``:
    published with every observation (a camera may run slower), so an ended episode waits
    for its last message."""

    key: str
    topic: str
    msg_type: Any
    decode: Decode
    command: bool = False
    max_age_s: float | None = None
    every_step: bool = True


@dataclass(frozen=True)
class Recording:
    """A kind's recording: the streams, the features they form (in dataset order) with
    their LeRobot descriptions, and the clock stream (published last in each observation)."""

    streams: tuple[Stream, ...]
    features: tuple[Feature, ...]
    info: dict[str, dict[str, Any]]
    clock_key: str


# --- decoders ------------------------------------------------------------------------------
def _stamped(fn: Callable[[Any], Any]) -> Decode:
    """A decoder for a message with a header: its stamp and ``fn(msg)``."""
    return lambda msg, _latest: (conv.from_time(msg.header.stamp), fn(msg))


_pose = _stamped(conv.pose_to_array)


def _image(msg: Image) -> np.ndarray:
    return conv.image_to_array(msg).copy()


def _imu(msg: Imu) -> np.ndarray:
    a, w = msg.linear_acceleration, msg.angular_velocity
    out = np.array([a.x, a.y, a.z, w.x, w.y, w.z], np.float64)
    if not np.isfinite(out).all():
        raise InvalidCommand("imu contains NaN or inf")
    return out.astype(np.float32)


def _trajectory(spec: RobotSpec) -> Decode:
    def decode(msg: JointTrajectory, _latest: Mapping[str, Any]) -> tuple[int, Any]:
        chunk = conv.trajectory_to_chunk(msg, spec)  # what the bridge rejects is not recorded
        return chunk.t0_ns, chunk

    return decode


def _base_twist(msg: Twist, _latest: Mapping[str, Any]) -> tuple[None, np.ndarray]:
    return None, base.twist_to_action(msg).astype(np.float32)


def _low_level(mode: str) -> Decode:
    """A drone's cmd_low_level in ``mode`` (the dataset's action space); other modes are not
    this dataset's actions."""

    def decode(msg: JointState, _latest: Mapping[str, Any]) -> tuple[int | None, Any]:
        got, values, stamp = conv.low_level_to_command(msg)
        if got != mode:
            raise InvalidCommand(f"a {got} command is not in the dataset's action mode {mode}")
        return (stamp or None), values.astype(np.float32)

    return decode


def _drone_twist(state_key: str) -> Decode:
    """A drone's cmd_vel (heading frame) as the velocity setpoint it becomes (world frame),
    turned by the drone's latest heading."""

    def decode(msg: Twist, latest: Mapping[str, Any]) -> tuple[None, Any]:
        state = latest.get(state_key)
        if state is None:
            raise InvalidCommand("cmd_vel before the drone's first odometry")
        w, x, y, z = (float(v) for v in state[3:7])
        yaw = math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
        return None, conv.twist_to_setpoint(msg, yaw).astype(np.float32)

    return decode


# --- features ------------------------------------------------------------------------------
def _vector(names: list[str]) -> dict[str, Any]:
    return {"dtype": "float32", "shape": [len(names)], "names": names}


class _Builder:
    """Collects streams and features in dataset order."""

    def __init__(self) -> None:
        self.streams: list[Stream] = []
        self.features: dict[str, Feature] = {}
        self.info: dict[str, dict[str, Any]] = {}

    def add(self, feature: str, names: list[str], *streams: Stream) -> None:
        self.streams += [s for s in streams if s not in self.streams]
        keys = tuple(dict.fromkeys(s.key for s in streams))  # several topics, one key: any
        old = self.features.get(feature)
        self.features[feature] = Feature(feature, (old.keys if old else ()) + keys)
        old_names = self.info.get(feature, {}).get("names", [])
        self.info[feature] = _vector(old_names + names)

    def objects(self, objects: tuple[str, ...], prefix: str = "") -> None:
        for o in objects:
            topic = prefix + itf.object_pose_topic(o)
            names = [f"{prefix}{o}.{c}" for c in POSE_FIELDS]
            self.add(ENV, names, Stream(f"obj/{topic}", topic, PoseStamped, _pose))

    def cameras(self, spec: RobotSpec) -> None:
        for c in spec.cameras:
            key = f"img/{c.name}"
            # cameras may run slower than the dataset: allow one camera period of age
            s = Stream(
                key,
                itf.image_topic(c.name),
                Image,
                _stamped(_image),
                max_age_s=1.5 / c.fps,
                every_step=False,
            )
            self.streams.append(s)
            name = f"observation.images.{c.name}"
            self.features[name] = Feature(name, (key,), video=True)
            self.info[name] = {
                "dtype": "video",
                "shape": [c.height, c.width, 3],
                "names": ["height", "width", "channels"],
            }

    def build(self, clock_key: str) -> Recording:
        order = [STATE, ACTION, ENV]
        names = sorted(self.features, key=lambda f: order.index(f) if f in order else len(order))
        return Recording(
            tuple(self.streams),
            tuple(self.features[n] for n in names),
            {n: self.info[n] for n in names},
            clock_key,
        )


# --- kinds ---------------------------------------------------------------------------------
def arm_recording(cfg: ExperimentConfig, spec: RobotSpec, objects: tuple[str, ...]) -> Recording:
    b = _Builder()
    names = spec.state_names
    b.add(
        STATE,
        list(names),
        Stream(
            "state",
            itf.JOINT_STATES,
            JointState,
            _stamped(lambda m: conv.joint_state_to_array(m, names)),
        ),
    )
    b.add(
        ACTION,
        list(spec.action.names),
        Stream("action", itf.JOINT_TRAJECTORY, JointTrajectory, _trajectory(spec), command=True),
    )
    b.objects(objects)
    b.cameras(spec)
    return b.build("state")


def mobile_base_recording(
    cfg: ExperimentConfig, spec: RobotSpec, objects: tuple[str, ...]
) -> Recording:
    b = _Builder()
    joints = base.wheel_joints(spec)
    odom, wheels = (
        spec.state_names[: len(base.ODOM_STATE)],
        spec.state_names[len(base.ODOM_STATE) :],
    )
    b.add(
        STATE,
        list(odom),
        Stream("state/odom", itf.ODOM, Odometry, _stamped(base.base_odometry_to_array)),
    )
    b.add(
        STATE,
        list(wheels),
        Stream(
            "state/wheels",
            itf.JOINT_STATES,
            JointState,
            _stamped(lambda m: base.wheel_state_from_msg(m, joints)),
        ),
    )
    # a policy server sends stamped chunks; teleop and planners send twists
    b.add(
        ACTION,
        list(spec.action.names),
        Stream("action", itf.JOINT_TRAJECTORY, JointTrajectory, _trajectory(spec), command=True),
        Stream("action", itf.CMD_VEL, Twist, _base_twist, command=True),
    )
    b.objects(objects)
    # the scan, when the experiment says how many beams it has (a simulated lidar)
    mobile = getattr(cfg.world, "mobile_base", None)
    if mobile is not None:
        n = mobile.lidar.n_beams

        def scan(msg: LaserScan) -> np.ndarray:
            ranges = base.scan_to_array(msg)
            if len(ranges) != n:
                raise InvalidCommand(f"scan has {len(ranges)} beams, the dataset {n}")
            return ranges

        b.add(
            "observation.scan",
            [f"range_{i}" for i in range(n)],
            Stream("scan", base.SCAN, LaserScan, _stamped(scan)),
        )
    b.cameras(spec)
    # the bridge publishes the wheel joint_states last in each observation
    return b.build("state/wheels")


def quadcopter_recording(
    cfg: ExperimentConfig, spec: RobotSpec, objects: tuple[str, ...]
) -> Recording:
    b = _Builder()
    n = len(spec.state_names) // DRONE_STATE_DIM
    per = len(spec.action.names) // n
    # each drone's topics are in its namespace (a lone drone has none), as the bridge serves them
    drones = [f"{d}/" if d else "" for d in drone_names(n)]
    for i, p in enumerate(drones):
        state = f"{p}state"
        b.add(
            STATE,
            list(spec.state_names[i * DRONE_STATE_DIM : (i + 1) * DRONE_STATE_DIM]),
            Stream(state, p + itf.ODOM, Odometry, _stamped(conv.odometry_to_state)),
        )
        commands = {
            itf.CMD_LOW_LEVEL: Stream(
                f"{p}action",
                p + itf.CMD_LOW_LEVEL,
                JointState,
                _low_level(spec.action.mode),
                command=True,
            ),
            itf.CMD_VEL: Stream(
                f"{p}action", p + itf.CMD_VEL, Twist, _drone_twist(state), command=True
            ),
        }
        names = list(spec.action.names[i * per : (i + 1) * per])
        b.add(ACTION, names, *(commands[t] for t in DRONE_COMMAND_TOPICS[spec.action.mode]))
        b.objects(objects, p)
        b.add(
            "observation.imu",
            [p + f for f in IMU_FIELDS],
            Stream(f"{p}imu", p + itf.IMU, Imu, _stamped(_imu)),
        )
    b.cameras(spec)
    # the bridge publishes each drone's imu then odom, drone after drone
    return b.build(f"{drones[-1]}state")


RECORDINGS: dict[str, Callable[[ExperimentConfig, RobotSpec, tuple[str, ...]], Recording]] = {
    "arm": arm_recording,
    "mobile_base": mobile_base_recording,
    "quadcopter": quadcopter_recording,
}


def recording(cfg: ExperimentConfig, spec: RobotSpec, objects: tuple[str, ...]) -> Recording:
    """The recording of an experiment's robot (by its kind) with the task's ``objects``."""
    build = RECORDINGS.get(spec.kind)
    if build is None:
        raise ConfigError(
            f"the recorder knows robot kinds {', '.join(RECORDINGS)}, not '{spec.kind}'"
        )
    return build(cfg, spec, objects)
