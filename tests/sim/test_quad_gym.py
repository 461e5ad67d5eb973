"""tether.sim.make_env: the gymnasium view of a backend + task. A drone world presents itself
through its LearningView exactly as BatchedHoverEnv; other kinds get the generic view."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tether.core.config import load_config
from tether.sim.quadrotor.batched_env import BatchedHoverEnv
from tether.sim.tasks.config_quad_tasks import HoverConfig

REPO = Path(__file__).resolve().parents[2]
HOVER_YAML = REPO / "configs/experiments/quad_pid_hover.yaml"
ENGINES = [
    pytest.param("pybullet", marks=pytest.mark.pybullet),
    pytest.param("mujoco", marks=pytest.mark.mujoco),
]

gym = pytest.importorskip("gymnasium")


def _env(engine: str, *overrides: str):  # type: ignore[no-untyped-def]
    pytest.importorskip(engine)
    from tether.sim import make_env

    return make_env(HOVER_YAML, overrides=[f"sim.type={engine}", "sim.cameras=[]", *overrides])


@pytest.mark.parametrize("engine", ENGINES)
def test_observation_and_action_match_batched_env(engine: str) -> None:
    env = _env(engine)
    try:
        assert env.observation_space.shape == (18,) and env.action_space.shape == (4,)
        assert env.action_space.low.min() == -1.0 and env.action_space.high.max() == 1.0
        obs, info = env.reset(seed=5)
        ref = BatchedHoverEnv(1, seed=5)
        ref_obs = ref.reset()
        assert info["seed"] == 5
        np.testing.assert_allclose(obs, ref_obs[0], atol=1e-6)
        rng = np.random.default_rng(0)
        wide = rng.uniform(-1.5, 1.5, (20, 4))
        wide[3, 1] = np.nan
        for a in wide:  # the mapping itself, out-of-range and NaN included
            np.testing.assert_array_equal(env.to_backend_action(a), ref.action_to_rpm(a[None])[0])
        actions = rng.uniform(-0.2, 0.2, (20, 4))
        actions[3, 1] = np.nan
        for a in actions:
            obs, reward, terminated, truncated, _ = env.step(a)
            ref_obs, ref_reward, *_ = ref.step(a[None])
            # engine (semi-implicit Euler) vs numpy RK4 over 0.2 s of random rotor commands
            np.testing.assert_allclose(obs, ref_obs[0], atol=5e-3)
            assert reward == pytest.approx(float(ref_reward[0]), abs=5e-3)
            assert obs.dtype == np.float32 and not terminated and not truncated
    finally:
        env.close()


@pytest.mark.parametrize("engine", ENGINES)
def test_crash_terminates_and_time_limit_truncates(engine: str) -> None:
    env = _env(engine, "task.max_duration_s=0.05")
    try:
        env.reset(seed=1)
        flags = [env.step(np.zeros(4))[2:4] for _ in range(5)]
        assert flags[:4] == [(False, False)] * 4 and flags[4] == (False, True)
        env.reset(seed=1)
    finally:
        env.close()
    env = _env(engine)
    try:
        env.reset(seed=1)
        for _ in range(300):  # rotors at half hover speed: it falls to the floor
            _, _, terminated, truncated, info = env.step(-np.ones(4))
            if terminated:
                break
        assert terminated and not truncated and info["failed"] and not info["is_success"]
    finally:
        env.close()


@pytest.mark.parametrize("engine", ENGINES)
def test_passes_gymnasium_checker(engine: str) -> None:
    from gymnasium.utils.env_checker import check_env

    env = _env(engine)
    try:
        check_env(env, skip_render_check=True)
    finally:
        env.close()


@pytest.mark.pybullet
def test_task_config_on_a_backend_and_other_modes() -> None:
    pytest.importorskip("pybullet")
    from tether.core import registry
    from tether.sim import make_env

    cfg = registry.config_class("backend", "pybullet/quadcopter")(
        cameras=[], quadrotor={"action_mode": "thrust_rates", "num_drones": 2}
    )
    backend = registry.build("sim", cfg, robot="crazyflie", task=None)
    env = make_env(HoverConfig(target=(0.0, 0.0, 1.5), random_start=False), backend)
    try:
        assert env.observation_space.shape == (36,) and env.action_space.shape == (8,)
        obs, _ = env.reset(seed=0)
        np.testing.assert_allclose(obs.reshape(2, 18)[:, 0:3], 0.0, atol=1e-6)  # on target
        # thrust_rates is linear onto [low, high]: -1 -> 0 N and -10 rad/s, +1 -> max
        low, high = env.to_backend_action(-np.ones(8)), env.to_backend_action(np.ones(8))
        np.testing.assert_allclose(low[:4], [0.0, -10.0, -10.0, -10.0], atol=1e-6)
        np.testing.assert_allclose(high[:4], backend.spec.action.high[:4], rtol=1e-6)
    finally:
        env.close()


@pytest.mark.mujoco
def test_arm_experiment() -> None:
    pytest.importorskip("mujoco")
    from tether.sim import make_env

    env = make_env(
        REPO / "configs/experiments/panda_reach_expert.yaml", overrides=["sim.cameras=[]"]
    )
    try:
        obs, _ = env.reset(seed=0)
        assert obs.shape == (9 + 7,)  # joint positions + the target's pose
        spec = env.backend.spec
        np.testing.assert_allclose(env.to_backend_action(-np.ones(8)), spec.action.low, atol=1e-6)
        obs, reward, *_ = env.step(np.zeros(8))
        assert np.isfinite(reward) and obs.shape == (16,)
    finally:
        env.close()


@pytest.mark.pybullet
def test_mobile_base_experiment_gets_the_generic_view() -> None:
    """A base is no LearningView: observation concat(state, env_state), actions linear."""
    pytest.importorskip("pybullet")
    from tether.core.protocols import LearningView
    from tether.sim import make_env

    env = make_env(REPO / "configs/experiments/husky_go_to_goal.yaml", overrides=["sim.cameras=[]"])
    try:
        assert not isinstance(env.backend, LearningView)
        obs, _ = env.reset(seed=0)
        assert obs.shape == (13 + 7,)  # odometry + wheels, then the goal's pose
        np.testing.assert_allclose(env.to_backend_action(np.ones(2)), [1.0, 2.0])
        np.testing.assert_allclose(env.to_backend_action(np.array([np.nan, -1.0])), [0.0, -2.0])
    finally:
        env.close()


def test_import_stays_light() -> None:
    code = (
        "import sys, tether.sim; assert 'gymnasium' not in sys.modules; "
        "assert 'pybullet' not in sys.modules and 'mujoco' not in sys.modules; "
        "from tether.sim import make_env; assert 'gymnasium' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_example_configs_parse() -> None:
    from tether.core.experiment import robot_spec

    cfg = load_config(REPO / "configs/experiments/quad_pid_figure_eight.yaml")
    spec = robot_spec(cfg)
    assert spec.kind == "quadcopter" and spec.action.mode == "velocity_setpoint"
    assert spec.action.dim == 4 * cfg.sim.quadrotor.num_drones
    panda = load_config(REPO / "configs/experiments/panda_reach_expert.yaml")
    assert robot_spec(panda).action.mode == "joint_position"


def test_float_observation_equals_numpy() -> None:
    from tether.sim.quadrotor.batched_env import action_to_rpm, hover_observation
    from tether.sim.quadrotor.features import hover_features, rpm_from_normalized

    env = BatchedHoverEnv(3, seed=4)
    env.reset()
    state = env.state.reshape(-1).astype(np.float32)
    targets = np.random.default_rng(0).normal(size=(3, 7)).astype(np.float32)
    got = hover_features(state, targets.reshape(-1), 3)
    want = hover_observation(state.reshape(3, 13).astype(np.float64), targets[:, :3])
    np.testing.assert_array_equal(got, want.reshape(-1))
    a = np.random.default_rng(1).uniform(-1.5, 1.5, 12)
    a[5] = np.nan
    hover = env.params.hover_rpm
    np.testing.assert_array_equal(
        rpm_from_normalized(a, hover), action_to_rpm(a.reshape(3, 4)).reshape(-1)
    )
