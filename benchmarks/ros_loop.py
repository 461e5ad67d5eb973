"""Closed-loop rate and obs->action latency over ROS 2 vs the same loop in one process.

Panda lift in MuJoCo, the same SimRunner + SafetyFilter + policy on both sides; only the
transport differs (sim_bridge and policy_server as separate processes over Fast DDS with the
shared-memory profile). Cases: state-only and with a 96x96 camera at 30 Hz, at 100 Hz and
500 Hz on the wall clock (realtime) and as fast as the loop goes (lockstep). The policy is
`hold` (no compute: the transport alone) unless a case says otherwise. Ratios come from one
run, since this machine is noisy.

The same run measures the floor under the loop (issue #22): bare rclpy in two processes with
the hot path's messages, QoS and DDS profile (benchmarks/ros_floor.py), with the default
executor and with rclpy's EventsExecutor, and the raw engine time of one control step (the
backend's own ``mj_step`` at the case's control rate, nothing else). ``floor_ratios`` holds
the state-only lockstep loop against the leanest floor: its period over (floor period + raw
engine time per step), and its p99 over (floor p99 + raw engine time). The floors and the
lockstep cases run ``--repeats`` times and keep the median run (short runs swing with load).

What bounds the lockstep loop (``hot_path_us``, ``padded_floor``): Tether's own work per
step timed in-process (the sim bridge's and the policy server's callbacks, fed each other's
messages, no transport), warm and after a sleep; and the leanest floor padded with that much
busy work per message on each side. The padded floor is the loop's period if Tether's work
cost in the loop what it costs back to back; the loop over the padded floor is what the
work's cold start after each wait adds.
Writes benchmarks/results/ros_loop.json.
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


def _median_run(runs: list[dict[str, Any]], key: str) -> dict[str, Any]:
    """The run whose ``key`` is the median (the lower middle one for an even count)."""
    return sorted(runs, key=lambda r: r[key])[(len(runs) - 1) // 2]


def raw_engine(hz: float, steps: int = 3000) -> dict[str, Any]:
    """The raw engine time of one control step at ``hz`` (ms): ``mj_step`` of the Panda lift
    scene for one control period, ctrl held, cameras off (what the backend step wraps)."""
    import mujoco
    import numpy as np
    from backend_step import _block

    from tether.core import registry
    from tether.core.experiment import build_task

    cfg = load_config(EXPERIMENT, [f"sim.control_hz={hz}", "sim.cameras=[]"])
    backend = registry.build("sim", cfg.sim, robot=cfg.robot, task=build_task(cfg))
    try:
        m, d, n = backend.model, backend.data, backend.substeps
        out = _block(backend, lambda _: mujoco.mj_step(m, d, nstep=n), steps)
    finally:
        backend.close()
    ms = out * 1e3
    return {
        "control_hz": hz,
        "physics_steps_per_control_step": n,
        "mean_ms": float(ms.mean()),
        "p50_ms": float(np.median(ms)),
        "p99_ms": float(np.percentile(ms, 99)),
    }


HOT_PATH_KEYS = (
    "sim_bridge",
    "policy_server",
    "sim_bridge_after_idle",
    "policy_server_after_idle",
)


def hot_path(steps: int = 3000, idle_s: float = 3e-4) -> dict[str, Any]:
    """Tether's own work per lockstep step, without the transport: the sim bridge and the
    policy server of the state-only lockstep case built in this process, each one's
    callback fed the other's last message (their publishers replaced by a capture), timed
    per step (us). ``sim_bridge`` / ``policy_server``: back to back, caches warm;
    ``*_after_idle``: each callback after ``idle_s`` asleep, as in the loop, where each
    process sleeps while the other works (its caches go cold)."""
    import time

    import numpy as np
    import rclpy
    from rclpy.context import Context

    from tether_ros.policy_server import PolicyServer
    from tether_ros.sim_bridge import SimBridge

    cfg = load_config(EXPERIMENT, _overrides(500, "lockstep", False, "hold", 3600.0))
    ctx = Context()
    rclpy.init(context=ctx)
    try:
        bridge, server = SimBridge(cfg, context=ctx), PolicyServer(cfg, context=ctx)
        io, got = bridge.io, {}
        io.pub_js.publish = lambda m: got.__setitem__("state", m)
        server.output.pub.publish = lambda m: got.__setitem__("action", m)
        io._start()  # publishes the first state
        state_in = server.inputs.state._on_state
        times: dict[str, list[int]] = {k: [] for k in HOT_PATH_KEYS}
        clock = time.perf_counter_ns
        for i in range(2 * steps + WARMUP_STEPS):
            idle = i >= steps + WARMUP_STEPS  # the second half: each callback after a sleep
            suffix = "_after_idle" if idle else ""
            if idle:
                time.sleep(idle_s)
            t0 = clock()
            state_in(got["state"])
            policy_ns = clock() - t0
            if idle:
                time.sleep(idle_s)
            t1 = clock()
            io._on_trajectory(got["action"])
            sim_ns = clock() - t1
            if i >= WARMUP_STEPS:
                times["policy_server" + suffix].append(policy_ns)
                times["sim_bridge" + suffix].append(sim_ns)
        simulated = io.runner.steps
        bridge.destroy_node()
        server.destroy_node()
    finally:
        rclpy.try_shutdown(context=ctx)
    out: dict[str, Any] = {"steps": steps, "idle_s": idle_s, "steps_simulated": simulated}
    for name, t in times.items():
        us = np.asarray(t) * 1e-3
        out[name] = {"mean_us": float(us.mean()), "p50_us": float(np.median(us))}
    return out


def leanest(floors: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The floor with the shorter period: what the loop's ratios are taken against."""
    return min(floors.values(), key=lambda f: f["period_ms"])


