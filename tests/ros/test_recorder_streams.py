"""The recorder's per-kind streams (tether_ros.kinds.streams) without a simulator: the
features carry the spec's names, the decoders invert what the bridges publish, and the
recorder node writes a base's and a drone's topics into a dataset."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("rclpy")
pytest.importorskip("pyarrow")
pytestmark = [pytest.mark.ros]

from geometry_msgs.msg import PoseStamped, Twist  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from ros_helpers import ros_context, spin_until  # noqa: E402
from sensor_msgs.msg import Imu, JointState, LaserScan  # noqa: E402

from tether.core.config import load_config  # noqa: E402
from tether.core.data.align import assemble  # noqa: E402
from tether.core.data.lerobot import LeRobotReader  # noqa: E402
from tether.core.errors import ConfigError, InvalidCommand  # noqa: E402
from tether.core.experiment import robot_spec  # noqa: E402
from tether.sim.config_mobile_base import LidarConfig  # noqa: E402
from tether_ros import conversions as conv  # noqa: E402
from tether_ros import interface as itf  # noqa: E402
from tether_ros.kinds import mobile_base as base  # noqa: E402
from tether_ros.kinds.streams import RECORDINGS, recording  # noqa: E402
from tether_ros.recorder import Recorder, experiment_recording, task_sentence  # noqa: E402

MS = 1_000_000
CONFIGS = [
    "panda_lift_expert",
    "husky_go_to_goal",
    "husky_obstacle_course",
    "husky_go_to_goal_mock",
    "quad_pid_hover",
    "quad_pid_figure_eight",
    "quad_mavlink_mock",
]


def _cfg(repo, name: str, *overrides: str):
    return load_config(repo / f"configs/experiments/{name}.yaml", list(overrides))


def test_every_shipped_task_gives_its_episodes_a_sentence():
    """The dataset's task string comes from the task's registry entry (option ``task``); a
    task that gives none is named in words."""
    from tether.core import registry
    from tether.sim.plugins import PLUGINS

    sentences = {name: task_sentence(name) for name in PLUGINS["task"]}
    for name, sentence in sentences.items():
        assert sentence == registry.entry("task", name).options["task"], name
    assert sentences["lift"] == "lift the cube" and sentences["reach"] == "reach the target"
    assert len(set(sentences.values())) == len(sentences)  # each its own
    assert task_sentence("stack_three_blocks") == "stack three blocks"


@pytest.mark.parametrize("name", CONFIGS)
def test_features_carry_the_specs_names(repo, name):
    cfg = _cfg(repo, name)
    spec = robot_spec(cfg)
    rec = experiment_recording(cfg)
    info = rec.info
    assert list(info)[:2] == ["observation.state", "action"]
    assert info["observation.state"]["names"] == list(spec.state_names)
    assert info["action"]["names"] == list(spec.action.names)
    assert info["action"]["shape"] == [spec.action.dim]
    for cam in spec.cameras:
        assert info[f"observation.images.{cam.name}"]["shape"] == [cam.height, cam.width, 3]
    # every feature is made of streams the recorder subscribes, the clock stream among them
    keys = {s.key for s in rec.streams}
    assert {k for f in rec.features for k in f.keys} == keys
    assert rec.clock_key in keys
    assert [f.name for f in rec.features] == list(info)
    # a stream's topic is subscribed once
    assert len({s.topic for s in rec.streams}) == len(rec.streams)


def test_every_kind_has_a_recording_and_an_unknown_kind_is_one_sentence(repo):
    cfg = _cfg(repo, "panda_lift_expert")
    spec = robot_spec(cfg)
    assert set(RECORDINGS) == {"arm", "mobile_base", "quadcopter"}
    with pytest.raises(ConfigError, match="not 'submarine'"):
        recording(cfg, spec.model_copy(update={"kind": "submarine"}), ())


def _decode(rec, topic: str, msg, latest=None):
    stream = next(s for s in rec.streams if s.topic == topic)
    return stream.key, *stream.decode(msg, latest or {})


def test_base_streams_invert_the_bridge_messages(repo):
    cfg = _cfg(repo, "husky_go_to_goal", "sim.cameras=[]")
    spec = robot_spec(cfg)
    rec = experiment_recording(cfg)
    joints = base.wheel_joints(spec)
    rng = np.random.default_rng(0)
    state = rng.uniform(-1, 1, len(spec.state_names)).astype(np.float32)
    stamp = 1234 * MS
    frame = {"stamp_ns": stamp}
    for topic, msg in (
        (itf.ODOM, base.base_odometry_msg(state[:5], stamp)),
        (itf.JOINT_STATES, base.wheel_joint_state_msg(state, stamp, joints)),
    ):
        key, t, value = _decode(rec, topic, msg)
        assert t == stamp
        frame[key] = value
    ranges = rng.uniform(0.5, 9.0, 64)
    key, t, frame[key] = _decode(rec, base.SCAN, base.scan_msg(ranges, stamp, LidarConfig()))
    key, t, frame[key] = _decode(
        rec,
        itf.object_pose_topic("goal"),
        conv.pose_msg(np.array([3.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0]), stamp, "world"),
    )
    twist = Twist()
    twist.linear.x, twist.angular.z = 0.5, -0.25
    key, t, frame[key] = _decode(rec, itf.CMD_VEL, twist)
    assert t is None  # unstamped: the recorder stamps it with the robot's time
    row = assemble(frame, rec.features)
    np.testing.assert_allclose(row["observation.state"], state, atol=1e-6)
    np.testing.assert_allclose(row["action"], [0.5, -0.25])
    np.testing.assert_allclose(row["observation.scan"], ranges, atol=1e-6)
    # a scan of another lidar is not this dataset's
    with pytest.raises(InvalidCommand, match="beams"):
        _decode(rec, base.SCAN, base.scan_msg(ranges[:10], stamp, LidarConfig(n_beams=10)))


def test_drone_streams_invert_the_bridge_messages(repo):
    cfg = _cfg(repo, "quad_pid_hover")
    rec = experiment_recording(cfg)
    yaw = 0.7
    state = np.array(
        [0.1, -0.2, 1.0, np.cos(yaw / 2), 0, 0, np.sin(yaw / 2), 0.3, 0.1, -0.1, 0.01, 0.02, 0.5],
        np.float32,
    )
    key, t, value = _decode(rec, itf.ODOM, conv.odometry_msg(state, 5 * MS, "odom", "base_link"))
    assert t == 5 * MS
    np.testing.assert_allclose(value, state, atol=1e-6)
    force = np.array([0.1, 0.2, 9.81])
    _, _, imu = _decode(rec, itf.IMU, conv.imu_msg(state, force, 5 * MS, "base_link"))
    np.testing.assert_allclose(imu, [*force, *state[10:13]], atol=1e-6)
    # rotor_rpm experiment: rpm commands are actions, other modes are not this dataset's
    rpm = np.array([15000.0, 15100.0, 15200.0, 15300.0])
    _, t, value = _decode(rec, itf.CMD_LOW_LEVEL, conv.low_level_msg("rotor_rpm", rpm, 5 * MS))
    assert t == 5 * MS
    np.testing.assert_allclose(value, rpm)
    _, t, _ = _decode(rec, itf.CMD_LOW_LEVEL, conv.low_level_msg("rotor_rpm", rpm))
    assert t is None  # stamp zero means "now"
    with pytest.raises(InvalidCommand, match="action mode"):
        _decode(rec, itf.CMD_LOW_LEVEL, conv.low_level_msg("thrust_rates", rpm))
    assert not any(s.topic == itf.CMD_VEL for s in rec.streams)  # not a velocity setpoint


def test_a_velocity_drones_cmd_vel_is_its_world_setpoint(repo):
    cfg = _cfg(repo, "quad_pid_hover", "sim.quadrotor.action_mode=velocity_setpoint")
    rec = experiment_recording(cfg)
    yaw = 0.7
    state = np.zeros(13, np.float32)
    state[3], state[6] = np.cos(yaw / 2), np.sin(yaw / 2)
    setpoint = np.array([0.3, -0.2, 0.1, 0.4])
    twist = conv.setpoint_to_twist(setpoint, yaw)  # what a heading-frame teleop sends
    with pytest.raises(InvalidCommand, match="before the drone's first odometry"):
        _decode(rec, itf.CMD_VEL, twist)
    _, t, value = _decode(rec, itf.CMD_VEL, twist, {"state": state})
    assert t is None
    np.testing.assert_allclose(value, setpoint, atol=1e-6)


def test_multi_drone_streams_are_per_namespace(repo):
    rec = experiment_recording(_cfg(repo, "quad_pid_figure_eight", "sim.cameras=[]"))
    topics = {s.topic for s in rec.streams}
    for d in ("cf0", "cf1"):
        assert {f"{d}/odom", f"{d}/imu", f"{d}/cmd_low_level", f"{d}/cmd_vel"} <= topics
        assert f"{d}/objects/target/pose" in topics
    assert rec.clock_key == "cf1/state"  # the bridge publishes drone after drone


class _Publisher:
    """Publishes a robot's topics as a bridge would, stamped in sim time."""

    def __init__(self, node: Node, topics: dict[str, type]) -> None:
        self.pubs = {
            t: node.create_publisher(
                cls, t, itf.COMMAND_QOS if t in (itf.CMD_VEL, itf.CMD_LOW_LEVEL) else itf.SENSOR_QOS
            )
            for t, cls in topics.items()
        }

    def ready(self) -> bool:
        return all(p.get_subscription_count() >= 1 for p in self.pubs.values())


