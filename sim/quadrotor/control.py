"""Cascaded PID for N quadrotors: position -> velocity -> attitude -> body rates -> rotor rpm.

Every loop is vectorized over N drones and each inner loop is an entry point, so the three
action modes map to rotor speeds:
    ``rotor_rpm``          passes through
    ``thrust_rates``       -> :meth:`CascadedPID.thrust_rates` (rate loop + mixer)
    ``velocity_setpoint``  -> :meth:`CascadedPID.velocity` (velocity loop and below)
    position / trajectory  -> :meth:`CascadedPID.position` (all loops)
The attitude loop is the geometric controller of Lee, Leok & McClamroch (CDC 2010):
e_R = vee(R_d^T R - R^T R_d) / 2, which has no singularity at large tilts.
Frames: world ENU, body FLU; state layout as in ``dynamics.py``.
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from tether.core.robot_kinds import GRAVITY, QuadrotorParams
from tether.robots.crazyflie.robot import CRAZYFLIE
from tether.sim.quadrotor.dynamics import _cross, quat_to_rotmat, quat_yaw


class PIDGains(BaseModel):
    """Gains of the cascade. Each loop is ~3x slower than the one inside it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # 1/s: velocity command per metre of position error
    pos_p: tuple[float, float, float] = (2.0, 2.0, 2.5)
    # 1/s: acceleration command per m/s of velocity error; integral in 1/s^2
    vel_p: tuple[float, float, float] = (5.0, 5.0, 6.0)
    vel_i: tuple[float, float, float] = (2.0, 2.0, 3.0)
    # 1/s: body-rate command per rad of attitude error (roll, pitch, yaw)
    att_p: tuple[float, float, float] = (14.0, 14.0, 6.0)
    # 1/s: angular acceleration per rad/s of rate error; with 30 ms motor lag keep < ~40
    rate_p: tuple[float, float, float] = (40.0, 40.0, 20.0)
    # rad: tilt limit the velocity loop may ask for
    max_tilt: float = Field(0.6, gt=0, lt=1.5)
    # m/s: speed limit the position loop may ask for
    max_speed: float = Field(2.0, gt=0)
    # m/s^2: integrator clamp (anti-windup)
    vel_i_limit: float = Field(2.0, ge=0)


