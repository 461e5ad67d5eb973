"""Path (b): analytic policy gradients through the differentiable batched simulator.

Each iteration rolls ``num_drones`` drones ``horizon`` control steps forward with the
deterministic policy in ``DiffQuadrotor``, and follows the exact gradient of their summed
cost (distance to the target, speed, body rates, motor effort: the negated reward of the
batched hover simulator) with Adam. Drones carry their state from one iteration to the next
(truncated backpropagation through time) and restart from the documented initial-state
distribution after ``episode_s`` or when they leave the 2 m ball.

Training stops when the policy keeps ``success_target`` of ``eval_drones`` fresh drones
within 10 cm for the last 10 s of a 15 s episode in the numpy simulator, or when the time
or step budget is spent. A cheap proxy decides when to pay for that evaluation: a drone
restarting after ``episode_s`` counts when it stayed within 10 cm since 5 s after its start.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from tether.policies.quad.batched_eval import evaluate_batched
from tether.policies.quad.config_quad import BatchedConfig, QuadHoverTrainConfig
from tether.policies.quad.diff_sim import DiffQuadrotor
from tether.policies.quad.model import HoverActor, hover_features
from tether.policies.quad.simulators import hover_env

SETTLE_S = 5.0  # the success rule's time to reach the 10 cm ball


@dataclass
class TrainState:
    """What a run has done so far (saved with the checkpoint, restored on resume)."""

    updates: int = 0
    env_steps: int = 0
    wall_s: float = 0.0
    # one row per update: (env_steps, wall_s, mean cost per step, proxy success)
    history: list[list[float]] = field(default_factory=list)
    # one row per success evaluation: (env_steps, wall_s, success_rate)
    evals: list[list[float]] = field(default_factory=list)
    solved_at: dict[str, float] | None = None


def deterministic_policy(model: HoverActor) -> Callable[[np.ndarray], np.ndarray]:
    """The mean action as a numpy batch policy: obs (N, 18) float32 -> (N, 4)."""

    def act(obs: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return model.mean(torch.from_numpy(obs)).numpy()

    return act


def rollout_cost(
    model: HoverActor,
    sim: DiffQuadrotor,
    s: torch.Tensor,
    rpm: torch.Tensor,
    horizon: int,
    p: BatchedConfig,
    target_pos: tuple[float, float, float] = (0.0, 0.0, 1.0),
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Roll ``horizon`` steps from states s (B, 13) and rotor speeds rpm (B, 4) towards
    ``target_pos`` (m, the hover task's target).

    Returns the mean cost per step and drone (differentiable), the final states and rotor
    speeds, and the distances to the target (horizon, B) m (detached).
    """
    target = torch.tensor(target_pos, dtype=torch.float32)
    hover_rpm = sim.params.hover_rpm
    loss = torch.zeros(())
    dists = []
    for _ in range(horizon):
        a = model.mean(hover_features(s, target))
        cmd = hover_rpm * (1.0 + 0.5 * a.clamp(-1.0, 1.0))
        s, rpm = sim.step(s, rpm, cmd)
        if p.grad_decay < 1.0:
            # same values, gradients through the state shrink per step: the exploding
            # gradients of a long, unstable closed loop stay bounded
            s = p.grad_decay * s + (1.0 - p.grad_decay) * s.detach()
        err = s[:, 0:3] - target
        dist = torch.sqrt((err * err).sum(1) + 1e-6)
        # tilt = 1 - cos(angle between body z and world z), from the quaternion
        tilt = 2.0 * (s[:, 4] ** 2 + s[:, 5] ** 2)
        cost = (
            dist
            + p.speed_cost * torch.sqrt((s[:, 7:10] ** 2).sum(1) + 1e-6)
            + p.rate_cost * torch.sqrt((s[:, 10:13] ** 2).sum(1) + 1e-6)
            + p.tilt_cost * tilt
            + p.action_penalty * (a * a).sum(1)
        )
        loss = loss + cost.mean()
        dists.append(dist.detach())
    return loss / horizon, s, rpm, torch.stack(dists)


