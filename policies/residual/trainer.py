"""`tether finetune`: train a residual on a frozen base (registered as trainer ``residual``;
its config is the experiment's ``finetune:`` section). Also serves `tether eval` and
`tether export` of the checkpoints it writes (see tether.cli.train for the protocol).

One run: observation statistics from base-only rollouts -> the base alone evaluated on
``eval_episodes`` unseen seeds -> PPO or off-policy learning on ``n_envs`` envs, the
deterministic residual evaluated every ``eval_every_steps`` env steps (a checkpoint is
written each time, so a killed run resumes from its last evaluation) -> until
``total_env_steps``, ``wall_budget_s`` or ``success_target``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from tether.core.config import ExperimentConfig, dump_config
from tether.core.errors import ConfigError, TetherError
from tether.policies.progress import Progress
from tether.policies.residual.checkpoint import (
    as_list,
    load_learner,
    load_model,
    load_optimizers,
    optimizer_tensors,
    read_contract,
    save_checkpoint,
)
from tether.policies.residual.config import FinetuneConfig
from tether.policies.residual.env import ResidualEnv, observation_stats
from tether.policies.residual.evaluation import evaluate
from tether.policies.residual.model import NumpyNormaliser, ResidualMLP
from tether.policies.residual.workers import make_venv

# seeds of the observation-statistics rollouts (apart from training and evaluation seeds)
STATS_SEED = 50_000
# a status line between evaluations this often (s)
STATUS_EVERY_S = 10.0
# the sub-folder with the checkpoint of the best evaluation so far (sparse-reward runs
# swing between evaluations; `tether export CKPT/best` exports it)
BEST = "best"


def plot_curve(
    history: list[list[float]], evals: list[list[float]], path: Path, title: str
) -> None:
    """Learning curve: training-episode success (rows: env steps, wall s, rate) and the
    deterministic residual's evaluated success (same rows) against env steps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    if history:
        ax.plot(
            [h[0] for h in history],
            [h[2] for h in history],
            color="tab:blue",
            lw=1.2,
            label="training episodes (with exploration)",
        )
    if evals:
        ax.plot(
            [e[0] for e in evals],
            [e[2] for e in evals],
            "o-",
            color="tab:green",
            label="evaluation (deterministic residual)",
        )
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("env steps")
    ax.set_ylabel("success rate")
    ax.legend(loc="lower right")
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def limit_training_episodes(venv: Any, fcfg: FinetuneConfig, eval_env: ResidualEnv) -> None:
    """``finetune.train_episode_s``: the training envs' time limit (control steps), never
    above the task's; the evaluation env keeps the task's."""
    if fcfg.train_episode_s is None:
        return
    limit = max(1, round(fcfg.train_episode_s * eval_env.robot_spec.control_hz))
    venv.set_attr("max_steps", min(limit, eval_env.max_steps))


def _algo(name: str) -> Any:
    """The learner's module: make(venv, fcfg, model), actor_to_model, optimizers,
    extra_tensors, load_extra."""
    if name == "ppo":
        from tether.policies.residual import ppo

        return ppo
    if name == "grpo":
        from tether.policies.residual import grpo

        return grpo
    from tether.policies.residual import offpolicy

    return offpolicy


