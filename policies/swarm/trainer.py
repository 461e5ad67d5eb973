"""The ``swarm_ppo`` trainer: `tether train | eval | export` for the decentralised swarm policy.

Stable-Baselines3 PPO on the batched swarm world (tether.sim.quadrotor.swarm_world, one
process): every drone of every world is one agent of one shared actor (parameter sharing,
as quad-swarm-rl). Every ``eval_every_steps`` the deterministic actor flies
``eval_episodes`` fresh worlds per swarm size; the best evaluation's actor is kept. SB3
saves with pickle, so ``model.save`` is never called: the actor is written as
``model.safetensors`` + ``contract.json``, with ``training_curve.png`` and ``train.json``.
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
from tether.policies.nav.ppo import build_ppo, evaluate_exported
from tether.policies.nav.trainer import MODEL, save_actor, state_numpy
from tether.policies.progress import Progress
from tether.policies.swarm.config import WORLD, SwarmTrainConfig

TRAINER = "swarm_ppo"
# m: imitation samples whose nearest neighbour is closer than this weigh more
CLOSE = 0.6
EVAL_SEED = 2_000_000


def swarm_contract(cfg: Any, tcfg: SwarmTrainConfig, robot: Any, world: Any) -> dict[str, Any]:
    """What the policy reads and writes (docs/swarm.md)."""
    return {
        "trainer": TRAINER,
        "robot": robot.name,
        "action_mode": "velocity_setpoint",
        "action_names": ["vx", "vy", "vz", "yaw_rate"],
        "control_hz": float(tcfg.world.control_hz),
        "hidden": list(tcfg.hidden),
        "observation_keys": ["state", "env_state"],
        "features": world.feature_info(),
        "speed": float(tcfg.world.v_max),
    }


def load_actor(path: Path) -> tuple[Any, dict[str, Any]]:
    """The actor (eval mode) and contract of a ``swarm_ppo`` checkpoint folder."""
    from safetensors.torch import load_file

    from tether.policies.nav.model import torch_actor

    contract = read_checked(path, "trainer", TRAINER)
    speed = float(contract["speed"])
    actor = torch_actor(tuple(contract["hidden"]), int(contract["features"]["dim"]), (speed,) * 3)
    actor.load_state_dict(load_file(str(path / MODEL)))
    actor.eval()
    return actor, contract


def plot_curve(history: list[dict[str, Any]], evals: list[dict[str, Any]], path: Path) -> None:
    """Training episodes' outcomes (recent worlds) and the evaluations, against steps."""
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
    marks = "os^dv"
    for e in evals:
        for j, r in enumerate(e["sizes"].values()):
            m = marks[j % len(marks)]
            ax.plot(e["steps"] / 1e6, r["success_rate"], m, color="k", ms=4)
            ax.plot(e["steps"] / 1e6, r["collision_rate"], m, color="tab:red", ms=3, mfc="none")
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("agent decisions (millions)")
    sizes = (
        ", ".join(f"{m} {s}" for m, s in zip(marks, evals[0]["sizes"], strict=False))
        if evals
        else ""
    )
    ax.set_ylabel(f"rate; evaluations ({sizes} drones)")
    ax.set_title("swarm_ppo: shared actor, PPO on the batched swarm world")
    ax.legend(loc="center right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def imitate(
    actor: Any, world: Any, tcfg: SwarmTrainConfig, speed: float, progress: Progress
) -> int:
    """DAgger (Ross et al., 2011) with PID + ORCA as the expert: each round flies the world
    for ``imitation_decisions`` agent decisions (the expert flies the first round, the
    learner the others), labels every observation with the expert's command, and fits the
    actor to everything gathered so far (MSE). Returns the agent decisions flown."""
    import torch

    from tether.policies.swarm.evaluate import swarm_summary

    xs: list[np.ndarray] = []
    ys: list[np.ndarray] = []
    opt = torch.optim.Adam(actor.parameters(), lr=1e-3)
    steps = max(1, tcfg.imitation_decisions // world.n)
    obs = world.observe()
    flown = 0
    for r in range(tcfg.imitation_rounds):
        start = len(world.episode_stats)
        for _ in range(steps):
            label = world.expert_actions().astype(np.float32)
            xs.append(obs)
            ys.append(label)
            if r == 0:
                act = label
            else:
                with torch.no_grad():
                    act = actor(torch.from_numpy(obs)).numpy() / speed
            obs = world.step(act)[0]
            flown += world.n
        x = torch.from_numpy(np.concatenate(xs))
        y = torch.from_numpy(np.concatenate(ys))
        # the nearest neighbour's distance from its closeness feature (1 - d / sense range)
        f = world.feature_info()
        nearest_closeness = int(f["self_dim"]) + int(f["neighbour_dim"]) - 1
        near = (1.0 - x[:, nearest_closeness]) * float(f["sense_range"])
        weight = 1.0 + tcfg.imitation_close_weight * torch.clamp(1.0 - near / CLOSE, min=0.0)
        for _ in range(tcfg.imitation_epochs):
            perm = torch.randperm(len(x))
            for i in range(0, len(x), 4096):
                idx = perm[i : i + 4096]
                err = ((actor.net(x[idx]) - y[idx]) ** 2).sum(-1)
                loss = (weight[idx] * err).sum() / weight[idx].sum() / 3.0
                opt.zero_grad()
                loss.backward()
                opt.step()
        flew = swarm_summary(world.episode_stats[start:])
        who = "expert" if r == 0 else "learner"
        progress.show(
            f"imitation round {r + 1}/{tcfg.imitation_rounds}: {len(x) / 1e3:.0f} k labels, "
            f"loss {float(loss.detach()):.4f}; the {who} flew {flew['episodes']} episodes, success "
            f"{flew['success_rate']:.0%}, collision {flew['collision_rate']:.0%}"
        )
    return flown


class SwarmTrainer:
    """Registered as trainer ``swarm_ppo`` (see tether.cli.train for the protocol)."""

    @classmethod
    def train(cls, cfg: Any, out: Path, resume: bool) -> dict[str, Any]:
        import torch
        from stable_baselines3.common.callbacks import BaseCallback

        from tether.policies.nav.model import copy_weights, numpy_actor, torch_actor
        from tether.policies.nav.vec_env import NavVecEnv
        from tether.policies.swarm.evaluate import evaluate_in_world, swarm_summary

        tcfg: SwarmTrainConfig = cfg.train
        torch.set_num_threads(tcfg.threads)
        torch.manual_seed(tcfg.seed)
        robot = registry.load("robot", cfg.robot)
        if getattr(robot, "kind", None) != "quadcopter":
            raise TetherError(f"swarm_ppo trains multirotors; robot '{cfg.robot}' is not one")
        if (out / "contract.json").exists() and not resume:
            raise TetherError(f"{out} already holds a checkpoint: pass --resume or another --out")
        t0 = time.monotonic()
        world = registry.load("env", WORLD)(tcfg.world, robot, seed=tcfg.seed)
        venv = NavVecEnv(world, action_dim=3)
        model = build_ppo(venv, tcfg.ppo, tcfg.hidden, tcfg.seed)
        contract = swarm_contract(cfg, tcfg, robot, world)
        dim = int(contract["features"]["dim"])
        speed = float(contract["speed"])
        actor = torch_actor(tcfg.hidden, dim, (speed,) * 3)
        history: list[dict[str, Any]] = []
        evals: list[dict[str, Any]] = []
        best: dict[str, Any] = {"score": -1.0}
        progress = Progress("swarm_ppo")
        imitation = 0
        frozen: list[Any] = []
        if resume:
            previous, _ = load_actor(out)
            copy_weights(previous, model.policy, to_sb3=True)
        elif tcfg.imitation_decisions > 0 or tcfg.start_from:
            if tcfg.start_from:
                previous, _ = load_actor(Path(tcfg.start_from))
                actor.load_state_dict(previous.state_dict())
            else:
                imitation = imitate(actor, world, tcfg, speed, progress)
            copy_weights(actor, model.policy, to_sb3=True)
            with torch.no_grad():
                model.policy.log_std.fill_(tcfg.imitation_log_std)
            # the critic learns the imitated actor's values before the actor moves
            pol = model.policy
            frozen = [*pol.mlp_extractor.policy_net.parameters(), *pol.action_net.parameters()]
            frozen.append(pol.log_std)
            for prm in frozen:
                prm.requires_grad_(False)

        def evaluate(steps: int) -> None:
            copy_weights(actor, model.policy)
            act = numpy_actor(state_numpy(actor))
            sizes = evaluate_in_world(
                lambda x: act(x) / speed,
                tcfg.world,
                robot,
                tcfg.eval_sizes,
                tcfg.eval_episodes,
                EVAL_SEED,
            )
            # success without any collision, over the sizes
            score = float(np.mean([v["success_rate"] for v in sizes.values()]))
            evals.append(
                {"steps": steps, "wall_s": round(time.monotonic() - t0, 1), "sizes": sizes}
            )
            if score > best["score"]:
                best.update(score=score, steps=steps, sizes=sizes)
                save_actor(out, actor, {**contract, "experiment": dump_config(cfg), "best": best})

        class Monitor(BaseCallback):  # type: ignore[misc]
            next_eval = tcfg.eval_every_steps

            def _on_step(self) -> bool:
                return time.monotonic() - t0 < tcfg.time_budget_s

            rollouts = 0

            def _on_rollout_end(self) -> None:
                steps = int(self.num_timesteps)
                self.rollouts += 1
                if frozen and self.rollouts > tcfg.critic_warmup_rollouts:
                    for prm in frozen:
                        prm.requires_grad_(True)
                    frozen.clear()
                recent = world.episode_stats[-200:]
                summary = swarm_summary(recent) if recent else {}
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
                    ev = " | eval " + " ".join(
                        f"{n}:{v['success_rate']:.0%}/{v['collision_rate']:.0%}"
                        for n, v in evals[-1]["sizes"].items()
                    )
                progress.show(
                    f"{steps / 1e6:6.2f} M decisions | {time.monotonic() - t0:6.0f} s | "
                    f"success {history[-1]['success']:.0%} collision "
                    f"{history[-1]['collision']:.0%}{ev}"
                )

        if imitation or (tcfg.start_from and not resume):
            evaluate(0)  # the imitated (or given) actor, before PPO
        model.learn(total_timesteps=tcfg.total_steps, callback=Monitor())
        steps = int(model.num_timesteps)
        evaluate(steps)
        wall = time.monotonic() - t0
        progress.show(
            f"stopped after {steps / 1e6:.2f} M decisions, {wall:.0f} s; best evaluation at "
            f"{best['steps'] / 1e6:.2f} M: "
            + ", ".join(
                f"{n} drones {v['success_rate']:.0%} ({v['collision_rate']:.0%} collide)"
                for n, v in best["sizes"].items()
            ),
            final=True,
        )
        plot_curve(history, evals, out / "training_curve.png")
        result = {
            "checkpoint": str(out),
            "env_steps": steps,
            "imitation_decisions": imitation,
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
        from tether.policies.swarm.export import export_onnx

        if fmt != "onnx":
            raise TetherError(f"swarm_ppo exports to onnx only, not '{fmt}'")
        return export_onnx(checkpoint, out)
