"""The training simulator: ``BatchedHoverEnv`` with one 10 ms RK4 step per control step.

Same rigid body, drag, ground effect, initial-state distribution, observation, action map
and reward as the numpy batched env (``batched_env``), whose five 2 ms
physics steps per control step make it ~5x slower. Within a control step the rotor speeds
are held, so RK4 with a 10 ms step stays accurate; the motor lag is still integrated
exactly, the rigid body seeing the rotor speed *averaged* over the step (holding the
end-of-step speed, as the fine model does per 2 ms step, would hide ~5 ms of lag). A test
bounds the gap to the fine model (tests/policies/test_quad_env.py); policies trained here
are evaluated on the fine model, PyBullet and MuJoCo.
"""

from __future__ import annotations

import numpy as np

from tether.core.robot_kinds import QuadrotorParams
from tether.robots.crazyflie.robot import CRAZYFLIE
from tether.sim.quadrotor.batched_env import EPISODE_S, BatchedHoverEnv
from tether.sim.quadrotor.dynamics import QuadrotorDynamics

COARSE_DT = 0.01  # s, one physics step per 100 Hz control step


class CoarseQuadrotorDynamics(QuadrotorDynamics):
    """``QuadrotorDynamics`` with steps up to 10 ms and the mean rotor speed held per step."""

    def rigid_body_step(self, state: np.ndarray, rpm: np.ndarray, dt: float) -> np.ndarray:
        """RK4 over dt (s) at fixed rotor speeds; shapes (N, 13), (N, 4) -> (N, 13)."""
        if not 0.0 < dt <= COARSE_DT + 1e-12:
            raise ValueError(f"dt must be in (0, {COARSE_DT}] s, got {dt}")
        terms = self._rotor_terms(rpm)
        s = np.ascontiguousarray(state.T, dtype=np.float64)
        k1 = self._deriv_t(s, *terms)
        k2 = self._deriv_t(s + (0.5 * dt) * k1, *terms)
        k3 = self._deriv_t(s + (0.5 * dt) * k2, *terms)
        k4 = self._deriv_t(s + dt * k3, *terms)
        new = s + (dt / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
        new[3:7] /= np.sqrt((new[3:7] ** 2).sum(axis=0))
        return new.T.copy()

    def step(
        self, state: np.ndarray, motor_rpm: np.ndarray, rpm_cmd: np.ndarray, dt: float
    ) -> tuple[np.ndarray, np.ndarray]:
        """Motor lag (exact) then the rigid body at the step's mean rotor speed.

        Shapes: state (N, 13), motor_rpm and rpm_cmd (N, 4) rpm; returns both advanced by dt.
        """
        cmd = np.clip(rpm_cmd, 0.0, self.params.max_rpm)
        tau = self.params.motor_tau
        if tau == 0.0:
            return self.rigid_body_step(state, cmd, dt), cmd.astype(np.float64)
        alpha = np.exp(-dt / tau)
        gap = motor_rpm - cmd
        mean = cmd + gap * (tau / dt) * (1.0 - alpha)
        return self.rigid_body_step(state, mean, dt), cmd + gap * alpha


class CoarseHoverEnv(BatchedHoverEnv):
    """``BatchedHoverEnv`` on ``CoarseQuadrotorDynamics``: 100 Hz control, one physics step."""

    def __init__(
        self,
        n: int,
        *,
        params: QuadrotorParams = CRAZYFLIE,
        episode_s: float = EPISODE_S,
        seed: int | None = None,
    ) -> None:
        super().__init__(
            n,
            params=params,
            control_hz=1.0 / COARSE_DT,
            physics_dt=COARSE_DT,
            episode_s=episode_s,
            seed=seed,
        )
        self.dynamics = CoarseQuadrotorDynamics(params)
