"""`tether demo`: N seeded episodes of the scripted expert through the ROS 2 loop, headless.

Starts sim_bridge and policy_server as separate processes (Fast DDS, shared-memory profile),
drives episodes through ~/start_episode, and writes DIR/summary.json (success_rate,
episodes, control_hz, latency_ms p50/p99), latency_hist.png and an MP4 of episode 0.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from tether.core.config import load_config
from tether.core.timing import percentiles_ms

DEMO_OVERRIDES = ["episodes.autostart=false", "episodes.auto_reset=false"]


def run_demo(config: str, overrides: list[str], out: str | None, video: bool = True) -> int:
    from tether_ros.graph import GraphProcesses, graph_env, plan_graph

    overrides = [*overrides, *DEMO_OVERRIDES]
    cfg = load_config(config, overrides)
    out_dir = Path(out) if out else Path("runs") / time.strftime("demo-%Y%m%d-%H%M%S")
    out_dir.mkdir(parents=True, exist_ok=True)
    env = graph_env(cfg)
    nodes = plan_graph(config, overrides)
    n = cfg.episodes.count
    print(
        f"tether demo: {n} episodes of {cfg.task.type} with {cfg.policy.type} in {world_name(cfg)} "
        f"at {cfg.world.control_hz:g} Hz ({cfg.ros.rate_mode}) over ROS 2 -> {out_dir}"
    )
    with GraphProcesses(nodes, env, out_dir / "logs") as graph:
        results, frames = _supervise(cfg, graph, env, record_camera=video)
    summary = summarize(cfg, results)
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    all_lat = [x for r in results for x in r.get("latency_ms", [])]
    (out_dir / "latency_ms.json").write_text(json.dumps(all_lat))
    from tether.cli.report import latency_histogram

    latency_histogram(
        all_lat,
        out_dir / "latency_hist.png",
        title=f"obs->action latency over ROS 2 ({len(all_lat)} steps)",
    )
    if frames:
        from tether.cli.report import write_mp4

        fps = cfg.world.cameras[0].fps if cfg.world.cameras else 30
        write_mp4(frames, out_dir / "episode_000.mp4", fps=fps)
    lat = summary["latency_ms"]
    print(
        f"success {summary['successes']}/{n} ({100 * summary['success_rate']:.0f}%), "
        f"control {summary['control_hz']:.1f} Hz (target {cfg.world.control_hz:g}), "
        f"obs->action latency p50 {lat['p50']:.2f} ms, p99 {lat['p99']:.2f} ms"
    )
    print(
        f"wrote {out_dir}/summary.json, latency_hist.png" + (", episode_000.mp4" if frames else "")
    )
    return 0


def world_name(cfg: Any) -> str:
    """What the episodes run in: the simulator, or the (mock) hardware."""
    if cfg.sim is not None:
        return cfg.sim.type
    return f"{'mock ' if cfg.hardware.mock else ''}{cfg.hardware.type} hardware"


def summarize(cfg: Any, results: list[dict[str, Any]]) -> dict[str, Any]:
    steps = sum(r["steps"] for r in results)
    wall = sum(r["wall_s"] for r in results)
    lat = percentiles_ms([x for r in results for x in r.get("latency_ms", [])])
    return {
        "experiment": cfg.name,
        "episodes": len(results),
        "successes": sum(r["success"] for r in results),
        "success_rate": sum(r["success"] for r in results) / max(1, len(results)),
        "control_hz": steps / wall if wall > 0 else float("nan"),
        "target_hz": cfg.world.control_hz,
        "rate_mode": cfg.ros.rate_mode,
        "latency_ms": lat,
        **({"chunk_executor": chunk_summary(results)} if cfg.ros.chunked else {}),
        "per_episode": [{k: v for k, v in r.items() if k != "latency_ms"} for r in results],
    }


def chunk_summary(results: list[dict[str, Any]]) -> dict[str, Any]:
    """ros.chunked: the chunk executor's reports over all episodes (each report covers its
    episode up to at most 1 s before the end)."""
    reports = [r["chunk_executor"] for r in results if r.get("chunk_executor")]
    keys = ("chunks", "executed", "underruns", "dropped_rows")
    total = {k: sum(int(c[k]) for c in reports) for k in keys}
    hz = [float(c["achieved_hz"]) for c in reports]
    return {
        "episodes_reported": len(reports),
        "achieved_hz_min": min(hz) if hz else None,
        **total,
    }


def _supervise(cfg: Any, graph: Any, env: dict[str, str], record_camera: bool):
    """Start each episode through the sim bridge and collect its end status."""
    from tether_ros.supervisor import EpisodeSupervisor

    cam = cfg.world.cameras[0].name if (record_camera and cfg.world.cameras) else None
    results: list[dict[str, Any]] = []
    frames: list[np.ndarray] = []
    with EpisodeSupervisor(cfg, graph, env, camera=cam) as sup:
        sup.wait_ready()
        for k in range(cfg.episodes.count):
            r = sup.run_episode(record=(k == 0 and cam is not None))
            if k == 0:
                frames = sup.frames
            results.append(r)
            lat = percentiles_ms(r["latency_ms"])
            chunks = r.get("chunk_executor")
            print(
                f"  episode {k + 1}/{cfg.episodes.count} seed {r['seed']}: "
                f"{'success' if r['success'] else 'FAIL   '} {r['sim_time_s']:.2f} s sim, "
                f"{r['steps']} steps, {r['control_hz'] or 0:.1f} Hz, "
                f"latency p50 {lat['p50']:.2f} / p99 {lat['p99']:.2f} ms"
                + (
                    f"; chunk executor {chunks['achieved_hz']:.1f} Hz, {chunks['chunks']} "
                    f"chunks, {chunks['underruns']} underruns, inference p50 "
                    f"{chunks['inference_latency_ms']['p50']:.1f} ms"
                    if chunks
                    else ""
                ),
                flush=True,
            )
    return results, frames
