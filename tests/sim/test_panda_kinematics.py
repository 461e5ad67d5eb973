"""The numpy Panda kinematics: agrees with the MuJoCo model, Jacobian and IK are right."""

from __future__ import annotations

import numpy as np
import pytest

from tether.sim.robots import panda_kinematics as kin
from tether.sim.robots.panda import HOME_ARM, panda_spec


def _random_q(rng: np.random.Generator) -> np.ndarray:
    return rng.uniform(kin.LOWER, kin.UPPER)


@pytest.mark.mujoco
def test_fk_matches_mujoco_tcp_site() -> None:
    mujoco = pytest.importorskip("mujoco")
    from tether.sim.mujoco.backend import MujocoBackend
    from tether.sim.mujoco.config_mujoco import MujocoConfig

    sim = MujocoBackend(MujocoConfig())
    rng = np.random.default_rng(0)
    try:
        for _ in range(50):
            q = _random_q(rng)
            # teleport the joints: write qpos and run forward kinematics only
            sim.data.qpos[sim._qadr[:7]] = q
            mujoco.mj_forward(sim.model, sim.data)
            pos, quat = sim.ee_pose()
            p, R = kin.fk(q)
            assert np.linalg.norm(p - pos) < 1e-3
            assert np.linalg.norm(kin.rotation_error(kin.quat_to_mat(quat), R)) < 1e-3
    finally:
        sim.close()


def test_spec_limits_match_kinematics() -> None:
    spec = panda_spec()
    lower = [j.lower for j in spec.joints[:7]]
    upper = [j.upper for j in spec.joints[:7]]
    np.testing.assert_allclose(lower, kin.LOWER)
    np.testing.assert_allclose(upper, kin.UPPER)
    assert spec.action.dim == 8 and len(spec.state_names) == 9


def test_jacobian_matches_finite_differences() -> None:
    rng = np.random.default_rng(1)
    eps = 1e-6
    for _ in range(10):
        q = _random_q(rng)
        J, p, R = kin.jacobian(q)
        for i in range(7):
            dq = np.zeros(7)
            dq[i] = eps
            p2, R2 = kin.fk(q + dq)
            np.testing.assert_allclose((p2 - p) / eps, J[:3, i], atol=1e-5)
            np.testing.assert_allclose(kin.rotation_error(R2, R) / eps, J[3:, i], atol=1e-5)


def test_ik_converges_to_reachable_poses() -> None:
    rng = np.random.default_rng(2)
    for _ in range(20):
        q_true = np.clip(np.asarray(HOME_ARM) + rng.uniform(-0.6, 0.6, 7), kin.LOWER, kin.UPPER)
        pos, rot = kin.fk(q_true)
        q, ok = kin.ik(np.asarray(HOME_ARM), pos, rot)
        assert ok
        p, R = kin.fk(q)
        assert np.linalg.norm(p - pos) < 1e-3
        assert np.linalg.norm(kin.rotation_error(rot, R)) < 1e-2
        assert np.all(q >= kin.LOWER) and np.all(q <= kin.UPPER)


def test_ik_top_down_grasps_over_the_table() -> None:
    for x in (0.4, 0.5, 0.62):
        for y in (-0.18, 0.0, 0.18):
            for yaw in (-0.78, 0.0, 0.78):
                q, ok = kin.ik(
                    np.asarray(HOME_ARM), np.array([x, y, 0.025]), kin.down_rotation(yaw)
                )
                assert ok, (x, y, yaw)


def test_quaternion_helpers_round_trip() -> None:
    rng = np.random.default_rng(3)
    for _ in range(20):
        q = rng.normal(size=4)
        q /= np.linalg.norm(q)
        q = q if q[0] >= 0 else -q
        np.testing.assert_allclose(kin.mat_to_quat(kin.quat_to_mat(q)), q, atol=1e-9)
