"""Drone swarms (issue #21, docs/swarm.md): the learned decentralised policy (the shipped
ONNX model), the PID to each goal with no avoidance (`quad_pid`, 1 m/s) and PID + ORCA
(`swarm_orca`), per swarm size, on the same unseen seeds of the position swap (downwash
on): success (all at goal), collision rate (episodes with any collision), mean least
separation, mean time to goal of successes; other scenarios with fewer seeds; the learned
policy's training wall-clock (its train.json) and its inference latency (one onnxruntime
thread: one drone's query with its 6 neighbours, and a 16-drone swarm in one call). Writes
benchmarks/results/swarm.json, swarm.png (rates per size) and swarm_swap.png (the paths of
one 8-drone swap under each policy).

    python benchmarks/swarm.py [--episodes 100] [--sizes 4 8 16] [--engine pybullet]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from common import RESULTS, tether_eval_ros, write_result  # noqa: E402

EXPERIMENT = REPO / "configs/experiments/swarm_orca.yaml"
MODEL = REPO / "models/swarm_policy"
SEED = 1000
POLICIES = ("learned", "pid", "orca")


def policy_overrides(policy: str, model: Path) -> list[str]:
    if policy == "learned":
        return ["policy.type=onnx", f"policy.model={model / 'model.onnx'}"]
    if policy == "pid":
        return ["policy.type=quad_pid", "policy.max_speed=1.0"]
    return ["policy.type=swarm_orca"]


def summarize(results: list[dict[str, Any]]) -> dict[str, Any]:
    n = max(1, len(results))
    out: dict[str, Any] = {
        "episodes": len(results),
        **{
            f"{k}_rate": sum(r["outcome"] == k for r in results) / n
            for k in ("success", "collision", "crash", "timeout")
        },
        "mean_min_separation_m": round(float(np.mean([r["min_separation_m"] for r in results])), 3),
    }
    wins = [r["time_s"] for r in results if r["outcome"] == "success"]
    if wins:
        out["mean_time_to_goal_s"] = round(float(np.mean(wins)), 2)
    return out


def run_case(
    policy: str, engine: str, n: int, scenario: str, episodes: int, model: Path, track: bool = False
) -> dict[str, Any]:
    from tether.core.config import load_config
    from tether.core.experiment import build_policy
    from tether.sim.loop import run_local_episode
    from tether.sim.runner import SimRunner

    cfg = load_config(
        EXPERIMENT,
        [
            f"sim.type={engine}",
            "sim.cameras=[]",
            f"sim.quadrotor.num_drones={n}",
            f"task.scenario={scenario}",
            "task.end_on_collision=true",
            f"episodes.seed={SEED}",
            *policy_overrides(policy, model),
        ],
    )
    runner = SimRunner(cfg)
    pol = build_policy(cfg, runner.spec)
    t0 = time.monotonic()
    results = []
    try:
        for _ in range(episodes):
            s = run_local_episode(cfg, runner, pol)
            m = s["metrics"]
            results.append(
                {
                    "seed": s["seed"],
                    "outcome": s["outcome"],
                    "time_s": m["all_at_goal_s"],
                    "min_separation_m": m["min_separation_m"],
                }
            )
    finally:
        runner.backend.close()
    out = summarize(results)
    out["wall_s"] = round(time.monotonic() - t0, 1)
    out["failed"] = [(r["seed"], r["outcome"]) for r in results if r["outcome"] != "success"]
    return out


def swap_paths(policy: str, engine: str, model: Path) -> dict[str, Any]:
    """Positions (T, 8, 3) of one 8-drone swap (seed 1000) and its outcome."""
    from tether.core.config import load_config
    from tether.core.experiment import build_policy
    from tether.sim.runner import SimRunner

    cfg = load_config(
        EXPERIMENT,
        [
            f"sim.type={engine}",
            "sim.cameras=[]",
            "task.end_on_collision=true",
            f"episodes.seed={SEED}",
        ]
        + policy_overrides(policy, model),
    )
    runner = SimRunner(cfg)
    pol = build_policy(cfg, runner.spec)
    try:
        obs = runner.reset()
        pol.reset()
        path = [runner.backend.drone_states()[:, 0:3]]
        while not runner.done:
            runner.submit(pol.act(obs))
            runner.step()
            obs = runner.obs
            path.append(runner.backend.drone_states()[:, 0:3])
        return {"path": np.asarray(path), "goals": runner.task.targets.copy(), **runner.summary()}
    finally:
        runner.backend.close()


def latency(model: Path, calls: int = 2000) -> dict[str, Any]:
    """One onnxruntime thread: a drone's own query (itself + 6 neighbours, 7 drones in the
    graph: what a per-drone policy server runs) and one 16-drone call (a batched server)."""
    from tether.policies.runtime import OnnxModel
    from tether.policies.swarm.export import example_swarm

    m = OnnxModel(model / "model.onnx", threads=1)
    rng = np.random.default_rng(0)
    out: dict[str, Any] = {}
    for label, n in (("one_drone_7", 7), ("swarm_16", 16)):
        feeds = []
        for _ in range(50):
            state, goal = example_swarm(rng, n)
            feeds.append({"state": state, "goal": goal})
        times = []
        for k in range(calls):
            t = time.perf_counter()
            m.run(feeds[k % 50])
            times.append((time.perf_counter() - t) * 1e3)
        lat = np.asarray(times[100:])
        out[label] = {
            "p50": round(float(np.percentile(lat, 50)), 4),
            "p99": round(float(np.percentile(lat, 99)), 4),
        }
    return out


def ros_eval(model: Path, drones: int, episodes: int, mode: str) -> dict[str, Any]:
    """`tether eval --ros` of the learned swap (a process per node, lockstep): its summary."""
    overrides = [
        f"drones.policy_servers={mode}",
        "sim.cameras=[]",
        f"sim.quadrotor.num_drones={drones}",
    ]
    return tether_eval_ros(model, episodes, SEED, overrides)


def ros_servers(model: Path, episodes: int = 3, drones: int = 8) -> dict[str, Any]:
    """The learned swap over ROS 2 as `tether eval --ros` runs it: one policy server per
    drone against one batched server, side by side; and the issue's 4 namespaced drones (a
    server each) on 5 seeds."""
    out: dict[str, Any] = {"drones": drones, "episodes": episodes}
    for mode in ("per_drone", "batched"):
        s = ros_eval(model, drones, episodes, mode)
        lat = s["latency_ms"]
        out[mode] = {
            "success_rate": s["success_rate"],
            "control_hz": round(float(s["control_hz"]), 1),
            "latency_ms": {"p50": round(lat["p50"], 2), "p99": round(lat["p99"], 2)},
        }
    s = ros_eval(model, 4, 5, "per_drone")
    out["swap_4"] = {
        "episodes": 5,
        "success_rate": s["success_rate"],
        "per_seed": [
            {
                "seed": e["seed"],
                "outcome": e["outcome"],
                "min_separation_m": e.get("metrics", {}).get("min_separation_m"),
            }
            for e in s["per_episode"]
        ],
    }
    return out


def plot_rates(cases: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    swap = [c for c in cases if c["scenario"] == "swap"]
    sizes = sorted({c["n"] for c in swap})
    policies = list(dict.fromkeys(c["policy"] for c in swap))
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    width = 0.8 / max(1, len(policies))
    for k, pol in enumerate(policies):
        rows = [c for c in swap if c["policy"] == pol]
        x = np.array([sizes.index(c["n"]) for c in rows]) + k * width
        bars = ax.bar(x, [c["success_rate"] for c in rows], width, label=pol)
        colour = bars.patches[0].get_facecolor() if bars.patches else None
        ax.bar(x, [-c["collision_rate"] for c in rows], width, color=colour, alpha=0.45)
    ax.axhline(0, color="k", lw=0.5)
    ax.set_xticks(np.arange(len(sizes)) + 0.4 - width / 2, [f"{n} drones" for n in sizes])
    ax.set_ylim(-1.05, 1.05)
    ax.set_title("position swap: all at goal (up), any collision (down)")
    ax.legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_paths(runs: dict[str, dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(runs), figsize=(4.2 * len(runs), 4.0), squeeze=False)
    for ax, (name, run) in zip(axes[0], runs.items(), strict=True):
        p = run["path"]
        for i in range(p.shape[1]):
            line = ax.plot(p[:, i, 0], p[:, i, 1], lw=1)[0]
            ax.plot(p[0, i, 0], p[0, i, 1], "o", color=line.get_color(), ms=4)
            ax.plot(run["goals"][i, 0], run["goals"][i, 1], "x", color=line.get_color(), ms=6)
        sep = run["metrics"]["min_separation_m"]
        ax.set_title(
            f"{name}: {run['outcome']} at {run['sim_time_s']:.1f} s, min sep {sep:.2f} m",
            fontsize=9,
        )
        ax.set_aspect("equal")
        ax.set_xlabel("x (m)")
    axes[0][0].set_ylabel("y (m)")
    fig.suptitle("8 Crazyflies swap places (seed 1000, top view; o start, x goal)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--episodes", type=int, default=100, help="swap seeds per policy and size")
    ap.add_argument("--other-episodes", type=int, default=20, help="cross / formation seeds")
    ap.add_argument("--sizes", nargs="+", type=int, default=[4, 8, 16])
    ap.add_argument("--engine", default="pybullet")
    ap.add_argument("--policies", nargs="*", default=list(POLICIES))
    ap.add_argument(
        "--ros-servers",
        action="store_true",
        help="also fly the learned 8-drone swap over ROS 2: a server per drone vs one batched",
    )
    ap.add_argument("--model", type=Path, default=MODEL, help="an exported swarm policy folder")
    ap.add_argument(
        "--merge",
        action="store_true",
        help="keep the other policies' cases of the existing result (same episodes)",
    )
    args = ap.parse_args()
    cases = []
    previous: dict[str, Any] = {}
    path = RESULTS / "swarm.json"
    if args.merge and path.is_file():
        import json

        previous = json.loads(path.read_text())
        if previous.get("episodes") != args.episodes or previous.get("engine") != args.engine:
            ap.error(f"--merge: {path} has other episodes or another engine")
        cases = [c for c in previous["cases"] if c["policy"] not in args.policies]
    plan = [("swap", args.episodes)]
    if args.other_episodes > 0:
        plan += [("cross", args.other_episodes), ("formation", args.other_episodes)]
    for scenario, episodes in plan:
        for n in args.sizes:
            for pol in args.policies:
                case = run_case(pol, args.engine, n, scenario, episodes, args.model)
                case.update(policy=pol, n=n, scenario=scenario, engine=args.engine)
                print(
                    f"{scenario:9s} {n:2d} drones {pol:7s} success {case['success_rate']:.0%} "
                    f"collision {case['collision_rate']:.0%} min sep "
                    f"{case['mean_min_separation_m']:.2f} m ({case['wall_s']:.0f} s)",
                    flush=True,
                )
                cases.append(case)
    order = {p: k for k, p in enumerate(POLICIES)}
    scen = {"swap": 0, "cross": 1, "formation": 2}
    cases.sort(key=lambda c: (scen[c["scenario"]], c["n"], order.get(c["policy"], 9)))
    data: dict[str, Any] = {
        "how": "python benchmarks/swarm.py: run_local_episode on "
        "configs/experiments/swarm_orca.yaml (downwash on) with sim.quadrotor.num_drones, "
        "task.scenario, task.end_on_collision=true, seeds from 1000",
        "engine": args.engine,
        "episodes": args.episodes,
        "seeds": [SEED, SEED + args.episodes - 1],
        "cases": cases,
    }
    if "learned" in previous and "learned" not in args.policies:
        data["learned"] = previous["learned"]
    if "ros_servers" in previous:
        data["ros_servers"] = previous["ros_servers"]
    if args.ros_servers:
        data["ros_servers"] = ros_servers(args.model)
    if "learned" in args.policies:
        data["learned"] = {
            "model": str(args.model.resolve().relative_to(REPO))
            if args.model.resolve().is_relative_to(REPO)
            else str(args.model),
            "latency_ms": latency(args.model),
        }
        train = args.model / "train.json"
        if train.is_file():
            import json

            t = json.loads(train.read_text())
            data["learned"]["training"] = {
                k: t[k] for k in ("env_steps", "imitation_decisions", "wall_s") if k in t
            }
    write_result("swarm", data)
    plot_rates(cases, RESULTS / "swarm.png")
    flown = list(dict.fromkeys(c["policy"] for c in cases))
    if 8 in args.sizes and (MODEL.exists() or "learned" not in flown):
        runs = {p: swap_paths(p, args.engine, args.model) for p in flown}
        plot_paths(runs, RESULTS / "swarm_swap.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