#: wall-clock cases and the rate of the paced floor each is also compared with
PACED_CASES = {"state_100hz": 100, "camera96_100hz": 100, "state_500hz": 500, "state_1khz": 1000}


def floor_ratios(
    by: dict[str, dict[str, Any]],
    floors: dict[str, dict[str, Any]],
    raw: dict[str, Any],
    paced: dict[str, dict[str, Any]] | None = None,
    padded: dict[str, Any] | None = None,
    hot: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Issue #22's ratios: the loop's cases (by name, their ROS 2 side) against the leanest
    floor (the one with the shorter period), plus the raw engine time per control step for
    the lockstep loop. ``paced``: floors paced at a wall-clock rate (str(Hz) -> result),
    what a timer case's p99 is also compared with (both sides idle between steps, as in
    the timer cases, where the back-to-back floor never sleeps)."""
    lean = leanest(floors)
    floor_p99 = lean["latency_ms"]["p99"]
    loop = by["state_max"]["ros"]
    period = 1e3 / loop["achieved_hz"]
    bound_period = lean["period_ms"] + raw["mean_ms"]
    bound_p99 = floor_p99 + raw["mean_ms"]
    out: dict[str, Any] = {
        "leanest_floor": lean["executor"],
        "loop_period_ms": period,
        "floor_period_plus_engine_ms": bound_period,
        "ratio_period": period / bound_period,
        "loop_p99_ms": loop["latency_ms"]["p99"],
        "floor_p99_plus_engine_ms": bound_p99,
        "ratio_p99": loop["latency_ms"]["p99"] / bound_p99,
        "target_ratio_period": 1.25,
        "target_ratio_p99": 1.5,
        # the camera lockstep loop's rate over the state-only one's (target >= 0.8)
        "camera_over_state_lockstep_rate": by["camera96_max"]["ros"]["achieved_hz"]
        / loop["achieved_hz"],
        # 100 Hz with a 96x96 camera: p99 over the floor's p99 (target <= 2.5)
        "camera_100hz_p99_over_floor_p99": by["camera96_100hz"]["ros"]["latency_ms"]["p99"]
        / floor_p99,
    }
    for name in ("state_500hz", "state_1khz"):
        if name in by:
            c = by[name]
            # wall-clock timers: the rate held (target within 1 %), p99 over the floor's
            # (target <= 1.5)
            out[f"{name}_rate_error"] = c["ros"]["achieved_hz"] / c["target_hz"] - 1
            out[f"{name}_p99_over_floor_p99"] = c["ros"]["latency_ms"]["p99"] / floor_p99
    if padded is not None:
        # the leanest floor with busy work per message as long as Tether's own work per step
        # in-process (hot_path, caches warm): the period the loop would have if that work
        # cost in the loop what it costs back to back
        out["padded_floor_work_us"] = padded["work_us"]
        out["padded_floor_period_ms"] = padded["period_ms"]
        out["padded_floor_over_floor_plus_engine"] = padded["period_ms"] / bound_period
        out["loop_over_padded_floor"] = period / padded["period_ms"]
    if hot is not None:
        # the floor plus Tether's work per step as it costs after a wait (each node sleeps
        # while the other works): the period that work explains
        cold_ms = (
            hot["sim_bridge_after_idle"]["mean_us"] + hot["policy_server_after_idle"]["mean_us"]
        ) * 1e-3
        out["floor_plus_work_after_idle_ms"] = lean["period_ms"] + cold_ms
        out["loop_over_floor_plus_work_after_idle"] = period / (lean["period_ms"] + cold_ms)
    for name, hz in PACED_CASES.items():
        f = (paced or {}).get(str(hz))
        if name in by and f is not None:
            out[f"{name}_p99_over_paced_floor_p99"] = (
                by[name]["ros"]["latency_ms"]["p99"] / f["latency_ms"]["p99"]
            )
    return out


def pin_each(pids: list[int]) -> list[int]:
    """Pin every thread of process i to CPU i (modulo the CPUs this process may use); the
    CPUs given, in order."""
    import os

    cpus = sorted(os.sched_getaffinity(0))
    given = []
    for i, pid in enumerate(pids):
        cpu = cpus[i % len(cpus)]
        for tid in os.listdir(f"/proc/{pid}/task"):
            os.sched_setaffinity(int(tid), {cpu})
        given.append(cpu)
    return given


def run_ros(ov: list[str], pin: bool = False) -> dict[str, Any]:
    """One episode of the graph over ROS 2. ``pin``: each node process on a CPU of its own
    (all its threads), set once the graph is up (issue #22's CPU-affinity option)."""
    from tether_ros.graph import GraphProcesses, graph_env, plan_graph
    from tether_ros.supervisor import EpisodeSupervisor

    cfg = load_config(EXPERIMENT, ov)
    env = graph_env(cfg)
    with (
        GraphProcesses(plan_graph(EXPERIMENT, ov), env) as graph,
        EpisodeSupervisor(cfg, graph, env) as sup,
    ):
        sup.wait_ready()
        cpus = pin_each([p.pid for p in graph.procs.values()]) if pin else None
        result = sup.run_episode()
        out = _stats(result)
        if cpus is not None:
            out["cpus"] = cpus
        if "chunk_executor" in result:
            out["chunk_executor"] = result["chunk_executor"]
        return out


def run_local(ov: list[str], realtime: bool) -> dict[str, Any]:
    from tether.sim.loop import run_local_episode

    return _stats(run_local_episode(load_config(EXPERIMENT, ov), realtime=realtime))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--duration", type=float, default=4.0, help="sim seconds per case")
    p.add_argument("--floor-steps", type=int, default=4000, help="round trips per floor")
    p.add_argument(
        "--repeats", type=int, default=3, help="runs of each floor and lockstep case (median)"
    )
    args = p.parse_args()
    d = args.duration
    from ros_floor import EXECUTORS, ping

    # runs of a few seconds swing with this VM's load: the floors and the lockstep cases run
    # --repeats times, interleaved, and keep the run with the median rate
    floor_runs: dict[str, list[dict[str, Any]]] = {kind: [] for kind in EXECUTORS}
    for _ in range(args.repeats):
        for kind in EXECUTORS:
            floor_runs[kind].append(ping(kind, args.floor_steps))
    floors = {kind: _median_run(runs, "rate_hz") for kind, runs in floor_runs.items()}
    for f in floors.values():
        print(
            f"floor {f['executor']:14s} {f['rate_hz']:7.1f} Hz p50 {f['latency_ms']['p50']:6.3f} "
            f"p99 {f['latency_ms']['p99']:6.3f} ms",
            flush=True,
        )
    lean_kind = leanest(floors)["executor"]
    # Tether's own work per step, in-process, and the leanest floor padded with as much
    # busy work per message (what bounds the lockstep loop, see hot_path)
    hot = hot_path()
    work = (hot["sim_bridge"]["mean_us"], hot["policy_server"]["mean_us"])
    padded = _median_run(
        [ping(lean_kind, args.floor_steps, work_us=work) for _ in range(args.repeats)], "rate_hz"
    )
    print(
        f"Tether's work per step in-process: sim bridge {work[0]:.1f} us, policy server "
        f"{work[1]:.1f} us (after {hot['idle_s'] * 1e6:.0f} us asleep: "
        f"{hot['sim_bridge_after_idle']['mean_us']:.1f} / "
        f"{hot['policy_server_after_idle']['mean_us']:.1f} us); {lean_kind} floor padded with "
        f"it: {padded['rate_hz']:.1f} Hz",
        flush=True,
    )
    # the same ping-pong paced by the wall clock, at the timer cases' rates (4 s each)
    paced_floors = {
        str(hz): ping(lean_kind, 4 * hz, warmup=hz // 2, rate_hz=hz)
        for hz in sorted(set(PACED_CASES.values()))
    }
    for hz, f in paced_floors.items():
        print(
            f"floor {lean_kind} paced {hz:>5s} Hz: p50 {f['latency_ms']['p50']:6.3f} "
            f"p99 {f['latency_ms']['p99']:6.3f} ms",
            flush=True,
        )
    raw = raw_engine(500)
    print(f"raw engine step at 500 Hz: mean {raw['mean_ms']:.4f} ms", flush=True)
    cases = [
        # name, camera, hz, ROS mode, in-process paced?, policy
        ("state_100hz", False, 100, "realtime", True, "hold"),
        ("state_500hz", False, 500, "realtime", True, "hold"),
        ("state_1khz", False, 1000, "realtime", True, "hold"),
        ("state_max", False, 500, "lockstep", False, "hold"),
        ("camera96_100hz", True, 100, "realtime", True, "hold"),
        ("camera96_max", True, 500, "lockstep", False, "hold"),
        ("expert_state_100hz", False, 100, "realtime", True, "scripted_expert"),
        # the loop as every node spun before ros.executor existed (the A/B of the executor)
        ("state_max_default_executor", False, 500, "lockstep", False, "hold"),
        # each node process pinned to a CPU of its own (the A/B of CPU affinity)
        ("state_max_pinned", False, 500, "lockstep", False, "hold"),
        # the chunked path: the policy answers chunks of 16 rows on request, the chunk
        # executor sends the bridge a row per control period on the wall clock
        ("chunked_100hz", False, 100, "realtime", True, "hold"),
        ("chunked_500hz", False, 500, "realtime", True, "hold"),
    ]
    out: list[dict[str, Any]] = []
    for name, camera, hz, mode, paced, policy in cases:
        ov = _overrides(hz, mode, camera, policy, d)
        if name.endswith("_default_executor"):
            ov.append("ros.executor=default")
        if name.startswith("chunked"):
            ov += ["ros.chunked=true", "policy.horizon=16"]
        pin = name.endswith("_pinned")
        if mode == "lockstep":
            runs = [run_ros(ov, pin) for _ in range(args.repeats)]
            ros = _median_run(runs, "achieved_hz")
            ros["repeat_rates_hz"] = [r["achieved_hz"] for r in runs]
        else:
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
    ratios = floor_ratios(by, floors, raw, paced_floors, padded, hot)
    targets["lockstep_period_le_1_25x_floor_plus_engine"] = ratios["ratio_period"] <= 1.25
    targets["lockstep_p99_le_1_5x_floor_plus_engine"] = ratios["ratio_p99"] <= 1.5
    print(
        f"state_max vs {ratios['leanest_floor']} floor + engine: period x{ratios['ratio_period']:.2f}"
        f" p99 x{ratios['ratio_p99']:.2f}",
        flush=True,
    )
    write_result(
        "ros_loop",
        {
            "duration_sim_s": d,
            "floors": floors,
            "paced_floors": paced_floors,
            "raw_engine": raw,
            "hot_path_us": hot,
            "padded_floor": padded,
            "floor_ratios": ratios,
            "cases": out,
            "targets": targets,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
