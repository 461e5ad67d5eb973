"""On-policy residual learning with group-relative advantages (GRPO): PPO's clipped update
without a critic, the baseline of each episode being the other episodes of its own seed.

Why by hand: a simulator resets to exactly the same scene from the same seed, and the base
is deterministic, so episodes that share a seed differ only by the residual's exploration
noise. Comparing an episode's sparse return with the mean of its group's (DeepSeekMath's
GRPO; SimpleVLA-RL and RLinf-VLA fine-tune VLAs this way on binary success) removes the
largest part of the variance a learned critic has to explain from the scene alone: on
peg-in-hole the base succeeds or fails mostly by the layout, and a value network that has
not learnt the layout yet turns that into advantage noise (docs/residual_rl.md). A group
where every episode succeeds, or every one fails, says nothing about the noise and is
skipped (DAPO's dynamic sampling). Stable-baselines3 has no grouped rollouts, so the
rollout bookkeeping and the update (about a hundred lines) are here; the vectorised envs
(inline, local workers, Ray), the residual network and the checkpoints are shared with PPO
and the off-policy learner.

Groups: a group is ``group_size`` episodes of one seed. Each env always has its next
episode queued (the env's ``next_seed``, which its auto-reset takes), drawn from the oldest
group still short of episodes, so an env runs on as soon as its episode ends and a group's
episodes run close together in time whatever their lengths. An update runs once
``episodes_per_update`` episodes of complete groups are in; episodes still running carry on
with the updated policy, their steps keep the log-probabilities they were taken with (PPO's
ratio corrects for it).
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

import numpy as np
import torch
from torch import nn

from tether.policies.residual.config import FinetuneConfig
from tether.policies.residual.model import ResidualMLP


def _approx_kl(log_ratio: torch.Tensor, ratio: torch.Tensor | None = None) -> float:
    """The mean of (ratio - 1) - log ratio: the KL estimator SB3's PPO stops on."""
    ratio = log_ratio.exp() if ratio is None else ratio
    return float(((ratio - 1) - log_ratio).mean())


class GaussianResidual(nn.Module):
    """The learner's policy: mean = the residual network's pre-tanh output (it *is*
    ``model.net``, shared, so the residual model is always the current mean), a learned
    state-independent log-std per element. The env applies tanh and the bound."""

    def __init__(self, model: ResidualMLP, init_std: float) -> None:
        super().__init__()
        self.net = model.net
        self.log_std = nn.Parameter(torch.full((model.out_dim,), math.log(init_std)))

    def distribution(self, x: torch.Tensor) -> torch.distributions.Normal:
        return torch.distributions.Normal(self.net(x), self.log_std.exp().expand(x.shape[0], -1))


class SuccessGate(nn.Module):
    """P(the episode succeeds | a decision's observation) under the policy's mean, learnt
    from the episodes that ran the mean (one per group; every decision labelled with its
    episode's outcome: a Monte-Carlo success value). ``gate(x)`` = max(floor, 1 - P): the
    factor on the exploration noise's std. Learnt from the noisy episodes instead, it
    predicted failure nearly everywhere on peg-in-hole (noise costs most successes there)
    and so never closed."""

    def __init__(self, obs_dim: int, floor: float, capacity: int = 50_000) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(obs_dim, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 1)
        )
        self.floor = floor
        self.optimizer = torch.optim.Adam(self.net.parameters(), lr=1e-3)
        self.x: deque[np.ndarray] = deque(maxlen=capacity)
        self.y: deque[float] = deque(maxlen=capacity)
        # trained on at least this many episodes' decisions before it gates (else 1)
        self.episodes = 0

    @property
    def ready(self) -> bool:
        """Trained on 20 episodes of the mean: before that it neither gates nor scores."""
        return self.episodes >= 20

    def probability(self, x: torch.Tensor) -> torch.Tensor:
        """(N,) P(success | observation) under the mean."""
        with torch.no_grad():
            return torch.sigmoid(self.net(x)[:, 0])

    def gate(self, x: torch.Tensor) -> torch.Tensor:
        """(N,) factors in [floor, 1]; 1 until it is ready."""
        if not self.ready:
            return torch.ones(x.shape[0])
        return (1 - self.probability(x)).clamp(min=self.floor)

    def add(self, obs: list[np.ndarray], success: bool) -> None:
        self.x.extend(obs)
        self.y.extend([float(success)] * len(obs))
        self.episodes += 1

    def fit(self, generator: torch.Generator, steps: int = 50, batch: int = 512) -> float:
        """A few gradient steps of the logistic loss on the kept decisions; the loss."""
        if not self.x:
            return 0.0
        x = torch.as_tensor(np.stack(self.x), dtype=torch.float32)
        y = torch.as_tensor(np.array(self.y), dtype=torch.float32)
        loss = torch.zeros(())
        for _ in range(steps):
            idx = torch.randint(0, x.shape[0], (batch,), generator=generator)
            loss = nn.functional.binary_cross_entropy_with_logits(self.net(x[idx])[:, 0], y[idx])
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
        return float(loss.detach())