class CascadedPID:
    """Vectorized cascaded PID for N drones. Call :meth:`reset` before the first command."""

    def __init__(
        self, n: int, params: QuadrotorParams = CRAZYFLIE, gains: PIDGains | None = None
    ) -> None:
        self.params = params
        self.gains = gains or PIDGains()
        self._inertia = np.asarray(params.inertia)
        self._mix_inv = np.linalg.inv(params.mixer())
        self._vel_int = np.zeros((n, 3))

    def reset(self, mask: np.ndarray | None = None) -> None:
        """Zero the integrators of all drones, or of those where ``mask`` (N,) is true."""
        if mask is None:
            self._vel_int[:] = 0.0
        else:
            self._vel_int[mask] = 0.0

    def mix(self, thrust: np.ndarray, torque: np.ndarray) -> np.ndarray:
        """Rotor speeds for a collective thrust (N,) N and body torque (N, 3) N m.

        Shape: (N, 4) rpm, each within 0..max_rpm. Saturation clips rotor by rotor, so at the
        limits the wrench is only approximate.
        """
        wrench = np.concatenate([thrust[:, None], torque], axis=1)
        rpm_sq = wrench @ self._mix_inv.T
        return np.sqrt(np.clip(rpm_sq, 0.0, self.params.max_rpm**2))

    def thrust_rates(self, state: np.ndarray, cmd: np.ndarray) -> np.ndarray:
        """Rate loop + mixer. cmd: (N, 4) = collective thrust N, body rates p, q, r rad/s.

        state: (N, 13). Returns rotor speeds (N, 4) rpm.
        """
        omega = state[:, 10:13]
        rate_p = np.asarray(self.gains.rate_p)
        j_omega = omega * self._inertia
        # feed the gyroscopic term forward so the P loop only fights the error
        gyro = _cross(omega, j_omega)
        torque = self._inertia * (rate_p * (cmd[:, 1:4] - omega)) + gyro
        thrust = np.clip(cmd[:, 0], 0.0, self.params.max_thrust)
        return self.mix(thrust, torque)

    def attitude_rates(
        self,
        state: np.ndarray,
        acc_cmd: np.ndarray,
        yaw_ref: np.ndarray,
        yaw_rate_ff: np.ndarray | None = None,
    ) -> np.ndarray:
        """Attitude loop: a world acceleration command (N, 3) m/s^2 and yaw (N,) rad ->
        the ``thrust_rates`` command (N, 4): collective thrust N, body rates rad/s.

        Gravity is added here; the tilt is limited to ``gains.max_tilt``.
        """
        g = self.gains
        acc = acc_cmd.copy()
        acc[:, 2] = np.maximum(acc[:, 2] + GRAVITY, 0.2 * GRAVITY)
        # limit the horizontal part so the thrust vector stays within max_tilt of vertical
        horiz = np.linalg.norm(acc[:, :2], axis=1)
        limit = np.tan(g.max_tilt) * acc[:, 2]
        acc[:, :2] *= np.minimum(1.0, limit / np.maximum(horiz, 1e-9))[:, None]
        rot = quat_to_rotmat(state[:, 3:7])
        # desired body z along the thrust; collective thrust is its projection on body z
        b3d = acc / np.linalg.norm(acc, axis=1, keepdims=True)
        thrust = self.params.mass * np.einsum("ni,ni->n", acc, rot[:, :, 2])
        heading = np.stack([np.cos(yaw_ref), np.sin(yaw_ref), np.zeros_like(yaw_ref)], axis=1)
        b2d = _cross(b3d, heading)
        b2d /= np.linalg.norm(b2d, axis=1, keepdims=True)
        b1d = _cross(b2d, b3d)
        rot_d = np.stack([b1d, b2d, b3d], axis=2)
        m = np.einsum("nji,njk->nik", rot_d, rot)  # R_d^T R
        e_r = 0.5 * np.stack(
            [m[:, 2, 1] - m[:, 1, 2], m[:, 0, 2] - m[:, 2, 0], m[:, 1, 0] - m[:, 0, 1]], axis=1
        )
        rates = -np.asarray(g.att_p) * e_r
        if yaw_rate_ff is not None:
            rates[:, 2] += yaw_rate_ff
        return np.concatenate([thrust[:, None], rates], axis=1)

    def attitude(
        self,
        state: np.ndarray,
        acc_cmd: np.ndarray,
        yaw_ref: np.ndarray,
        yaw_rate_ff: np.ndarray | None = None,
    ) -> np.ndarray:
        """Attitude loop and below: acceleration (N, 3) m/s^2, yaw (N,) rad -> (N, 4) rpm."""
        return self.thrust_rates(state, self.attitude_rates(state, acc_cmd, yaw_ref, yaw_rate_ff))

    def velocity_rates(
        self,
        state: np.ndarray,
        cmd: np.ndarray,
        dt: float,
        acc_ff: np.ndarray | None = None,
        yaw_ref: np.ndarray | None = None,
    ) -> np.ndarray:
        """Velocity loop -> the ``thrust_rates`` command (N, 4); arguments as :meth:`velocity`."""
        g = self.gains
        err = cmd[:, :3] - state[:, 7:10]
        self._vel_int = np.clip(
            self._vel_int + np.asarray(g.vel_i) * err * dt, -g.vel_i_limit, g.vel_i_limit
        )
        acc = np.asarray(g.vel_p) * err + self._vel_int
        if acc_ff is not None:
            acc = acc + acc_ff
        if yaw_ref is None:
            yaw_ref = quat_yaw(state[:, 3:7])
        return self.attitude_rates(state, acc, yaw_ref, yaw_rate_ff=cmd[:, 3])

    def velocity(
        self,
        state: np.ndarray,
        cmd: np.ndarray,
        dt: float,
        acc_ff: np.ndarray | None = None,
        yaw_ref: np.ndarray | None = None,
    ) -> np.ndarray:
        """Velocity loop. cmd: (N, 4) = world velocity vx, vy, vz m/s and yaw rate rad/s.

        dt: s since the last call (integrator). acc_ff: (N, 3) m/s^2 feedforward. yaw_ref:
        (N,) rad; default: hold the current heading and follow the commanded yaw rate.
        Returns (N, 4) rpm.
        """
        return self.thrust_rates(state, self.velocity_rates(state, cmd, dt, acc_ff, yaw_ref))

    def position_velocity(
        self, state: np.ndarray, pos_ref: np.ndarray, vel_ref: np.ndarray | None = None
    ) -> np.ndarray:
        """Position loop -> the ``velocity_setpoint`` command (N, 4): world velocity m/s
        (speed limited to ``gains.max_speed``) and a zero yaw rate."""
        g = self.gains
        vel = np.asarray(g.pos_p) * (pos_ref - state[:, 0:3])
        if vel_ref is not None:
            vel = vel + vel_ref
        speed = np.linalg.norm(vel, axis=1, keepdims=True)
        vel *= np.minimum(1.0, g.max_speed / np.maximum(speed, 1e-9))
        return np.concatenate([vel, np.zeros((state.shape[0], 1))], axis=1)

    def position_rates(
        self,
        state: np.ndarray,
        pos_ref: np.ndarray,
        dt: float,
        vel_ref: np.ndarray | None = None,
        acc_ref: np.ndarray | None = None,
        yaw_ref: np.ndarray | None = None,
    ) -> np.ndarray:
        """Full cascade down to the ``thrust_rates`` command (N, 4); see :meth:`position`."""
        cmd = self.position_velocity(state, pos_ref, vel_ref)
        if yaw_ref is None:
            yaw_ref = np.zeros(state.shape[0])
        return self.velocity_rates(state, cmd, dt, acc_ff=acc_ref, yaw_ref=yaw_ref)

    def position(
        self,
        state: np.ndarray,
        pos_ref: np.ndarray,
        dt: float,
        vel_ref: np.ndarray | None = None,
        acc_ref: np.ndarray | None = None,
        yaw_ref: np.ndarray | None = None,
    ) -> np.ndarray:
        """Full cascade. pos_ref (N, 3) m, optional vel_ref (N, 3) m/s and acc_ref (N, 3)
        m/s^2 feedforward (trajectory tracking), yaw_ref (N,) rad (default 0). -> (N, 4) rpm."""
        cmd = self.position_rates(state, pos_ref, dt, vel_ref, acc_ref, yaw_ref)
        return self.thrust_rates(state, cmd)


