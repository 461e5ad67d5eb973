"""Record a finished `tether finetune` run of peg-in-hole in
models/panda_insert_residual/finetune_runs.json (the runs table of docs/residual_rl.md and,
through `python benchmarks/residual_rl.py`'s "training", of the README).

    python benchmarks/record_finetune_run.py RUN_DIR NAME WHAT COMMAND R1000 R1100 [--shipped]

R1000 / R1100: the final checkpoint's successes on 100 episodes from seeds 1000 and 1100
(`tether eval RUN_DIR --episodes 100 --seed 1000 --no-video`), e.g. 78 and 72. A run of the
same NAME is replaced. Reads RUN_DIR/contract.json (progress, evaluations, the experiment).
"""

from __future__ import annotations

import argparse
import datetime
import json
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RUNS = REPO / "models/panda_insert_residual/finetune_runs.json"
BASE = "models/panda_insert_diffusion (narrow ranges, noise_scale 0: 45/100)"


def entry(run_dir: Path, args: argparse.Namespace) -> dict[str, Any]:
    contract = json.loads((run_dir / "contract.json").read_text())
    state = contract["train_state"]
    fcfg = contract["experiment"]["finetune"]
    algorithm = fcfg["algorithm"]
    out: dict[str, Any] = {
        "run": args.name,
        "what": args.what,
        "algorithm": algorithm,
        "reward": fcfg["reward"],
        "command": args.command,
        "base": BASE,
        "space": fcfg["space"],
        "hold_steps": contract.get("hold_steps", fcfg.get("hold_steps")),
        "scale": fcfg["scale"],
        "init_std": fcfg[algorithm]["init_std"],
        "env_steps": state["env_steps"],
        "wall_s": round(state["wall_s"], 1),
        "base_success": contract["base_eval"]["success_rate"],
        "eval_episodes": fcfg["eval_episodes"],
        "eval_seed": fcfg["eval_seed"],
        "evals": state["evals"],
        "train_history": state["history"],
        "final_checkpoint_seeds_1000_1099": f"{args.r1000}/100",
        "final_checkpoint_seeds_1100_1199": (
            f"{args.r1100}/100 (tether eval <run> --episodes 100 --seed 1100)"
        ),
        "session": datetime.date.today().isoformat(),
    }
    if args.shipped:
        out["shipped"] = True
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("name")
    parser.add_argument("what")
    parser.add_argument("command")
    parser.add_argument("r1000", type=int)
    parser.add_argument("r1100", type=int)
    parser.add_argument("--shipped", action="store_true")
    args = parser.parse_args()
    data = json.loads(RUNS.read_text())
    new = entry(args.run_dir, args)
    if args.shipped:
        for run in data["runs"]:
            run.pop("shipped", None)
    data["runs"] = [r for r in data["runs"] if r["run"] != args.name] + [new]
    RUNS.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    print(f"{RUNS.relative_to(REPO)}: {args.name}, {new['env_steps']} steps")


if __name__ == "__main__":
    main()
