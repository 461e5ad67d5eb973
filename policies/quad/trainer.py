"""The ``quad_hover`` trainer: `tether train | eval | export` for quadrotor hover policies.

``train.path: batched`` (default) learns in seconds with analytic policy gradients on the
batched simulator (``apg.py``); ``train.path: sb3_ppo`` runs Stable-Baselines3 PPO on
vectorized PyBullet envs (``sb3_ppo.py``). Both write the same checkpoint (``checkpoint.py``):
``model.safetensors`` + ``contract.json``, plus ``training_curve.png`` and ``train.json``.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from tether.core.config import dump_config
from tether.core.errors import TetherError
from tether.policies.progress import Progress
from tether.policies.quad.config_quad import QuadHoverTrainConfig


def plot_curve(
    history: list[list[float]],
    evals: list[list[float]],
    path: Path,
    title: str,
    ylabel: str = "mean cost per step (lower is better)",
) -> None:
    """Training curve: history rows (env steps, wall s, value) against env steps, success
    evaluations (env steps, wall s, rate) on a twin axis."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    if history:
        steps = [h[0] / 1e6 for h in history]
        ax.plot(steps, [h[2] for h in history], color="tab:blue", lw=1.2)
    ax.set_xlabel("env steps (millions)")
    ax.set_ylabel(ylabel, color="tab:blue")
    ax2 = ax.twinx()
    if evals:
        ax2.plot([e[0] / 1e6 for e in evals], [e[2] for e in evals], "o-", color="tab:green")
    ax2.set_ylim(0, 1.02)
    ax2.set_ylabel("success rate (15 s episodes)", color="tab:green")
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


class QuadHoverTrainer:
    """Registered as trainer ``quad_hover`` (see tether.cli.train for the protocol)."""

    @classmethod
    def train(cls, cfg: Any, out: Path, resume: bool) -> dict[str, Any]:
        import torch

        tcfg: QuadHoverTrainConfig = cfg.train
        torch.set_num_threads(tcfg.threads)
        if tcfg.path == "sb3_ppo":
            from tether.policies.quad.sb3_ppo import train_sb3

            return train_sb3(cfg, out, resume)
        return cls._train_batched(cfg, tcfg, out, resume)

    @staticmethod
    def _train_batched(
        cfg: Any, tcfg: QuadHoverTrainConfig, out: Path, resume: bool
    ) -> dict[str, Any]:
        import torch

        from tether.policies.quad.apg import TrainState, summarize, train_apg
        from tether.policies.quad.checkpoint import (
            load_optimizer_state,
            load_policy,
            save_checkpoint,
        )
        from tether.policies.quad.model import HoverActor

        torch.manual_seed(tcfg.seed)
        state = TrainState()
        if resume:
            model, contract = load_policy(out)
            model.train()
            optimizer = torch.optim.Adam(model.parameters(), lr=tcfg.batched.lr)
            opt_state = load_optimizer_state(out, contract)
            if opt_state is not None:
                optimizer.load_state_dict(opt_state)
            state = TrainState(**contract.get("train_state", {}))
            state.solved_at = None  # keep training from here
        else:
            if (out / "contract.json").exists():
                raise TetherError(
                    f"{out} already holds a checkpoint: pass --resume or another --out"
                )
            model = HoverActor(tcfg.hidden)
            optimizer = torch.optim.Adam(model.parameters(), lr=tcfg.batched.lr)
        progress = Progress("quad_hover batched")

        def show(st: TrainState, stats: dict[str, float]) -> None:
            ev = f" | eval {stats['eval']:.1%}" if "eval" in stats else ""
            progress.show(
                f"update {st.updates:4d} | {st.env_steps / 1e6:6.2f} M steps | "
                f"{st.wall_s:6.1f} s | cost {stats['cost']:.3f} | lost {stats['lost']:.1%} | "
                f"proxy {stats['proxy']:.0%}{ev}"
            )

        state = train_apg(tcfg, model, optimizer, state, show)
        result = summarize(state)
        progress.show(
            f"{'solved' if result['solved'] else 'stopped'} after {state.updates} updates, "
            f"{state.env_steps / 1e6:.2f} M steps, {state.wall_s:.1f} s",
            final=True,
        )
        extra = {
            "path": "batched",
            "experiment": dump_config(cfg),
            "train_state": asdict(state),
            "result": result,
        }
        save_checkpoint(out, model, extra, optimizer)
        plot_curve(
            state.history,
            state.evals,
            out / "training_curve.png",
            "quad_hover, analytic policy gradients (batched sim)",
        )
        result["checkpoint"] = str(out)
        (out / "train.json").write_text(json.dumps(result, indent=2))
        return result

    @classmethod
    def evaluate(cls, checkpoint: Path, options: Any) -> dict[str, Any]:
        import torch

        from tether.policies.quad.checkpoint import load_policy
        from tether.policies.quad.evaluate import evaluate_policy, numpy_policy

        torch.set_num_threads(1)
        model, contract = load_policy(checkpoint)
        sim = options.sim or "batched"
        # batched: drones per call; engines: episodes one after the other
        episodes = options.episodes if sim != "batched" or options.episodes > 10 else 1000
        out = Path(options.out) if options.out else None
        res = evaluate_policy(
            numpy_policy(model), sim, episodes, options.seed, out, contract.get("experiment")
        )
        res["checkpoint"] = str(checkpoint)
        if out is not None:
            (out / "summary.json").write_text(json.dumps(res, indent=2))
        return {k: v for k, v in res.items() if k != "per_episode"}

    @classmethod
    def export(cls, checkpoint: Path, fmt: str, out: Path | None) -> Path:
        if fmt != "onnx":
            raise TetherError(f"quad_hover exports to onnx only (asked for {fmt})")
        from tether.policies.quad.export import export_onnx

        return export_onnx(checkpoint, out)
