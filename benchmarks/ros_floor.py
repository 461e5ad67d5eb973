"""The floor under Tether's ROS 2 loop (issue #22): bare rclpy, two processes, the hot path's
messages and QoS, nothing else.

A ``ping`` process publishes ``sensor_msgs/JointState`` (the Panda's 9 joints, sensor-data
QoS, as the sim bridge's ``joint_states``); an ``echo`` process answers each one with a
``trajectory_msgs/JointTrajectory`` of one point (8 targets, reliable, as the policy
server's ``joint_trajectory``); the ping process waits for the answer, then sends the next
state. Both use the same executor, the same DDS profile (the shared-memory one Tether's
graphs use) and endpoints without QoS-event handlers (tether_ros.interface.FAST_PUB/SUB).
Messages are built once and only their stamp / values change: the loop costs the transport
and the executor and nothing of Tether's.

Executors:
- ``default``: ``SingleThreadedExecutor.spin_once`` (what every Tether node spins on);
- ``events``: ``rclpy.experimental.EventsExecutor.spin_once``.

Writes nothing itself; ``benchmarks/ros_loop.py`` runs it beside Tether's loop and writes
the ratios. Alone: ``python benchmarks/ros_floor.py --executor events``.
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, get_args

import numpy as np

from tether.core.config import RosConfig
from tether_ros.runtime import make_executor

REPO = Path(__file__).resolve().parents[1]
# ros.executor's choices (tether.core.config.RosConfig)
EXECUTORS: tuple[str, ...] = get_args(RosConfig.model_fields["executor"].annotation)
STATE_TOPIC = "floor_joint_states"
ACTION_TOPIC = "floor_joint_trajectory"
# the longest the ping side waits for the echo to appear / for one answer (s)
DISCOVERY_S = 30.0
ANSWER_S = 5.0
RESEND_S = 0.5


def _env() -> dict[str, str]:
    """The environment of Tether's graphs (RMW, the DDS profile), from the loop's experiment."""
    from tether.core.config import load_config
    from tether_ros.graph import graph_env

    return graph_env(load_config(REPO / "configs/experiments/panda_lift_expert.yaml"))


def busy(us: float) -> None:
    """Spin on the clock for ``us`` microseconds: CPU work of a known length that touches
    no memory (what a padded floor adds per message, see ``ping``)."""
    if us > 0:
        end = time.perf_counter_ns() + int(us * 1e3)
        while time.perf_counter_ns() < end:
            pass


def echo(kind: str, work_us: float = 0.0) -> int:
    """The answering side: one JointTrajectory per JointState (after ``work_us`` of busy
    work), until SIGTERM."""
    import signal

    import rclpy
    from rclpy.signals import SignalHandlerOptions
    from sensor_msgs.msg import JointState
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    from tether_ros.interface import COMMAND_QOS, FAST_PUB, FAST_SUB, SENSOR_QOS

    rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    node = rclpy.create_node("tether_floor_echo")
    out = JointTrajectory()
    out.joint_names = [f"panda_joint{i}" for i in range(1, 8)] + ["panda_finger_joint1"]
    point = JointTrajectoryPoint()
    point.positions = [0.0] * 8
    out.points = [point]
    pub = node.create_publisher(
        JointTrajectory, ACTION_TOPIC, COMMAND_QOS, event_callbacks=FAST_PUB
    )

    def on_state(msg: Any) -> None:
        busy(work_us)
        out.header.stamp = msg.header.stamp
        point.positions = msg.position[:8]
        pub.publish(out)

    node.create_subscription(
        JointState, STATE_TOPIC, on_state, SENSOR_QOS, event_callbacks=FAST_SUB
    )
    executor = make_executor(kind=kind)
    executor.add_node(node)
    print("ready", flush=True)
    while not stop and rclpy.ok():
        executor.spin_once(timeout_sec=0.1)
    executor.shutdown()
    node.destroy_node()
    rclpy.try_shutdown()
    return 0


def ping(
    kind: str,
    steps: int,
    warmup: int = 200,
    rate_hz: float | None = None,
    work_us: tuple[float, float] = (0.0, 0.0),
) -> dict[str, Any]:
    """Start an echo process with executor ``kind``, ping it ``warmup + steps`` times (each
    answer must carry its ping's stamp); the period (wall time per round trip over the timed
    steps) and the round trip's percentiles (ms). ``rate_hz``: paced, one ping per period
    of the wall clock (as a realtime sim bridge steps), both sides idle in between; else
    the next ping goes as soon as the answer is in. ``work_us``: (ping side, echo side)
    microseconds of busy work per round trip, each side's before it sends (a padded floor:
    the transport plus CPU work of a known length, and no memory of Tether's)."""
    import rclpy
    from rclpy.context import Context
    from sensor_msgs.msg import JointState
    from trajectory_msgs.msg import JointTrajectory

    from tether_ros.interface import COMMAND_QOS, FAST_PUB, FAST_SUB, SENSOR_QOS

    proc = subprocess.Popen(
        [sys.executable, __file__, "--echo", "--executor", kind, "--work-us", str(work_us[1])],
        env=_env(),
        stdout=subprocess.PIPE,
        text=True,
    )
    ctx = Context()
    rclpy.init(context=ctx)
    try:
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != "ready":
            raise RuntimeError(f"floor echo ({kind}) did not start")
        node = rclpy.create_node("tether_floor_ping", context=ctx)
        got: list[int] = []
        node.create_subscription(
            JointTrajectory,
            ACTION_TOPIC,
            lambda m: got.append(m.header.stamp.nanosec),
            COMMAND_QOS,
            event_callbacks=FAST_SUB,
        )
        pub = node.create_publisher(JointState, STATE_TOPIC, SENSOR_QOS, event_callbacks=FAST_PUB)
        msg = JointState()
        msg.name = [f"panda_joint{i}" for i in range(1, 8)] + [
            "panda_finger_joint1",
            "panda_finger_joint2",
        ]
        msg.position = [0.0] * 9
        msg.velocity = [0.0] * 9
        msg.effort = [0.0] * 9
        executor = make_executor(ctx, kind=kind)
        executor.add_node(node)
        t_end = time.monotonic() + DISCOVERY_S
        while pub.get_subscription_count() < 1 or node.count_publishers(ACTION_TOPIC) < 1:
            executor.spin_once(timeout_sec=0.01)
            if time.monotonic() > t_end:
                raise RuntimeError(f"floor echo ({kind}) not discovered in {DISCOVERY_S} s")
        lat = np.empty(steps)
        t_start, resent = 0.0, 0
        t_next = time.perf_counter()
        for i in range(warmup + steps):
            if rate_hz:
                # as an rcl timer: on the period's grid, periods already past skipped (a
                # re-sent ping must not make the next ones go back to back)
                now = time.perf_counter()
                if t_next > now:
                    time.sleep(t_next - now)
                else:
                    t_next += math.floor((now - t_next) * rate_hz) / rate_hz
                # paced, a ping's time is its grid tick, not when a late one went out (the
                # next keeps to the grid, less than a period after a late one)
                tick = t_next
                t_next += 1.0 / rate_hz
            else:
                tick = time.perf_counter()
            if i == warmup:
                t_start = tick
            got.clear()
            busy(work_us[0])
            msg.header.stamp.nanosec = i
            msg.position[0] = float(i)
            t0 = time.perf_counter()
            pub.publish(msg)
            deadline, resend = t0 + ANSWER_S, t0 + RESEND_S
            while not got:
                executor.spin_once(timeout_sec=RESEND_S)
                now = time.perf_counter()
                if now > deadline:
                    raise RuntimeError(f"floor echo ({kind}): no answer to ping {i}")
                if not got and now > resend:
                    # sensor-data QoS is best effort: a state can be lost (a fresh match
                    # drops the first ones); sent again, and counted
                    pub.publish(msg)
                    resend = now + RESEND_S
                    resent += i >= warmup
            if i >= warmup:
                lat[i - warmup] = time.perf_counter() - t0
            if got[0] != i:
                raise RuntimeError(f"floor echo ({kind}): ping {i} answered with {got[0]}")
        wall = time.perf_counter() - t_start
        executor.shutdown()
        node.destroy_node()
    finally:
        rclpy.try_shutdown(context=ctx)
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
    ms = lat * 1e3
    return {
        "executor": kind,
        "paced_hz": rate_hz,
        "steps": steps,
        # timed pings whose state was lost and sent again (their round trip includes the wait)
        "resent": resent,
        "work_us": list(work_us),
        "period_ms": wall / steps * 1e3,
        "rate_hz": steps / wall,
        "latency_ms": {
            "p50": float(np.percentile(ms, 50)),
            "p99": float(np.percentile(ms, 99)),
            "max": float(ms.max()),
        },
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--executor", choices=EXECUTORS, default="default")
    p.add_argument("--steps", type=int, default=4000)
    p.add_argument("--rate", type=float, default=None, help="paced at this rate (Hz)")
    p.add_argument(
        "--work-us", type=float, default=0.0, help="busy work per message on each side (us)"
    )
    p.add_argument("--echo", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.echo:
        return echo(args.executor, args.work_us)
    r = ping(args.executor, args.steps, rate_hz=args.rate, work_us=(args.work_us, args.work_us))
    print(
        f"{r['executor']:8s} {r['rate_hz']:7.0f} Hz  period {r['period_ms']:.3f} ms  "
        f"p50 {r['latency_ms']['p50']:.3f}  p99 {r['latency_ms']['p99']:.3f} ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
