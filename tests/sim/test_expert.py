"""The scripted expert solves reach and lift in MuJoCo from state and env_state alone, for every
registered arm (robot facts from its description); PyBullet: test_pybullet.py."""

from __future__ import annotations

import numpy as np
import pytest
from arm_cases import arm, arm_params, build_arm_sim
from sim_helpers import expert_episode

from tether.core import registry
from tether.core.errors import ConfigError
from tether.core.protocols import Policy
from tether.core.types import Observation
from tether.sim.experts.config_expert import ScriptedExpertConfig
from tether.sim.tasks.config_tasks import LiftConfig, ReachConfig

# The README claims 100 % success on 30 seeds at 50/100/500 Hz for the Panda; measured 30/30
# in every case, the slowest episode finishing in 1.51 s of reach's 5 s limit and 3.06 s of
# lift's 8 s (so the claim holds with a wide time margin, not by a hair). Any other arm must
# pass 90 % of the seeds (27/30), the bar of issue #15.
SEEDS = range(30)
ALLOWED_FAILURES = {"panda": 0}
DEFAULT_ALLOWED_FAILURES = 3


def _make(task_type: str, robot: str = "panda", control_hz: float = 100.0):  # noqa: ANN202
    from tether.sim.experts.expert import ScriptedExpert
    from tether.sim.tasks.lift import LiftTask
    from tether.sim.tasks.reach import ReachTask

    task_cfg = LiftConfig() if task_type == "lift" else ReachConfig()
    task = LiftTask(task_cfg) if task_type == "lift" else ReachTask(task_cfg)
    sim = build_arm_sim("mujoco", robot, task, control_hz=control_hz)
    expert = ScriptedExpert(ScriptedExpertConfig(), sim.spec, task_cfg)
    return sim, expert


def _failed_seeds(task_type: str, robot: str, control_hz: float, seeds: range) -> list[int]:
    sim, expert = _make(task_type, robot, control_hz)
    try:
        return [s for s in seeds if not expert_episode(sim, expert, s)]
    finally:
        sim.close()


def _assert_success(failed: list[int], robot: str) -> None:
    allowed = ALLOWED_FAILURES.get(robot, DEFAULT_ALLOWED_FAILURES)
    assert len(failed) <= allowed, f"{robot}: failed seeds {failed} (allowed {allowed})"


@pytest.mark.mujoco
@pytest.mark.parametrize("robot", arm_params())
@pytest.mark.parametrize("task_type", ["reach", "lift"])
@pytest.mark.parametrize("control_hz", [50.0, 100.0])
def test_expert_succeeds_on_every_seed(robot: str, task_type: str, control_hz: float) -> None:
    """30 seeds (about 1-3 s for the 30 Panda episodes)."""
    _assert_success(_failed_seeds(task_type, robot, control_hz, SEEDS), robot)


@pytest.mark.mujoco
@pytest.mark.slow
@pytest.mark.parametrize("robot", arm_params())
@pytest.mark.parametrize("task_type", ["reach", "lift"])
def test_expert_succeeds_on_every_seed_at_500hz(robot: str, task_type: str) -> None:
    """A 2 ms control period (Panda lift: ~13 s for the 30 episodes)."""
    _assert_success(_failed_seeds(task_type, robot, 500.0, SEEDS), robot)


@pytest.mark.mujoco
@pytest.mark.parametrize("robot", arm_params())
def test_expert_survives_reset_mid_episode(robot: str) -> None:
    """A sim reset the expert is not told about (stamp jumps back): it must start over."""
    sim, expert = _make("lift", robot)
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


@pytest.mark.parametrize("robot", arm_params())
def test_expert_respects_joint_rate_limits(robot: str) -> None:
    """Pure numpy: commanded steps stay within the safety filter's per-step limits, and the
    gripper element stays in the gripper's range."""
    from tether.sim.experts.expert import ScriptedExpert

    desc = arm(robot)
    spec = desc.spec(control_hz=200.0)
    expert = ScriptedExpert(ScriptedExpertConfig(), spec, ReachConfig())
    assert isinstance(expert, Policy)
    n_fingers = len(desc.gripper.joints)
    state = np.array([*desc.home, *[desc.gripper.home] * n_fingers], np.float32)
    env = np.array([0.6, 0.25, 0.1, 1, 0, 0, 0], np.float32)
    max_step = np.array([j.max_velocity for j in spec.joints]) * spec.dt
    dim = spec.action.dim
    prev = state[:dim].astype(np.float64)
    for k in range(600):  # 3 s
        a = expert.act(Observation({"state": state, "env_state": env}, round(k * spec.dt * 1e9)))
        assert a.actions.shape == (1, dim)
        act = a.actions[0].astype(np.float64)
        assert np.all(np.abs(act - prev) <= max_step + 1e-6)
        assert desc.gripper.lower - 1e-6 <= act[-1] <= desc.gripper.upper + 1e-6
        prev = act
        state = np.concatenate([act, [act[-1]] * (n_fingers - 1)]).astype(np.float32)
    # the target (0.6, 0.25, 0.1) was reached with perfect tracking
    p, _ = desc.kinematics.fk(prev[: desc.dof])
    np.testing.assert_allclose(p, env[:3], atol=0.01)
    assert expert.contract["observation_keys"] == ["state", "env_state"]


def test_expert_takes_the_grasp_height_from_the_robot_or_the_config() -> None:
    from tether.sim.experts.expert import ScriptedExpert

    spec = arm("panda").spec()
    assert ScriptedExpert(ScriptedExpertConfig(), spec, LiftConfig()).grasp_offset == 0.0
    cfg = ScriptedExpertConfig(grasp_offset=0.01)
    assert ScriptedExpert(cfg, spec, LiftConfig()).grasp_offset == 0.01


def test_expert_refuses_other_tasks_and_kinds() -> None:
    from tether.sim.experts.expert import ScriptedExpert

    spec = arm("panda").spec()
    with pytest.raises(ConfigError, match="reach and lift, not 'go_to_goal'"):
        cfg = registry.config_class("task", "go_to_goal")()
        ScriptedExpert(ScriptedExpertConfig(), spec, cfg)
    husky = registry.load("robot", "husky").spec()
    with pytest.raises(ConfigError, match="drives arms; robot 'husky' is a mobile_base"):
        ScriptedExpert(ScriptedExpertConfig(), husky, LiftConfig())
