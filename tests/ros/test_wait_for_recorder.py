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


def _graph(ctx, cfg, withheld: set[str]):
    """The stand-in recorder, a sim bridge and a policy server on one executor."""
    ack = StandInRecorder(ctx, cfg, withheld)
    bridge = SimBridge(cfg, context=ctx)
    server = PolicyServer(cfg, context=ctx)
    ex = SingleThreadedExecutor(context=ctx)
    for n in (ack.node, bridge, server):
        ex.add_node(n)
    return ack, bridge, server, ex


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
        ack, bridge, server, ex = _graph(ctx, cfg, {withheld})
        assert withheld in ack.topics
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


def test_a_finished_episode_ends_once_its_final_observation_is_answered(repo):
    """The recorder's last frame holds the policy's answer to the final observation, so a
    lockstep bridge that waits for the recorder ends the episode (and auto-resets to the
    next one) only once that answer is in: with the policy held back after the final step,
    the episode stays open; let go, it ends, the answer stamped with the final observation.
    (Ending on the recorder's acks alone let the next start event overtake the answer: the
    recorder then saved the last frame with the previous chunk's row.)"""
    cfg = load_config(
        repo / "configs/experiments/husky_go_to_goal.yaml",
        [*LOCKSTEP, "sim.cameras=[]", "task.distance_range=[1.0, 1.5]"],
    )
    with ros_context() as ctx:
        ack, bridge, server, ex = _graph(ctx, cfg, set())
        world = bridge.io.world
        # one callback per spin: the final step's observation is out, not yet all taken in
        assert spin_until(ex, lambda: world.done, 120)
        final = world.obs.stamp_ns
        assert server.last_stamp is None or server.last_stamp < final
        ex.remove_node(server)
        spin_until(ex, lambda: not bridge.io.running, 1.5)
        assert bridge.io.running, "the episode ended before its final observation was answered"
        ex.add_node(server)
        assert spin_until(ex, lambda: not bridge.io.running, 10)
        assert server.last_stamp == final
        assert bridge.io.runner.chunk.t0_ns == final
        for n in (server, bridge, ack.node):
            n.destroy_node()
