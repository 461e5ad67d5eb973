"""Closed-loop rate and obs->action latency over ROS 2 vs the same loop in one process.

Panda lift in MuJoCo, the same SimRunner + SafetyFilter + policy on both sides; only the
transport differs (sim_bridge and policy_server as separate processes over Fast DDS with the
shared-memory profile). Cases: state-only and with a 96x96 camera at 30 Hz, at 100 Hz and
500 Hz on the wall clock (realtime) and as fast as the loop goes (lockstep). The policy is
`hold` (no compute: the transport alone) unless a case says otherwise. Ratios come from one
run, since this machine is noisy. Writes benchmarks/results/ros_loop.json.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from common import write_result  # noqa: E402

from tether.core.config import load_config  # noqa: E402
from tether.core.timing import percentiles_ms  # noqa: E402

EXPERIMENT = str(REPO / "configs/experiments/panda_lift_expert.yaml")
CAMERA = "sim.cameras=[{name: front, width: 96, height: 96, fps: 30}]"
WARMUP_STEPS = 20  # DDS discovery and first-call costs are not the loop's steady state


def _overrides(hz: float, mode: str, camera: bool, policy: str, duration_s: float) -> list[str]:
    ov = [
        f"sim.control_hz={hz}",
        f"ros.rate_mode={mode}",
        f"policy.type={policy}",
        f"task.max_duration_s={duration_s}",
        "episodes.autostart=false",
        "episodes.auto_reset=false",
        CAMERA if camera else "sim.cameras=[]",
    ]
    if camera and policy == "hold":
        ov.append("policy.cameras=[front]")  # the policy server subscribes to the images
    return ov


def _stats(result: dict[str, Any]) -> dict[str, Any]:
    lat = result["latency_ms"][WARMUP_STEPS:]
    return {
        "achieved_hz": result["control_hz"],
        "steps": result["steps"],
        "stale_steps": result["stale_steps"],
        "latency_ms": percentiles_ms(lat),
    }


def run_ros(ov: list[str]) -> dict[str, Any]:
    from tether_ros.graph import GraphProcesses, graph_env, plan_graph
    from tether_ros.supervisor import EpisodeSupervisor

    cfg = load_config(EXPERIMENT, ov)
    env = graph_env(cfg)
    with (
        GraphProcesses(plan_graph(EXPERIMENT, ov), env) as graph,
        EpisodeSupervisor(cfg, graph, env) as sup,
    ):
        sup.wait_ready()
        return _stats(sup.run_episode())


def run_local(ov: list[str], realtime: bool) -> dict[str, Any]:
    from tether.sim.loop import run_local_episode

    return _stats(run_local_episode(load_config(EXPERIMENT, ov), realtime=realtime))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--duration", type=float, default=4.0, help="sim seconds per case")
    args = p.parse_args()
    d = args.duration
    cases = [
        # name, camera, hz, ROS mode, in-process paced?, policy
        ("state_100hz", False, 100, "realtime", True, "hold"),
        ("state_500hz", False, 500, "realtime", True, "hold"),
        ("state_max", False, 500, "lockstep", False, "hold"),
        ("camera96_100hz", True, 100, "realtime", True, "hold"),
        ("camera96_max", True, 500, "lockstep", False, "hold"),
        ("expert_state_100hz", False, 100, "realtime", True, "scripted_expert"),
    ]
    out: list[dict[str, Any]] = []
    for name, camera, hz, mode, paced, policy in cases:
        ov = _overrides(hz, mode, camera, policy, d)
        ros = run_ros(ov)
        local = run_local(ov, realtime=paced)
        row = {
            "case": name,
            "camera": "96x96@30" if camera else None,
            "target_hz": hz if paced else None,
            "ros_mode": mode,
            "policy": policy,
            "ros": ros,
            "in_process": local,
            "ratio_rate_ros_over_local": ros["achieved_hz"] / local["achieved_hz"],
            "ratio_p99_ros_over_local": ros["latency_ms"]["p99"]
            / max(local["latency_ms"]["p99"], 1e-9),
        }
        out.append(row)
        print(
            f"{name:20s} ROS {ros['achieved_hz']:7.1f} Hz p50 {ros['latency_ms']['p50']:6.3f} "
            f"p99 {ros['latency_ms']['p99']:6.3f} ms | in-process {local['achieved_hz']:7.1f} Hz "
            f"p50 {local['latency_ms']['p50']:6.3f} p99 {local['latency_ms']['p99']:6.3f} ms",
            flush=True,
        )
    by = {r["case"]: r for r in out}
    targets = {
        "state_ros_rate_ge_500hz": by["state_max"]["ros"]["achieved_hz"] >= 500,
        "state_500hz_realtime_achieved_hz": by["state_500hz"]["ros"]["achieved_hz"],
        "state_500hz_p99_le_2ms": by["state_500hz"]["ros"]["latency_ms"]["p99"] <= 2.0,
        "camera_p99_le_5ms": by["camera96_100hz"]["ros"]["latency_ms"]["p99"] <= 5.0,
    }
    write_result("ros_loop", {"duration_sim_s": d, "cases": out, "targets": targets})
    return 0


if __name__ == "__main__":
    sys.exit(main())
