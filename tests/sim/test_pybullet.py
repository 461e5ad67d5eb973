"""The PyBullet backend: isolated instances, the TCP of panda_kinematics, and the scripted
expert solving reach and lift unchanged (the generic SimBackend checks live in
test_backend_contract.py)."""

from __future__ import annotations

import numpy as np
import pytest
from sim_helpers import expert_episode

from tether.sim.experts.config_expert import ScriptedExpertConfig
from tether.sim.robots import panda_kinematics as kin
from tether.sim.tasks.config_tasks import LiftConfig, ReachConfig

pytestmark = pytest.mark.pybullet
pb = pytest.importorskip("pybullet")


def _make(task_type: str, control_hz: float = 100.0):  # noqa: ANN202 - test helper
    from tether.sim.experts.expert import ScriptedExpert
    from tether.sim.pybullet.backend import PybulletBackend
    from tether.sim.pybullet.config_pybullet import PybulletConfig
    from tether.sim.tasks.lift import LiftTask
    from tether.sim.tasks.reach import ReachTask

    task_cfg = LiftConfig() if task_type == "lift" else ReachConfig()
    task = LiftTask(task_cfg) if task_type == "lift" else ReachTask(task_cfg)
    sim = PybulletBackend(PybulletConfig(control_hz=control_hz), task=task)
    expert = ScriptedExpert(ScriptedExpertConfig(), sim.spec, task_cfg)
    return sim, expert


def test_two_instances_step_independently() -> None:
    """Each backend owns its physics client: stepping one leaves the other untouched."""
    a, _ = _make("lift")
    b, _ = _make("lift")
    try:
        assert a._cid != b._cid
        oa, ob = a.reset(seed=1), b.reset(seed=1)
        np.testing.assert_array_equal(oa["state"], ob["state"])
        # drive a's elbow and close its fingers; b holds still
        target = oa["state"][:8].copy()
        target[3] += 0.3
        target[7] = 0.0
        for _ in range(30):
            a.step(target)
        for _ in range(5):
            b.step(ob["state"][:8])
        sa, sb = a.observe(), b.observe()
        assert abs(sa["state"][3] - oa["state"][3]) > 0.2
        assert sa["state"][7] < 0.01
        np.testing.assert_allclose(sb["state"], ob["state"], atol=1e-3)
        np.testing.assert_allclose(sb["env_state"], ob["env_state"], atol=1e-3)
        assert a.sim_time == pytest.approx(0.3) and b.sim_time == pytest.approx(0.05)
        a.close()
        # closing one client leaves the other running
        assert b.step(ob["state"][:8]).observation["state"].shape == (9,)
    finally:
        a.close()
        b.close()


def test_ee_pose_matches_panda_kinematics() -> None:
    """The backend's TCP (URDF panda_hand frame + 0.1034 m) is the expert's FK TCP."""
    sim, _ = _make("reach")
    rng = np.random.default_rng(0)
    try:
        for _ in range(30):
            q = rng.uniform(kin.LOWER, kin.UPPER)
            for j, qj in zip(sim._arm, q, strict=True):
                pb.resetJointState(sim._robot, j, qj, 0.0, physicsClientId=sim._cid)
            state = sim.observe()["state"].astype(np.float64)
            np.testing.assert_allclose(state[:7], q, atol=1e-6)
            pos, quat = sim.ee_pose()
            p_fk, R_fk = kin.fk(state[:7])
            assert np.linalg.norm(pos - p_fk) < 0.005
            # q and -q are the same rotation
            assert abs(abs(float(quat @ kin.mat_to_quat(R_fk))) - 1.0) < 1e-4
    finally:
        sim.close()


def test_render_front_and_wrist() -> None:
    from tether.core.spec import CameraSpec
    from tether.sim.pybullet.backend import PybulletBackend
    from tether.sim.pybullet.config_pybullet import PybulletConfig

    cams = [
        CameraSpec(name="front", width=64, height=48),
        CameraSpec(name="wrist", width=32, height=32, fovy_deg=70.0),
    ]
    with PybulletBackend(PybulletConfig(cameras=cams, render_in_obs=True)) as sim:
        obs = sim.reset(0)
        assert obs["images/front"].shape == (48, 64, 3)
        assert obs["images/wrist"].shape == (32, 32, 3)
        assert obs["images/front"].dtype == np.uint8
        assert obs["images/front"].std() > 5  # not a blank frame


def _failed_seeds(task_type: str, control_hz: float, seeds: range) -> list[int]:
    sim, expert = _make(task_type, control_hz)
    try:
        if control_hz == 500.0:  # a 2 ms control period is one physics step
            assert sim.substeps == 1
        return [s for s in seeds if not expert_episode(sim, expert, s)]
    finally:
        sim.close()


# The README claims "expert 30/30 lift, 20/20 reach" on PyBullet and 100 % on 30 seeds at
# 50/100/500 Hz for the expert. Measured here: 30/30 for reach and lift at 50, 100 and 500 Hz;
# the slowest episode succeeds after 1.44 s of reach's 5 s limit and 2.93 s of lift's 8 s.
def test_expert_reach_succeeds_on_every_seed() -> None:
    assert _failed_seeds("reach", 100.0, range(20)) == []  # ~1.5 s


@pytest.mark.slow
def test_expert_lift_succeeds_on_every_seed() -> None:
    assert _failed_seeds("lift", 100.0, range(30)) == []  # ~13 s


@pytest.mark.slow
def test_expert_lift_at_500hz_succeeds_on_every_seed() -> None:
    """A 2 ms control period: one physics step per control step (~20 s for 30 episodes)."""
    assert _failed_seeds("lift", 500.0, range(30)) == []
