"""The engines' per-physics-step float code (loads.py) equals the numpy reference model."""

from __future__ import annotations

import numpy as np
import pytest

from tether.robots.crazyflie.robot import CRAZYFLIE
from tether.sim.quadrotor.control import CascadedPID
from tether.sim.quadrotor.dynamics import (
    QuadrotorDynamics,
    hover_state,
    quat_from_euler,
    rotor_wrench,
)
from tether.sim.quadrotor.loads import DroneLoads, rotate


def _states(n: int, rng: np.random.Generator) -> np.ndarray:
    s = hover_state(n)
    s[:, 0:3] += rng.uniform(-0.5, 0.5, (n, 3))
    s[:, 2] = rng.uniform(0.0, 0.3, n)  # low: ground effect matters, some below the clip
    e = rng.uniform(-0.6, 0.6, (n, 3))
    s[:, 3:7] = quat_from_euler(e[:, 0], e[:, 1], 3 * e[:, 2])
    s[-1, 3:7] = quat_from_euler(np.array([2.8]), np.array([0.1]), np.array([0.0]))[
        0
    ]  # upside down
    s[:, 7:13] = rng.uniform(-2.0, 2.0, (n, 6))
    return s


@pytest.mark.parametrize("drag", [True, False])
@pytest.mark.parametrize("ground_effect", [True, False])
def test_loads_equal_rotor_wrench(drag: bool, ground_effect: bool) -> None:
    rng = np.random.default_rng(0)
    dyn = QuadrotorDynamics(drag=drag, ground_effect=ground_effect)
    states, rpm = _states(16, rng), rng.uniform(0.0, CRAZYFLIE.max_rpm, (16, 4))
    thrust, torque, drag_f = rotor_wrench(dyn, states, rpm)
    loads = DroneLoads(dyn)
    for i in range(16):
        t, tq, d, rot = loads.loads(states[i].tolist(), rpm[i].tolist())
        np.testing.assert_allclose(t, thrust[i], rtol=1e-12)
        np.testing.assert_allclose(tq, torque[i], rtol=1e-12, atol=1e-18)
        np.testing.assert_allclose(d, drag_f[i], rtol=1e-12, atol=1e-18)
        v = rng.normal(size=3)
        world = np.asarray(rot).reshape(3, 3) @ v
        np.testing.assert_allclose(rotate(rot, (v[0], v[1], v[2])), world, rtol=1e-12)
    if ground_effect:
        assert np.any(thrust > CRAZYFLIE.kf * rpm**2 * 1.01)  # the low drones got lift


def test_rate_loop_equals_cascaded_pid() -> None:
    rng = np.random.default_rng(1)
    states = _states(32, rng)
    cmd = np.c_[rng.uniform(-0.1, 0.7, 32), rng.uniform(-12.0, 12.0, (32, 3))]
    want = CascadedPID(32).thrust_rates(states, cmd)
    loads = DroneLoads(QuadrotorDynamics())
    got = np.array(
        [loads.rate_loop(s.tolist(), c.tolist()) for s, c in zip(states, cmd, strict=True)]
    )
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-6)
    # both saturations were exercised
    assert np.any(want == 0.0) and np.any(np.isclose(want, CRAZYFLIE.max_rpm))


@pytest.mark.parametrize("motor_tau", [0.03, 0.0])
def test_motor_lag_equals_numpy(motor_tau: float) -> None:
    params = CRAZYFLIE.model_copy(update={"motor_tau": motor_tau})
    dyn = QuadrotorDynamics(params)
    rng = np.random.default_rng(2)
    rpm, cmd = rng.uniform(0, 2e4, (8, 4)), rng.uniform(-5e3, 3e4, (8, 4))
    want = dyn.motor_step(rpm, cmd, 0.002)
    loads = DroneLoads(dyn)
    got = np.array(
        [loads.motor(r.tolist(), c.tolist(), 0.002) for r, c in zip(rpm, cmd, strict=True)]
    )
    np.testing.assert_allclose(got, want, rtol=1e-12)
