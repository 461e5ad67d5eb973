"""The MuJoCo arm scene's camera shows the scene, for every registered arm: a lit picture, and
the red cube where the cube is (a black or frozen frame fails)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from arm_cases import arm, arm_params

pytestmark = pytest.mark.mujoco
pytest.importorskip("mujoco")


def red_pixels(img: np.ndarray) -> np.ndarray:
    """Mask (H, W) of the cube's colour: red well above green and blue."""
    i = img.astype(np.int32)
    return (i[..., 0] > 80) & (i[..., 0] > 2 * i[..., 1]) & (i[..., 0] > 2 * i[..., 2])


@pytest.fixture(params=arm_params())
def sim(request: pytest.FixtureRequest) -> Iterator[Any]:
    from tether.sim.mujoco.backend import MujocoBackend
    from tether.sim.mujoco.config_mujoco import MujocoConfig
    from tether.sim.tasks.lift import LiftTask

    backend = MujocoBackend(MujocoConfig(), arm(request.param), task=LiftTask())
    backend.reset(0)
    yield backend
    backend.close()


def test_front_camera_sees_table_and_cube(sim: Any) -> None:
    """Measured at 96x96 (Panda): std 66, the cube 15-27 red pixels, none once it is out of
    view."""
    cam = sim.spec.cameras[0]
    _, quat = sim.body_pose("cube")
    centres = []
    for pos in ([0.62, -0.18, 0.025], [0.40, 0.18, 0.025]):  # two corners of the reset range
        sim.set_body_pose("cube", np.array(pos), quat)
        img = sim.render(cam.name)
        assert img.shape == (cam.height, cam.width, 3) and img.dtype == np.uint8
        assert float(img.std()) > 20.0  # not blank: table, floor, arm
        mask = red_pixels(img)
        assert mask.sum() >= 5, mask.sum()
        ys, xs = np.nonzero(mask)
        centres.append(np.array([xs.mean(), ys.mean()]))
    # the cube moved 0.43 m across the table: its picture moved with it (measured 17 px)
    assert np.linalg.norm(centres[0] - centres[1]) > 5.0, centres
    sim.set_body_pose("cube", np.array([0.5, 0.0, -2.0]), quat)  # below the floor
    assert red_pixels(sim.render(cam.name)).sum() == 0


def test_frame_follows_the_arm(sim: Any) -> None:
    """Commanding the arm elsewhere changes the picture (measured, Panda: 8.7 % of the
    pixels); the same state renders the same frame."""
    cam = sim.spec.cameras[0]
    first = sim.render(cam.name).copy()
    np.testing.assert_array_equal(sim.render(cam.name), first)  # same state, same frame
    target = sim.observe()["state"][: sim.spec.action.dim].copy()
    target[0] += 0.8  # swing the base joint
    for _ in range(100):
        sim.step(target)
    moved = sim.render(cam.name)
    changed = np.abs(moved.astype(np.int32) - first).sum(axis=-1) > 30
    assert changed.mean() > 0.01, changed.mean()
