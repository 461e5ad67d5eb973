"""Every registered arm's kinematic chain (its description's DH table) is the TCP its
simulator models have: the MuJoCo scene's TCP site and the PyBullet model's TCP link frame +
offset, over random joint positions; and it reaches every top-down grasp and reach target of
the table-top tasks (what the scripted expert and teleop need)."""

from __future__ import annotations

import numpy as np
import pytest
from arm_cases import arm, arm_params

from tether.core.kinematics import down_rotation, mat_to_quat, quat_to_mat, rotation_error
from tether.sim.tasks.config_tasks import LiftConfig, ReachConfig

ARMS = arm_params()


def _random_q(robot: str, rng: np.random.Generator) -> np.ndarray:
    kin = arm(robot).kinematics
    return rng.uniform(kin.lower, kin.upper)


@pytest.mark.mujoco
@pytest.mark.parametrize("robot", ARMS)
def test_chain_matches_the_mujoco_tcp_site(robot: str) -> None:
    mujoco = pytest.importorskip("mujoco")
    from tether.sim.mujoco.backend import MujocoBackend
    from tether.sim.mujoco.config_mujoco import MujocoConfig

    desc = arm(robot)
    sim = MujocoBackend(MujocoConfig(cameras=[]), desc)
    rng = np.random.default_rng(0)
    try:
        for _ in range(50):
            q = _random_q(robot, rng)
            # teleport the joints: write qpos and run forward kinematics only
            sim.data.qpos[sim._qadr[: desc.dof]] = q
            mujoco.mj_forward(sim.model, sim.data)
            pos, quat = sim.ee_pose()
            p, R = desc.kinematics.fk(q)
            assert np.linalg.norm(p - pos) < 1e-3, (q, p, pos)
            assert np.linalg.norm(rotation_error(quat_to_mat(quat), R)) < 1e-3
    finally:
        sim.close()


@pytest.mark.pybullet
@pytest.mark.parametrize("robot", ARMS)
def test_chain_matches_the_pybullet_tcp(robot: str) -> None:
    """The PyBullet TCP (tcp_link frame + tcp_offset along its z) is the chain's TCP; a URDF
    may round its link offsets differently from the maker's DH table (5 mm)."""
    pb = pytest.importorskip("pybullet")
    from tether.sim.pybullet.backend import PybulletBackend
    from tether.sim.pybullet.config_pybullet import PybulletConfig

    desc = arm(robot)
    rng = np.random.default_rng(0)
    with PybulletBackend(PybulletConfig(cameras=[]), desc) as sim:
        for _ in range(30):
            q = _random_q(robot, rng)
            for j, qj in zip(sim._arm, q, strict=True):
                pb.resetJointState(sim._robot, j, qj, 0.0, physicsClientId=sim._cid)
            state = sim.observe()["state"].astype(np.float64)
            np.testing.assert_allclose(state[: desc.dof], q, atol=1e-6)
            pos, quat = sim.ee_pose()
            p_fk, R_fk = desc.kinematics.fk(state[: desc.dof])
            assert np.linalg.norm(pos - p_fk) < 0.005, (q, p_fk, pos)
            # q and -q are the same rotation
            assert abs(abs(float(quat @ mat_to_quat(R_fk))) - 1.0) < 1e-4


@pytest.mark.parametrize("robot", ARMS)
def test_description_limits_match_the_chain_and_spec(robot: str) -> None:
    desc = arm(robot)
    spec = desc.spec()
    np.testing.assert_array_equal(desc.kinematics.lower, desc.lower)
    np.testing.assert_array_equal(desc.kinematics.upper, desc.upper)
    assert [j.lower for j in spec.joints[: desc.dof]] == list(desc.lower)
    assert spec.action.dim == desc.dof + 1
    assert len(spec.state_names) == desc.dof + len(desc.gripper.joints)
    assert spec.action.low[-1] == desc.gripper.lower and spec.action.high[-1] == desc.gripper.upper


@pytest.mark.parametrize("robot", ARMS)
def test_home_pose_points_the_tool_down_above_the_table(robot: str) -> None:
    """The expert starts from home: TCP above the table, in front of the base, tool down."""
    desc = arm(robot)
    p, R = desc.kinematics.fk(np.asarray(desc.home))
    assert 0.15 < p[2] < 0.8 and 0.2 < p[0] < 0.8, p
    assert R[2, 2] < -0.95, R  # tool z points down


@pytest.mark.parametrize("robot", ARMS)
def test_ik_reaches_every_top_down_grasp_over_the_table(robot: str) -> None:
    """The corners and centre of lift's cube range, at its yaw extremes, from home."""
    desc = arm(robot)
    c = LiftConfig()
    home = np.asarray(desc.home)
    for x in (c.x_range[0], sum(c.x_range) / 2, c.x_range[1]):
        for y in (c.y_range[0], 0.0, c.y_range[1]):
            for yaw in (c.yaw_range[0], 0.0, c.yaw_range[1]):
                goal = np.array([x, y, c.rest_z + desc.grasp_offset])
                _, ok = desc.kinematics.ik(home, goal, down_rotation(yaw))
                assert ok, (x, y, yaw)


@pytest.mark.parametrize("robot", ARMS)
def test_ik_reaches_the_corners_of_reach_targets(robot: str) -> None:
    desc = arm(robot)
    c = ReachConfig()
    home = np.asarray(desc.home)
    for x in c.x_range:
        for y in c.y_range:
            for z in c.z_range:
                _, ok = desc.kinematics.ik(home, np.array([x, y, z]), down_rotation(0.0))
                assert ok, (x, y, z)