def _learner_tensors(algo: Any, mod: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    tensors = {f"policy/{k}": v for k, v in algo.policy.state_dict().items()}
    opt_t, groups = optimizer_tensors(mod.optimizers(algo))
    tensors.update(opt_t)
    tensors.update({f"extra/{k}": v for k, v in mod.extra_tensors(algo).items()})
    return tensors, groups


def _restore(algo: Any, mod: Any, tensors: dict[str, Any], groups: dict[str, Any]) -> None:
    policy = {k[len("policy/") :]: v for k, v in tensors.items() if k.startswith("policy/")}
    algo.policy.load_state_dict(policy)
    load_optimizers(mod.optimizers(algo), tensors, groups)
    mod.load_extra(algo, {k[6:]: v for k, v in tensors.items() if k.startswith("extra/")})


def base_description(cfg: ExperimentConfig, fcfg: FinetuneConfig) -> dict[str, Any]:
    """How to rebuild the frozen base: a model folder, or the experiment's policy section."""
    if fcfg.base_model is not None:
        base: dict[str, Any] = {"model": str(fcfg.base_model)}
    else:
        base = {"policy": cfg.policy.model_dump(mode="json")}
    return {**base, "offset": fcfg.base_offset, "replan": fcfg.base_replan}


def fresh_model(
    env: ResidualEnv, fcfg: FinetuneConfig, offset: np.ndarray, scale: np.ndarray
) -> ResidualMLP:
    """An untrained residual for ``env``: the finetune section's network, the env's action
    range, residual space and relative positions, ``offset`` / ``scale`` normalising its
    features (observation_stats)."""
    spec = env.robot_spec
    return ResidualMLP(
        offset,
        scale,
        spec.action.low_array(),
        spec.action.high_array(),
        fcfg.scale,
        fcfg.hidden,
        fcfg.activation,
        fcfg.last_layer_init,
        out_limit=env.space.limit,
        relative=env.relative,
    )


def train(cfg: ExperimentConfig, out: Path, resume: bool) -> dict[str, Any]:
    """Fine-tune; writes the checkpoint, learning_curve.png and train.json to ``out``."""
    import torch
    from stable_baselines3.common.callbacks import BaseCallback

    if not isinstance(cfg.finetune, FinetuneConfig):
        raise TetherError(f"{cfg.name}: no finetune: section of type residual")
    fcfg: FinetuneConfig = cfg.finetune
    torch.set_num_threads(fcfg.threads)
    torch.manual_seed(fcfg.seed)
    mod = _algo(fcfg.algorithm)
    # on-policy learners explore with a Gaussian on the pre-tanh residual (the env squashes);
    # the off-policy actors squash themselves
    squash = fcfg.algorithm != "offpolicy"
    prev: dict[str, Any] = {}
    eval_env = ResidualEnv(cfg, fcfg, None, squash=squash)
    if resume:
        model, prev = load_model(out)
        stats_steps = 0
    else:
        offset, scale = observation_stats(
            eval_env, fcfg.stats_episodes, STATS_SEED, eval_env.base.contract
        )
        # at most this many (episodes end early on success)
        stats_steps = int(fcfg.stats_episodes * eval_env.max_steps)
        model = fresh_model(eval_env, fcfg, offset, scale)
    if model.relative != eval_env.relative:
        raise ConfigError(
            f"{out}: the checkpoint's residual sees relative positions {model.relative}, "
            f"finetune.relative_positions gives {eval_env.relative}; resume with the same"
        )
    norm = NumpyNormaliser(model)
    eval_env.normaliser = norm
    state = prev.get("train_state", {})
    history: list[list[float]] = state.get("history", [])
    evals: list[list[float]] = state.get("evals", [])
    # finetune.workers: inline (DummyVecEnv), local processes or Ray actors (workers.py);
    # with workers, the evaluations run on them (evaluation.py)
    venv = make_venv(cfg, fcfg, norm, squash=squash)
    try:
        base_eval = prev.get("base_eval") or evaluate(
            eval_env, None, fcfg.eval_episodes, fcfg.eval_seed, venv
        )
        limit_training_episodes(venv, fcfg, eval_env)
        venv.seed(fcfg.seed + int(state.get("env_steps", 0)))
        algo = mod.make(venv, fcfg, model)
        if hasattr(algo, "seed_base"):  # grpo: new scenes after a resume
            algo.seed_base = fcfg.seed + int(state.get("env_steps", 0))
            # (and its exploration curriculum goes on where it was)
            algo.control_before = int(state.get("env_steps", 0))
    except BaseException:
        venv.close()
        raise
    if resume:
        _restore(algo, mod, load_learner(out), prev.get("optimizer", {}))
    done_before = int(state.get("env_steps", 0))
    wall_before = float(state.get("wall_s", 0.0))
    warm = 0
    progress = Progress(f"finetune {cfg.name} {fcfg.algorithm}")
    if not squash and not resume:
        o = fcfg.offpolicy
        noise = o.action_noise if o.learner == "td3" else 0.0
        warm = mod.warm_start(algo, venv, o.base_rollout_steps, noise)
        if o.learner == "td3" and o.critic_warmup_steps:
            progress.show(
                f"{warm} control steps of base rollouts in the buffer | critic burn-in: "
                f"{o.critic_warmup_steps} gradient steps"
            )
            mod.critic_warmup(algo, o.critic_warmup_steps)
    start = time.perf_counter()
    experiment = dump_config(cfg)
    # solved: the first evaluation at the success target in force (a run resumed with a
    # higher finetune.success_target trains on past the one it stopped at)
    solved: dict[str, float] | None = next(
        ({"env_steps": e[0], "wall_s": e[1]} for e in evals if e[2] >= fcfg.success_target),
        None,
    )
    best = max((e[2] for e in evals), default=0.0)

    # control steps this run has taken (Monitor counts them)
    control = 0

    def env_steps(taken: int) -> int:
        """Control steps so far, given the ``taken`` by this run's learner."""
        return done_before + stats_steps + warm + taken

    def checkpoint(
        control: int, result: dict[str, Any] | None = None, folder: Path | None = None
    ) -> None:
        tensors, groups = _learner_tensors(algo, mod)
        mod.actor_to_model(algo, model)
        contract = {
            "algorithm": fcfg.algorithm,
            "robot": cfg.robot,
            "action_names": list(eval_env.robot_spec.action.names),
            "action_low": as_list(eval_env.robot_spec.action.low_array()),
            "action_high": as_list(eval_env.robot_spec.action.high_array()),
            "control_hz": eval_env.robot_spec.control_hz,
            "observation_keys": eval_env.keys,
            "observation_sizes": [int(np.asarray(eval_env.obs[k]).size) for k in eval_env.keys],
            "base": base_description(cfg, fcfg),
            "hold_steps": fcfg.hold_steps,
            "residual_space": eval_env.space.describe(),
            "base_eval": base_eval,
            "experiment": experiment,
            "optimizer": groups,
            "train_state": {
                "env_steps": env_steps(control),
                "wall_s": wall_before + time.perf_counter() - start,
                "history": history,
                "evals": evals,
                "solved": solved,
            },
            "result": result,
        }
        save_checkpoint(folder or out, model, contract, tensors)

    class Monitor(BaseCallback):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.next_eval = fcfg.eval_every_steps
            self.outcomes: list[float] = []
            self.status_at = time.perf_counter()
            self.status_steps = 0
            # control steps of this run (a learner step holds the residual for
            # finetune.hold_steps of them, fewer at an episode's end)
            self.control = 0

        def _on_step(self) -> bool:
            nonlocal solved, best, control
            for d, info in zip(self.locals["dones"], self.locals["infos"], strict=True):
                self.control += int(info.get("control_steps", 1))
                if d:
                    self.outcomes.append(float(info.get("is_success", False)))
            control = self.control
            n = env_steps(self.control)
            wall = wall_before + time.perf_counter() - start
            if self.control >= self.next_eval:
                self.next_eval += fcfg.eval_every_steps
                recent = self.outcomes[-50:]
                history.append([n, wall, float(np.mean(recent)) if recent else 0.0])
                mod.actor_to_model(algo, model)
                res = evaluate(eval_env, model, fcfg.eval_episodes, fcfg.eval_seed, venv)
                evals.append([n, wall, res["success_rate"], res.get("final_distance_m", -1.0)])
                if solved is None and res["success_rate"] >= fcfg.success_target:
                    solved = {"env_steps": n, "wall_s": wall}
                checkpoint(self.control)
                if res["success_rate"] > best:  # the best evaluation's residual, kept aside
                    checkpoint(self.control, folder=out / BEST)
                best = max(best, res["success_rate"])
                dist = res.get("final_distance_m")
                extra = f" | final distance {dist * 100:.1f} cm" if dist is not None else ""
                progress.show(
                    f"{n:>8d} steps | {wall:6.0f} s | train success {history[-1][2]:.0%} | "
                    f"eval {res['success_rate']:.0%} (base {base_eval['success_rate']:.0%})"
                    f"{extra}"
                )
            elif time.perf_counter() - self.status_at >= STATUS_EVERY_S:
                # between evaluations: where it is, how fast, how the training episodes go
                rate = (self.control - self.status_steps) / (time.perf_counter() - self.status_at)
                self.status_at, self.status_steps = time.perf_counter(), self.control
                recent = self.outcomes[-50:]
                won = f"{np.mean(recent):.0%} of the last {len(recent)}" if recent else "-"
                extra = f" | {algo.status()}" if hasattr(algo, "status") else ""
                progress.show(
                    f"{n:>8d} steps | {wall:6.0f} s | {rate:5.0f} steps/s | train success "
                    f"{won} | next eval at {env_steps(self.next_eval)}{extra}"
                )
            if solved is not None:
                return False
            if fcfg.wall_budget_s and wall >= fcfg.wall_budget_s:
                return False
            return n < fcfg.total_env_steps

    try:
        if env_steps(0) < fcfg.total_env_steps and solved is None:
            algo.learn(total_timesteps=10**12, callback=Monitor(), reset_num_timesteps=True)
        mod.actor_to_model(algo, model)
        if not evals or evals[-1][0] < env_steps(control):  # the final residual, evaluated
            wall = wall_before + time.perf_counter() - start
            res = evaluate(eval_env, model, fcfg.eval_episodes, fcfg.eval_seed, venv)
            evals.append(
                [env_steps(control), wall, res["success_rate"], res.get("final_distance_m", -1.0)]
            )
            best = max(best, res["success_rate"])
    finally:
        venv.close()
    last = evals[-1] if evals else None
    result = {
        "algorithm": fcfg.algorithm,
        "reward": fcfg.reward,
        "env_steps": env_steps(control),
        "wall_s": round(wall_before + time.perf_counter() - start, 2),
        "base_success": base_eval["success_rate"],
        "base_final_distance_m": base_eval.get("final_distance_m"),
        "last_eval_success": last[2] if last else None,
        "last_eval_final_distance_m": last[3] if last and last[3] >= 0 else None,
        "best_eval_success": best,
        "best_checkpoint": str(out / BEST) if (out / BEST).is_dir() else None,
        "solved_at": solved,
        "checkpoint": str(out),
    }
    checkpoint(control, result)
    eval_env.close()
    plot_curve(
        history,
        evals,
        out / "learning_curve.png",
        f"{cfg.name}: residual {fcfg.algorithm}, {fcfg.reward} reward "
        f"(base {base_eval['success_rate']:.0%})",
    )
    (out / "train.json").write_text(json.dumps(result, indent=2))
    progress.show(
        f"done: {result['env_steps']} env steps, {result['wall_s']:.0f} s, eval success "
        f"{result['last_eval_success']} (base {base_eval['success_rate']:.0%})",
        final=True,
    )
    return result


class ResidualTrainer:
    """Registered as trainer ``residual``: the ``finetune:`` section's type."""

    @classmethod
    def train(cls, cfg: ExperimentConfig, out: Path, resume: bool) -> dict[str, Any]:
        return train(cfg, out, resume)

    @classmethod
    def evaluate(cls, checkpoint: Path, options: Any) -> dict[str, Any]:
        """What would be deployed: the checkpoint exported and served by the ``residual_onnx``
        policy in the experiment it was trained in, through the caller's episode runner
        (in-process or over ROS 2, the safety filter in front). The export goes to a temporary
        folder of this evaluation's own, so evaluations of one checkpoint can run side by side
        (two seed ranges at once) and the checkpoint folder is left as it was."""
        import tempfile

        from tether.policies.evaluation import evaluate_checkpoint
        from tether.policies.residual.export import export_checkpoint

        with tempfile.TemporaryDirectory(prefix="tether-eval-") as tmp:
            folder = export_checkpoint(checkpoint, "onnx", Path(tmp) / "export").parent
            policy = {"type": "residual_onnx", "model": str(folder.resolve())}
            summary = evaluate_checkpoint(checkpoint, options, policy)
        summary["base_at_training"] = read_contract(checkpoint).get("base_eval")
        return summary

    @classmethod
    def export(cls, checkpoint: Path, fmt: str, out: Path | None) -> Path:
        from tether.policies.residual.export import export_checkpoint

        return export_checkpoint(checkpoint, fmt, out)
