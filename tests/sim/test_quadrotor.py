"""Batched quadrotor dynamics, cascaded PID and hover env (pure numpy, no simulator)."""

from __future__ import annotations

import numpy as np
import pytest

from tether.robots.crazyflie.robot import CRAZYFLIE, GRAVITY, crazyflie_spec
from tether.sim.quadrotor.batched_env import BatchedHoverEnv, hover_success
from tether.sim.quadrotor.control import CascadedPID, figure_eight
from tether.sim.quadrotor.dynamics import (
    QuadrotorDynamics,
    hover_state,
    quat_from_euler,
    quat_yaw,
)

DT = 0.002
# documented bound for the figure-eight (1 m x 0.5 m, 8 s period) RMS position error
FIGURE_EIGHT_RMS_BOUND = 0.02


def _random_states(n: int, rng: np.random.Generator) -> np.ndarray:
    s = hover_state(n)
    s[:, 0:3] += rng.uniform(-0.5, 0.5, (n, 3))
    tilt = rng.uniform(-np.pi / 6, np.pi / 6, (n, 2))
    s[:, 3:7] = quat_from_euler(tilt[:, 0], tilt[:, 1], rng.uniform(-np.pi, np.pi, n))
    s[:, 7:10] = rng.uniform(-0.5, 0.5, (n, 3))
    s[:, 10:13] = rng.uniform(-1.0, 1.0, (n, 3))
    return s


@pytest.mark.parametrize("mode", ["rotor_rpm", "thrust_rates", "velocity_setpoint"])
def test_spec(mode: str) -> None:
    spec = crazyflie_spec(100.0, mode)  # type: ignore[arg-type]
    assert spec.kind == "quadcopter" and spec.action.mode == mode and spec.action.dim == 4
    assert len(spec.state_names) == 13
    assert CRAZYFLIE.max_rpm == pytest.approx(21702, rel=2e-3)


def test_free_fall_accelerates_at_g() -> None:
    dyn = QuadrotorDynamics(drag=True, ground_effect=True)
    state, rpm = hover_state(3, (0.0, 0.0, 10.0)), np.zeros((3, 4))
    for _ in range(500):  # 1 s
        state, rpm = dyn.step(state, rpm, np.zeros((3, 4)), DT)
    np.testing.assert_allclose(state[:, 9], -GRAVITY, rtol=1e-9)
    np.testing.assert_allclose(state[:, 2], 10.0 - 0.5 * GRAVITY, rtol=1e-9)


def test_hover_rpm_balances_gravity() -> None:
    dyn = QuadrotorDynamics(drag=True, ground_effect=False)
    state = hover_state(2)
    rpm = np.full((2, 4), CRAZYFLIE.hover_rpm)
    for _ in range(1000):  # 2 s
        state, rpm = dyn.step(state, rpm, rpm, DT)
    np.testing.assert_allclose(state, hover_state(2), atol=1e-9)


def test_yaw_torque_sign() -> None:
    """Rotors 1 and 3 spin CW; speeding them up (and slowing 0, 2) yaws CCW: +z rate."""
    dyn = QuadrotorDynamics()
    cmd = np.full((1, 4), CRAZYFLIE.hover_rpm)
    cmd[0, [1, 3]] *= 1.05
    cmd[0, [0, 2]] *= 0.95
    state, rpm = hover_state(1), cmd.copy()
    for _ in range(100):
        state, rpm = dyn.step(state, rpm, cmd, DT)
    assert state[0, 12] > 1.0
    assert quat_yaw(state[:, 3:7])[0] > 0.0
    np.testing.assert_allclose(state[0, 10:12], 0.0, atol=1e-9)  # pure yaw, no roll/pitch


