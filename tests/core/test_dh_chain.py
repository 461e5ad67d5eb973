"""The generic DH chain (tether.core.kinematics): both conventions against closed-form arms,
the Jacobian against finite differences, IK, and the rotation helpers. Robot-free; every
registered arm's chain is checked against its simulator models in tests/sim/test_kinematics.py."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tether.core.kinematics import (
    DHChain,
    down_rotation,
    mat_to_quat,
    quat_to_mat,
    rotation_error,
)

L1, L2 = 0.4, 0.3
PI2 = math.pi / 2

# a planar two-link arm (z up, both joints about z), in each convention
PLANAR = {
    "standard": DHChain(
        convention="standard",
        a=(L1, L2),
        d=(0.0, 0.0),
        alpha=(0.0, 0.0),
        lower=(-3.0, -3.0),
        upper=(3.0, 3.0),
    ),
    "modified": DHChain(
        convention="modified",
        a=(0.0, L1),
        d=(0.0, 0.0),
        alpha=(0.0, 0.0),
        lower=(-3.0, -3.0),
        upper=(3.0, 3.0),
        tool_xyz=(L2, 0.0, 0.0),
    ),
}

# six joints with twists, offsets and a full tool transform (a UR-like standard chain and a
# Panda-like modified one): exercises every term of both conventions
GENERAL = {
    "standard": DHChain(
        convention="standard",
        a=(0.0, -0.425, -0.392, 0.0, 0.0, 0.0),
        d=(0.163, 0.0, 0.0, 0.133, 0.1, 0.1),
        alpha=(PI2, 0.0, 0.0, PI2, -PI2, 0.0),
        offset=(0.1, -PI2, 0.0, -PI2, 0.0, 0.3),
        lower=(-3.0,) * 6,
        upper=(3.0,) * 6,
        tool_xyz=(0.01, -0.02, 0.05),
        tool_yaw=0.4,
        tool_z=0.15,
    ),
    "modified": DHChain(
        convention="modified",
        a=(0.0, 0.0, 0.0, 0.0825, -0.0825, 0.088),
        d=(0.333, 0.0, 0.316, 0.0, 0.384, 0.0),
        alpha=(0.0, -PI2, PI2, PI2, -PI2, PI2),
        offset=(0.0, 0.2, 0.0, 0.0, -0.1, 0.0),
        lower=(-2.5,) * 6,
        upper=(2.5,) * 6,
        tool_xyz=(0.0, 0.03, 0.107),
        tool_yaw=-math.pi / 4,
        tool_z=0.1034,
    ),
}


@pytest.mark.parametrize("convention", ["standard", "modified"])
def test_planar_arm_matches_closed_form(convention: str) -> None:
    kin = PLANAR[convention].model()
    rng = np.random.default_rng(0)
    for _ in range(20):
        q1, q2 = rng.uniform(-3.0, 3.0, 2)
        p, R = kin.fk(np.array([q1, q2]))
        want = [
            L1 * math.cos(q1) + L2 * math.cos(q1 + q2),
            L1 * math.sin(q1) + L2 * math.sin(q1 + q2),
            0,
        ]
        np.testing.assert_allclose(p, want, atol=1e-12)
        c, s = math.cos(q1 + q2), math.sin(q1 + q2)
        np.testing.assert_allclose(R, [[c, -s, 0], [s, c, 0], [0, 0, 1]], atol=1e-12)


def test_offset_and_tool_yaw() -> None:
    """``offset`` adds to the joint angle; ``tool_yaw`` turns the TCP frame about its z and
    ``tool_z`` moves along the turned z (here the same as the unturned one)."""
    base = PLANAR["standard"]
    shifted = base.model_copy(update={"offset": (0.3, -0.2)}).model()
    q = np.array([0.5, 0.4])
    np.testing.assert_allclose(shifted.fk(q)[0], base.model().fk(q + [0.3, -0.2])[0], atol=1e-12)
    tooled = base.model_copy(update={"tool_yaw": 0.7, "tool_z": 0.05}).model()
    p0, R0 = base.model().fk(q)
    p1, R1 = tooled.fk(q)
    np.testing.assert_allclose(p1, p0 + [0.0, 0.0, 0.05], atol=1e-12)
    np.testing.assert_allclose(rotation_error(R1, R0), [0.0, 0.0, 0.7], atol=1e-12)


@pytest.mark.parametrize("convention", ["standard", "modified"])
def test_jacobian_matches_finite_differences(convention: str) -> None:
    kin = GENERAL[convention].model()
    rng = np.random.default_rng(1)
    eps = 1e-6
    for _ in range(10):
        q = rng.uniform(kin.lower, kin.upper)
        J, p, R = kin.jacobian(q)
        np.testing.assert_array_equal(p, kin.fk(q)[0])
        for i in range(kin.n):
            dq = np.zeros(kin.n)
            dq[i] = eps
            p2, R2 = kin.fk(q + dq)
            np.testing.assert_allclose((p2 - p) / eps, J[:3, i], atol=1e-5)
            np.testing.assert_allclose(rotation_error(R2, R) / eps, J[3:, i], atol=1e-5)


@pytest.mark.parametrize("convention", ["standard", "modified"])
def test_frames_lie_on_the_joint_axes(convention: str) -> None:
    """``frames``: each origin's axis passes through the next-link geometry: turning joint i
    moves the TCP on a circle about (origin_i, axis_i)."""
    kin = GENERAL[convention].model()
    q = np.random.default_rng(2).uniform(kin.lower, kin.upper)
    origins, axes, p, _ = kin.frames(q)
    assert origins.shape == (kin.n, 3) and axes.shape == (kin.n, 3)
    np.testing.assert_allclose(np.linalg.norm(axes, axis=1), 1.0, atol=1e-12)
    for i in range(kin.n):
        dq = np.zeros(kin.n)
        dq[i] = 0.5
        p2 = kin.fk(q + dq)[0]
        # distance to the axis is unchanged, and so is the position along it
        for pt in (p, p2):
            assert np.dot(pt - origins[i], axes[i]) == pytest.approx(
                np.dot(p - origins[i], axes[i]), abs=1e-9
            )
        r1 = np.linalg.norm(np.cross(axes[i], p - origins[i]))
        r2 = np.linalg.norm(np.cross(axes[i], p2 - origins[i]))
        assert r1 == pytest.approx(r2, abs=1e-9)


@pytest.mark.parametrize("convention", ["standard", "modified"])
def test_ik_converges_to_reachable_poses(convention: str) -> None:
    kin = GENERAL[convention].model()
    rng = np.random.default_rng(3)
    solved = 0
    for _ in range(20):
        q_true = rng.uniform(kin.lower + 0.5, kin.upper - 0.5)
        pos, rot = kin.fk(q_true)
        q0 = q_true + rng.uniform(-0.3, 0.3, kin.n)  # a nearby start (the previous pose)
        q, ok = kin.ik(q0, pos, rot)
        p, R = kin.fk(q)
        if ok:
            solved += 1
            assert np.linalg.norm(p - pos) < 1e-3
            assert np.linalg.norm(rotation_error(rot, R)) < 1e-2
        assert np.all(q >= kin.lower) and np.all(q <= kin.upper)
    assert solved == 20


def test_dls_step_moves_toward_the_goal_and_respects_the_clip() -> None:
    kin = GENERAL["standard"].model()
    q = np.full(6, 0.3)
    p, R = kin.fk(q)
    goal = p + np.array([0.05, -0.03, 0.02])
    dq = kin.dls_step(q, goal, R, max_lin=0.01, max_ang=0.01)
    p2, _ = kin.fk(q + dq)
    # at most the 1 cm clip (less: damping), in the goal's direction
    assert 0.005 < np.linalg.norm(p2 - p) < 0.0105
    assert np.dot(p2 - p, goal - p) > 0.95 * np.linalg.norm(p2 - p) * np.linalg.norm(goal - p)
    with pytest.raises(ValueError, match="6 joint positions"):
        kin.fk(np.zeros(5))


def test_description_lengths_are_validated() -> None:
    with pytest.raises(ValueError, match="d needs 2 elements"):
        DHChain(
            convention="standard", a=(0.1, 0.2), d=(0.0,), alpha=(0, 0), lower=(0, 0), upper=(1, 1)
        )


def test_quaternion_helpers_round_trip() -> None:
    rng = np.random.default_rng(4)
    for _ in range(20):
        q = rng.normal(size=4)
        q /= np.linalg.norm(q)
        q = q if q[0] >= 0 else -q
        np.testing.assert_allclose(mat_to_quat(quat_to_mat(q)), q, atol=1e-9)


def test_rotation_error_including_half_turns() -> None:
    rng = np.random.default_rng(5)
    for _ in range(20):
        w = rng.normal(size=3)
        w *= rng.uniform(0.0, 3.0) / np.linalg.norm(w)
        K = np.array([[0, -w[2], w[1]], [w[2], 0, -w[0]], [-w[1], w[0], 0]])
        th = np.linalg.norm(w)
        Rw = np.eye(3) + math.sin(th) / th * K + (1 - math.cos(th)) / th**2 * (K @ K)
        np.testing.assert_allclose(rotation_error(Rw, np.eye(3)), w, atol=1e-9)
    flip = np.diag([1.0, -1.0, -1.0])  # pi about x
    assert abs(abs(rotation_error(flip, np.eye(3))[0]) - math.pi) < 1e-9


def test_down_rotation_points_the_tool_down() -> None:
    for yaw in (-1.0, 0.0, 0.7):
        R = down_rotation(yaw)
        np.testing.assert_allclose(R @ R.T, np.eye(3), atol=1e-12)
        assert np.linalg.det(R) == pytest.approx(1.0)
        np.testing.assert_allclose(R[:, 2], [0, 0, -1])
        np.testing.assert_allclose(R[:, 0], [math.cos(yaw), math.sin(yaw), 0], atol=1e-12)