def figure_eight(
    t: np.ndarray | float,
    size: tuple[float, float] = (1.0, 0.5),
    period: float = 8.0,
    center: tuple[float, float, float] = (0.0, 0.0, 1.0),
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A horizontal figure-eight (lemniscate of Gerono), ``size`` = full x, y extent in m.

    x = (sx/2) sin(w t), y = (sy/2) sin(2 w t), w = 2 pi / period: one loop per period.
    t: scalar or (N,) s. Returns position, velocity, acceleration, each (N, 3) (world, SI).
    """
    tt = np.atleast_1d(np.asarray(t, dtype=np.float64))
    w = 2.0 * np.pi / period
    ax, ay = size[0] / 2.0, size[1] / 2.0
    zeros = np.zeros_like(tt)
    pos = np.stack(
        [center[0] + ax * np.sin(w * tt), center[1] + ay * np.sin(2 * w * tt), center[2] + zeros],
        axis=1,
    )
    vel = np.stack([ax * w * np.cos(w * tt), 2 * ay * w * np.cos(2 * w * tt), zeros], axis=1)
    acc = np.stack(
        [-ax * w**2 * np.sin(w * tt), -4 * ay * w**2 * np.sin(2 * w * tt), zeros], axis=1
    )
    return pos, vel, acc
