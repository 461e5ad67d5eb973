"""`tether finetune <experiment.yaml> [--out DIR] [--resume] [overrides]`: RL fine-tuning of
the experiment's policy by the trainer its ``finetune:`` section names (residual RL:
docs/residual_rl.md). The checkpoint folder is served by `tether eval` and `tether export`
like a `tether train` checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

from tether.cli.train import default_out
from tether.core import registry
from tether.core.config import load_config
from tether.core.errors import TetherError


def run_finetune(config: str, overrides: list[str], out: str | None, resume: bool) -> int:
    cfg = load_config(config, overrides)
    if cfg.finetune is None:
        raise TetherError(
            f"{config}: no finetune: section (e.g. finetune: {{type: residual}}; "
            "see docs/residual_rl.md)"
        )
    folder = Path(out) if out else default_out(f"finetune-{cfg.name}")
    if resume and not (folder / "contract.json").is_file():
        raise TetherError(f"--resume: no checkpoint in {folder} (pass the run's --out)")
    trainer = registry.load("trainer", cfg.finetune.type)
    result = trainer.train(cfg, folder, resume)
    print(json.dumps(result, indent=2, default=str))
    return 0
