"""A gymnasium env whose action is the residual on a frozen base policy.

One env owns a simulator backend (built through the registry: the policy layer never
imports tether.sim), the experiment's task, the frozen base and a safety filter. The base is
a black box that returns action chunks (any registered policy, or an exported model folder
served by the ``onnx`` policy); the base's action for the current step is the row for now
of its current chunk, asked for at every step as the in-process loop asks (the base replans
on its own schedule) or when the chunk runs out, as a chunk executor asks
(``finetune.base_replan``, see base_executor). Each step::

    action = base row + residual  ->  SafetyFilter (command + output, as the sim bridge)
           ->  backend.step

A learner step (``step``) holds one residual for ``finetune.hold_steps`` control steps.

Spaces:
    observation  Box (F + A,) float32: the residual model's normalised input (latest
                 observation features, base action in [-1, 1]); see model.ResidualMLP
    action       ``squash=True`` (PPO): the pre-tanh residual, Box [-5, 5]^D, the env
                 applies tanh; ``squash=False`` (SAC, whose actor squashes): the residual in
                 [-1, 1]^D. Either way residual = squashed * limit, |residual| <= limit;
                 D = A in joint space, 6 + fingers in tcp space (space.py), where each
                 control step maps it to a joint correction bounded as in joint space.
Reward: ``sparse`` 1 on the step the task succeeds, else 0; ``dense`` the task's reward,
and on a success that ends the episode that reward for every step left (so succeeding early
never pays less than hovering near the goal until the time limit); minus
``residual_penalty`` * mean((residual / limit)^2). Episodes terminate on success (tasks
whose success ends the episode) or failure, truncate at the task's time limit.
"""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import numpy as np

from tether.core import registry
from tether.core.config import ExperimentConfig
from tether.core.errors import ConfigError
from tether.core.experiment import build_task, max_episode_steps, workspace_fk
from tether.core.protocols import Policy, Snapshotting, Task
from tether.core.safety import SafetyFilter
from tether.core.spec import RobotSpec, cameras_due
from tether.core.types import IMAGE_PREFIX, Observation
from tether.policies.residual.base_executor import BaseExecutor
from tether.policies.residual.branching import BranchPoints
from tether.policies.residual.config import FinetuneConfig
from tether.policies.residual.model import NumpyNormaliser
from tether.policies.residual.space import ResidualSpace

# bound of the pre-tanh action space (tanh(5) = 0.9999): SB3 clips to it, harmlessly
PRE_TANH_BOUND = 5.0


def build_base(cfg: ExperimentConfig, fcfg: FinetuneConfig, spec: RobotSpec) -> Policy:
    """The frozen base: ``finetune.base_model`` served by the ``onnx`` policy, else the
    experiment's ``policy:`` section."""
    if fcfg.base_model is not None:
        onnx_cfg = registry.config_class("policy", "onnx")(type="onnx", model=fcfg.base_model)
        policy: Policy = registry.build("policy", onnx_cfg, spec, cfg.task)
        return policy
    built: Policy = registry.build("policy", cfg.policy, spec, cfg.task)
    return built


def observation_keys(base: Policy, keys: list[str] | None = None) -> list[str]:
    """What the residual sees: ``keys`` (``finetune.observation_keys``), else the base
    contract's observation keys without its cameras. The base sees all of its own keys,
    images and instruction included (a VLA base); the residual takes arrays only."""
    base_keys = list(base.contract.get("observation_keys", ["state"]))
    chosen = list(keys) if keys else [k for k in base_keys if not k.startswith(IMAGE_PREFIX)]
    images = [k for k in chosen if k.startswith(IMAGE_PREFIX)]
    if images:
        raise ConfigError(
            f"finetune.observation_keys: {', '.join(images)} are images; the residual takes "
            "state observations only so far (the base still sees its cameras)"
        )
    if not chosen:
        raise ConfigError(
            "finetune: the base observes only images; name the residual's inputs in "
            "finetune.observation_keys (e.g. [state, env_state])"
        )
    return chosen