def train_apg(
    cfg: QuadHoverTrainConfig,
    model: HoverActor,
    optimizer: torch.optim.Optimizer,
    state: TrainState,
    progress: Callable[[TrainState, dict[str, float]], None] | None = None,
) -> TrainState:
    """Run APG iterations on ``model.actor`` until solved or out of budget; returns ``state``.

    ``progress`` is called after every update with the state and that update's numbers.
    """
    p = cfg.batched
    seed = cfg.seed + 1000 * state.updates  # a resumed run sees new initial states
    torch.manual_seed(seed)
    sim = DiffQuadrotor()
    hover_rpm = sim.params.hover_rpm
    n, horizon = p.num_envs, p.horizon
    # draws fresh drones from the task's initial-state distribution
    sampler = hover_env(n, seed=seed)
    sampler.reset()
    tx, ty, tz = (float(x) for x in sampler.target)
    target_pos = (tx, ty, tz)
    s = torch.from_numpy(sampler.state.astype(np.float32))
    rpm = torch.full((n, 4), hover_rpm)
    episode_steps = round(p.episode_s / sim.dt)
    settle_steps = round(SETTLE_S / sim.dt)
    # staggered episode clocks: restarts spread over iterations
    rng = np.random.default_rng(seed)
    age = torch.from_numpy(rng.integers(0, episode_steps, n))
    streak = torch.zeros(n, dtype=torch.int64)
    start = time.perf_counter() - state.wall_s
    last_eval = -p.eval_every
    recent_reached = recent_timeouts = 0.0
    while True:
        loss, s, rpm, d = rollout_cost(model, sim, s.detach(), rpm.detach(), horizon, p, target_pos)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.actor.parameters(), p.max_grad_norm)
        optimizer.step()
        with torch.no_grad():
            inside = d <= 0.1
            # consecutive in-ball steps ending now (streak carries across iterations)
            all_in = inside.all(0)
            trailing = torch.flip(inside, [0]).to(torch.int64).cumprod(0).sum(0)
            streak = torch.where(all_in, streak + horizon, trailing)
            age += horizon
            bad = (d[-1] > 2.0) | (s[:, 2] <= 0.0) | ~torch.isfinite(s).all(1)
            timeout = ~bad & (age >= episode_steps)
            reached = int((timeout & (streak >= episode_steps - settle_steps)).sum())
            n_timeout = int(timeout.sum())
            restart = bad | timeout
            if bool(restart.any()):
                sampler.reset()
                idx = restart.nonzero().squeeze(1)
                fresh = torch.from_numpy(sampler.state[: idx.numel()].astype(np.float32))
                s[idx] = fresh
                rpm[idx] = hover_rpm
                age[idx] = 0
                streak[idx] = 0
        state.updates += 1
        state.env_steps += n * horizon
        state.wall_s = time.perf_counter() - start
        # the proxy over recent restarts (a few dozen per update), decayed by half per update
        recent_reached = 0.5 * recent_reached + reached
        recent_timeouts = 0.5 * recent_timeouts + n_timeout
        proxy = recent_reached / recent_timeouts if recent_timeouts >= 20 else 0.0
        state.history.append([state.env_steps, state.wall_s, float(loss.detach()), proxy])
        stats = {"cost": float(loss.detach()), "proxy": proxy, "lost": float(bad.float().mean())}
        # evaluate (15 s, fresh drones, deterministic) once the proxy says it may pass
        if proxy >= cfg.success_target and state.updates - last_eval >= p.eval_every:
            last_eval = state.updates
            res = evaluate_batched(
                deterministic_policy(model),
                hover_env(cfg.eval_drones, coarse=True, seed=cfg.seed + 7),
                seed=cfg.seed + 7,
                give_up_below=cfg.success_target,
            )
            state.wall_s = time.perf_counter() - start
            state.evals.append([state.env_steps, state.wall_s, res["success_rate"]])
            stats["eval"] = res["success_rate"]
            if res["success_rate"] >= cfg.success_target:
                state.solved_at = {"env_steps": state.env_steps, "wall_s": state.wall_s}
        if progress is not None:
            progress(state, stats)
        if state.solved_at is not None or state.wall_s >= cfg.time_budget_s:
            break
        if cfg.max_env_steps and state.env_steps >= cfg.max_env_steps:
            break
    return state


def summarize(state: TrainState) -> dict[str, Any]:
    """JSON-able result of a batched run."""
    return {
        "updates": state.updates,
        "env_steps": state.env_steps,
        "wall_s": round(state.wall_s, 2),
        "solved": state.solved_at is not None,
        "solved_at": state.solved_at,
        "last_eval_success": state.evals[-1][2] if state.evals else None,
    }
