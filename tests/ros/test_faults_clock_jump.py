"""Fault injection: the clock jumps back. A simulator reset mid-run (sim time back to 0) while
a policy server streams: a chunk stamped in the old timeline is dropped (expected: counted,
no warning), the policy server resets, and the loop carries on with fresh commands. A
backend whose clock jumps back by itself (a restarted driver) resets the safety filter:
nothing commanded before the jump is applied after it."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("rclpy")
pytest.importorskip("mujoco")
pytestmark = [pytest.mark.ros, pytest.mark.mujoco]

from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from ros_helpers import ros_context, spin_until  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402
from trajectory_msgs.msg import JointTrajectory  # noqa: E402

from tether.core.config import load_config  # noqa: E402
from tether.core.types import ActionChunk  # noqa: E402
from tether.sim.runner import SimRunner  # noqa: E402
from tether_ros import conversions as conv  # noqa: E402
from tether_ros import interface as itf  # noqa: E402
from tether_ros.faults import BridgeSpy  # noqa: E402
from tether_ros.policy_server import PolicyServer  # noqa: E402
from tether_ros.sim_bridge import SimBridge  # noqa: E402

ARM = "configs/experiments/panda_lift_expert.yaml"
RUN = [
    "sim.cameras=[]",
    "ros.rate_mode=realtime",
    "episodes.autostart=true",
    "episodes.auto_reset=false",
    "task.max_duration_s=600",
]


def _call(ex, client) -> Trigger.Response:
    assert spin_until(ex, client.service_is_ready)
    future = client.call_async(Trigger.Request())
    assert spin_until(ex, future.done)
    return future.result()


def test_simulator_reset_mid_run_rejects_old_timeline_commands(repo, monkeypatch):
    """The late chunk of the old timeline is dropped as expected (counted in
    ``old_timeline``, logged at debug level): no warning, not counted as rejected. A
    malformed trajectory after it still warns."""
    cfg = load_config(repo / ARM, RUN)
    with ros_context() as ctx:
        bridge = SimBridge(cfg, context=ctx)
        warnings: list[str] = []
        logger = bridge.get_logger()
        real_warning = logger.warning

        def warning(msg, *args, **kwargs):
            warnings.append(str(msg))
            return real_warning(msg, *args, **kwargs)

        monkeypatch.setattr(logger, "warning", warning)
        spy = BridgeSpy(bridge)
        server = PolicyServer(cfg, context=ctx)
        probe = Node("probe", context=ctx)
        pub = probe.create_publisher(JointTrajectory, itf.JOINT_TRAJECTORY, itf.COMMAND_QOS)
        reset = probe.create_client(Trigger, "/sim_bridge/reset")
        start = probe.create_client(Trigger, "/sim_bridge/start_episode")
        ex = SingleThreadedExecutor(context=ctx)
        for n in (bridge, server, probe):
            ex.add_node(n)
        assert spin_until(ex, lambda: spy.fresh_since(0) > 60, timeout_s=60)
        t_old = bridge.io.runner.obs.stamp_ns
        assert t_old > 0.5e9
        assert _call(ex, reset).success
        assert bridge.io.runner.obs.stamp_ns < t_old  # time went back
        i_reset = len(spy.steps)
        # a command of the old timeline, late: distinctive target, stamped before the reset
        target = bridge.io.runner.measured(bridge.io.runner.obs).copy()
        target[0] += 0.3
        rejected, dropped = bridge.rejected, bridge.io.old_timeline
        pub.publish(
            conv.chunk_to_trajectory(
                ActionChunk(np.repeat(target[None], 50, 0), bridge.spec.dt, t_old),
                bridge.spec.action.names,
            )
        )
        assert spin_until(ex, lambda: bridge.io.old_timeline > dropped)
        assert bridge.rejected == rejected and bridge.io.runner.safety.stats.old_timeline >= 1
        assert not [w for w in warnings if "joint_trajectory" in w], warnings
        # a genuinely bad command still warns: one joint short
        bad = conv.chunk_to_trajectory(
            ActionChunk(
                np.repeat(target[None], 5, 0), bridge.spec.dt, bridge.io.runner.obs.stamp_ns
            ),
            bridge.spec.action.names,
        )
        bad.joint_names = bad.joint_names[:-1]
        pub.publish(bad)
        assert spin_until(ex, lambda: bridge.rejected > rejected)
        assert any("rejected joint_trajectory" in w for w in warnings), warnings
        assert _call(ex, start).success
        assert spin_until(ex, lambda: spy.fresh_since(i_reset) > 30, timeout_s=60)
        after = spy.steps[i_reset:]
        assert all(s.t_ns < t_old for s in after)  # the new timeline
        # the arm never heads for the old command (the expert's own motion may cross joint
        # 0's value, not the whole target)
        assert not any(np.allclose(s.action, target, atol=1e-3) for s in after)
        for n in (probe, server, bridge):
            n.destroy_node()


def test_backend_clock_jumping_back_resets_the_safety_filter(repo):
    cfg = load_config(repo / ARM, ["sim.cameras=[]"])
    runner = SimRunner(cfg)
    try:
        obs = runner.reset()
        home = runner.measured(obs).copy()
        target = home.copy()
        target[0] += 0.005
        runner.submit(ActionChunk(np.repeat(target[None], 500, 0), runner.spec.dt, obs.stamp_ns))
        for _ in range(20):
            runner.step()
        assert not runner.last_stale
        # the backend's clock jumps back 0.15 s (a restarted driver): the chunk, whose rows
        # start later than the new time, no longer applies and the filter forgot the command
        real_step = runner.backend.step

        def jumped(action):
            res = real_step(action)
            res.observation.stamp_ns -= 150_000_000
            return res

        runner.backend.step = jumped
        runner.step()
        runner.backend.step = real_step
        res_t = runner.obs.stamp_ns
        runner.step()
        assert runner.safety.stats.clock_jumps == 1
        assert runner.last_stale  # held where the arm is, not driven by the old command
        assert runner.obs.stamp_ns > res_t
    finally:
        runner.backend.close()