def test_batched_step_equals_single_steps() -> None:
    rng = np.random.default_rng(1)
    dyn = QuadrotorDynamics()
    state = _random_states(8, rng)
    rpm = rng.uniform(0.5, 1.4, (8, 4)) * CRAZYFLIE.hover_rpm
    cmd = rng.uniform(0.5, 1.4, (8, 4)) * CRAZYFLIE.hover_rpm
    batched = dyn.step(state, rpm, cmd, DT)
    for i in range(8):
        single = dyn.step(state[i : i + 1], rpm[i : i + 1], cmd[i : i + 1], DT)
        np.testing.assert_allclose(single[0][0], batched[0][i], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(single[1][0], batched[1][i], rtol=1e-12)


def test_pid_hover_from_perturbed_starts() -> None:
    n, target = 100, np.array([0.0, 0.0, 1.0])
    dyn, pid = QuadrotorDynamics(), CascadedPID(n)
    state = _random_states(n, np.random.default_rng(2))
    rpm = np.full((n, 4), CRAZYFLIE.hover_rpm)
    ref = np.tile(target, (n, 1))
    worst = np.zeros(n)
    for k in range(4000):  # 8 s, PID at 100 Hz
        if k % 5 == 0:
            cmd = pid.position(state, ref, 5 * DT)
        state, rpm = dyn.step(state, rpm, cmd, DT)
        if k >= 3000:  # judge the last 2 s, after settling
            worst = np.maximum(worst, np.linalg.norm(state[:, 0:3] - target, axis=1))
    assert np.mean(worst < 0.05) >= 0.95


def test_figure_eight_tracking() -> None:
    dyn, pid = QuadrotorDynamics(), CascadedPID(1)
    state, rpm = hover_state(1), np.full((1, 4), CRAZYFLIE.hover_rpm)
    errors = []
    for k in range(int(16.0 / DT)):  # two periods; judge the second
        t = k * DT
        if k % 5 == 0:
            pos, vel, acc = figure_eight(t)
            cmd = pid.position(state, pos, 5 * DT, vel, acc)
        state, rpm = dyn.step(state, rpm, cmd, DT)
        if t >= 8.0:
            errors.append(np.linalg.norm(state[0, 0:3] - figure_eight(t + DT)[0][0]))
    rms = float(np.sqrt(np.mean(np.square(errors))))
    assert rms < FIGURE_EIGHT_RMS_BOUND


def test_velocity_and_thrust_rates_modes() -> None:
    dyn, pid = QuadrotorDynamics(), CascadedPID(1)
    state, rpm = hover_state(1), np.full((1, 4), CRAZYFLIE.hover_rpm)
    for _ in range(1500):  # 3 s at 0.5 m/s forward, 0.2 m/s up, 0.5 rad/s yaw
        cmd = pid.velocity(state, np.array([[0.5, 0.0, 0.2, 0.5]]), DT)
        state, rpm = dyn.step(state, rpm, cmd, DT)
    np.testing.assert_allclose(state[0, 7:10], [0.5, 0.0, 0.2], atol=0.03)
    assert state[0, 12] == pytest.approx(0.5, abs=0.05)
    state, rpm = hover_state(1), np.full((1, 4), CRAZYFLIE.hover_rpm)
    for _ in range(250):  # 0.5 s of a 1 rad/s roll rate at hover thrust
        cmd = pid.thrust_rates(state, np.array([[CRAZYFLIE.weight, 1.0, 0.0, 0.0]]))
        state, rpm = dyn.step(state, rpm, cmd, DT)
    assert state[0, 10] == pytest.approx(1.0, abs=0.05)


def test_hover_success_function() -> None:
    dt, steps = 0.01, 1500
    dist = np.full((steps, 4), 0.05)
    dist[499, 1] = 0.2  # outside just before the last 10 s: still a success
    dist[500, 2] = 0.2  # outside at the first step of the last 10 s: failure
    dist[-1, 3] = 0.11  # outside at the very end: failure
    np.testing.assert_array_equal(hover_success(dist, dt), [True, True, False, False])


def test_env_success_matches_history() -> None:
    """Drive the env with the PID; its running success flag equals the offline criterion."""
    env = BatchedHoverEnv(16, seed=3, episode_s=15.0)
    pid = CascadedPID(16)
    env.reset()
    ref = np.tile(env.target, (16, 1))
    history = []
    for _ in range(env.episode_steps):
        action = env.rpm_to_action(pid.position(env.state, ref, env.control_dt))
        obs, reward, terminated, truncated, info = env.step(action)
        history.append(info["distance"])
        assert obs.shape == (16, 18) and obs.dtype == np.float32 and reward.shape == (16,)
    assert truncated.all() and not terminated.any()
    expected = hover_success(np.array(history), env.control_dt)
    np.testing.assert_array_equal(info["success"], expected)
    assert expected.mean() >= 0.9
    assert (env.steps == 0).all()  # auto-reset
