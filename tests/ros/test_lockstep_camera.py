"""Lockstep with a camera: episodes end even when images and service responses are lost.

The camera96_max case of benchmarks/ros_loop.py (500 Hz lockstep, a policy that reads a
96x96 camera at 30 fps) used to hang in most runs: the sim bridge rendered the image of sim
time 0 once, at reset, usually before the policy server was connected (sensor QoS is best
effort: nobody got it); the policy server waits for a first image before it answers, the sim
waits for an answer before it steps, and the bridge's re-sends carried the joint states but
not the image. Here the policy server is created after the bridge has published that image,
so the first image is always lost, and every episode must still end.

A fresh graph's first ~/start_episode can lose its response too: Fast DDS drops it when the
bridge has not yet matched the caller's response reader ("failed to send response
(timeout)"), which service_is_ready does not wait for; the episode runs, and the supervisor
must see it start from the bridge's start event instead of waiting for the response.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("rclpy")
pytest.importorskip("mujoco")
pytestmark = [pytest.mark.ros, pytest.mark.mujoco]

from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from ros_helpers import ros_context, spin_until  # noqa: E402
from sensor_msgs.msg import Image  # noqa: E402
from std_msgs.msg import String  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

from tether.core.config import ExperimentConfig, load_config  # noqa: E402
from tether.core.errors import TetherError  # noqa: E402
from tether_ros import conversions as conv  # noqa: E402
from tether_ros import interface as itf  # noqa: E402
from tether_ros.policy_server import PolicyServer  # noqa: E402
from tether_ros.sim_bridge import SimBridge  # noqa: E402
from tether_ros.supervisor import EpisodeSupervisor  # noqa: E402

EPISODES = 5
EPISODE_S = 0.3  # 150 lockstep steps at 500 Hz
STEPS = 150


def _overrides(extra: tuple[str, ...] = ()) -> list[str]:
    return [
        "sim.control_hz=500",
        "ros.rate_mode=lockstep",
        "policy.type=hold",
        "policy.cameras=[front]",  # the policy server waits for this camera's images
        "sim.cameras=[{name: front, width: 96, height: 96, fps: 30}]",
        f"task.max_duration_s={EPISODE_S}",
        "episodes.autostart=false",
        "episodes.auto_reset=false",
        *extra,
    ]


def _cfg(repo: Path, extra: tuple[str, ...] = ()) -> ExperimentConfig:
    return load_config(repo / "configs/experiments/panda_lift_expert.yaml", _overrides(extra))


def test_camera_lockstep_episodes_end_after_a_lost_first_image(repo):
    cfg = _cfg(repo)
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
            assert end["steps"] == STEPS and end["stale_steps"] == 0, end
        for n in (probe, server, bridge):
            n.destroy_node()


class FirstSendLost:
    """An image publisher whose every new image is lost on its first send (best effort), as
    the t=0 image of a reset is for a policy server not yet connected; a re-send of the same
    image goes through."""

    def __init__(self, pub: Any) -> None:
        self.pub = pub
        self.sent: set[int] = set()  # stamps sent once (clear at each episode: time restarts)
        self.lost = 0

    def publish(self, msg: Image) -> None:
        stamp = conv.from_time(msg.header.stamp)
        if stamp not in self.sent:
            self.sent.add(stamp)
            self.lost += 1
            return
        self.pub.publish(msg)


def test_camera_lockstep_20_episodes_end_when_images_and_start_responses_are_lost(
    repo, monkeypatch
):
    """20 camera lockstep episodes in a row through the EpisodeSupervisor (what the benchmark
    and `tether demo` drive), each with a policy server that has no image yet, every image's
    first send lost and every start_episode response lost. The supervisor's deadlines
    (start: 30 s; end: 66 s) fail the test where a hang would block it."""
    # lockstep_timeout_s: no step without the policy's answer, so stale_steps counts lost
    # answers and never a slow scheduler
    cfg = _cfg(repo, ("ros.lockstep_timeout_s=600",))
    with EpisodeSupervisor(cfg, None, {}) as sup:
        bridge = SimBridge(cfg, context=sup.ctx)
        sup.ex.add_node(bridge)
        lossy = FirstSendLost(bridge.io.pub_images["front"][0])
        bridge.io.pub_images["front"] = (lossy, bridge.io.pub_images["front"][1])
        start = next(s for s in bridge.services if s.srv_name.endswith("/start_episode"))
        responses: list[Any] = []
        monkeypatch.setattr(start, "send_response", lambda resp, _header: responses.append(resp))
        ends = []
        try:
            for k in range(20):
                lossy.sent.clear()
                server = PolicyServer(cfg, context=sup.ctx)  # no image yet: it waits for one
                sup.ex.add_node(server)
                sup.wait_ready(timeout_s=30.0)
                try:
                    end = sup.run_episode()
                except TetherError as exc:
                    runner = bridge.io.runner
                    raise AssertionError(
                        f"episode {k}: {exc} (steps {runner.steps}, images lost {lossy.lost})"
                    ) from exc
                finally:
                    sup.ex.remove_node(server)
                    server.destroy_node()
                assert end["episode"] == k and end["steps"] == STEPS, end
                assert end["stale_steps"] == 0 and end["rejected"] == 0, end
                ends.append(end)
        finally:
            bridge.close()
            bridge.destroy_node()
    assert len(responses) == 20  # the bridge answered every start; none reached the caller
    assert lossy.lost >= 20  # each episode's t=0 image (at least) was lost


@pytest.mark.slow
def test_camera_lockstep_graph_12_fresh_graphs_in_a_row(repo, tmp_path):
    """The benchmark's camera96_max case as it runs (sim bridge and policy server as separate
    processes over Fast DDS, started fresh, the supervisor's first call right after the graph
    is up), shortened to 0.3 s episodes: 12 graphs in a row, every episode ends (20 until
    2026-11-28: each graph costs ~5 s of the suite)."""
    from tether_ros.graph import GraphProcesses, graph_env, plan_graph

    experiment = repo / "configs/experiments/panda_lift_expert.yaml"
    ov = _overrides()
    cfg = load_config(experiment, ov)
    env = graph_env(cfg)
    for k in range(12):
        logs = tmp_path / f"graph{k}"
        with (
            GraphProcesses(plan_graph(experiment, ov), env, logs) as graph,
            EpisodeSupervisor(cfg, graph, env) as sup,
        ):
            sup.wait_ready()
            try:
                end = sup.run_episode()
            except TetherError as exc:
                for proc in graph.procs.values():  # each node's stacks into its log
                    os.kill(proc.pid, signal.SIGUSR1)
                raise AssertionError(f"graph {k}: {exc}; logs in {logs}") from exc
        assert end["steps"] == STEPS and end["stale_steps"] == 0, (k, end)
