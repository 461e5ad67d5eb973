"""SimRunner wires the safety layer: the arm's forward kinematics (its description's chain)
keeps end-effector targets inside safety.workspace."""

from __future__ import annotations

import numpy as np
import pytest
from arm_cases import arm, arm_params

from tether.core import registry
from tether.core.config import load_config
from tether.core.experiment import workspace_fk
from tether.core.types import ActionChunk

PANDA = arm("panda").kinematics


@pytest.mark.parametrize("robot", arm_params())
def test_workspace_fk_is_the_arms_chain(robot: str) -> None:
    """Every arm gets a workspace box: the TCP of its chain for the arm part of an action."""
    desc = arm(robot)
    fk = workspace_fk(desc.spec())
    assert fk is not None
    q = np.asarray(desc.home) + 0.1
    action = np.array([*q, desc.gripper.upper])
    np.testing.assert_array_equal(fk(action), desc.kinematics.fk(q)[0])


def test_workspace_fk_is_none_without_a_chain() -> None:
    assert workspace_fk(registry.load("robot", "husky").spec()) is None


@pytest.mark.mujoco
def test_panda_targets_outside_the_workspace_box_are_not_applied(repo):
    pytest.importorskip("mujoco")
    from tether.sim.runner import SimRunner

    exp = repo / "configs/experiments/panda_lift_expert.yaml"
    probe = SimRunner(load_config(exp, ["sim.cameras=[]"]))
    home = probe.measured(probe.reset()).copy()
    probe.backend.close()
    p = PANDA.fk(home[:7].astype(np.float64))[0]
    box = f"{{low: {(p - 0.05).tolist()}, high: {(p + 0.05).tolist()}}}"
    runner = SimRunner(load_config(exp, ["sim.cameras=[]", f"safety.workspace={box}"]))
    try:
        obs = runner.reset()
        target = runner.measured(obs).copy()
        target[1] += 0.6  # shoulder forward: the hand leaves the 10 cm box
        runner.submit(ActionChunk(np.repeat(target[None], 100, 0), runner.spec.dt, obs.stamp_ns))
        sent: list[np.ndarray] = []
        real = runner.backend.step

        def spy(action):
            sent.append(np.array(action, copy=True))
            return real(action)

        runner.backend.step = spy
        for _ in range(60):
            runner.step()
        ee = np.array([PANDA.fk(a[:7].astype(np.float64))[0] for a in sent])
        assert np.all(np.abs(ee - p) <= 0.05 + 1e-6)
        assert runner.safety.stats.workspace_blocked > 0
        assert sent[-1][1] > home[1] + 0.01  # it moved as far as the box allows
    finally:
        runner.backend.close()


@pytest.mark.mujoco
def test_each_episode_summary_counts_its_own_safety_interventions(repo):
    """summary()['safety']: what the filter did with this episode's commands, from zero at
    each reset (a report of episode 2 must not carry episode 1's clamps)."""
    pytest.importorskip("mujoco")
    from tether.sim.runner import SimRunner

    exp = repo / "configs/experiments/panda_lift_expert.yaml"
    runner = SimRunner(load_config(exp, ["sim.cameras=[]"]))
    try:
        for beyond in (True, False):
            obs = runner.reset()
            target = runner.measured(obs).copy()
            if beyond:
                target[0] = 10.0  # joint 1's limit is 2.9 rad
            runner.submit(ActionChunk(np.repeat(target[None], 20, 0), runner.spec.dt, obs.stamp_ns))
            for _ in range(20):
                runner.step()
            safety = runner.summary()["safety"]
            assert safety["accepted"] == 20
            assert safety["clamped"] == (20 if beyond else 0), safety
    finally:
        runner.backend.close()
