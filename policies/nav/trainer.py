"""The ``nav_ppo`` trainer: `tether train | eval | export` for the learned local planner.

Stable-Baselines3 PPO on the batched kinematic world (tether.sim.nav_world, one process, ``num_envs``
bases); every ``eval_every_steps`` the deterministic actor is evaluated in the batched world
(``eval_episodes`` per density level, seeds of its own) and the best evaluation's actor is
kept. SB3 saves with pickle, so ``model.save`` is never called: the actor's weights are
copied into a plain module and written as ``model.safetensors`` + ``contract.json``, with
``training_curve.png`` and ``train.json``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from tether.core import registry
from tether.core.config import dump_config
from tether.core.errors import TetherError
from tether.policies.checkpoint_io import read_contract as read_checked
from tether.policies.checkpoint_io import write_contract
from tether.policies.nav.config import WORLD, NavTrainConfig
from tether.policies.nav.ppo import build_ppo, evaluate_exported
from tether.policies.progress import Progress

TRAINER = "nav_ppo"
MODEL = "model.safetensors"
# the evaluation world's seeds (the training world draws from train.seed)
EVAL_SEED = 1_000_000


def nav_contract(cfg: Any, tcfg: NavTrainConfig, robot: Any, world: Any) -> dict[str, Any]:
    """What the planner reads and writes (docs/base_planner.md)."""
    return {
        "trainer": TRAINER,
        "robot": robot.name,
        "action_mode": "twist",
        "action_names": ["linear_x", "angular_z"],
        "control_hz": cfg.sim.control_hz,
        "hidden": list(tcfg.hidden),
        "observation_keys": ["state", "env_state", "scan"],
        "features": world.feature_info(),
        "velocity_bounds": [float(world.v_max), float(world.w_max)],
    }


def save_actor(path: Path, actor: Any, contract: dict[str, Any]) -> None:
    from safetensors.torch import save_file

    path.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in actor.state_dict().items()}, str(path / MODEL))
    write_contract(path, contract)


def load_actor(path: Path) -> tuple[Any, dict[str, Any]]:
    """The actor (eval mode) and contract of a ``nav_ppo`` checkpoint folder."""
    from safetensors.torch import load_file

    from tether.policies.nav.model import torch_actor

    contract = read_checked(path, "trainer", TRAINER)
    actor = torch_actor(
        tuple(contract["hidden"]),
        int(contract["features"]["dim"]),
        tuple(contract["velocity_bounds"]),  # type: ignore[arg-type]
    )
    actor.load_state_dict(load_file(str(path / MODEL)))
    actor.eval()
    return actor, contract


def state_numpy(actor: Any) -> dict[str, np.ndarray]:
    return {k: v.detach().cpu().numpy() for k, v in actor.state_dict().items()}


def plot_curve(history: list[dict[str, Any]], evals: list[dict[str, Any]], path: Path) -> None:
    """Episode outcomes in training (rolling) and the evaluations, against env steps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    if history:
        x = [h["steps"] / 1e6 for h in history]
        ax.plot(
            x, [h["success"] for h in history], color="tab:green", lw=1, label="training success"
        )
        ax.plot(
            x, [h["collision"] for h in history], color="tab:red", lw=1, label="training collision"
        )
    for e in evals:
        for level, mark in zip(("open", "sparse", "medium", "dense"), "dos^", strict=True):
            if level in e["levels"]:
                ax.plot(e["steps"] / 1e6, e["levels"][level]["success_rate"], mark, color="k", ms=4)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("env steps (millions)")
    ax.set_ylabel("rate; evaluations: d open, o sparse, s medium, ^ dense")
    ax.set_title("nav_ppo: PPO on the batched kinematic world")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


