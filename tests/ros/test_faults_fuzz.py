"""Fault injection: 10,000 fuzzed command messages per command topic (arm joint_trajectory,
base cmd_vel, drone cmd_low_level): random lengths, NaN, inf, wrong joint names, huge values,
out-of-order and future stamps. None reaches the simulator unsafely (every action the backend
receives is finite, within the limits and, for the arm and the base, within the rate limit),
the bridge counts what it rejected, and it stays up: a good command still goes through
afterwards. "Unsafe" is judged by tests/ros/safety_oracle.py against limits read from each
robot's own description (MJCF, URDF, vendor limits), not by the safety filter under test.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("rclpy")
pytestmark = [pytest.mark.ros]

from geometry_msgs.msg import Twist  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from ros_helpers import ros_context, spin_until  # noqa: E402
from safety_oracle import (  # noqa: E402
    crazyflie_limits,
    limits_for,
    unsafe_actions,
    unsafe_steps,
)
from sensor_msgs.msg import JointState  # noqa: E402
from trajectory_msgs.msg import JointTrajectory  # noqa: E402

from tether.core.config import load_config  # noqa: E402
from tether.core.types import ActionChunk  # noqa: E402
from tether_ros import conversions as conv  # noqa: E402
from tether_ros import interface as itf  # noqa: E402
from tether_ros.faults import (  # noqa: E402
    BridgeSpy,
    fuzz_low_level,
    fuzz_topic,
    fuzz_trajectory,
    fuzz_twist,
)
from tether_ros.sim_bridge import SimBridge  # noqa: E402

N = 10_000
RUN = [
    "sim.cameras=[]",
    "ros.rate_mode=realtime",
    "episodes.autostart=true",
    "episodes.auto_reset=false",
    "task.max_duration_s=3600",
]


def _fuzz(ex, pub, make, processed) -> int:
    return fuzz_topic(ex, pub, make, processed, N)


@pytest.mark.slow
@pytest.mark.mujoco
def test_fuzzed_joint_trajectories_never_reach_the_arm_unsafely(repo):
    pytest.importorskip("mujoco")
    pytest.importorskip("pybullet_data")  # the oracle reads the Panda URDF's velocity limits
    cfg = load_config(repo / "configs/experiments/panda_lift_expert.yaml", RUN)
    rng = np.random.default_rng(0)
    with ros_context() as ctx:
        bridge = SimBridge(cfg, context=ctx)
        spy = BridgeSpy(bridge)
        probe = Node("fuzzer", context=ctx)
        pub = probe.create_publisher(JointTrajectory, itf.JOINT_TRAJECTORY, itf.COMMAND_QOS)
        ex = SingleThreadedExecutor(context=ctx)
        for n in (bridge, probe):
            ex.add_node(n)
        assert spin_until(ex, lambda: pub.get_subscription_count() > 0 and len(spy.steps) > 3)
        names = bridge.spec.action.names

        def make() -> JointTrajectory:
            return fuzz_trajectory(rng, names, bridge.io.runner.obs.stamp_ns, bridge.spec.dt, 3.0)

        seen = _fuzz(ex, pub, make, lambda: spy.accepted + bridge.rejected)
        assert seen == N
        assert bridge.rejected > N // 2  # most are malformed
        assert spy.accepted > 100  # and some well-formed ones were clamped and applied
        oracle = limits_for(cfg.robot, names)
        bad = unsafe_steps(spy.steps, oracle, 1 / cfg.world.control_hz)
        assert bad == {"not_finite": 0, "out_of_limits": 0, "too_fast": 0}, bad
        safety = bridge.io.runner.safety
        assert safety.stats.clamped > 0 and safety.stats.rate_limited > 0
        assert {"future", "out-of-order"} <= set(safety.stats.reasons)

        # still up: a good command goes through
        # a fuzzed stamp a little ahead of now (within the future tolerance) may be the last
        # one accepted: a command stamped now would be out of order until time passes it
        runner = bridge.io.runner
        assert spin_until(
            ex, lambda: runner.chunk is None or runner.obs.stamp_ns >= runner.chunk.t0_ns
        )
        # from the filter's last output (where the rate limiter starts; the measured position
        # may lag it by more than the chunk's second can cover), 0.01 rad towards the middle
        # of joint 1's range (-2.8973..2.8973): the fuzz may have left the arm at a limit,
        # where a step outwards would be clamped and never arrive
        target = np.asarray(spy.steps[-1].action, dtype=np.float32).copy()
        target[0] += 0.01 if target[0] <= 0 else -0.01
        chunk = ActionChunk(
            np.repeat(target[None], 100, 0), bridge.spec.dt, bridge.io.runner.obs.stamp_ns
        )
        good = conv.chunk_to_trajectory(chunk, names)
        pub.publish(good)
        assert spin_until(
            ex, lambda: np.isclose(spy.steps[-1].action[0], target[0], atol=1e-6), timeout_s=10
        )
        for n in (probe, bridge):
            n.destroy_node()


@pytest.mark.slow
@pytest.mark.pybullet
def test_fuzzed_twists_never_reach_the_base_unsafely(repo):
    pytest.importorskip("pybullet")
    cfg = load_config(
        repo / "configs/experiments/husky_go_to_goal.yaml",
        [*RUN, "sim.control_hz=50", "safety.max_acceleration={linear_x: 3.0, angular_z: 6.0}"],
    )
    rng = np.random.default_rng(1)
    with ros_context() as ctx:
        bridge = SimBridge(cfg, context=ctx)
        spy = BridgeSpy(bridge)
        probe = Node("fuzzer", context=ctx)
        pub = probe.create_publisher(Twist, itf.CMD_VEL, itf.COMMAND_QOS)
        ex = SingleThreadedExecutor(context=ctx)
        for n in (bridge, probe):
            ex.add_node(n)
        assert spin_until(ex, lambda: pub.get_subscription_count() > 0 and len(spy.steps) > 3)
        seen = _fuzz(ex, pub, lambda: fuzz_twist(rng), lambda: spy.accepted + bridge.rejected)
        assert seen == N
        assert bridge.rejected > N // 10 and spy.accepted > N // 10
        # Clearpath's velocity and acceleration limits (the override above configures the
        # filter with the same acceleration limits; the oracle does not read it)
        oracle = limits_for(cfg.robot, bridge.spec.action.names)
        bad = unsafe_steps(spy.steps, oracle, 1 / cfg.world.control_hz)
        assert bad == {"not_finite": 0, "out_of_limits": 0, "too_fast": 0}, bad
        assert bridge.io.runner.safety.stats.clamped > 0
        n0 = len(spy.steps)
        assert spin_until(ex, lambda: len(spy.steps) > n0 + 5)  # still stepping
        for n in (probe, bridge):
            n.destroy_node()


@pytest.mark.slow
def test_fuzzed_low_level_commands_never_reach_the_drone_unsafely(repo):
    cfg = load_config(
        repo / "configs/experiments/quad_pid_hover.yaml",
        ["ros.rate_mode=realtime", "sim.quadrotor.num_drones=1"],
    )
    rng = np.random.default_rng(2)
    with ros_context() as ctx:
        bridge = SimBridge(cfg, context=ctx)
        drones = bridge.io
        received: list[np.ndarray] = []
        real_step = drones.fleet.backend.step

        def spy(action):
            received.append(np.array(action, copy=True))
            return real_step(action)

        drones.fleet.backend.step = spy
        accepted = [0]
        real_accepted = drones._accepted

        def count(d, stamp=0):
            accepted[0] += 1
            real_accepted(d, stamp)

        drones._accepted = count
        probe = Node("fuzzer", context=ctx)
        pub = probe.create_publisher(JointState, itf.CMD_LOW_LEVEL, itf.COMMAND_QOS)
        ex = SingleThreadedExecutor(context=ctx)
        for n in (bridge, probe):
            ex.add_node(n)
        assert spin_until(ex, lambda: pub.get_subscription_count() > 0 and len(received) > 3)
        seen = _fuzz(
            ex,
            pub,
            lambda: fuzz_low_level(rng, conv.LOW_LEVEL_CHANNELS),
            lambda: accepted[0] + drones.rejected,
        )
        assert seen == N
        assert drones.rejected > N // 2 and accepted[0] > 100
        # the backend always receives rotor speeds, whatever the command mode was
        bad = unsafe_actions(np.stack(received), crazyflie_limits())
        assert bad == {"not_finite": 0, "out_of_limits": 0}, bad
        n0 = len(received)
        assert spin_until(ex, lambda: len(received) > n0 + 5)  # still stepping
        for n in (probe, bridge):
            n.destroy_node()


@pytest.mark.slow
def test_fuzzed_joint_trajectories_never_reach_the_mock_arm_unsafely(repo):
    """The same fuzz into hardware_bridge, whose commands go to a mock ros2_control arm over
    its JointTrajectory interface: every trajectory the driver receives is finite, within
    the joint limits and within the rate limit, and the driver never rejects one."""
    from hardware_helpers import spinning

    from tether_ros.hardware_bridge import HardwareBridge
    from tether_ros.mock_nodes import MockArmNode

    pytest.importorskip("pybullet_data")  # the oracle reads the Panda URDF's velocity limits
    n_msgs = 2000
    cfg = load_config(
        repo / "configs/experiments/panda_lift_mock.yaml",
        [*RUN[1:], "hardware.mock_options={latency_s: 0.0}"],
    )
    rng = np.random.default_rng(1)
    with ros_context() as ctx:
        mock = MockArmNode(cfg, context=ctx, namespace="/driver")
        driver_got: list[np.ndarray] = []
        real_send = mock.arm.send_trajectory

        def send(points, times):
            driver_got.append(np.array(points, copy=True))
            return real_send(points, times)

        mock.arm.send_trajectory = send
        with spinning(mock):
            bridge = HardwareBridge(cfg, context=ctx)
            spy = BridgeSpy(bridge)
            probe = Node("fuzzer", context=ctx)
            pub = probe.create_publisher(JointTrajectory, itf.JOINT_TRAJECTORY, itf.COMMAND_QOS)
            ex = SingleThreadedExecutor(context=ctx)
            for n in (bridge, probe):
                ex.add_node(n)
            assert spin_until(
                ex, lambda: pub.get_subscription_count() > 0 and len(spy.steps) > 3, 20
            )
            names = bridge.spec.action.names

            def make() -> JointTrajectory:
                return fuzz_trajectory(
                    rng, names, bridge.io.runner.obs.stamp_ns, bridge.spec.dt, 3.0
                )

            seen = fuzz_topic(ex, pub, make, lambda: spy.accepted + bridge.rejected, n_msgs)
            assert seen == n_msgs
            assert bridge.rejected > n_msgs // 2 and spy.accepted > 20
            oracle = limits_for(cfg.robot, names)
            bad = unsafe_steps(spy.steps, oracle, 1 / cfg.world.control_hz)
            assert bad == {"not_finite": 0, "out_of_limits": 0, "too_fast": 0}, bad
            n = len(driver_got)
            assert spin_until(ex, lambda: len(driver_got) > n + 5, 10)  # still commanding
            q = mock.arm.q.copy()
            for node in (probe, bridge):
                node.destroy_node()
    sent = np.concatenate(driver_got)
    assert len(driver_got) > 100
    assert unsafe_actions(sent, oracle) == {"not_finite": 0, "out_of_limits": 0}
    assert mock.rejected == 0  # nothing malformed got as far as the driver
    assert unsafe_actions(q[None], oracle) == {"not_finite": 0, "out_of_limits": 0}
