"""Every arm's MuJoCo scene file states the shared table-top scene (tether.sim.scene), the
numbers PyBullet builds it from: same table, floor, task bodies, friction and front camera, so
a task or an expert sees the same world on both engines whatever the arm.

A new arm's scene needs: geoms ``table``, ``table_leg`` and ``floor``, a free body ``cube``
with a box geom ``cube``, a mocap body ``target`` with a sphere geom ``target`` and a camera
``front``, at the poses and sizes below."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from arm_cases import arm, arm_params

from tether.sim import scene

pytestmark = pytest.mark.mujoco

ATOL = 1e-6


def _model(robot: str) -> Any:
    mujoco = pytest.importorskip("mujoco")
    desc = arm(robot)
    return mujoco, mujoco.MjModel.from_xml_path(str(desc.asset(desc.mujoco.scene)))


def _id(mujoco: Any, m: Any, kind: str, name: str, robot: str) -> int:
    i = mujoco.mj_name2id(m, getattr(mujoco.mjtObj, f"mjOBJ_{kind.upper()}"), name)
    assert i >= 0, f"robot '{robot}': its MuJoCo scene has no {kind} '{name}'"
    return int(i)


@pytest.mark.parametrize("robot", arm_params())
def test_table_and_floor(robot: str) -> None:
    mujoco, m = _model(robot)
    table = _id(mujoco, m, "geom", "table", robot)
    assert m.geom_type[table] == mujoco.mjtGeom.mjGEOM_BOX
    np.testing.assert_allclose(m.geom_size[table], scene.TABLE_HALF, atol=ATOL)
    np.testing.assert_allclose(m.geom_pos[table], scene.TABLE_POS, atol=ATOL)
    np.testing.assert_allclose(m.geom_friction[table], scene.TABLE_FRICTION, atol=ATOL)
    leg = _id(mujoco, m, "geom", "table_leg", robot)
    np.testing.assert_allclose(m.geom_size[leg], scene.LEG_HALF, atol=ATOL)
    np.testing.assert_allclose(m.geom_pos[leg], scene.LEG_POS, atol=ATOL)
    floor = _id(mujoco, m, "geom", "floor", robot)
    assert m.geom_type[floor] == mujoco.mjtGeom.mjGEOM_PLANE
    assert m.geom_pos[floor][2] == pytest.approx(scene.FLOOR_Z)


@pytest.mark.parametrize("robot", arm_params())
def test_task_bodies(robot: str) -> None:
    mujoco, m = _model(robot)
    cube = _id(mujoco, m, "body", "cube", robot)
    jnt = m.body_jntadr[cube]
    assert jnt >= 0 and m.jnt_type[jnt] == mujoco.mjtJoint.mjJNT_FREE
    np.testing.assert_allclose(m.body_pos[cube], scene.CUBE_POS, atol=ATOL)
    assert m.body_mass[cube] == pytest.approx(scene.CUBE_MASS)
    geom = _id(mujoco, m, "geom", "cube", robot)
    assert m.geom_type[geom] == mujoco.mjtGeom.mjGEOM_BOX
    np.testing.assert_allclose(m.geom_size[geom], (scene.CUBE_HALF,) * 3, atol=ATOL)
    np.testing.assert_allclose(m.geom_friction[geom], scene.GRIP_FRICTION, atol=ATOL)

    target = _id(mujoco, m, "body", "target", robot)
    assert m.body_mocapid[target] >= 0
    np.testing.assert_allclose(m.body_pos[target], scene.TARGET_POS, atol=ATOL)
    geom = _id(mujoco, m, "geom", "target", robot)
    assert m.geom_type[geom] == mujoco.mjtGeom.mjGEOM_SPHERE
    assert m.geom_size[geom][0] == pytest.approx(scene.TARGET_RADIUS)
    assert m.geom_contype[geom] == 0 and m.geom_conaffinity[geom] == 0  # visual only


@pytest.mark.parametrize("robot", arm_params())
def test_world_cameras(robot: str) -> None:
    mujoco, m = _model(robot)
    for name, cam in scene.WORLD_CAMERAS.items():
        c = _id(mujoco, m, "camera", name, robot)
        assert m.cam_bodyid[c] == 0, f"camera '{name}' must be fixed in the world"
        np.testing.assert_allclose(m.cam_pos[c], cam.pos, atol=ATOL)
        x = np.asarray(cam.x_axis) / np.linalg.norm(cam.x_axis)
        y = np.asarray(cam.y_axis) / np.linalg.norm(cam.y_axis)
        R = np.zeros(9)
        mujoco.mju_quat2Mat(R, m.cam_quat[c])
        R = R.reshape(3, 3)
        np.testing.assert_allclose(R[:, 0], x, atol=1e-3)
        np.testing.assert_allclose(R[:, 1], y, atol=1e-3)
