"""Local planners for the Husky on the obstacle course (issue #20, docs/base_planner.md):
the learned planner (the shipped ONNX model), the Dynamic Window Approach planner (`dwa`;
`dwa_odometry`: the same on the odometry the learned planner reads, wheels with the IMU's
heading, instead of the true pose; `dwa_wheel_odometry`: on wheel odometry alone) and the follow-the-gap expert (`base_expert`), per density level and engine, on the same
unseen seeds: success, collision and timeout rates, mean time to the goal and path length of
the successful runs; the learned planner's training wall-clock (its train.json) and its
per-step latency (one onnxruntime thread, p50 / p99). Writes
benchmarks/results/base_planner.json and base_planner.png.

    python benchmarks/base_planner.py [--episodes 100] [--engines pybullet mujoco]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from common import RESULTS, tether_eval_ros, write_result  # noqa: E402

EXPERIMENT = REPO / "configs/experiments/husky_obstacle_course.yaml"
MODEL = REPO / "models/husky_nav_planner"
LEVELS = ("sparse", "medium", "dense")
SEED = 1000


def policy_overrides(planner: str, model: Path) -> list[str]:
    """``dwa_odometry``: DWA reading the odometry the learned planner reads (the
    experiment's: wheels with the IMU's heading), instead of the true pose (its default, the
    stand-in for a localization system); ``dwa_wheel_odometry``: on wheel odometry alone
    (``sim.mobile_base.odometry_heading=wheels``: the heading drifts with the tracks' slip)."""
    if planner == "learned":
        return ["policy.type=onnx", f"policy.model={model / 'model.onnx'}"]
    if planner == "dwa_odometry":
        return ["policy.type=dwa", "policy.pose_source=odometry"]
    if planner == "dwa_wheel_odometry":
        return [
            "policy.type=dwa",
            "policy.pose_source=odometry",
            "sim.mobile_base.odometry_heading=wheels",
        ]
    return [f"policy.type={planner}"]


def run_case(
    planner: str, engine: str, level: str, episodes: int, model: Path, seed: int = SEED
) -> dict[str, Any]:
    from tether.core.config import load_config
    from tether.core.experiment import build_policy
    from tether.policies.nav.evaluate import outcome_summary
    from tether.sim.loop import run_local_episode
    from tether.sim.runner import SimRunner

    cfg = load_config(
        EXPERIMENT,
        [
            f"sim.type={engine}",
            "sim.cameras=[]",
            f"task.density={level}",
            "task.end_on_collision=true",
            f"episodes.seed={seed}",
            *policy_overrides(planner, model),
        ],
    )
    runner = SimRunner(cfg)
    policy = build_policy(cfg, runner.spec)
    t0 = time.monotonic()
    results = []
    try:
        for _ in range(episodes):
            s = run_local_episode(cfg, runner, policy)
            results.append(
                {
                    "seed": s["seed"],
                    "outcome": s["outcome"],
                    "time_s": s["sim_time_s"],
                    "path_length_m": s["metrics"]["path_length_m"],
                }
            )
    finally:
        runner.backend.close()
    out = outcome_summary(results)
    out["wall_s"] = round(time.monotonic() - t0, 1)
    out["failed"] = [(r["seed"], r["outcome"]) for r in results if r["outcome"] != "success"]
    return out


def ros_case(
    model: Path, engine: str, level: str, episodes: int, seed: int = SEED
) -> dict[str, Any]:
    """The learned planner over ROS 2 as `tether eval --ros` runs it (a process per node:
    sim bridge with its safety filter, policy server; lockstep): outcomes per seed."""
    t0 = time.monotonic()
    overrides = [
        f"sim.type={engine}",
        "sim.cameras=[]",
        f"task.density={level}",
        "task.end_on_collision=true",
    ]
    summary = tether_eval_ros(model, episodes, seed, overrides, timeout_s=1800)
    per_seed = [{"seed": e["seed"], "outcome": e["outcome"]} for e in summary["per_episode"]]
    return {
        "engine": engine,
        "level": level,
        "episodes": episodes,
        "successes": sum(e["outcome"] == "success" for e in per_seed),
        "wall_s": round(time.monotonic() - t0, 1),
        "per_seed": per_seed,
    }


def latency(model: Path, steps: int = 2000) -> dict[str, float]:
    """Per-step latency of the exported planner through the onnx policy, one thread."""
    from tether.core import registry
    from tether.core.types import Observation
    from tether.policies.config_onnx import OnnxPolicyConfig
    from tether.policies.runtime import OnnxPolicy

    spec = registry.load("robot", "husky").spec(control_hz=20.0, cameras=())
    policy = OnnxPolicy(OnnxPolicyConfig(model=model / "model.onnx", threads=1), spec)
    rng = np.random.default_rng(0)
    times = []
    for k in range(steps):
        obs = Observation(
            {
                "state": rng.uniform(-1, 1, 13).astype(np.float32),
                "env_state": rng.uniform(-5, 5, 7 * 9).astype(np.float32),
                "scan": rng.uniform(0.2, 10, 64).astype(np.float32),
            },
            stamp_ns=k * 50_000_000,
        )
        t = time.perf_counter()
        policy.act(obs)
        times.append((time.perf_counter() - t) * 1e3)
    lat = np.asarray(times[100:])
    return {
        "p50": round(float(np.percentile(lat, 50)), 4),
        "p99": round(float(np.percentile(lat, 99)), 4),
    }


def plot(cases: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    engines = sorted({c["engine"] for c in cases})
    planners = list(dict.fromkeys(c["planner"] for c in cases))
    fig, axes = plt.subplots(1, len(engines), figsize=(5 * len(engines), 3.6), squeeze=False)
    for ax, engine in zip(axes[0], engines, strict=True):
        width = 0.8 / len(planners)
        for k, planner in enumerate(planners):
            rows = [c for c in cases if c["engine"] == engine and c["planner"] == planner]
            x = np.array([LEVELS.index(c["level"]) for c in rows]) + k * width
            bars = ax.bar(x, [c["success_rate"] for c in rows], width, label=planner)
            colour = bars.patches[0].get_facecolor() if bars.patches else None
            ax.bar(x, [-c["collision_rate"] for c in rows], width, color=colour, alpha=0.45)
        ax.axhline(0, color="k", lw=0.5)
        ax.set_xticks(np.arange(len(LEVELS)) + 0.4 - width / 2, LEVELS)
        ax.set_ylim(-1, 1.05)
        ax.set_title(f"{engine}: success (up), collisions (down)")
    axes[0][0].legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--episodes", type=int, default=100, help="seeds per planner, level, engine")
    ap.add_argument("--engines", nargs="+", default=["pybullet", "mujoco"])
    ap.add_argument("--planners", nargs="+", default=["learned", "dwa", "base_expert"])
    ap.add_argument("--model", type=Path, default=MODEL, help="an exported planner folder")
    ap.add_argument(
        "--ros",
        type=int,
        default=0,
        metavar="N",
        help="also run the learned planner over ROS 2 on N medium seeds per engine",
    )
    ap.add_argument(
        "--seed",
        type=int,
        default=SEED,
        help="the first seed (the benchmark's 1000; other seeds to compare candidates "
        "without looking at the benchmark's, with --out)",
    )
    ap.add_argument(
        "--out",
        type=Path,
        default=RESULTS,
        help="the folder for base_planner.json and .png (default benchmarks/results)",
    )
    ap.add_argument(
        "--merge",
        action="store_true",
        help="keep the existing result's cases of other planners and engines (same episodes)",
    )
    args = ap.parse_args()
    cases = []
    previous: dict[str, Any] = {}
    path = args.out / "base_planner.json"
    seeds = [args.seed, args.seed + args.episodes - 1]
    if args.merge and path.is_file():
        previous = json.loads(path.read_text())
        if previous.get("episodes") != args.episodes or previous.get("seeds") != seeds:
            ap.error(
                f"--merge: {path} has seeds {previous.get('seeds')}, "
                f"{previous.get('episodes')} episodes per case; this run {seeds}"
            )
        rerun = {(p, e) for p in args.planners for e in args.engines}
        cases = [c for c in previous["cases"] if (c["planner"], c["engine"]) not in rerun]
    for engine in args.engines:
        for level in LEVELS:
            for planner in args.planners:
                case = run_case(planner, engine, level, args.episodes, args.model, args.seed)
                case.update(planner=planner, engine=engine, level=level)
                print(
                    f"{engine:8s} {level:6s} {planner:11s} success {case['success_rate']:.0%} "
                    f"collision {case['collision_rate']:.0%} timeout {case['timeout_rate']:.0%} "
                    f"({case['wall_s']:.0f} s)",
                    flush=True,
                )
                cases.append(case)
    data: dict[str, Any] = {
        "how": "python benchmarks/base_planner.py: run_local_episode on "
        "configs/experiments/husky_obstacle_course.yaml with task.density, "
        f"task.end_on_collision=true, seeds from {args.seed}",
        "episodes": args.episodes,
        "seeds": seeds,
        "cases": cases,
    }
    if args.ros:
        data["ros"] = [ros_case(args.model, e, "medium", args.ros, args.seed) for e in args.engines]
        for r in data["ros"]:
            print(f"ROS 2 {r['engine']} medium: {r['successes']}/{r['episodes']}", flush=True)
    elif "ros" in previous and "learned" not in args.planners:
        data["ros"] = previous["ros"]
    if "learned" in previous and "learned" not in args.planners:
        data["learned"] = previous["learned"]
    if "learned" in args.planners:
        data["learned"] = {
            "model": str(
                args.model.resolve().relative_to(REPO)
                if args.model.resolve().is_relative_to(REPO)
                else args.model
            ),
            "latency_ms": latency(args.model),
        }
        train = args.model / "train.json"
        if train.is_file():
            t = json.loads(train.read_text())
            data["learned"]["training"] = {
                k: t[k] for k in ("env_steps", "wall_s", "engine") if k in t
            }
    write_result("base_planner", data, args.out)
    plot(cases, args.out / "base_planner.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
