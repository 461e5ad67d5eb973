"""The MuJoCo arm backend's step() against the raw engine step it wraps (issue #22: target
<= 1.2x).

Per task (the Panda, MuJoCo, cameras off: ``panda_lift_expert`` and ``panda_insert_expert``):
the scripted expert's actions of one episode (seed 0) are recorded once, then replayed from
the same reset in interleaved blocks by two loops on the backend's own MjModel / MjData:

- ``raw``: per control step, the recorded actuator targets copied into ``data.ctrl`` and
  ``mj_step(model, data, nstep=substeps)``, nothing else;
- ``backend``: ``backend.step(action)`` with the recorded action (action checks, ctrl,
  the same mj_step call, observation, task reward and success, StepResult).

Both loops follow the same trajectory (checked: the final qpos is bit-identical), so the
ratio is the wrapper's cost over the physics of the same states. Each control step is timed
alone; the result gives p50 and mean per step and the ratios backend / raw of the p50s, of
the means, and the median over neighbouring block pairs (load drifts between blocks cancel).
This machine is shared and noisy: only the ratios inside one run mean anything.
Writes benchmarks/results/backend_step.json.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from common import write_result  # noqa: E402

from tether.core import registry  # noqa: E402
from tether.core.config import load_config  # noqa: E402
from tether.core.experiment import build_policy, build_task  # noqa: E402

EXPERIMENTS = {
    "lift": REPO / "configs/experiments/panda_lift_expert.yaml",
    "insert": REPO / "configs/experiments/panda_insert_expert.yaml",
}
TARGET_RATIO = 1.2
SEED = 0


def _record(backend: Any, policy: Any, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """The expert's actions (steps, A) from reset(SEED) and the ctrl (steps, nu) each sets."""
    obs = backend.reset(SEED)
    policy.reset()
    actions, ctrls = [], []
    for _ in range(steps):
        a = np.asarray(policy.act(obs).actions[0], np.float64)
        obs = backend.step(a).observation
        actions.append(a)
        ctrls.append(backend.data.ctrl.copy())
    return np.stack(actions), np.stack(ctrls)


def _block(backend: Any, fn: Callable[[int], Any], steps: int) -> np.ndarray:
    """Seconds of each of ``steps`` calls ``fn(i)`` from reset(SEED)."""
    backend.reset(SEED)
    out = np.empty(steps)
    clock = time.perf_counter
    for i in range(steps):
        t0 = clock()
        fn(i)
        out[i] = clock() - t0
    return out


def case(task: str, blocks: int, steps: int) -> dict[str, Any]:
    import mujoco

    cfg = load_config(EXPERIMENTS[task], ["sim.cameras=[]", "task.max_duration_s=1e6"])
    backend = registry.build("sim", cfg.sim, robot=cfg.robot, task=build_task(cfg))
    try:
        actions, ctrls = _record(backend, build_policy(cfg), steps)
        m, d, n = backend.model, backend.data, backend.substeps

        def raw(i: int) -> None:
            d.ctrl[:] = ctrls[i]
            mujoco.mj_step(m, d, nstep=n)

        def wrapped(i: int) -> None:
            backend.step(actions[i])

        calls: dict[str, Callable[[int], Any]] = {"raw": raw, "backend": wrapped}
        final: dict[str, np.ndarray] = {}
        for name, fn in calls.items():  # warm-up, and the trajectories agree
            _block(backend, fn, steps)
            final[name] = d.qpos.copy()
        if not np.array_equal(final["raw"], final["backend"]):
            raise RuntimeError(f"{task}: the raw loop and the backend left different states")
        times: dict[str, list[np.ndarray]] = {k: [] for k in calls}
        for b in range(blocks):
            # alternate the order so neither loop always runs right after the other
            order = list(calls.items()) if b % 2 == 0 else list(reversed(calls.items()))
            for name, fn in order:
                times[name].append(_block(backend, fn, steps))
    finally:
        backend.close()
    per_step = {k: np.concatenate(v) * 1e3 for k, v in times.items()}
    stats = {
        k: {"p50_ms": float(np.median(v)), "mean_ms": float(v.mean())} for k, v in per_step.items()
    }
    pairs = [bk.mean() / rw.mean() for bk, rw in zip(times["backend"], times["raw"], strict=True)]
    ratio_p50 = stats["backend"]["p50_ms"] / stats["raw"]["p50_ms"]
    return {
        "task": task,
        "experiment": EXPERIMENTS[task].name,
        "control_hz": cfg.sim.control_hz,
        "physics_steps_per_control_step": n,
        "blocks": blocks,
        "block_steps": steps,
        "raw": stats["raw"],
        "backend": stats["backend"],
        "overhead_p50_ms": stats["backend"]["p50_ms"] - stats["raw"]["p50_ms"],
        "ratio_p50": ratio_p50,
        "ratio_mean": stats["backend"]["mean_ms"] / stats["raw"]["mean_ms"],
        "ratio_block_median": float(np.median(pairs)),
        "ratio_block_p25_p75": [float(np.percentile(pairs, q)) for q in (25, 75)],
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--blocks", type=int, default=10, help="interleaved blocks per loop")
    p.add_argument("--steps", type=int, default=800, help="control steps per block")
    p.add_argument("--tasks", nargs="*", default=list(EXPERIMENTS), choices=list(EXPERIMENTS))
    p.add_argument("--name", default="backend_step", help="result file name (no .json)")
    args = p.parse_args()
    cases = []
    for task in args.tasks:
        c = case(task, args.blocks, args.steps)
        cases.append(c)
        print(
            f"{task:7s} raw p50 {c['raw']['p50_ms']:.4f} ms  backend p50 "
            f"{c['backend']['p50_ms']:.4f} ms  ratio p50 {c['ratio_p50']:.2f}  mean "
            f"{c['ratio_mean']:.2f}  blocks {c['ratio_block_median']:.2f}",
            flush=True,
        )
    write_result(
        args.name,
        {
            "note": "2 shared CPU cores: absolute times are contended; ratios come from "
            "interleaved blocks of one run on the same trajectory",
            "target_ratio": TARGET_RATIO,
            "cases": cases,
            "targets": {
                f"{c['task']}_ratio_p50_le_1.2": c["ratio_p50"] <= TARGET_RATIO for c in cases
            },
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
