"""A drone policy over ROS 2 in PyBullet: achieved command rate and obs->command latency.

Runs an experiment's graph as `tether up` does (sim_bridge + one policy_server per drone as
separate processes over Fast DDS) and listens from a probe node: the rate of commands on
``cmd_low_level`` (wall clock) and, for each, the time from the ``odom`` message it answers
(same stamp) reaching the probe to the command reaching the probe. Cases: realtime at the
experiment's control rate, lockstep (as fast as the loop goes), and the policy server alone
(the probe plays the bridge: it sends odom + target and the next one as soon as the answer
is back, from a recorded hover trajectory), which isolates the policy's own rate. Default
experiment:
configs/experiments/quad_hover_onnx.yaml when its model exists, else the same graph with a
stand-in ONNX velocity policy (tests/ros/onnx_standin.py). Writes
benchmarks/results/drone_loop.json.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from common import write_result  # noqa: E402

from tether.core.config import load_config  # noqa: E402
from tether.core.timing import now_ns, percentiles_ms  # noqa: E402

EXPERIMENT = REPO / "configs/experiments/quad_hover_onnx.yaml"
WARMUP_S = 2.0  # DDS discovery and first-call costs are not the loop's steady state


def _standin_overrides(tmp: Path) -> list[str]:
    sys.path.insert(0, str(REPO / "tests/ros"))
    from onnx_standin import write_velocity_standin

    model = write_velocity_standin(tmp / "onnx")
    return [
        "policy.type=onnx",
        f"policy.model={model}",
        "sim.quadrotor.action_mode=velocity_setpoint",
    ]


def measure(experiment: Path, overrides: list[str], duration_s: float) -> dict[str, Any]:
    import rclpy
    from nav_msgs.msg import Odometry
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from sensor_msgs.msg import JointState

    from tether_ros import conversions as conv
    from tether_ros import interface as itf
    from tether_ros.graph import GraphProcesses, graph_env, plan_graph

    cfg = load_config(experiment, overrides)
    graph = GraphProcesses(plan_graph(experiment, overrides), graph_env(cfg))
    odom_wall: dict[int, int] = {}
    cmds: list[tuple[int, int]] = []  # (wall ns, stamp ns)
    latency: list[float] = []

    def on_odom(msg: Odometry) -> None:
        odom_wall[conv.from_time(msg.header.stamp)] = now_ns()

    def on_cmd(msg: JointState) -> None:
        t, stamp = now_ns(), conv.from_time(msg.header.stamp)
        cmds.append((t, stamp))
        if stamp in odom_wall:
            latency.append((t - odom_wall.pop(stamp)) * 1e-6)

    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    graph.start()
    try:
        node = Node("drone_loop_probe", context=ctx)
        ns = (
            "cf0/"
            if getattr(cfg.sim, "quadrotor", None) and cfg.sim.quadrotor.num_drones > 1
            else ""
        )
        node.create_subscription(Odometry, f"{ns}{itf.ODOM}", on_odom, itf.SENSOR_QOS)
        node.create_subscription(JointState, f"{ns}{itf.CMD_LOW_LEVEL}", on_cmd, itf.COMMAND_QOS)
        ex = SingleThreadedExecutor(context=ctx)
        ex.add_node(node)
        deadline = time.monotonic() + 120
        while not cmds and time.monotonic() < deadline:
            ex.spin_once(timeout_sec=0.05)
        if not cmds:
            raise RuntimeError("no command came back within 120 s")
        t_start = time.monotonic() + WARMUP_S
        while time.monotonic() < t_start:
            ex.spin_once(timeout_sec=0.01)
        n0, lat0 = len(cmds), len(latency)
        end = time.monotonic() + duration_s
        while time.monotonic() < end:
            ex.spin_once(timeout_sec=0.01)
        window = cmds[n0:]
        wall_s = (window[-1][0] - window[0][0]) * 1e-9
        sim_s = (window[-1][1] - window[0][1]) * 1e-9
        return {
            "commands": len(window),
            "achieved_hz": round((len(window) - 1) / wall_s, 1),
            "sim_s_per_wall_s": round(sim_s / wall_s, 3),
            "latency_ms": percentiles_ms(latency[lat0:]),
        }
    finally:
        graph.stop()
        rclpy.try_shutdown(context=ctx)


def measure_policy_server(experiment: Path, overrides: list[str], duration_s: float) -> dict:
    """Only the policy server runs; the probe sends an observation as soon as the previous
    one is answered (ping-pong over ROS 2)."""
    import numpy as np
    import rclpy
    from geometry_msgs.msg import PoseStamped
    from nav_msgs.msg import Odometry
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from sensor_msgs.msg import JointState

    from tether.sim.quadrotor.dynamics import hover_state
    from tether_ros import conversions as conv
    from tether_ros import interface as itf
    from tether_ros.graph import GraphProcesses, graph_env, plan_graph

    cfg = load_config(experiment, overrides)
    nodes = [n for n in plan_graph(experiment, overrides) if n.name == "policy_server"][:1]
    graph = GraphProcesses(nodes, graph_env(cfg))
    answers: dict[int, int] = {}
    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    graph.start()
    try:
        node = Node("policy_probe", context=ctx)
        pub_odom = node.create_publisher(Odometry, itf.ODOM, itf.SENSOR_QOS)
        pub_target = node.create_publisher(
            PoseStamped, itf.object_pose_topic("target"), itf.SENSOR_QOS
        )

        def on_answer(msg: JointState) -> None:
            answers.setdefault(conv.from_time(msg.header.stamp), now_ns())

        node.create_subscription(JointState, itf.CMD_LOW_LEVEL, on_answer, itf.COMMAND_QOS)
        ex = SingleThreadedExecutor(context=ctx)
        ex.add_node(node)
        state = hover_state(1, (0.1, -0.1, 0.9))[0]
        target = np.array([0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0])
        sent: dict[int, int] = {}
        k = 1

        def send(stamp: int) -> None:
            pub_target.publish(conv.pose_msg(target, stamp, "odom"))
            sent[stamp] = now_ns()
            pub_odom.publish(conv.odometry_msg(state, stamp, "odom", "base_link"))

        deadline = time.monotonic() + 120
        while not answers and time.monotonic() < deadline:  # discovery, first inference
            send(k * 10_000_000)
            k += 1
            ex.spin_once(timeout_sec=0.05)
        if not answers:
            raise RuntimeError("the policy server never answered")
        start, end = time.monotonic() + WARMUP_S, time.monotonic() + WARMUP_S + duration_s
        latency: list[float] = []
        n = 0
        while time.monotonic() < end:
            stamp = k * 10_000_000
            send(stamp)
            t_send = time.monotonic()
            while stamp not in answers and time.monotonic() - t_send < 0.2:
                ex.spin_once(timeout_sec=0.001)
            if stamp in answers and t_send >= start:
                latency.append((answers[stamp] - sent[stamp]) * 1e-6)
                n += 1
            k += 1
        return {
            "answers": n,
            "achieved_hz": round(n / duration_s, 1),
            "latency_ms": percentiles_ms(latency),
        }
    finally:
        graph.stop()
        rclpy.try_shutdown(context=ctx)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--experiment", type=Path, default=EXPERIMENT)
    ap.add_argument("--duration", type=float, default=15.0, help="seconds per case")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base: list[str] = ["sim.cameras=[]", "task.max_duration_s=600"]
        experiment = args.experiment
        cfg = load_config(experiment)
        model = Path(str(getattr(cfg.policy, "model", "")))
        policy = f"{cfg.policy.type} {model}" if cfg.policy.type == "onnx" else cfg.policy.type
        if cfg.policy.type == "onnx" and not (REPO / model).exists() and not model.exists():
            base += _standin_overrides(Path(tmp))
            policy = "onnx stand-in (velocity P controller, tests/ros/onnx_standin.py)"
        cases = []
        # the last case: lockstep with rclpy's SingleThreadedExecutor (the A/B of ros.executor)
        for mode, executor in (("realtime", None), ("lockstep", None), ("lockstep", "default")):
            ov = [*base, f"ros.rate_mode={mode}"]
            name = mode
            if executor is not None:
                ov.append(f"ros.executor={executor}")
                name = f"{mode} (ros.executor={executor})"
            res = measure(experiment, ov, args.duration)
            print(f"{name}: {res}")
            cases.append({"rate_mode": name, "target_hz": cfg.sim.control_hz, **res})
        res = measure_policy_server(experiment, base, args.duration)
        print(f"policy server alone: {res}")
        cases.append({"rate_mode": "policy_server_ping_pong", "target_hz": None, **res})
    write_result(
        "drone_loop",
        {"experiment": str(experiment.relative_to(REPO)), "policy": policy, "cases": cases},
    )


if __name__ == "__main__":
    main()