class _Episode:
    __slots__ = (
        "obs", "actions", "logp", "ret", "rewards", "window", "gate", "success", "greedy", "start"
    )  # fmt: skip

    def __init__(
        self, window: tuple[int, int] | None = None, greedy: bool = False, start: int = 0
    ) -> None:
        self.obs: list[np.ndarray] = []
        self.rewards: list[float] = []
        # the decision of the group's first episode this one starts at (grpo.branch)
        self.start = start
        self.actions: list[np.ndarray] = []
        self.logp: list[float] = []
        # the factor on the noise's std at each step (SuccessGate; 1 without it)
        self.gate: list[float] = []
        self.success = False
        # runs the policy's mean throughout (with the success gate, one per group: what
        # the gate learns from, and part of the group's baseline)
        self.greedy = greedy
        self.ret = 0.0
        # learner steps [start, end) that explore (None: all of them)
        self.window = window

    def explores(self, t: int) -> bool:
        if self.greedy:
            return False
        return self.window is None or self.window[0] <= t < self.window[1]


class _Group:
    """Episodes that share a seed (and an exploration window)."""

    def __init__(self, seed: int, size: int, window: tuple[int, int] | None, key: int = 0) -> None:
        self.seed, self.size, self.window = seed, size, window
        self.unassigned = size
        self.done: list[_Episode] = []
        # grpo.branch: the key of its first episode's kept decisions in the env, the
        # decision the other episodes start at, and how many of them are still to start
        self.key = key
        self.branch_t = 0
        self.remaining = 0


class _Slot:
    """One episode of a group, as an env runs it."""

    def __init__(self, group: _Group, greedy: bool = False, start: int = 0) -> None:
        self.group = group
        self.episode = _Episode(group.window, greedy, start)


