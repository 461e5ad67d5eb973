"""With ``ros.wait_for_recorder`` a lockstep sim bridge steps only once the recorder has
acknowledged every topic it records of the current observation, for every kind: a base's
odom and scan as well as its joint_states, a drone's odom, imu, target and camera. A stand-in
recorder acknowledges all but one topic: the world stands still; once it acknowledges that
one too, the world steps (the bridge re-sends the observation it waits on)."""

from __future__ import annotations

import pytest

pytest.importorskip("rclpy")
pytest.importorskip("pybullet")
pytestmark = [pytest.mark.ros, pytest.mark.pybullet, pytest.mark.slow]

from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from ros_helpers import ros_context, spin_until  # noqa: E402
from std_msgs.msg import Header  # noqa: E402

from tether.core.config import load_config  # noqa: E402
from tether.core.experiment import build_task, robot_spec  # noqa: E402
from tether_ros import interface as itf  # noqa: E402
from tether_ros.kinds import experiment_io  # noqa: E402
from tether_ros.policy_server import PolicyServer  # noqa: E402
from tether_ros.sim_bridge import SimBridge  # noqa: E402

LOCKSTEP = [
    "ros.rate_mode=lockstep",
    "ros.wait_for_recorder=true",
    "ros.lockstep_timeout_s=30",
    "episodes.autostart=true",
    "episodes.auto_reset=false",
]


class StandInRecorder:
    """Subscribes the recording's sensor topics and acknowledges each message on
    recorder_ack as the recorder does, except those of the topics in ``withheld``."""

    def __init__(self, ctx, cfg, withheld: set[str]) -> None:
        self.node = Node("stand_in_recorder", context=ctx)
        self.withheld = withheld
        self.pub = self.node.create_publisher(Header, itf.RECORDER_ACK, itf.COMMAND_QOS)
        rec = experiment_io(cfg).recording(cfg, robot_spec(cfg), tuple(build_task(cfg).objects))
        self.topics = [s.topic for s in rec.streams if not s.command]
        for s in rec.streams:
            if not s.command:
                self.node.create_subscription(
                    s.msg_type, s.topic, lambda m, t=s.topic: self._ack(t, m), itf.SENSOR_QOS
                )

    def _ack(self, topic: str, msg) -> None:
        if topic not in self.withheld:
            self.pub.publish(Header(stamp=msg.header.stamp, frame_id=topic))


CASES = [
    ("husky_go_to_goal.yaml", ["sim.cameras=[]"], "odom"),
    ("husky_go_to_goal.yaml", ["sim.cameras=[]"], "scan"),
    ("quad_pid_hover.yaml", ["sim.cameras=[]"], "odom"),
    ("quad_pid_hover.yaml", ["sim.cameras=[]"], "imu"),
    ("quad_pid_hover.yaml", [], "camera/front/image_raw"),
]


@pytest.mark.parametrize(("config", "extra", "withheld"), CASES)
def test_the_bridge_waits_for_every_recorded_topic(repo, config, extra, withheld):
    cfg = load_config(repo / "configs/experiments" / config, [*LOCKSTEP, *extra])
    with ros_context() as ctx:
        ack = StandInRecorder(ctx, cfg, {withheld})
        assert withheld in ack.topics
        bridge = SimBridge(cfg, context=ctx)
        server = PolicyServer(cfg, context=ctx)
        ex = SingleThreadedExecutor(context=ctx)
        for n in (ack.node, bridge, server):
            ex.add_node(n)
        world = bridge.io.world
        # the policy answers the first observation and every other topic is acknowledged,
        # again and again (the bridge re-sends what it waits on): the world does not step
        assert spin_until(ex, lambda: server.last_stamp == world.obs.stamp_ns, 30)
        stepped = spin_until(ex, lambda: world.steps > 0, 1.0)
        assert not stepped and bridge.io.running
        ack.withheld = set()
        assert spin_until(ex, lambda: world.steps >= 20, 60), world.steps
        for n in (server, bridge, ack.node):
            n.destroy_node()