def _record(cfg, root, topics: dict[str, type], observe, command, steps: int, dt_ns: int):
    """Run a Recorder on ``topics``; one episode of ``steps`` observations by hand, each
    answered by a command (in lockstep: each taken in before the next)."""
    with ros_context() as ctx:
        rec = Recorder(cfg, output=str(root), context=ctx)
        node = Node("fake_bridge", context=ctx)
        pub = _Publisher(node, topics)
        ex = SingleThreadedExecutor(context=ctx)
        for n in (rec, node):
            ex.add_node(n)
        assert spin_until(ex, pub.ready)
        rec.start_episode()
        for k in range(steps):
            observe(pub.pubs, k, k * dt_ns)
            assert spin_until(ex, lambda k=k: rec.aligner.clock_ns == k * dt_ns)
            want = command(pub.pubs, k)
            assert spin_until(ex, lambda w=want: np.allclose(rec._latest.get("action", np.nan), w))
        status = json.loads(rec.save_episode())
        rec.close()
        for n in (rec, node):
            n.destroy_node()
    assert status["event"] == "saved" and status["dropped"] == 0, status
    return LeRobotReader(root)


def test_the_recorder_writes_a_base_driven_by_cmd_vel(repo, tmp_path):
    cfg = _cfg(repo, "husky_go_to_goal", "sim.cameras=[]")
    spec = robot_spec(cfg)
    joints = base.wheel_joints(spec)
    lidar = cfg.sim.mobile_base.lidar
    topics = {
        itf.ODOM: Odometry,
        itf.JOINT_STATES: JointState,
        base.SCAN: LaserScan,
        itf.object_pose_topic("goal"): PoseStamped,
        itf.CMD_VEL: Twist,
    }
    goal = np.array([2.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0])

    def observe(pubs, k: int, t: int) -> None:
        state = np.full(len(spec.state_names), 0.01 * k, np.float32)
        pubs[itf.ODOM].publish(base.base_odometry_msg(state[:5], t))
        pubs[base.SCAN].publish(base.scan_msg(np.full(lidar.n_beams, 5.0), t, lidar))
        pubs[itf.object_pose_topic("goal")].publish(conv.pose_msg(goal, t, "world"))
        pubs[itf.JOINT_STATES].publish(base.wheel_joint_state_msg(state, t, joints))

    def command(pubs, k: int) -> np.ndarray:
        twist = Twist()  # a teleop's answer to observation k (unstamped)
        twist.linear.x, twist.angular.z = 0.1 * k, -0.05 * k
        pubs[itf.CMD_VEL].publish(twist)
        return np.array([0.1 * k, -0.05 * k])

    dt = 50 * MS  # the husky's 20 Hz
    r = _record(cfg, tmp_path / "ds", topics, observe, command, steps=21, dt_ns=dt)
    data = r.episode(0)
    n = len(data["frame_index"])
    assert n == 31  # 1.0 s at 30 fps
    for i in range(n):
        t = round(i * 1e9 / 30)
        k = t // dt  # the latest observation at or before the frame
        np.testing.assert_allclose(data["observation.state"][i], 0.01 * k, atol=1e-6)
        # the twist heard after observation k is stamped with its time: in force from k
        np.testing.assert_allclose(data["action"][i], [0.1 * k, -0.05 * k], atol=1e-6)
    np.testing.assert_allclose(data["observation.environment_state"][0], goal, atol=1e-6)
    assert data["observation.scan"].shape == (n, lidar.n_beams)


