"""The training run's evaluations: base (+ the deterministic residual) on fixed seeds, in one
env of the trainer or split over the rollout workers.

With ``finetune.workers`` local or ray, each worker evaluates a contiguous share of the seeds
in an env of its own (built from the same experiment as its training envs, with the task's
own time limit; its training envs keep their episodes), with the residual sent as its
tensors. An episode depends only on its seed and the residual, so the per-seed outcomes are
the inline ones, and the evaluation runs on every worker's core at once instead of on the
trainer's alone while the workers wait: on peg-in-hole (two workers, 40 episodes), an
evaluation took about 25 s inline, a quarter of the run's wall clock at the recipe's
``eval_every_steps`` (docs/residual_rl.md, 'Evaluations on the workers').
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from tether.policies.residual.env import ResidualEnv
    from tether.policies.residual.model import ResidualMLP

# how a residual crosses to a worker: its state dict's tensors under this prefix
MODEL_PREFIX = "m/"


def run_seeds(env: ResidualEnv, model: ResidualMLP | None, seeds: list[int]) -> dict[str, list]:
    """One episode per seed on ``env``: base + the deterministic residual (``model``, its
    output held for ``finetune.hold_steps`` control steps as in training), or the base
    alone (None). Per seed: success, the task's final distance (m, None if it reports
    none) and control steps."""
    import torch

    out: dict[str, list] = {"success": [], "distance": [], "steps": []}
    dim = env.robot_spec.action.dim
    hold = env.fcfg.hold_steps
    for seed in seeds:
        obs, _ = env.reset(seed=int(seed))
        done, success, t = False, False, 0
        residual = np.zeros(dim)
        while not done:
            if model is not None and t % hold == 0:
                with torch.no_grad():
                    residual = model.from_features(torch.as_tensor(obs[None]))[0].numpy()
            t += 1
            joint = env.joint_residual(residual) if model is not None else residual
            obs, _, term, trunc, info = env.step_residual(joint)
            success = success or bool(info["is_success"])
            done = term or trunc
        out["success"].append(success)
        distance = getattr(env.task, "distance", None)
        out["distance"].append(float(distance(env.backend)) if distance is not None else None)
        out["steps"].append(t)
    return out


def summarise(per_seed: dict[str, list], seed: int) -> dict[str, Any]:
    """The evaluation's record: episodes, first seed, success rate, control steps, and the
    mean final distance (m) when the task reports one."""
    out: dict[str, Any] = {
        "episodes": len(per_seed["success"]),
        "seed": seed,
        "success_rate": float(np.mean(per_seed["success"])),
        "env_steps": int(sum(per_seed["steps"])),
    }
    distances = [d for d in per_seed["distance"] if d is not None]
    if distances:
        out["final_distance_m"] = float(np.mean(distances))
    return out


def evaluate(
    env: ResidualEnv,
    model: ResidualMLP | None,
    episodes: int,
    seed: int,
    venv: Any = None,
) -> dict[str, Any]:
    """Success of base (+ the deterministic residual) on seeds ``seed`` .. ``seed +
    episodes - 1``: on the rollout workers of ``venv`` when it has them (RolloutVecEnv),
    else in ``env``."""
    seeds = [seed + k for k in range(episodes)]
    if venv is not None and hasattr(venv, "evaluate_seeds"):
        per_seed = venv.evaluate_seeds(model, seeds)
    else:
        per_seed = run_seeds(env, model, seeds)
    return summarise(per_seed, seed)


def model_arrays(model: ResidualMLP) -> dict[str, np.ndarray]:
    """The residual's tensors (weights and normalisation buffers) as arrays for the wire."""
    return {MODEL_PREFIX + k: v.detach().cpu().numpy() for k, v in model.state_dict().items()}


def model_from_arrays(arrays: dict[str, np.ndarray], config: dict[str, Any]) -> ResidualMLP:
    """The residual rebuilt from :func:`model_arrays` and ``checkpoint.model_contract``."""
    import torch

    from tether.policies.residual.checkpoint import model_from_tensors

    tensors = {
        k[len(MODEL_PREFIX) :]: torch.from_numpy(np.ascontiguousarray(v))
        for k, v in arrays.items()
        if k.startswith(MODEL_PREFIX)
    }
    return model_from_tensors(tensors, config)