class ResidualEnv(BranchPoints, gym.Env):  # type: ignore[misc]
    """See the module docstring. ``normaliser`` None: observations are the raw features
    concatenated with the raw base action (for collecting normalisation statistics)."""

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(
        self,
        cfg: ExperimentConfig,
        fcfg: FinetuneConfig,
        normaliser: NumpyNormaliser | None = None,
        *,
        squash: bool = True,
    ) -> None:
        if cfg.sim is None:
            raise ConfigError("finetune: the experiment needs a sim: section (not hardware)")
        self.cfg = cfg
        self.fcfg = fcfg
        self.task = build_task(cfg)
        self.backend = registry.build("sim", cfg.sim, robot=cfg.robot, task=self.task)
        self.robot_spec = self.backend.spec
        self.base = build_base(cfg, fcfg, self.robot_spec)
        self.keys = observation_keys(self.base, fcfg.observation_keys)
        # the cameras the base observes, rendered at their fps in sim time as the
        # in-process loop renders them (the base sees the latest frame of each)
        base_keys = set(self.base.contract.get("observation_keys", []))
        self.cameras = [c for c in self.robot_spec.cameras if IMAGE_PREFIX + c.name in base_keys]
        missing = {k for k in base_keys if k.startswith(IMAGE_PREFIX)} - {
            IMAGE_PREFIX + c.name for c in self.cameras
        }
        if missing:
            raise ConfigError(
                f"finetune: the base observes {', '.join(sorted(missing))}, which the "
                "experiment's sim.cameras do not render"
            )
        self._images: dict[str, np.ndarray] = {}
        self._camera_next: dict[str, int] = {}
        fk = workspace_fk(self.robot_spec) if cfg.safety.workspace is not None else None
        self.safety = SafetyFilter(self.robot_spec, cfg.safety, fk=fk)
        self.max_steps = max_episode_steps(cfg)
        self.squash = squash
        self.normaliser = normaliser
        dim = self.robot_spec.action.dim
        low = self.robot_spec.action.low_array().astype(np.float64)
        high = self.robot_spec.action.high_array().astype(np.float64)
        # the bound of the applied (joint-space) residual
        self.limit = fcfg.scale * (high - low) / 2
        # where the learner's residual lives (joint, or the TCP's motion: space.py)
        self.space = ResidualSpace(
            self.robot_spec, fcfg.space, fcfg.scale, fcfg.tcp_scale, fcfg.tcp_damping
        )
        offset = np.zeros(dim) if fcfg.base_offset is None else np.asarray(fcfg.base_offset)
        self.offset = offset.astype(np.float32)
        if self.offset.shape != (dim,):
            raise ConfigError(
                f"finetune.base_offset: {len(self.offset)} values, the action has {dim}"
            )
        self._success_terminates = bool(getattr(self.task, "success_terminates", True))
        bound = PRE_TANH_BOUND if squash else 1.0
        self.action_space = gym.spaces.Box(-bound, bound, (self.space.dim,), np.float32)
        self.obs: Observation = self.backend.observe()
        self.base_action = np.zeros(dim)
        self.executor = BaseExecutor(self.base, fcfg.base_replan)
        self.steps = 0
        # the seed of the next reset that is given none (an auto-reset), set by a learner
        self.next_seed: int | None = None
        self.obs_dim = int(self.raw_features().shape[0])
        self.relative = relative_indices(fcfg.relative_positions, self.keys, self.obs, self.task)
        space_dim = self.obs_dim + 3 * len(self.relative) + dim
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (space_dim,), np.float32)

    # ---- observation ------------------------------------------------------------------
    def raw_features(self) -> np.ndarray:
        """The latest observation's features (F,): the keys' arrays flattened, in order."""
        parts = [np.asarray(self.obs[k], np.float64).ravel() for k in self.keys]
        return np.concatenate(parts)

    def observation(self) -> np.ndarray:
        feats = self.raw_features()
        if self.normaliser is None:
            return np.concatenate([feats, self.base_action]).astype(np.float32)
        return self.normaliser.features(feats, self.base_action)

    def _base_step(self) -> None:
        """The base's action for now (base_executor), plus the known offset if any."""
        # float32 as every chunk row (the sum is the row a biased base's chunk would hold)
        self.base_action = self.executor.row(self._seen()) + self.offset

    def _seen(self) -> Observation:
        """The latest observation with the latest frame of each camera the base observes."""
        if not self.cameras:
            return self.obs
        for cam in cameras_due(self.cameras, self.obs.stamp_ns, self._camera_next):
            self._images[IMAGE_PREFIX + cam.name] = self.backend.render(cam.name)
        data = {**{k: self.obs[k] for k in self.obs}, **self._images}
        return Observation(data, stamp_ns=self.obs.stamp_ns, instruction=self.obs.instruction)

    def measured(self) -> np.ndarray:
        return np.asarray(self.obs["state"][: self.robot_spec.action.dim], np.float32)

    # ---- gymnasium --------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """``seed`` goes to the backend as is; without one, ``next_seed`` if a learner set
        it (grpo.py queues each env's next episode), else drawn from the env's generator."""
        if seed is None and self.next_seed is not None:
            seed, self.next_seed = self.next_seed, None
        super().reset(seed=seed)
        episode_seed = seed if seed is not None else int(self.np_random.integers(2**31 - 1))
        self.obs = self.backend.reset(episode_seed)
        self.safety.reset(self.measured())
        self.executor.reset()
        self._images, self._camera_next = {}, {}
        self.steps = 0
        self._base_step()
        self.branch_reset()
        return self.observation(), {"seed": episode_seed}

    def snapshot(self) -> dict[str, Any]:
        """This moment of the episode, in memory: the simulator's snapshot (Snapshotting),
        the base's chunk and episode state, the safety filter's, and the env's own. After
        ``restore`` the same learner actions give the same observations, rewards and applied
        actions: a group of rollouts can branch here without replaying the steps before."""
        if not isinstance(self.backend, Snapshotting):
            kind = self.cfg.sim.type if self.cfg.sim is not None else "?"
            raise ConfigError(
                f"sim.type {kind}: its backend cannot take snapshots (the MuJoCo and PyBullet "
                "arm backends can)"
            )
        own = {"obs": self.obs, "base_action": self.base_action, "steps": self.steps}
        own |= {"images": self._images, "camera_next": self._camera_next}
        return {
            "sim": self.backend.snapshot(),
            "base": self.executor.state(),
            "safety": self.safety.state(),
            "env": copy.deepcopy(own),
        }

    def restore(self, snapshot: dict[str, Any]) -> np.ndarray:
        """Back to ``snapshot`` (from this env; usable again); the learner's observation."""
        self.backend.restore(snapshot["sim"])  # type: ignore[attr-defined]
        self.executor.load_state(snapshot["base"])
        self.safety.load_state(snapshot["safety"])
        own = copy.deepcopy(snapshot["env"])
        self.obs, self.base_action, self.steps = own["obs"], own["base_action"], own["steps"]
        self._images, self._camera_next = own["images"], own["camera_next"]
        return self.observation()

    def to_residual(self, action: np.ndarray) -> np.ndarray:
        """The learner's action -> residual in its space (space.py), |residual| <=
        space.limit (action units in joint space)."""
        a = np.nan_to_num(np.asarray(action, np.float64), nan=0.0)
        a = np.tanh(a) if self.squash else np.clip(a, -1.0, 1.0)
        return a * self.space.limit

    def joint_residual(self, residual: np.ndarray) -> np.ndarray:
        """A residual in its space -> the joint correction for this step's base row."""
        return self.space.to_joint(self.base_action, residual)

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """One learner step: the residual held for ``finetune.hold_steps`` control steps
        (fewer when the episode ends first; in tcp space mapped to the joints at each
        step's base row); the reward is their sum, ``info`` the last step's with
        ``is_success`` true if any step succeeded and ``control_steps``."""
        self.branch_decision()
        residual = self.to_residual(action)
        total, success, n = 0.0, False, 0
        while True:
            joint = self.joint_residual(residual)
            obs, reward, terminated, truncated, info = self.step_residual(joint)
            total += reward
            success = success or info["is_success"]
            n += 1
            if terminated or truncated or n >= self.fcfg.hold_steps:
                break
        info["is_success"] = success
        info["control_steps"] = n
        return obs, total, terminated, truncated, info

    def step_residual(
        self, residual: np.ndarray
    ) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """One control step with ``residual`` (A,) in action units (clipped to the limit)."""
        residual = np.clip(np.asarray(residual, np.float64), -self.limit, self.limit)
        t_s = self.obs.stamp_ns * 1e-9
        self.safety.command(self.base_action + residual, t_s, valid_s=self.robot_spec.dt)
        out, _ = self.safety.output(t_s, self.measured())
        res = self.backend.step(out)
        self.obs = res.observation
        self.steps += 1
        success = bool(res.info.get("is_success", res.terminated))
        failed = bool(res.info.get("failed", False))
        terminated = failed or (success and self._success_terminates)
        truncated = not terminated and (bool(res.truncated) or self.steps >= self.max_steps)
        if self.fcfg.reward == "sparse":
            reward = float(success)
        else:
            reward = float(res.reward)
            if terminated and success:
                # success ends the episode: pay the remaining steps at this step's reward,
                # else ending early pays less than hovering just outside the success radius
                reward *= 1 + self.max_steps - self.steps
        if self.fcfg.residual_penalty > 0:
            reward -= self.fcfg.residual_penalty * float(np.mean((residual / self.limit) ** 2))
        if not (terminated or truncated):
            self._base_step()
        info = {"is_success": success, "failed": failed, "applied": out}
        return self.observation(), reward, terminated, truncated, info

    def close(self) -> None:
        self.backend.close()


def relative_indices(
    pairs: list[tuple[str, str]], keys: list[str], obs: Observation, task: Task
) -> list[tuple[int, int]]:
    """``finetune.relative_positions`` as start indices of each object's position in the
    residual's raw features (env_state holds 7 per task object: position, quaternion)."""
    if not pairs:
        return []
    if "env_state" not in keys:
        raise ConfigError(
            "finetune.relative_positions reads the objects' positions from env_state; the "
            f"residual observes {keys} (add env_state to finetune.observation_keys)"
        )
    objects = list(task.objects)
    start = 0
    for key in keys:
        if key == "env_state":
            break
        start += int(np.asarray(obs[key]).size)
    out = []
    for a, b in pairs:
        unknown = [n for n in (a, b) if n not in objects]
        if unknown:
            raise ConfigError(
                f"finetune.relative_positions: {', '.join(unknown)} is not an object of task "
                f"'{task.name}' (its objects: {', '.join(objects) or 'none'})"
            )
        out.append((start + 7 * objects.index(a), start + 7 * objects.index(b)))
    return out


def observation_stats(
    env: ResidualEnv, episodes: int, seed: int, contract: dict[str, Any] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Normalisation (offset (F,), scale (F,)) of the residual's observation features:
    the base contract's ``normalization`` (min/max -> [-1, 1]) for keys that have one, else
    mean / std over ``episodes`` base-only rollouts (std floored at 1e-2)."""
    rows = []
    for k in range(episodes):
        env.reset(seed=seed + k)
        rows.append(env.raw_features())
        done = False
        while not done:
            _, _, term, trunc, _ = env.step_residual(np.zeros(env.robot_spec.action.dim))
            rows.append(env.raw_features())
            done = term or trunc
    x = np.stack(rows)
    offset, scale = x.mean(0), np.maximum(x.std(0), 1e-2)
    norm = (contract or {}).get("normalization", {})
    i = 0
    for key in env.keys:
        n = int(np.asarray(env.obs[key]).size)
        if "min" in norm.get(key, {}):
            lo = np.asarray(norm[key]["min"], np.float64).ravel()
            hi = np.asarray(norm[key]["max"], np.float64).ravel()
            if lo.size == n:
                offset[i : i + n] = (hi + lo) / 2
                scale[i : i + n] = np.maximum((hi - lo) / 2, 1e-6)
        i += n
    return offset, scale
