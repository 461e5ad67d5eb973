"""Safety layer under fault injection: watchdog reaction to a dying policy server, and fuzzed
command messages against the bridges. Writes benchmarks/results/safety.json.

Kills: the sim bridge runs in realtime mode (the robot never waits) with a policy server
driving it; the server is destroyed mid-run (an in-process node: the commands stop, as when a
process dies) N times per robot, plus a few SIGKILLs of a real policy-server process. The
reaction is measured in sim time through spies on the bridge: control periods from the last
command the safety filter registered to the first safe action the backend received (arm:
hold where it is; base: zero twist). Target: <= 2 periods, 100/100.

Fuzz: N random messages per command topic (arm joint_trajectory, base cmd_vel, drone
cmd_low_level; random lengths, NaN, inf, wrong names, huge values, out-of-order and future
stamps). Counts: sent, rejected by the bridge, passed (accepted, then clamped / rate-limited
by the filter), and unsafe actions at the backend (not finite, out of limits, too fast).
Target: 0 unsafe.

"Safe" (the held position, the limits, the rate) is judged by the tests' oracle,
tests/ros/safety_oracle.py, against limits read from each robot's description (MJCF, URDF,
vendor limits), never by the safety filter being measured; the benchmark imports that one
module so that its numbers and the tests' verdicts come from the same oracle.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO / "tests/ros"))  # safety_oracle: test-only code, read-only here

from common import write_result  # noqa: E402
from safety_oracle import (  # noqa: E402
    crazyflie_limits,
    holds_safe,
    limits_for,
    unsafe_actions,
    unsafe_steps,
)

# a domain of its own: other ROS 2 processes on this machine stay out of the measurement
os.environ.setdefault("ROS_DOMAIN_ID", str(100 + os.getpid() % 100))
os.environ.setdefault("MUJOCO_GL", "egl")

ARM = REPO / "configs/experiments/panda_lift_expert.yaml"
BASE = REPO / "configs/experiments/husky_go_to_goal.yaml"
DRONE = REPO / "configs/experiments/quad_pid_hover.yaml"
RUN = [
    "sim.cameras=[]",
    "ros.rate_mode=realtime",
    "episodes.autostart=true",
    "episodes.auto_reset=false",
    "task.max_duration_s=3600",
]
TARGET_PERIODS = 2.0


def _pct(x: list[float]) -> dict[str, float]:
    a = np.asarray(x, np.float64)
    return {
        "p50": round(float(np.percentile(a, 50)), 3),
        "p99": round(float(np.percentile(a, 99)), 3),
        "max": round(float(a.max()), 3),
    }


def _context() -> Any:
    import rclpy

    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    return ctx


def kills(experiment: Path, n: int, seed: int, overrides: list[str]) -> dict[str, Any]:
    """N in-process policy-server kills against one bridge."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    from tether.core.config import load_config
    from tether_ros.faults import BridgeSpy, kill_once
    from tether_ros.policy_server import PolicyServer
    from tether_ros.sim_bridge import SimBridge

    cfg = load_config(experiment, [*RUN, *overrides])
    rng = np.random.default_rng(seed)
    ctx = _context()
    results, failed = [], 0
    t0 = time.monotonic()
    try:
        bridge = SimBridge(cfg, context=ctx)
        spy = BridgeSpy(bridge)
        ex = SingleThreadedExecutor(context=ctx)
        ex.add_node(bridge)
        dt_ns = round(bridge.spec.dt * 1e9)
        oracle = limits_for(cfg.robot, bridge.spec.action.names)
        for _ in range(n):
            server = PolicyServer(cfg, context=ctx)
            r = kill_once(ex, spy, server, dt_ns, int(rng.integers(3, 12)), int(rng.integers(4)))
            if r is None:
                failed += 1
            else:
                results.append((r, holds_safe(r.safe.action, r.safe.measured, oracle)))
        bridge.destroy_node()
    finally:
        rclpy.try_shutdown(context=ctx)
    reaction = [r.reaction_periods for r, _ in results]
    return {
        "robot": cfg.robot,
        "control_hz": cfg.world.control_hz,
        "kills": n,
        "measured": len(results),
        "no_measurement": failed,
        "safe_within_target": sum(
            ok and r.reaction_periods <= TARGET_PERIODS + 1e-6 for r, ok in results
        ),
        "reaction_periods": _pct(reaction),
        "from_kill_periods": _pct([r.from_kill_periods for r, _ in results]),
        "wall_s": round(time.monotonic() - t0, 1),
    }


