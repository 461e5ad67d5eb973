"""The scripted expert solves reach and lift in MuJoCo from state and env_state alone."""

from __future__ import annotations

import numpy as np
import pytest
from sim_helpers import expert_episode

from tether.core.protocols import Policy
from tether.sim.experts.config_expert import ScriptedExpertConfig
from tether.sim.robots.panda import panda_spec
from tether.sim.tasks.config_tasks import LiftConfig, ReachConfig

# The README claims 100 % success on 30 seeds at 50/100/500 Hz; measured 30/30 in every case,
# the slowest episode finishing in 1.51 s of reach's 5 s limit and 3.06 s of lift's 8 s (so the
# claim holds with a wide time margin, not by a hair).
SEEDS = range(30)


def _make(task_type: str, control_hz: float = 100.0):  # noqa: ANN202 - test helper
    pytest.importorskip("mujoco")
    from tether.sim.experts.expert import ScriptedExpert
    from tether.sim.mujoco.backend import MujocoBackend
    from tether.sim.mujoco.config_mujoco import MujocoConfig
    from tether.sim.tasks.lift import LiftTask
    from tether.sim.tasks.reach import ReachTask

    task_cfg = LiftConfig() if task_type == "lift" else ReachConfig()
    task = LiftTask(task_cfg) if task_type == "lift" else ReachTask(task_cfg)
    sim = MujocoBackend(MujocoConfig(control_hz=control_hz), task=task)
    expert = ScriptedExpert(ScriptedExpertConfig(), sim.spec, task_cfg)
    return sim, expert


def _failed_seeds(task_type: str, control_hz: float, seeds: range) -> list[int]:
    sim, expert = _make(task_type, control_hz)
    try:
        return [s for s in seeds if not expert_episode(sim, expert, s)]
    finally:
        sim.close()


@pytest.mark.mujoco
@pytest.mark.parametrize("task_type", ["reach", "lift"])
@pytest.mark.parametrize("control_hz", [50.0, 100.0])
def test_expert_succeeds_on_every_seed(task_type: str, control_hz: float) -> None:
    """All 30 seeds succeed (about 1-3 s for the 30 episodes)."""
    assert _failed_seeds(task_type, control_hz, SEEDS) == []


@pytest.mark.mujoco
@pytest.mark.slow
@pytest.mark.parametrize("task_type", ["reach", "lift"])
def test_expert_succeeds_on_every_seed_at_500hz(task_type: str) -> None:
    """A 2 ms control period; all 30 seeds succeed (lift: ~13 s for the 30 episodes)."""
    assert _failed_seeds(task_type, 500.0, SEEDS) == []


@pytest.mark.mujoco
def test_expert_survives_reset_mid_episode() -> None:
    """A sim reset the expert is not told about (stamp jumps back): it must start over."""
    sim, expert = _make("lift")
    try:
        obs = sim.reset(0)
        expert.reset()
        for _ in range(150):  # 1.5 s: somewhere in descend/close
            obs = sim.step(expert.act(obs).actions[0]).observation
        obs = sim.reset(1)
        for _ in range(int(8.0 * 100)):
            result = sim.step(expert.act(obs).actions[0])
            obs = result.observation
            if result.terminated:
                break
        assert result.terminated
    finally:
        sim.close()


def test_expert_respects_joint_rate_limits() -> None:
    """Pure numpy: commanded steps stay within the safety filter's per-step limits."""
    from tether.core.types import Observation
    from tether.sim.experts.expert import ScriptedExpert

    spec = panda_spec(control_hz=200.0)
    expert = ScriptedExpert(ScriptedExpertConfig(), spec, ReachConfig())
    assert isinstance(expert, Policy)
    state = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785, 0.04, 0.04], np.float32)
    env = np.array([0.6, 0.25, 0.1, 1, 0, 0, 0], np.float32)
    max_step = np.array([j.max_velocity for j in spec.joints]) * spec.dt
    prev = state[:8].astype(np.float64)
    for k in range(300):
        a = expert.act(Observation({"state": state, "env_state": env}, round(k * spec.dt * 1e9)))
        act = a.actions[0].astype(np.float64)
        assert np.all(np.abs(act - prev) <= max_step + 1e-6)
        prev = act
        state = np.concatenate([act, act[7:]]).astype(np.float32)  # perfect tracking
    assert expert.contract["observation_keys"] == ["state", "env_state"]
