"""The per-physics-step work of the engine backends in plain Python floats, one drone at a
time: the motor lag, the aerodynamic loads of ``dynamics.py`` and the rate loop + mixer of
``CascadedPID.thrust_rates``.

Why floats: an engine backend flies a handful of drones and does this work 500 times per
simulated second; numpy's per-call overhead on (1, 4) arrays costs ~20x the arithmetic.
The numpy versions stay the reference; tests check these against them term by term.
"""

from __future__ import annotations

import math

import numpy as np

from tether.sim.quadrotor.control import PIDGains
from tether.sim.quadrotor.dynamics import QuadrotorDynamics

Vec3 = tuple[float, float, float]


class DroneLoads:
    """Loads of one drone model: ``params``, ``drag``, ``ground_effect`` of ``dyn``."""

    def __init__(self, dyn: QuadrotorDynamics, gains: PIDGains | None = None) -> None:
        p = dyn.params
        self.kf, self.km = p.kf, p.km
        self.max_rpm = p.max_rpm
        self.max_thrust = p.max_thrust
        self.tau = p.motor_tau
        self.pos = [tuple(float(x) for x in r) for r in dyn._pos]
        self.spin = [float(x) for x in dyn._spin]
        self.drag_on = dyn.drag
        self.ge_on = dyn.ground_effect
        self.cd = (p.drag_xy, p.drag_xy, p.drag_z)
        self.ge_coeff = p.gnd_eff_coeff
        self.prop_r = p.prop_radius
        self.ge_h_clip = float(dyn._ge_h_clip)
        self.inertia = tuple(float(x) for x in p.inertia)
        g = gains or PIDGains()
        self.rate_p = tuple(float(x) for x in g.rate_p)
        self.mix_inv = np.linalg.inv(p.mixer()).tolist()
        self._alpha: dict[float, float] = {}

    def motor(self, rpm: list[float], cmd: list[float], dt: float) -> list[float]:
        """First-order lag over dt s (exact), commands clipped to 0..max_rpm."""
        top = self.max_rpm
        c = [min(max(x, 0.0), top) for x in cmd]
        if self.tau == 0.0:
            return c
        a = self._alpha.get(dt)
        if a is None:
            a = self._alpha[dt] = math.exp(-dt / self.tau)
        return [ci + (ri - ci) * a for ri, ci in zip(rpm, c, strict=True)]

    def rate_loop(self, s: list[float], cmd: list[float]) -> list[float]:
        """``CascadedPID.thrust_rates`` for one drone: state (13,), command (thrust N,
        p, q, r rad/s) -> rotor speeds (4,) rpm."""
        wx, wy, wz = s[10], s[11], s[12]
        ix, iy, iz = self.inertia
        kx, ky, kz = self.rate_p
        # torque = J kp (rate_cmd - w) + w x (J w)
        tx = ix * kx * (cmd[1] - wx) + (wy * iz * wz - wz * iy * wy)
        ty = iy * ky * (cmd[2] - wy) + (wz * ix * wx - wx * iz * wz)
        tz = iz * kz * (cmd[3] - wz) + (wx * iy * wy - wy * ix * wx)
        thrust = min(max(cmd[0], 0.0), self.max_thrust)
        top = self.max_rpm**2
        out = []
        for row in self.mix_inv:
            sq = row[0] * thrust + row[1] * tx + row[2] * ty + row[3] * tz
            out.append(math.sqrt(min(max(sq, 0.0), top)))
        return out

    def loads(
        self, s: list[float], rpm: list[float]
    ) -> tuple[list[float], Vec3, Vec3, tuple[float, ...]]:
        """Loads of ``dynamics.rotor_wrench`` for one drone, body frame: rotor thrusts (4,)
        N, body torque (3,) N m, drag force (3,) N, and the rotation matrix world-from-body
        (9,) row-major of state ``s`` (13,)."""
        qw, qx, qy, qz = s[3], s[4], s[5], s[6]
        r00 = 1 - 2 * (qy * qy + qz * qz)
        r01 = 2 * (qx * qy - qw * qz)
        r02 = 2 * (qx * qz + qw * qy)
        r10 = 2 * (qx * qy + qw * qz)
        r11 = 1 - 2 * (qx * qx + qz * qz)
        r12 = 2 * (qy * qz - qw * qx)
        r20 = 2 * (qx * qz - qw * qy)
        r21 = 2 * (qy * qz + qw * qx)
        r22 = 1 - 2 * (qx * qx + qy * qy)
        kf = self.kf
        w0, w1, w2, w3 = rpm
        s0, s1, s2, s3 = w0 * w0, w1 * w1, w2 * w2, w3 * w3
        thrust = [kf * s0, kf * s1, kf * s2, kf * s3]
        if self.ge_on and r22 > 0.0:
            z, clip, c, rp = s[2], self.ge_h_clip, self.ge_coeff, self.prop_r / 4.0
            for i, (px, py, _) in enumerate(self.pos):
                h = max(z + r20 * px + r21 * py, clip)
                thrust[i] *= 1.0 + c * (rp / h) ** 2
        (x0, y0, _), (x1, y1, _), (x2, y2, _), (x3, y3, _) = self.pos
        t0, t1, t2, t3 = thrust
        tx = t0 * y0 + t1 * y1 + t2 * y2 + t3 * y3
        ty = -(t0 * x0 + t1 * x1 + t2 * x2 + t3 * x3)
        p0, p1, p2, p3 = self.spin
        tz = -self.km * (p0 * s0 + p1 * s1 + p2 * s2 + p3 * s3)
        drag: Vec3 = (0.0, 0.0, 0.0)
        if self.drag_on:
            vx, vy, vz = s[7], s[8], s[9]
            k = -(w0 + w1 + w2 + w3) * (2.0 * math.pi / 60.0)
            drag = (
                self.cd[0] * k * (r00 * vx + r10 * vy + r20 * vz),
                self.cd[1] * k * (r01 * vx + r11 * vy + r21 * vz),
                self.cd[2] * k * (r02 * vx + r12 * vy + r22 * vz),
            )
        rot = (r00, r01, r02, r10, r11, r12, r20, r21, r22)
        return thrust, (tx, ty, tz), drag, rot


def rotate(rot: tuple[float, ...], v: Vec3) -> Vec3:
    """World vector of body vector v, with rot (9,) world-from-body row-major."""
    return (
        rot[0] * v[0] + rot[1] * v[1] + rot[2] * v[2],
        rot[3] * v[0] + rot[4] * v[1] + rot[5] * v[2],
        rot[6] * v[0] + rot[7] * v[1] + rot[8] * v[2],
    )
