"""Step a simulator from action chunks through the safety filter, with episode accounting.

Transport-free: the ROS 2 sim bridge and the in-process loop (benchmarks, tests) share it, so
the two differ only in how observations and chunks travel.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tether.core import registry
from tether.core.config import ExperimentConfig
from tether.core.errors import ConfigError, InvalidCommand, StaleCommand
from tether.core.experiment import build_task, max_episode_steps, workspace_fk
from tether.core.protocols import SimBackend
from tether.core.safety import SafetyFilter
from tether.core.spec import CameraSpec, RobotSpec, cameras_due
from tether.core.timing import LatencyTracker, now_ns
from tether.core.types import ActionChunk, Observation, StepResult

# state layout of a mobile base whose geofence the safety filter checks (husky_spec)
ODOM_POSE = ("odom_x", "odom_y", "odom_yaw")


class Perturbation:
    """DART-style noise injection (``sim.perturb_std``): an Ornstein-Uhlenbeck offset on the
    arm joints' commands, stationary std ``std``, time constant ``tau_s``, sampled at the
    control rate from a generator seeded per episode (the same seed, the same offsets)."""

    def __init__(self, dims: int, std: float, tau_s: float, dt: float) -> None:
        self.dims, self.std = dims, std
        self.decay = float(np.exp(-dt / tau_s))
        self.kick = std * float(np.sqrt(1.0 - self.decay**2))
        self.offset = np.zeros(dims, np.float32)
        self._rng = np.random.default_rng(0)

    def reset(self, seed: int) -> None:
        self._rng = np.random.default_rng([seed, 0xDA27])
        self.offset = self._rng.normal(0.0, self.std, self.dims).astype(np.float32)

    def apply(self, action: np.ndarray) -> np.ndarray:
        out = np.array(action, np.float32)
        out[: self.dims] += self.offset
        self.offset = (
            self.decay * self.offset + self.kick * self._rng.standard_normal(self.dims)
        ).astype(np.float32)
        return out


def perturbation(cfg: ExperimentConfig, spec: RobotSpec) -> Perturbation | None:
    """The experiment's DART perturbation, or None when ``sim.perturb_std`` is 0."""
    std = float(getattr(cfg.sim, "perturb_std", 0.0))
    if std <= 0:
        return None
    if spec.kind != "arm" or spec.action.mode != "joint_position":
        raise ConfigError(
            f"sim.perturb_std perturbs an arm's joint commands; robot '{spec.name}' is a "
            f"{spec.kind} commanded in {spec.action.mode}"
        )
    arm = len(registry.load("robot", spec.name).arm_joints)
    return Perturbation(arm, std, float(cfg.sim.perturb_tau_s), spec.dt)


