"""Success of the models Tether ships (``models/*``), as a user evaluates them.

Each folder is evaluated the way `tether eval models/<name>` runs it: onnxruntime alone, in
the experiment its model.json carries, in-process, on seeds no training or tuning used
(1000 on). Per engine where the model's robot runs on both (the hover policy: PyBullet and
MuJoCo). Writes benchmarks/results/shipped_models.json (per-episode seeds and outcomes).

    python benchmarks/shipped_models.py [--episodes N]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from common import write_result  # noqa: E402

from tether.cli.train import EvalOptions  # noqa: E402
from tether.policies.evaluation import evaluate_model  # noqa: E402

SEED = 1000
# (model folder, engines, episodes): the arm lift episodes take ~3 s of sim time each, the
# hover episodes 15 s
PLAN = [
    ("panda_lift_diffusion", ["mujoco"], 50),
    ("panda_lift_diffusion_image", ["mujoco"], 50),
    ("quad_hover", ["pybullet", "mujoco"], 100),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--episodes", type=int, default=None, help="episodes per case (default: plan)")
    args = ap.parse_args()
    cases = []
    for name, engines, episodes in PLAN:
        model = REPO / "models" / name
        contract = json.loads((model / "model.json").read_text())
        for engine in engines:
            n = args.episodes or episodes
            t0 = time.monotonic()
            with tempfile.TemporaryDirectory() as out:
                opts = EvalOptions(episodes=n, seed=SEED, out=Path(out), video=False, sim=engine)
                summary = evaluate_model(model, opts)
            cases.append(
                {
                    "model": f"models/{name}",
                    "robot": contract["robot"],
                    "task": contract["experiment"]["task"]["type"],
                    "sim": engine,
                    "episodes": summary["episodes"],
                    "seeds": [SEED, SEED + n - 1],
                    "successes": summary["successes"],
                    "success_rate": summary["success_rate"],
                    "failed_seeds": [e["seed"] for e in summary["per_episode"] if not e["success"]],
                    "policy_latency_ms": summary["latency_ms"],
                    "wall_s": round(time.monotonic() - t0, 1),
                }
            )
            print(
                f"{name} in {engine}: {summary['successes']}/{summary['episodes']} "
                f"(seeds {SEED}-{SEED + n - 1})",
                flush=True,
            )
    write_result(
        "shipped_models",
        {
            "how": "tether eval models/<name> --sim <engine> --episodes N --seed 1000 "
            "(onnxruntime, in-process)",
            "cases": cases,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