def test_the_recorder_writes_a_drone_from_its_topics(repo, tmp_path):
    cfg = _cfg(repo, "quad_pid_hover", "sim.cameras=[]")
    topics = {
        itf.ODOM: Odometry,
        itf.IMU: Imu,
        itf.object_pose_topic("target"): PoseStamped,
        itf.CMD_LOW_LEVEL: JointState,
    }
    target = np.array([0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0])

    def state(k: int) -> np.ndarray:
        s = np.zeros(13, np.float32)
        s[2], s[3], s[9] = 0.5 + 0.01 * k, 1.0, 0.2
        return s

    def observe(pubs, k: int, t: int) -> None:
        pubs[itf.object_pose_topic("target")].publish(conv.pose_msg(target, t, "odom"))
        pubs[itf.IMU].publish(conv.imu_msg(state(k), np.array([0, 0, 9.81]), t, "base_link"))
        pubs[itf.ODOM].publish(conv.odometry_msg(state(k), t, "odom", "base_link"))
        t_now[0] = t

    def command(pubs, k: int) -> np.ndarray:
        rpm = np.full(4, 14000.0 + 10 * k)
        pubs[itf.CMD_LOW_LEVEL].publish(conv.low_level_msg("rotor_rpm", rpm, t_now[0]))
        return rpm

    t_now = [0]
    dt = 10 * MS  # 100 Hz
    r = _record(cfg, tmp_path / "ds", topics, observe, command, steps=31, dt_ns=dt)
    data = r.episode(0)
    n = len(data["frame_index"])
    assert n == 10  # 0.3 s at 30 fps
    for i in range(n):
        k = round(i * 1e9 / 30) // dt
        np.testing.assert_allclose(data["observation.state"][i], state(k), atol=1e-6)
        np.testing.assert_allclose(data["action"][i], 14000.0 + 10 * k)
        np.testing.assert_allclose(data["observation.imu"][i], [0, 0, 9.81, 0, 0, 0], atol=1e-5)
    np.testing.assert_allclose(data["observation.environment_state"][-1], target, atol=1e-6)