class SimRunner:
    """Owns a backend, its task and the safety filter; executes the latest chunk at the
    control rate. Sim time is the time base for chunks and the watchdog."""

    def __init__(self, cfg: ExperimentConfig, backend: SimBackend | None = None) -> None:
        self.cfg = cfg
        # a backend given with its task (a simulator reached over ROS 2) keeps that task
        own = getattr(backend, "task", None)
        self.task = own if own is not None else build_task(cfg)
        self.backend: SimBackend = backend or registry.build(
            "sim", cfg.sim, robot=cfg.robot, task=self.task
        )
        self.spec = self.backend.spec
        fk = workspace_fk(self.spec) if cfg.safety.workspace is not None else None
        self.safety = SafetyFilter(self.spec, cfg.safety, fk=fk)
        self.perturb = perturbation(cfg, self.spec)
        self.max_steps = max_episode_steps(cfg)
        self.latency = LatencyTracker()
        self.resets = 0
        self.episode = -1
        self.seed = cfg.episodes.seed
        self.chunk: ActionChunk | None = None
        self.obs: Observation | None = None
        self.rejected = 0
        self.old_timeline = 0  # chunks from before a reset / clock jump back, dropped
        self.last_stale = True  # whether the last step's action came from the watchdog
        self._last_step_ns: int | None = None
        self._camera_next: dict[str, int] = {}
        self._new_episode_state()

    def _new_episode_state(self) -> None:
        self.steps = 0
        self.ret = 0.0
        self.success = False
        self.failure: str | None = None  # what ended the episode early (a task's failure())
        self.done = False
        self.stale_steps = 0
        self.wall_start_ns: int | None = None
        self.wall_end_ns: int | None = None
        self._safety_at_start = self.safety.stats.counts()

    def measured(self, obs: Observation) -> np.ndarray:
        """The current position in action space (joint positions for joint_position)."""
        return np.asarray(obs["state"][: self.spec.action.dim], np.float32)

    def reset(self) -> Observation:
        """Reset with seed ``episodes.seed + k`` for the k-th reset since start."""
        self.seed = self.cfg.episodes.seed + self.resets
        self.resets += 1
        self.episode += 1
        self.obs = self.backend.reset(self.seed)
        self.safety.reset(self.measured(self.obs))
        if self.perturb is not None:
            self.perturb.reset(self.seed)
        self.chunk = None
        self._last_step_ns = None
        self.latency.clear()
        self._camera_next = {c.name: 0 for c in self.spec.cameras}
        self._new_episode_state()
        return self.obs

    def submit(self, chunk: ActionChunk) -> float | None:
        """Accept a chunk (rows are validated when used); returns its obs->action latency in
        ms if it answers an observation marked with ``latency.mark``."""
        if chunk.dim != self.spec.action.dim:
            self.rejected += 1
            raise InvalidCommand(f"chunk has {chunk.dim} columns, expected {self.spec.action.dim}")
        if not np.isfinite(chunk.actions).all():
            self.rejected += 1
            raise InvalidCommand("chunk contains NaN or inf")
        if self.obs is not None:
            try:  # out-of-order or future stamps never replace the chunk in force
                self.safety.check_stamp(chunk.t0_ns * 1e-9, self.obs.stamp_ns * 1e-9)
            except StaleCommand:
                self.old_timeline += 1
                raise
            except InvalidCommand:
                self.rejected += 1
                raise
        self.chunk = chunk
        return self.latency.match(chunk.t0_ns)

    def submit_command(self, action: np.ndarray) -> None:
        """Accept one unstamped action (a cmd_vel twist) for now: in force for about
        ``safety.watchdog_s``, as a base driver's command timeout."""
        assert self.obs is not None, "call reset() first"
        grace = self.cfg.safety.grace_periods
        rows = max(1, round(self.cfg.safety.watchdog_s / self.spec.dt) - grace)
        try:  # shape, NaN / inf and values beyond float32 before anything else
            a = self.safety.validate(action).reshape(1, -1)
        except InvalidCommand:
            self.rejected += 1
            raise
        self.submit(ActionChunk(np.repeat(a, rows, 0), self.spec.dt, self.obs.stamp_ns))

    def pose(self, obs: Observation) -> np.ndarray | None:
        """A mobile base's odometry pose (x m, y m, yaw rad) for the geofence, else None."""
        if self.spec.kind != "mobile_base" or self.spec.state_names[:3] != ODOM_POSE:
            return None
        return np.asarray(obs["state"][:3], np.float64)

    def answered(self) -> bool:
        """Whether the current chunk has an action for the current sim time."""
        assert self.obs is not None
        return self.chunk is not None and self.chunk.action_at(self.obs.stamp_ns) is not None

    def step(self) -> StepResult:
        """One control step: chunk row for now -> safety filter -> backend."""
        assert self.obs is not None, "call reset() first"
        if self.wall_start_ns is None:
            self.wall_start_ns = now_ns()
        t_ns = self.obs.stamp_ns
        t_s = t_ns * 1e-9
        if self._last_step_ns is not None and t_ns < self._last_step_ns:
            self.chunk = None  # the clock jumped back: nothing planned before it applies
        self._last_step_ns = t_ns
        a = self.chunk.action_at(t_ns) if self.chunk is not None else None
        if a is not None:  # a chunk row is valid for its control period (plus the grace)
            if self.perturb is not None:
                a = self.perturb.apply(a)
            self.safety.command(a, t_s, valid_s=self.spec.dt)
        out, stale = self.safety.output(t_s, self.measured(self.obs), self.pose(self.obs))
        self.stale_steps += int(stale)
        self.last_stale = stale
        res = self.backend.step(out)
        self.obs = res.observation
        self.steps += 1
        self.ret += float(res.reward)
        self.success = self.success or bool(res.terminated)
        self.failure = self.failure or res.info.get("failure")
        res.truncated = bool(res.info.get("failure")) or (
            self.steps >= self.max_steps and not res.terminated
        )
        self.done = bool(res.terminated or res.truncated)
        if self.done:
            self.wall_end_ns = now_ns()
        return res

    def cameras_due(self) -> list[CameraSpec]:
        """Cameras whose next frame (at their fps, in sim time) is due now."""
        assert self.obs is not None
        return cameras_due(self.spec.cameras, self.obs.stamp_ns, self._camera_next)

    def _instruction(self) -> dict[str, Any]:
        task: Any = getattr(self.backend, "task", None)
        return {"instruction": task.instruction} if hasattr(task, "set_instruction") else {}

    def outcome(self) -> str:
        """ "success", the task's failure ("collision"), "timeout" (the time limit), or
        "running" before the episode ends."""
        if self.success:
            return "success"
        if self.failure:
            return str(self.failure)
        return "timeout" if self.done else "running"

    def _task_metrics(self) -> dict[str, Any]:
        task: Any = getattr(self.backend, "task", None)
        metrics = getattr(task, "metrics", None)
        return {"metrics": metrics()} if metrics is not None else {}

    def summary(self) -> dict[str, Any]:
        """Episode result: success, outcome, steps, return, achieved rate, latency samples,
        the task's metrics (a base's path length)."""
        end = self.wall_end_ns or now_ns()
        wall_s = (end - self.wall_start_ns) * 1e-9 if self.wall_start_ns else 0.0
        return {
            "episode": self.episode,
            "seed": self.seed,
            "success": bool(self.success),
            "outcome": self.outcome(),
            "steps": self.steps,
            "return": round(self.ret, 4),
            # the backend's time since the episode's start (a simulator with a clock of its
            # own stamps observations with that clock: Isaac Sim over ROS 2)
            "sim_time_s": round(float(self.backend.sim_time) if self.obs else 0.0, 4),
            "wall_s": round(wall_s, 4),
            "control_hz": round(self.steps / wall_s, 2) if wall_s > 0 else None,
            "stale_steps": self.stale_steps,
            "rejected": self.rejected,
            # what the safety filter did with this episode's commands
            "safety": {
                k: v - self._safety_at_start[k] for k, v in self.safety.stats.counts().items()
            },
            "latency_ms": [round(x, 4) for x in self.latency.samples_ms],
            # a language-conditioned task: the instruction the episode was judged by
            **self._instruction(),
            **self._task_metrics(),
        }
