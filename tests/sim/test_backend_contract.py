"""Every registered sim backend honours the SimBackend contract (mujoco_playground style:
adding a backend to the registry adds it to this test)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from tether.core import registry
from tether.core.protocols import SimBackend
from tether.core.types import Observation, StepResult

# the Python package each backend needs; a backend whose package is missing is skipped
DEPENDENCIES = {"mujoco": "mujoco", "pybullet": "pybullet"}
MARKS = {"mujoco": [pytest.mark.mujoco], "pybullet": [pytest.mark.pybullet]}
BACKENDS = [pytest.param(n, marks=MARKS.get(n, [])) for n in registry.available("sim")]


def _build(name: str, control_hz: float | None = None) -> SimBackend:
    if name in DEPENDENCIES:
        pytest.importorskip(DEPENDENCIES[name])
    cfg = registry.config_class("sim", name)()
    if control_hz is not None:
        cfg = cfg.model_copy(update={"control_hz": control_hz})
    task_cfg = registry.config_class("task", "lift")()
    task = registry.build("task", task_cfg)
    return registry.build("sim", cfg, robot="panda", task=task)


@pytest.fixture(params=BACKENDS)
def sim(request: pytest.FixtureRequest) -> Iterator[SimBackend]:
    backend = _build(request.param)
    yield backend
    backend.close()


def _check_obs(obs: Observation, sim: SimBackend) -> None:
    n_state = len(sim.spec.state_names)
    assert isinstance(obs, Observation)
    assert obs["state"].shape == (n_state,) and obs["state"].dtype == np.float32
    assert obs["env_state"].shape == (7,) and obs["env_state"].dtype == np.float32
    if "velocity" in obs:
        assert obs["velocity"].shape == (n_state,) and obs["velocity"].dtype == np.float32
    if "ee_pose" in obs:
        assert obs["ee_pose"].shape == (7,) and obs["ee_pose"].dtype == np.float32
    for key, value in obs.items():
        assert np.all(np.isfinite(value)), key
    assert obs.stamp_ns == round(sim.sim_time * 1e9)


def test_is_a_sim_backend(sim: SimBackend) -> None:
    assert isinstance(sim, SimBackend)
    assert sim.spec.name == "panda"


def test_reset_step_observe(sim: SimBackend) -> None:
    obs = sim.reset(seed=3)
    _check_obs(obs, sim)
    assert sim.sim_time == pytest.approx(0.0)
    action = obs["state"][: sim.spec.action.dim].copy()
    for k in range(1, 4):
        result = sim.step(action)
        assert isinstance(result, StepResult)
        assert isinstance(result.reward, float)
        assert isinstance(result.terminated, bool) and isinstance(result.truncated, bool)
        assert sim.sim_time == pytest.approx(k / sim.spec.control_hz, abs=1e-9)
        _check_obs(result.observation, sim)
    _check_obs(sim.observe(), sim)
    np.testing.assert_array_equal(sim.observe()["state"], result.observation["state"])


def test_reset_is_deterministic(sim: SimBackend) -> None:
    a = sim.reset(seed=7)
    sim.step(a["state"][: sim.spec.action.dim])
    b = sim.reset(seed=7)
    np.testing.assert_allclose(a["env_state"], b["env_state"], atol=1e-6)
    np.testing.assert_allclose(a["state"], b["state"], atol=1e-6)
    c = sim.reset(seed=8)
    assert not np.allclose(a["env_state"], c["env_state"])


def test_render(sim: SimBackend) -> None:
    sim.reset(seed=0)
    assert sim.spec.cameras, "default config should expose at least one camera"
    for cam in sim.spec.cameras:
        img = sim.render(cam.name)
        assert img.shape == (cam.height, cam.width, 3)
        assert img.dtype == np.uint8


def test_body_pose_round_trip(sim: SimBackend) -> None:
    sim.reset(seed=0)
    pos = np.array([0.45, -0.1, 0.025])
    yaw = 0.3
    quat = np.array([np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2)])
    sim.set_body_pose("cube", pos, quat)
    got_pos, got_quat = sim.body_pose("cube")
    np.testing.assert_allclose(got_pos, pos, atol=1e-6)
    # q and -q are the same rotation
    assert abs(abs(float(np.dot(got_quat, quat))) - 1.0) < 1e-6
    env = sim.observe()["env_state"]
    np.testing.assert_allclose(env[:3], pos, atol=1e-5)


def test_ee_pose(sim: SimBackend) -> None:
    sim.reset(seed=0)
    pos, quat = sim.ee_pose()
    assert pos.shape == (3,) and quat.shape == (4,)
    assert abs(np.linalg.norm(quat) - 1.0) < 1e-5
    assert 0.05 < pos[2] < 1.0  # above the table, within reach


@pytest.mark.parametrize("name", BACKENDS)
def test_control_rate(name: str) -> None:
    sim = _build(name, control_hz=500.0)
    try:
        obs = sim.reset(seed=1)
        for _ in range(5):
            sim.step(obs["state"][: sim.spec.action.dim])
        assert sim.sim_time == pytest.approx(5 / 500.0, abs=1e-9)
    finally:
        sim.close()


@pytest.mark.parametrize("name", BACKENDS)
def test_instances_coexist(name: str) -> None:
    """Two instances in one process keep separate state and each renders."""
    a, b = _build(name), _build(name)
    try:
        oa, ob = a.reset(seed=1), b.reset(seed=2)
        assert not np.allclose(oa["env_state"], ob["env_state"])
        a.step(oa["state"][: a.spec.action.dim])
        assert a.sim_time > 0 and b.sim_time == pytest.approx(0.0)
        for sim in (a, b):
            cam = sim.spec.cameras[0]
            assert sim.render(cam.name).shape == (cam.height, cam.width, 3)
    finally:
        a.close()
        b.close()