def process_kills(n: int) -> dict[str, Any]:
    """N SIGKILLs of a policy-server process driving an in-process bridge (the arm)."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    from tether.core.config import load_config
    from tether_ros.faults import BridgeSpy, spin_until
    from tether_ros.sim_bridge import SimBridge

    cfg = load_config(ARM, RUN)
    overrides = "[" + ", ".join(f"'{o}'" for o in RUN) + "]"
    cmd = [sys.executable, "-m", "tether_ros.policy_server", "--ros-args"]
    cmd += ["-p", f"experiment:={ARM}", "-p", f"overrides:={overrides}"]
    ctx = _context()
    reaction: list[float] = []
    within = 0
    try:
        bridge = SimBridge(cfg, context=ctx)
        spy = BridgeSpy(bridge)
        ex = SingleThreadedExecutor(context=ctx)
        ex.add_node(bridge)
        dt_ns = round(bridge.spec.dt * 1e9)
        oracle = limits_for(cfg.robot, bridge.spec.action.names)
        for _ in range(n):
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            start = len(spy.steps)
            drove = spin_until(ex, lambda s=start: spy.fresh_since(s) >= 20, 60.0)
            i_kill = len(spy.steps)
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
            if not drove or not spin_until(
                ex, lambda i=i_kill: spy.first_stale_from(i) is not None, 30.0
            ):
                continue
            found = spy.reaction(i_kill)
            assert found is not None
            safe, last = found
            reaction.append((safe.t_ns - last) / dt_ns)
            held = holds_safe(safe.action, safe.measured, oracle)
            within += bool(held and reaction[-1] <= TARGET_PERIODS + 1e-6)
        bridge.destroy_node()
    finally:
        rclpy.try_shutdown(context=ctx)
    return {
        "robot": cfg.robot,
        "kills": n,
        "measured": len(reaction),
        "safe_within_target": within,
        "reaction_periods": _pct(reaction) if reaction else None,
    }


def fuzz(kind: str, n: int, seed: int) -> dict[str, Any]:
    """N fuzzed messages on one command topic; unsafe actions counted at the backend."""
    import rclpy
    from geometry_msgs.msg import Twist
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from sensor_msgs.msg import JointState
    from trajectory_msgs.msg import JointTrajectory

    from tether.core.config import load_config
    from tether_ros import conversions as conv
    from tether_ros import interface as itf
    from tether_ros.faults import (
        BridgeSpy,
        fuzz_low_level,
        fuzz_topic,
        fuzz_trajectory,
        fuzz_twist,
        spin_until,
    )
    from tether_ros.sim_bridge import SimBridge

    rng = np.random.default_rng(seed)
    ctx = _context()
    t0 = time.monotonic()
    try:
        probe = Node("fuzzer", context=ctx)
        ex = SingleThreadedExecutor(context=ctx)
        if kind == "drone":
            cfg = load_config(DRONE, ["ros.rate_mode=realtime", "sim.quadrotor.num_drones=1"])
            bridge = SimBridge(cfg, context=ctx)
            drones = bridge.io
            received: list[np.ndarray] = []
            real_step = drones.fleet.backend.step
            drones.fleet.backend.step = lambda a: (received.append(np.array(a)), real_step(a))[1]
            accepted = [0]
            real_accepted = drones._accepted

            def count(d: Any, stamp: int = 0) -> None:
                accepted[0] += 1
                real_accepted(d, stamp)

            drones._accepted = count
            pub = probe.create_publisher(JointState, itf.CMD_LOW_LEVEL, itf.COMMAND_QOS)
            for node in (bridge, probe):
                ex.add_node(node)
            spin_until(ex, lambda: pub.get_subscription_count() > 0 and len(received) > 3, 30.0)
            seen = fuzz_topic(
                ex,
                pub,
                lambda: fuzz_low_level(rng, conv.LOW_LEVEL_CHANNELS),
                lambda: accepted[0] + drones.rejected,
                n,
            )
            bad = unsafe_actions(np.stack(received), crazyflie_limits())
            rejected, passed = drones.rejected, accepted[0]
            n_steps = received.__len__
            reasons: dict[str, int] = {}
            for d in drones.fleet.drones:
                for k, v in d.safety.stats.reasons.items():
                    reasons[k] = reasons.get(k, 0) + v
        else:
            experiment, topic = (ARM, "joint_trajectory") if kind == "arm" else (BASE, "cmd_vel")
            extra = [] if kind == "arm" else ["sim.control_hz=50"]
            extra += (
                ["safety.max_acceleration={linear_x: 3.0, angular_z: 6.0}"]
                if kind == "base"
                else []
            )
            cfg = load_config(experiment, [*RUN, *extra])
            bridge = SimBridge(cfg, context=ctx)
            spy = BridgeSpy(bridge)
            msg_type = JointTrajectory if kind == "arm" else Twist
            pub = probe.create_publisher(msg_type, topic, itf.COMMAND_QOS)
            for node in (bridge, probe):
                ex.add_node(node)
            spin_until(ex, lambda: pub.get_subscription_count() > 0 and len(spy.steps) > 3, 30.0)
            names, dt = bridge.spec.action.names, bridge.spec.dt

            def make() -> Any:
                if kind == "arm":
                    return fuzz_trajectory(rng, names, bridge.io.runner.obs.stamp_ns, dt, 3.0)
                return fuzz_twist(rng)

            seen = fuzz_topic(ex, pub, make, lambda: spy.accepted + bridge.rejected, n)
            s = bridge.io.runner.safety
            bad = unsafe_steps(spy.steps, limits_for(cfg.robot, names), 1 / cfg.world.control_hz)
            rejected, passed = bridge.rejected, spy.accepted
            n_steps = spy.steps.__len__
            reasons = dict(s.stats.reasons)
            reasons.update(clamped=s.stats.clamped, rate_limited=s.stats.rate_limited)
            reasons.update(accel_limited=s.stats.accel_limited)
        steps = n_steps()
        alive = spin_until(ex, lambda: n_steps() > steps + 5, 30.0)  # still stepping
        for node in (probe, bridge):
            node.destroy_node()
    finally:
        rclpy.try_shutdown(context=ctx)
    return {
        "topic": {"arm": "joint_trajectory", "base": "cmd_vel", "drone": "cmd_low_level"}[kind],
        "sent": n,
        "processed": seen,
        "rejected": rejected,
        "passed": passed,
        "backend_steps": steps,
        "unsafe_at_backend": sum(bad.values()),
        "unsafe_by_kind": bad,
        "filter_counts": reasons,
        "node_alive": bool(alive),
        "wall_s": round(time.monotonic() - t0, 1),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kills", type=int, default=100, help="policy kills per robot")
    p.add_argument("--process-kills", type=int, default=5, help="SIGKILLs of a real process")
    p.add_argument("--fuzz", type=int, default=10_000, help="fuzzed messages per topic")
    args = p.parse_args()
    far_goal = ["task.distance_range=[500, 510]"]  # the episode ends at the goal
    result = {
        "target": {"reaction_periods_max": TARGET_PERIODS, "unsafe_at_backend": 0},
        "kills": {
            "arm": kills(ARM, args.kills, 0, []),
            "base": kills(BASE, args.kills, 1, far_goal),
        },
        "process_kills": process_kills(args.process_kills) if args.process_kills else None,
        "fuzz": {k: fuzz(k, args.fuzz, i) for i, k in enumerate(("arm", "base", "drone"))},
    }
    write_result("safety", result)
    ok = all(k["safe_within_target"] == k["kills"] for k in result["kills"].values()) and all(
        f["unsafe_at_backend"] == 0 and f["node_alive"] for f in result["fuzz"].values()
    )
    print("targets met" if ok else "TARGETS MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