class GroupPPO:
    """What the trainer needs of an SB3 algorithm: ``learn(total_timesteps, callback)``
    (the callback sees ``dones`` and ``infos`` of every vector step), ``policy``,
    ``num_timesteps``."""

    def __init__(self, venv: Any, fcfg: FinetuneConfig, model: ResidualMLP) -> None:
        g = fcfg.grpo
        self.venv = venv
        self.cfg = g
        self.policy = GaussianResidual(model, g.init_std)
        self.optimizer = torch.optim.Adam(self.policy.parameters(), lr=g.lr)
        self.num_timesteps = 0
        # seeds of the lanes' first episodes (the trainer sets it from finetune.seed and
        # the steps already taken, so a resumed run draws new scenes)
        self.seed_base = fcfg.seed
        # control steps of the run before this learner started (a resumed run; the trainer
        # sets it): where the exploration curriculum goes on from
        self.control_before = 0
        self.hold_steps = fcfg.hold_steps
        self.generator = torch.Generator().manual_seed(fcfg.seed)
        self.logger: Any = None
        self._noise: torch.Tensor | None = None
        # learner steps in the longest episode (set by learn from the envs)
        self.horizon = 1
        self._rng = np.random.default_rng(fcfg.seed)
        self._filling: list[_Group] = []
        # learner steps of the latest episodes
        self._lengths: deque[int] = deque(maxlen=200)
        # per update: groups used (mixed outcomes), groups skipped, approx KL, epochs run
        self.updates: list[dict[str, float]] = []
        self._reported = 0
        floor = g.explore_gate_floor
        self.gate = None if floor is None else SuccessGate(model.in_dim, floor)
        # with the gate: the first episodes, one per seed, run the mean only (no update can
        # use them) so that the gate has learnt before any noise is added (as a critic is
        # trained before the actor moves)
        self._warm_left = 0 if floor is None else g.gate_warmup_episodes
        self._gate_values: deque[float] = deque(maxlen=2000)
        self._branch = g.branch != "none"
        self._keys = 0
        # grpo.branch: groups that branched, and their episodes that began at the reset
        self.branched = 0
        self.unbranched = 0
        # grpo.self_imitation: the decisions of successful episodes (observations, actions)
        self._success_x: deque[np.ndarray] = deque(maxlen=g.imitation_buffer)
        self._success_a: deque[np.ndarray] = deque(maxlen=g.imitation_buffer)
        # grpo.replay_failures: seeds of scenes the mean failed, oldest first, and how many
        # times each was replayed; groups that replayed one
        self._replay: deque[int] = deque()
        self._replayed: dict[int, int] = {}
        self.replays = 0

    def get_env(self) -> Any:
        return self.venv

    def status(self) -> str:
        """The updates since the last call, for the progress line: groups with a signal,
        KL (at the last minibatch; and of the update's start to the decisions' stored
        log-probabilities) and epochs per update, exploration std."""
        recent, self._reported = self.updates[self._reported :], len(self.updates)
        std = float(self.policy.log_std.detach().exp().mean())
        if not recent:
            return f"std {std:.3f}"
        mixed = sum(u["mixed"] for u in recent)
        groups = sum(u["groups"] for u in recent)
        kl = np.mean([u["kl"] for u in recent if u["mixed"]] or [0.0])
        epochs = np.mean([u["epochs"] for u in recent if u["mixed"]] or [0.0])
        stale = np.mean([u.get("stale_kl", 0.0) for u in recent if u["mixed"]] or [0.0])
        gate = ""
        if self.gate is not None and self._gate_values:
            gate = f", gate mean {np.mean(self._gate_values):.2f}"
        if self._branch:
            gate += f", branched {self.branched}/{self.branched + self.unbranched} scenes"
        if self.cfg.replay_failures > 0:
            gate += f", replayed {self.replays} scenes ({len(self._replay)} queued)"
        if "kept" in recent[-1]:
            gate += f", kept successes {recent[-1]['kept']:.0f}"
        return (
            f"{len(recent)} updates, groups with a signal {mixed:.0f}/{groups:.0f}, "
            f"kl {kl:.3f} (since the rollout {stale:.3f}), epochs {epochs:.1f}, "
            f"std {std:.3f}{gate}"
        )

    # ---- rollouts ---------------------------------------------------------------------
    def _window(self) -> tuple[int, int] | None:
        """The learner steps where a new group's episodes explore: one window of
        ``explore_window`` steps, at the same place for the whole group; with
        ``explore_curriculum_steps`` from a start (late in the episode at first) to the
        end; or None (every step explores)."""
        w, curriculum = self.cfg.explore_window, self.cfg.explore_curriculum_steps
        if not w and not curriculum:
            return None
        # where episodes still run: the limit at first, then the 75th percentile of recent
        # lengths (an episode that succeeds early has no steps for a later window)
        horizon = self.horizon
        if len(self._lengths) >= 20:
            horizon = min(horizon, int(np.percentile(self._lengths, 75)))
        if curriculum:
            # explore from a start drawn in [late / 2, late], late sliding from the
            # horizon to 0 over the curriculum: to the episode's end from there
            # (num_timesteps counts decisions; the curriculum, as total_env_steps, counts
            # control steps)
            progress = (self.control_before + self.num_timesteps * self.hold_steps) / curriculum
            late = horizon * max(0.0, 1.0 - progress)
            start = int(self._rng.uniform(late / 2, late)) if late >= 1 else 0
            return start, 2**31
        start = int(self._rng.integers(0, max(1, horizon - w + 1)))
        return start, start + w

    def _act(
        self, obs: np.ndarray, fresh: np.ndarray, explore: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Actions (N, D), their log-probabilities under the current policy and the gate
        (N,): the mean where not ``explore``, else mean + gate x std x noise (gate 1
        without explore_gate_floor). The noise of each env is an AR(1) process per element
        with coefficient ``noise_correlation`` and unit variance (so each action is still
        the policy's Gaussian at the margin), drawn afresh where ``fresh`` (a new
        episode)."""
        rho = self.cfg.noise_correlation
        with torch.no_grad():
            x = torch.as_tensor(obs, dtype=torch.float32)
            dist = self.policy.distribution(x)
            draw = torch.randn(dist.mean.shape, generator=self.generator)
            if self._noise is None or rho == 0:
                self._noise = draw
            else:
                carried = rho * self._noise + math.sqrt(1 - rho * rho) * draw
                self._noise = torch.where(torch.as_tensor(fresh)[:, None], draw, carried)
            gate = torch.ones(x.shape[0]) if self.gate is None else self.gate.gate(x)
            mask = torch.as_tensor(explore, dtype=torch.float32)[:, None]
            a = dist.mean + dist.stddev * gate[:, None] * self._noise * mask
            logp = self._log_prob(dist, gate, a)
            return a.numpy(), logp.numpy(), gate.numpy()

    @staticmethod
    def _log_prob(
        dist: torch.distributions.Normal, gate: torch.Tensor, a: torch.Tensor
    ) -> torch.Tensor:
        """log N(a; mean, (gate x std)^2) summed over elements: the gate is part of the
        behaviour policy, fixed per step (stored with the step for the update)."""
        scaled = torch.distributions.Normal(dist.mean, dist.stddev * gate[:, None])
        return scaled.log_prob(a).sum(-1)

    def _assign(self) -> _Slot:
        """The next episode to run: a free place in the oldest group still filling, else
        a new group (a fresh seed and, with explore_window, its window). With grpo.branch
        every group starts with the mean's episode, and its others start at a decision of
        that one, on the same env, once it has ended (_plan_branches)."""
        if self._branch:
            size = self.cfg.group_size
            if self._warm_left > 0:
                self._warm_left -= 1
                size = 1
            self._keys += 1
            grp = _Group(int(self._rng.integers(0, 2**31 - 1)), size, None, self._keys)
            grp.unassigned = 0
            return _Slot(grp, greedy=True)
        for grp in self._filling:
            if grp.unassigned:
                grp.unassigned -= 1
                return _Slot(grp)
        size = self.cfg.group_size
        if self._warm_left > 0:  # the gate's warm-up: one episode of the mean per seed
            self._warm_left -= 1
            size = 1
        grp = _Group(self._next_seed(size), size, self._window())
        self._filling.append(grp)
        grp.unassigned -= 1
        # with the success gate, each group's first episode runs the mean
        return _Slot(grp, greedy=self.gate is not None)

    def _next_seed(self, size: int) -> int:
        """A new group's scene: with grpo.replay_failures the oldest queued seed of a scene
        the mean failed (not for the gate's one-episode warm-up groups), else a fresh one."""
        p = self.cfg.replay_failures
        if p > 0 and size > 1 and self._replay and self._rng.random() < p:
            seed = self._replay.popleft()
            self._replayed[seed] = self._replayed.get(seed, 0) + 1
            self.replays += 1
            return seed
        return int(self._rng.integers(0, 2**31 - 1))

    def _note_outcome(self, grp: _Group) -> None:
        """grpo.replay_failures: queue a completed group's seed if the mean failed there
        (its greedy episode; without the gate, any episode of the group), at most
        replay_max replays per seed."""
        if self.cfg.replay_failures <= 0:
            return
        greedy = [ep for ep in grp.done if ep.greedy]
        failed = not greedy[0].success if greedy else not all(ep.success for ep in grp.done)
        fresh = grp.seed not in self._replay
        if failed and fresh and self._replayed.get(grp.seed, 0) < self.cfg.replay_max:
            self._replay.append(grp.seed)

    def _queue(self, i: int, slot: _Slot) -> None:
        """Env ``i``'s next reset: ``slot``'s seed (and, with grpo.branch, keep its
        decisions)."""
        self.venv.set_attr("next_seed", slot.group.seed, [i])
        if self._branch:
            self.venv.set_attr("branch_record", slot.group.key, [i])

    def _plan_branches(self, grp: _Group, ep: _Episode) -> None:
        """After a group's first episode (the mean's): where its others start, or none
        (with branch "failures" a scene the mean solves; the gate's warm-up)."""
        n = len(ep.obs)
        if grp.size <= 1 or n < 1 or (self.cfg.branch == "failures" and ep.success):
            grp.size = 1
            self.unbranched += 1
            return
        lo, hi = self.cfg.branch_span
        first = min(n - 1, int(lo * n))
        last = max(first + 1, min(n, math.ceil(hi * n)))
        grp.branch_t = int(self._rng.integers(first, last))
        grp.remaining = grp.size - 1
        # the mean from the branch point on is what the branches are compared with
        ep.ret = float(sum(ep.rewards[grp.branch_t :]))
        self.branched += 1

    def learn(self, total_timesteps: int, callback: Any, reset_num_timesteps: bool = True) -> Any:
        from stable_baselines3.common.logger import configure

        self.logger = configure(None, [])
        n = self.venv.num_envs
        self._rng = np.random.default_rng(self.seed_base)
        self.horizon = max(1, int(self.venv.get_attr("max_steps", [0])[0]) // self.hold_steps)
        # each env runs its current episode and has the next one queued (next_seed, what
        # ResidualEnv's auto-reset takes), so a group's episodes run close together in time
        # whatever their lengths, and a finished group waits for no env far behind
        current = [self._assign() for _ in range(n)]
        queued = [self._assign() for _ in range(n)]
        # SB3's VecEnv keeps the seeds of the next reset in _seeds (what seed() sets)
        self.venv._seeds = [slot.group.seed for slot in current]
        if self._branch:
            for i, slot in enumerate(current):
                self.venv.set_attr("branch_record", slot.group.key, [i])
        obs = self.venv.reset()
        for i, slot in enumerate(queued):
            self._queue(i, slot)
        callback.init_callback(self)
        callback.on_training_start(locals(), globals())
        fresh = np.ones(n, bool)
        complete: list[list[_Episode]] = []
        while self.num_timesteps < total_timesteps:
            explore = np.array([slot.episode.explores(len(slot.episode.obs)) for slot in current])
            actions, logp, gate = self._act(obs, fresh, explore)
            if self.gate is not None:
                self._gate_values.extend(gate[explore].tolist())
            new_obs, rewards, dones, infos = self.venv.step(actions)
            if self._branch:  # a branch start replaces a row: a copy of its own
                new_obs = np.array(new_obs)
            fresh = np.asarray(dones, bool)
            self.num_timesteps += n
            for i in range(n):
                ep = current[i].episode
                ep.obs.append(obs[i])
                ep.actions.append(actions[i])
                ep.logp.append(float(logp[i]))
                ep.gate.append(float(gate[i]))
                ep.ret += float(rewards[i])
                ep.rewards.append(float(rewards[i]))
                ep.success = ep.success or bool(infos[i].get("is_success", False))
                if dones[i]:
                    if self.gate is not None and ep.greedy:
                        self.gate.add(ep.obs, ep.success)
                    if ep.start == 0:
                        self._lengths.append(len(ep.obs))
                    grp = current[i].group
                    grp.done.append(ep)
                    if self._branch and ep.greedy:
                        self._plan_branches(grp, ep)
                    if grp.remaining > 0:
                        # the group's next episode starts at its branch point, here (the
                        # reset the env just ran is dropped, and its episode queued again)
                        grp.remaining -= 1
                        start = self.venv.env_method(
                            "restore_branch", grp.key, grp.branch_t, indices=[i]
                        )[0]
                        new_obs[i] = np.asarray(start, np.float32)
                        current[i] = _Slot(grp, start=grp.branch_t)
                        self._queue(i, queued[i])
                        continue
                    if len(grp.done) == grp.size:
                        self._note_outcome(grp)
                        if grp in self._filling:
                            self._filling.remove(grp)
                        if self._branch:
                            self.venv.env_method("drop_branch", grp.key, indices=[i])
                        complete.append(grp.done)
                    current[i], queued[i] = queued[i], self._assign()
                    self._queue(i, queued[i])
            obs = new_obs
            callback.update_locals({"dones": dones, "infos": infos})
            if not callback.on_step():
                break
            if sum(len(grp) for grp in complete) >= self.cfg.episodes_per_update:
                self._update(complete)
                if self.cfg.self_imitation > 0:
                    self._imitate(complete)
                complete = []
                if self.gate is not None:
                    self.gate.fit(self.generator)
        callback.on_training_end()
        return self

    # ---- update -----------------------------------------------------------------------
    def _update(self, complete: list[list[_Episode]]) -> None:
        c = self.cfg
        obs, actions, logp, adv, weight, gates = [], [], [], [], [], []
        used = 0
        for grp in complete:
            returns = np.array([ep.ret for ep in grp])
            if np.ptp(returns) == 0:  # every episode alike: no signal about the noise
                continue
            used += 1
            mean = float(returns.mean())
            for ep in grp:
                # only the steps that explored: elsewhere the action is the mean, which
                # says nothing about which way to move it
                steps = [t for t in range(len(ep.obs)) if ep.explores(t)]
                obs += [ep.obs[t] for t in steps]
                actions += [ep.actions[t] for t in steps]
                logp += [ep.logp[t] for t in steps]
                gates += [ep.gate[t] for t in steps]
                adv += self._advantages(ep, steps, mean)
                # each episode weighs the same however long it ran (a failing episode runs
                # to the time limit, a successful one ends early)
                weight += [1.0 / max(1, len(steps))] * len(steps)
        record = {"groups": float(len(complete)), "mixed": float(used), "kl": 0.0, "epochs": 0.0}
        self.updates.append(record)
        if not obs:
            return
        x = torch.as_tensor(np.stack(obs), dtype=torch.float32)
        a = torch.as_tensor(np.stack(actions), dtype=torch.float32)
        old = torch.as_tensor(np.array(logp), dtype=torch.float32)
        advantage = torch.as_tensor(np.array(adv), dtype=torch.float32)
        w = torch.as_tensor(np.array(weight), dtype=torch.float32)
        g = torch.as_tensor(np.array(gates), dtype=torch.float32)
        if c.normalize_advantage:
            advantage = advantage / (advantage.std() + 1e-8)
        with torch.no_grad():  # how far the policy moved since these decisions ran
            now = self._log_prob(self.policy.distribution(x), g, a)
            record["stale_kl"] = _approx_kl(now - old)
        if c.refresh_log_probs:
            old = now
        count = x.shape[0]
        for epoch in range(c.epochs):
            order = torch.randperm(count, generator=self.generator)
            for start in range(0, count, c.batch_size):
                idx = order[start : start + c.batch_size]
                new = self._log_prob(self.policy.distribution(x[idx]), g[idx], a[idx])
                log_ratio = new - old[idx]
                ratio = log_ratio.exp()
                with torch.no_grad():  # the estimator SB3's PPO stops on, before the step
                    kl = _approx_kl(log_ratio, ratio)
                record["kl"], record["epochs"] = kl, float(epoch + start / count)
                if c.target_kl is not None and kl > 1.5 * c.target_kl:
                    return
                clipped = ratio.clamp(1 - c.clip_range, 1 + c.clip_range)
                gain = torch.min(ratio * advantage[idx], clipped * advantage[idx])
                loss = -(w[idx] * gain).sum() / w[idx].sum()
                self.optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(self.policy.parameters(), c.max_grad_norm)
                self.optimizer.step()
            record["epochs"] = float(epoch + 1)

    def _advantages(self, ep: _Episode, steps: list[int], mean: float) -> list[float]:
        """The advantage of each explored step: its episode's return - the group's ``mean``;
        with grpo.value_baseline w, return - ((1 - w) mean + w P(success | obs))."""
        w = self.cfg.value_baseline
        if w == 0 or not steps or self.gate is None or not self.gate.ready:
            return [ep.ret - mean] * len(steps)
        x = torch.as_tensor(np.stack([ep.obs[t] for t in steps]), dtype=torch.float32)
        value = self.gate.probability(x).numpy()
        return (ep.ret - ((1 - w) * mean + w * value)).tolist()

    def _imitate(self, complete: list[list[_Episode]]) -> None:
        """grpo.self_imitation: keep the decisions of the successful episodes in
        ``complete``, then regress the mean towards the kept actions (each weighted by
        1 - P(success | observation) with imitation_weighting "advantage")."""
        c = self.cfg
        for grp in complete:
            for ep in grp:
                if ep.success:
                    self._success_x.extend(ep.obs)
                    self._success_a.extend(ep.actions)
        n = len(self._success_x)
        if n == 0:
            return
        # stacked once per update, then sampled (as SuccessGate.fit does)
        xs = torch.as_tensor(np.stack(self._success_x), dtype=torch.float32)
        acts = torch.as_tensor(np.stack(self._success_a), dtype=torch.float32)
        losses = []
        for _ in range(c.imitation_steps):
            idx = torch.randint(0, n, (min(c.batch_size, n),), generator=self.generator)
            mean = self.policy.distribution(xs[idx]).mean
            error = ((mean - acts[idx]) ** 2).sum(-1)
            if c.imitation_weighting == "advantage" and self.gate is not None and self.gate.ready:
                # self-imitation learning's (R - V)+: R = 1, V the mean's success value
                error = error * (1 - self.gate.probability(xs[idx]))
            loss = c.self_imitation * error.mean()
            self.optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(self.policy.parameters(), c.max_grad_norm)
            self.optimizer.step()
            losses.append(float(loss.detach()))
        if self.updates:
            self.updates[-1]["imitation"] = float(np.mean(losses))
            self.updates[-1]["kept"] = float(n)


def make(venv: Any, fcfg: FinetuneConfig, model: ResidualMLP) -> GroupPPO:
    """The group-relative learner on ``venv`` whose mean starts as ``model``."""
    return GroupPPO(venv, fcfg, model)


def actor_to_model(algo: GroupPPO, model: ResidualMLP) -> ResidualMLP:
    """The learner's mean is ``model.net`` itself (shared): nothing to copy."""
    if algo.policy.net is not model.net:
        model.net.load_state_dict(algo.policy.net.state_dict())
    return model


def optimizers(algo: GroupPPO) -> dict[str, torch.optim.Optimizer]:
    return {"policy": algo.optimizer}


def extra_tensors(algo: GroupPPO) -> dict[str, torch.Tensor]:
    """The success gate's weights and episode count (its kept decisions are not saved: a
    resumed run refills them)."""
    if algo.gate is None:
        return {}
    out = {f"gate.{k}": v for k, v in algo.gate.net.state_dict().items()}
    out["gate_episodes"] = torch.tensor(algo.gate.episodes)
    return out


def load_extra(algo: GroupPPO, tensors: dict[str, torch.Tensor]) -> None:
    if algo.gate is None or "gate_episodes" not in tensors:
        return
    algo.gate.net.load_state_dict({k[5:]: v for k, v in tensors.items() if k.startswith("gate.")})
    algo.gate.episodes = int(tensors["gate_episodes"])
