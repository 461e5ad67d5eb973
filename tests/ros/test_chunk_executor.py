"""chunk_executor in-process (own rclpy context) against a fake policy server: it asks for
chunks when its queue runs low, executes them through the safety filter at the control rate,
and reports its cadence; with nobody answering it counts underruns and holds."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("rclpy")
pytestmark = pytest.mark.ros

from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from ros_helpers import ros_context, spin_until  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Header, String  # noqa: E402
from trajectory_msgs.msg import JointTrajectory  # noqa: E402

from tether.core.config import load_config  # noqa: E402
from tether.core.types import ActionChunk  # noqa: E402
from tether_ros import conversions as conv  # noqa: E402
from tether_ros import interface as itf  # noqa: E402
from tether_ros.chunk_executor import ACTION_CHUNK, CHUNK_REQUEST, ChunkExecutor  # noqa: E402

Q0 = np.array([0.0, -0.5, 0.0, -2.0, 0.0, 1.6, 0.8, 0.04, 0.04], np.float32)


def _setup(ctx, repo, answer: bool):
    cfg = load_config(repo / "configs/experiments/panda_lift_expert.yaml")
    node = ChunkExecutor(cfg, context=ctx)
    probe = Node("probe", context=ctx)
    got: dict[str, list] = {"cmd": [], "req": [], "cadence": []}
    names = node.spec.action.names
    target = Q0[:8] + 0.01  # a small step from where the robot is
    target[7] = 0.05  # past the finger limit (0.04): the safety filter clamps it

    def on_request(msg: Header) -> None:
        got["req"].append(conv.from_time(msg.stamp))
        if answer:
            rows = np.repeat(target[None], 20, 0)
            chunk = ActionChunk(rows, 0.01, conv.from_time(msg.stamp))
            chunk_pub.publish(conv.chunk_to_trajectory(chunk, names))

    chunk_pub = probe.create_publisher(JointTrajectory, ACTION_CHUNK, itf.COMMAND_QOS)
    state_pub = probe.create_publisher(JointState, itf.JOINT_STATES, itf.SENSOR_QOS)
    probe.create_subscription(Header, CHUNK_REQUEST, on_request, itf.COMMAND_QOS)
    probe.create_subscription(
        JointTrajectory, itf.JOINT_TRAJECTORY, lambda m: got["cmd"].append(m), itf.COMMAND_QOS
    )
    probe.create_subscription(
        String,
        "chunk_executor/cadence",
        lambda m: got["cadence"].append(json.loads(m.data)),
        itf.COMMAND_QOS,
    )
    ex = SingleThreadedExecutor(context=ctx)
    ex.add_node(node)
    ex.add_node(probe)
    state = conv.joint_state_msg(node.now_ns(), node.spec.state_names, Q0)
    return node, ex, state_pub, state, got, target


def test_executes_requested_chunks_through_the_safety_filter(repo) -> None:
    with ros_context() as ctx:
        node, ex, state_pub, state, got, target = _setup(ctx, repo, answer=True)
        assert spin_until(ex, lambda: state_pub.publish(state) or node.measured is not None)

        def positions() -> list[np.ndarray]:
            return [np.array(m.points[0].positions) for m in got["cmd"]]

        def follows(q: np.ndarray) -> bool:
            return bool(np.allclose(q[:7], target[:7], atol=1e-5))

        assert spin_until(
            ex,
            lambda: (
                len(got["cmd"]) >= 30
                and len(got["cadence"]) >= 1
                and any(follows(q) for q in positions())
            ),
        )
        assert got["req"], "the executor never asked for a chunk"
        # every command is the chunk's row (through the filter) or, where a chunk came late
        # on a loaded machine, the watchdog's hold where the arm is: nothing else
        followed = [q for q in positions() if follows(q)]
        for q in positions():
            assert follows(q) or np.allclose(q, Q0[:8], atol=1e-5), q
        assert all(q[7] == pytest.approx(0.04) for q in followed)  # the finger clamped
        # each tick's rows are in force from a period before the executor's clock (the first
        # row's stamp + a period) to a period after it: a bridge stepping a period ahead of
        # the executor's /clock still finds its row (chunked_500hz in benchmarks/ros_loop.py)
        dt_ns = round(node.spec.dt * 1e9)
        for msg in got["cmd"][-5:]:
            rows = conv.trajectory_to_chunk(msg, node.spec)
            now = rows.t0_ns + dt_ns
            for t in (now - dt_ns, now, now + dt_ns):
                assert rows.action_at(t) is not None, (t - now) / dt_ns
        report = got["cadence"][-1]
        assert report["chunks"] >= 1 and report["executed"] >= 1
        assert report["inference_latency_ms"]["count"] >= 1
        assert report["achieved_hz"] > 0
        ex.shutdown()
        node.destroy_node()


def test_without_chunks_it_underruns_and_holds(repo) -> None:
    with ros_context() as ctx:
        node, ex, state_pub, state, got, _ = _setup(ctx, repo, answer=False)
        assert spin_until(ex, lambda: state_pub.publish(state) or node.measured is not None)
        assert spin_until(ex, lambda: len(got["cmd"]) >= 10)
        assert node.queue.stats.underruns >= 10 and node.queue.stats.executed == 0
        held = np.array(got["cmd"][-1].points[0].positions)
        np.testing.assert_allclose(held, Q0[:8], atol=1e-5)  # watchdog: hold where it is
        ex.shutdown()
        node.destroy_node()


def test_policy_server_chunk_mode_answers_requests_only(repo) -> None:
    from rclpy.parameter import Parameter

    from tether_ros.policy_server import PolicyServer

    cfg = load_config(
        repo / "configs/experiments/panda_lift_demo.yaml", ["policy.type=hold", "policy.horizon=5"]
    )
    with ros_context() as ctx:
        server = PolicyServer(
            cfg, context=ctx, parameter_overrides=[Parameter("chunk_mode", value=True)]
        )
        probe = Node("probe", context=ctx)
        chunks: list[JointTrajectory] = []
        per_obs: list[JointTrajectory] = []
        probe.create_subscription(JointTrajectory, ACTION_CHUNK, chunks.append, itf.COMMAND_QOS)
        probe.create_subscription(
            JointTrajectory, itf.JOINT_TRAJECTORY, per_obs.append, itf.COMMAND_QOS
        )
        state_pub = probe.create_publisher(JointState, itf.JOINT_STATES, itf.SENSOR_QOS)
        req_pub = probe.create_publisher(Header, CHUNK_REQUEST, itf.COMMAND_QOS)
        ex = SingleThreadedExecutor(context=ctx)
        ex.add_node(server)
        ex.add_node(probe)
        stamp = 1_000_000_000
        state = conv.joint_state_msg(stamp, server.spec.state_names, Q0)
        assert spin_until(ex, lambda: state_pub.publish(state) or server.latest is not None)
        assert spin_until(ex, lambda: req_pub.publish(Header()) or len(chunks) >= 1)
        msg = chunks[0]
        assert conv.from_time(msg.header.stamp) == stamp and len(msg.points) == 5
        np.testing.assert_allclose(msg.points[0].positions, Q0[:8], atol=1e-6)
        assert per_obs == []  # nothing published per observation in chunk mode
        ex.shutdown()
        server.destroy_node()


def test_a_clock_jump_back_drops_the_old_timeline(repo) -> None:
    """A simulator reset sends /clock back to 0: rows queued on the old timeline must not be
    executed in the new episode; the executor holds, starts over and asks for a chunk."""
    with ros_context() as ctx:
        node, ex, state_pub, state, got, target = _setup(ctx, repo, answer=False)
        assert spin_until(ex, lambda: state_pub.publish(state) or node.measured is not None)
        clock = {"t": 5_000_000_000}
        node.now_ns = lambda: clock["t"]  # type: ignore[method-assign]
        node.ticks = []  # (ticks so far were on the wall clock)
        rows = np.repeat(target[None], 50, 0)  # 0.5 s of a far target
        node.queue.add(ActionChunk(rows, 0.01, clock["t"]), clock["t"])
        node._tick()
        assert node.queue.stats.executed == 1
        clock["t"] = 10_000_000  # the new episode
        n_req = len(got["req"])
        node._tick()
        assert node.queue.stats.executed == 0 and node.queue.stats.chunks == 0  # started over
        assert node.pending_since == clock["t"]  # asked for a chunk on the new timeline
        # a request from before the jump (wall-clock stamp) may still be arriving under load
        assert spin_until(ex, lambda: clock["t"] in got["req"][n_req:])
        assert spin_until(ex, lambda: len(got["cmd"]) >= 2)
        held = np.array(got["cmd"][-1].points[0].positions)
        np.testing.assert_allclose(held, Q0[:8], atol=1e-5)  # holds, not the old chunk
        ex.shutdown()
        node.destroy_node()
