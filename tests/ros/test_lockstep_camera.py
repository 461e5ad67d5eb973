"""Lockstep with a camera: episodes end even when the episode's first image was lost.

The camera96_max case of benchmarks/ros_loop.py (500 Hz lockstep, a policy that reads a
96x96 camera at 30 fps) used to hang in most runs: the sim bridge rendered the image of sim
time 0 once, at reset, usually before the policy server was connected (sensor QoS is best
effort: nobody got it); the policy server waits for a first image before it answers, the sim
waits for an answer before it steps, and the bridge's re-sends carried the joint states but
not the image. Here the policy server is created after the bridge has published that image,
so the first image is always lost, and every episode must still end.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("rclpy")
pytest.importorskip("mujoco")
pytestmark = [pytest.mark.ros, pytest.mark.mujoco]

from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from ros_helpers import ros_context, spin_until  # noqa: E402
from std_msgs.msg import String  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

from tether.core.config import load_config  # noqa: E402
from tether_ros import interface as itf  # noqa: E402
from tether_ros.policy_server import PolicyServer  # noqa: E402
from tether_ros.sim_bridge import SimBridge  # noqa: E402

EPISODES = 5


def test_camera_lockstep_episodes_end_after_a_lost_first_image(repo):
    cfg = load_config(
        repo / "configs/experiments/panda_lift_expert.yaml",
        [
            "sim.control_hz=500",
            "ros.rate_mode=lockstep",
            "policy.type=hold",
            "policy.cameras=[front]",  # the policy server waits for this camera's images
            "sim.cameras=[{name: front, width: 96, height: 96, fps: 30}]",
            "task.max_duration_s=0.3",
            "episodes.autostart=false",
            "episodes.auto_reset=false",
        ],
    )
    with ros_context() as ctx:
        bridge = SimBridge(cfg, context=ctx)  # publishes the image of t=0 to nobody
        server = PolicyServer(cfg, context=ctx)
        probe = Node("probe", context=ctx)
        events: list[dict] = []
        probe.create_subscription(
            String, itf.EPISODE_STATUS, lambda m: events.append(json.loads(m.data)), itf.EVENT_QOS
        )
        start = probe.create_client(Trigger, "sim_bridge/start_episode")
        ex = SingleThreadedExecutor(context=ctx)
        for n in (bridge, server, probe):
            ex.add_node(n)
        assert spin_until(ex, start.service_is_ready)
        for k in range(EPISODES):
            future = start.call_async(Trigger.Request())
            assert spin_until(ex, future.done)
            ended = spin_until(ex, lambda k=k: sum(e["event"] == "end" for e in events) > k, 30)
            assert ended, f"episode {k} never ended (steps so far: {bridge.io.runner.steps})"
            end = [e for e in events if e["event"] == "end"][k]
            assert end["steps"] == 150 and end["stale_steps"] == 0, end
        for n in (probe, server, bridge):
            n.destroy_node()