class NavTrainer:
    """Registered as trainer ``nav_ppo`` (see tether.cli.train for the protocol)."""

    @classmethod
    def train(cls, cfg: Any, out: Path, resume: bool) -> dict[str, Any]:
        import torch
        from stable_baselines3.common.callbacks import BaseCallback

        from tether.policies.nav.evaluate import evaluate_in_world, outcome_summary
        from tether.policies.nav.model import copy_weights, numpy_actor, torch_actor
        from tether.policies.nav.vec_env import NavVecEnv

        tcfg: NavTrainConfig = cfg.train
        torch.set_num_threads(tcfg.threads)
        torch.manual_seed(tcfg.seed)
        robot = registry.load("robot", cfg.robot)
        if getattr(robot, "kind", None) != "mobile_base":
            raise TetherError(
                f"nav_ppo trains a mobile base's planner; robot '{cfg.robot}' is not one"
            )
        hz = float(cfg.sim.control_hz)
        if (out / "contract.json").exists() and not resume:
            raise TetherError(f"{out} already holds a checkpoint: pass --resume or another --out")
        t0 = time.monotonic()
        world = registry.load("env", WORLD)(tcfg.world, robot, tcfg.num_envs, hz, seed=tcfg.seed)
        venv = NavVecEnv(world)
        model = build_ppo(venv, tcfg.ppo, tcfg.hidden, tcfg.seed)
        contract = nav_contract(cfg, tcfg, robot, world)
        dim = int(contract["features"]["dim"])
        actor = torch_actor(tcfg.hidden, dim, tuple(contract["velocity_bounds"]))  # type: ignore[arg-type]
        if resume:
            previous, _ = load_actor(out)
            copy_weights(previous, model.policy, to_sb3=True)
        history: list[dict[str, Any]] = []
        evals: list[dict[str, Any]] = []
        best: dict[str, Any] = {"score": -1.0}
        progress = Progress("nav_ppo")

        def evaluate(steps: int) -> None:
            copy_weights(actor, model.policy)
            state = state_numpy(actor)
            levels = evaluate_in_world(
                numpy_actor(state), tcfg.world, robot, hz, tcfg.eval_episodes, EVAL_SEED
            )
            score = float(np.mean([v["success_rate"] for v in levels.values()]))
            evals.append(
                {"steps": steps, "wall_s": round(time.monotonic() - t0, 1), "levels": levels}
            )
            if score > best["score"]:
                best.update(score=score, steps=steps, levels=levels)
                save_actor(out, actor, {**contract, "experiment": dump_config(cfg), "best": best})

        class Monitor(BaseCallback):  # type: ignore[misc]
            next_eval = tcfg.eval_every_steps

            def _on_step(self) -> bool:
                return time.monotonic() - t0 < tcfg.time_budget_s

            def _on_rollout_end(self) -> None:
                steps = int(self.num_timesteps)
                recent = world.episode_stats[-300:]
                summary = outcome_summary(recent) if recent else {}
                history.append(
                    {
                        "steps": steps,
                        "wall_s": round(time.monotonic() - t0, 1),
                        "success": summary.get("success_rate", 0.0),
                        "collision": summary.get("collision_rate", 0.0),
                    }
                )
                if steps >= self.next_eval:
                    self.next_eval += tcfg.eval_every_steps
                    evaluate(steps)
                ev = ""
                if evals:
                    ev = " | eval " + "/".join(
                        f"{v['success_rate']:.0%}" for v in evals[-1]["levels"].values()
                    )
                progress.show(
                    f"{steps / 1e6:6.2f} M steps | {time.monotonic() - t0:6.0f} s | "
                    f"success {history[-1]['success']:.0%} collision "
                    f"{history[-1]['collision']:.0%}{ev}"
                )

        model.learn(total_timesteps=tcfg.total_steps, callback=Monitor())
        steps = int(model.num_timesteps)
        evaluate(steps)
        wall = time.monotonic() - t0
        progress.show(
            f"stopped after {steps / 1e6:.2f} M steps, {wall:.0f} s; best evaluation at "
            f"{best['steps'] / 1e6:.2f} M steps: "
            + ", ".join(f"{k} {v['success_rate']:.0%}" for k, v in best["levels"].items()),
            final=True,
        )
        plot_curve(history, evals, out / "training_curve.png")
        result = {
            "checkpoint": str(out),
            "env_steps": steps,
            "wall_s": round(wall, 1),
            "best": best,
            "evaluations": evals,
            "history": history,
        }
        (out / "train.json").write_text(json.dumps(result, indent=2))
        return result

    @classmethod
    def evaluate(cls, checkpoint: Path, options: Any) -> dict[str, Any]:
        return evaluate_exported(cls, checkpoint, options)

    @classmethod
    def export(cls, checkpoint: Path, fmt: str, out: Path | None) -> Path:
        from tether.policies.nav.export import export_onnx

        if fmt != "onnx":
            raise TetherError(f"nav_ppo exports to onnx only, not '{fmt}'")
        return export_onnx(checkpoint, out)
