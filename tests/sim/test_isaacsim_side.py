"""Tether's side of the in-process Isaac Sim backend (``sim.type: isaacsim``) with a FAKE
adapter in place of Isaac's API: not the proof that Isaac Sim runs (it cannot here, no RTX
GPU; docs/isaac_sim.md says what is unverified), but the joint-name mapping onto the
articulation's DOF order, the control period in physics steps, the observation, the image
conversion and the errors."""

from __future__ import annotations

import numpy as np
import pytest

from tether.core import registry
from tether.core.errors import ConfigError, TetherError
from tether.core.spec import CameraSpec
from tether.sim.isaac.config_isaac import IsaacSimConfig
from tether.sim.isaac.isaacsim_backend import NOT_INSTALLED, IsaacSimBackend, isaac_missing

PANDA = registry.load("robot", "panda")
# the articulation's DOFs in an order of Isaac's own, with one Tether does not drive
DOFS = [
    "panda_finger_joint2",
    *reversed(PANDA.arm_joints),
    "panda_finger_joint1",
    "extra_dof",
]


class FakeAdapter:
    """Records what the backend asks; position targets are reached at the next step."""

    def __init__(self, dofs: list[str] = DOFS, image: np.ndarray | None = None) -> None:
        self.dof_names = list(dofs)
        self.q = np.zeros(len(dofs))
        self.target = np.zeros(len(dofs))
        self.poses: dict[str, np.ndarray] = {}
        self.cubes: dict[str, tuple[float, float]] = {}
        self.cameras: dict[str, tuple[int, int, float]] = {}
        self.steps: list[tuple[int, bool]] = []
        self.loaded: tuple[str, float, float] | None = None
        self.image = image

    def load(self, usd, physics_dt, rendering_dt):
        self.loaded = (usd, physics_dt, rendering_dt)

    def add_cube(self, name, side, mass):
        self.cubes[name] = (side, mass)
        self.poses[name] = np.r_[0.5, 0, side / 2, 1, 0, 0, 0]

    def add_camera(self, name, width, height, fovy_deg):
        self.cameras[name] = (width, height, fovy_deg)

    def start(self):
        pass

    def set_joint_positions(self, q):
        self.q = np.array(q, float)

    def command(self, q):
        self.target = np.array(q, float)

    def step(self, substeps, render):
        self.steps.append((substeps, render))
        self.q = self.target.copy()

    def joint_positions(self):
        return self.q.copy()

    def joint_velocities(self):
        return np.zeros_like(self.q)

    def body_pose(self, name):
        return self.poses[name][:3].copy(), self.poses[name][3:].copy()

    def set_body_pose(self, name, pos, quat):
        self.poses[name] = np.r_[pos, quat]

    def render(self, camera):
        w, h, _ = self.cameras[camera]
        return self.image if self.image is not None else np.full((h, w, 4), 0.5, np.float32)

    def close(self):
        pass


def _backend(adapter=None, **cfg):
    task = registry.build("task", registry.config_class("task", "lift")())
    cfg.setdefault("cameras", [CameraSpec(name="front", width=32, height=24, fps=30)])
    return IsaacSimBackend(IsaacSimConfig(**cfg), PANDA, task, adapter=adapter or FakeAdapter())


def test_actions_land_on_the_articulations_own_dof_order():
    sim = _backend()
    fake = sim.adapter
    assert fake.loaded == ("/Isaac/Robots/FrankaRobotics/FrankaPanda/franka.usd", 0.002, 0.01)
    action = np.r_[np.linspace(-0.5, 0.5, 7), 0.03]
    result = sim.step(action)
    by_name = dict(zip(DOFS, fake.target, strict=True))
    for j, name in enumerate(PANDA.arm_joints):
        assert by_name[name] == pytest.approx(action[j])
    assert by_name["panda_finger_joint1"] == by_name["panda_finger_joint2"] == 0.03
    assert by_name["extra_dof"] == 0.0
    # one control period of 10 ms is 5 physics steps of 2 ms, no render without render_in_obs
    assert fake.steps == [(5, False)]
    # and the observation reads them back in Tether's order (arm, then fingers)
    obs = result.observation
    np.testing.assert_allclose(obs["state"], np.r_[action[:7], 0.03, 0.03], atol=1e-6)
    assert obs.stamp_ns == 10_000_000 and sim.sim_time == pytest.approx(0.01)
    assert obs["env_state"].shape == (7,) and obs["ee_pose"].shape == (7,)


def test_a_reset_draws_what_mujoco_draws_for_the_seed():
    pytest.importorskip("mujoco")
    sim = _backend()
    mj_task = registry.build("task", registry.config_class("task", "lift")())
    mj = registry.build(
        "sim", registry.config_class("sim", "mujoco")(), robot="panda", task=mj_task
    )
    try:
        for seed in (3, 11):
            obs = sim.reset(seed)
            ref = mj.reset(seed)
            np.testing.assert_allclose(obs["state"][:7], ref["state"][:7], atol=1e-6)
            np.testing.assert_allclose(obs["env_state"][:3], ref["env_state"][:3], atol=1e-6)
            assert obs.stamp_ns == 0
    finally:
        mj.close()


def test_images_come_out_as_rgb_uint8_of_the_cameras_size():
    sim = _backend(render_in_obs=True)
    img = sim.render("front")
    assert img.shape == (24, 32, 3) and img.dtype == np.uint8 and int(img[0, 0, 0]) == 128
    assert sim.step(np.r_[np.zeros(7), 0.04]).observation["images/front"].shape == (24, 32, 3)
    assert sim.adapter.steps[-1] == (5, True)  # rendered on the control period's last step
    wrong = _backend(FakeAdapter(image=np.zeros((10, 10, 4), np.uint8)))
    with pytest.raises(TetherError, match="camera 'front'.*32x24"):
        wrong.render("front")


def test_errors_name_what_is_missing():
    with pytest.raises(ConfigError, match="no joint 'panda_joint3'"):
        _backend(FakeAdapter(dofs=[d for d in DOFS if d != "panda_joint3"]))
    with pytest.raises(ConfigError, match="robot 'ur5e' has no Isaac asset.*sim.usd"):
        task = registry.build("task", registry.config_class("task", "lift")())
        IsaacSimBackend(IsaacSimConfig(), registry.load("robot", "ur5e"), task, FakeAdapter())
    with pytest.raises(ConfigError, match="camera 'side'"):
        _backend(cameras=[CameraSpec(name="side", width=8, height=8)])


def test_without_isaac_sim_one_sentence_says_how_to_get_it():
    try:
        import isaacsim  # noqa: F401

        pytest.skip("Isaac Sim is importable here")
    except ImportError:
        pass
    assert isaac_missing() == NOT_INSTALLED
    assert "RTX GPU" in NOT_INSTALLED and "isaac_ros" in NOT_INSTALLED
    task = registry.build("task", registry.config_class("task", "lift")())
    with pytest.raises(ConfigError, match="Isaac Sim is not installed here"):
        IsaacSimBackend(IsaacSimConfig(), PANDA, task)
