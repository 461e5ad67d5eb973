"""A differentiable torch model of the Crazyflie for analytic policy gradients.

The rigid body of the numpy reference model (thrust, rotor reaction torques, drag, Euler's
equations, quaternion kinematics) and its exact first-order motor lag, one
semi-implicit Euler step per 10 ms control step; ground effect (< 0.2 % of thrust above
0.5 m) is left out. It only has to give useful gradients: policies trained through it are
judged on the numpy RK4 model, PyBullet and MuJoCo. A test bounds its gap to the numpy model.

State (B, 13): position m world ENU, quaternion wxyz world-from-body, linear velocity m/s
world, angular velocity rad/s body; rotor speeds (B, 4) rpm.
"""

from __future__ import annotations

import math

import torch

from tether.core.robot_kinds import GRAVITY, QuadrotorParams
from tether.robots.crazyflie.robot import CRAZYFLIE


class DiffQuadrotor:
    """Batched, differentiable quadrotor step (torch autograd flows through ``step``)."""

    def __init__(self, params: QuadrotorParams = CRAZYFLIE, dt: float = 0.01) -> None:
        self.params = params
        self.dt = dt
        self.alpha = math.exp(-dt / params.motor_tau) if params.motor_tau > 0 else 0.0
        mixer = torch.tensor(params.mixer(), dtype=torch.float32)  # (4, 4): rpm^2 -> wrench
        self.mixer_t = mixer.T.contiguous()
        self.inertia = torch.tensor(params.inertia, dtype=torch.float32)
        self.drag = torch.tensor([params.drag_xy, params.drag_xy, params.drag_z])

    def step(
        self, state: torch.Tensor, rpm: torch.Tensor, cmd: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One control step of dt s with rotor commands cmd (B, 4) rpm.

        Returns the new state (B, 13) and rotor speeds (B, 4).
        """
        p, dt = self.params, self.dt
        cmd = cmd.clamp(0.0, p.max_rpm)
        gap = rpm - cmd
        # rotor speed averaged over the step (exact for the first-order lag)
        tau = p.motor_tau
        mean_rpm = cmd + gap * (tau / dt) * (1.0 - self.alpha) if tau > 0 else cmd
        new_rpm = cmd + gap * self.alpha
        wrench = (mean_rpm * mean_rpm) @ self.mixer_t  # (B, 4): thrust N, torques N m
        pos, q, vel, w = state[:, 0:3], state[:, 3:7], state[:, 7:10], state[:, 10:13]
        qw, qx, qy, qz = q[:, 0:1], q[:, 1:2], q[:, 2:3], q[:, 3:4]
        # columns of the world-from-body rotation
        c0 = torch.cat(
            [1 - 2 * (qy * qy + qz * qz), 2 * (qx * qy + qw * qz), 2 * (qx * qz - qw * qy)], 1
        )
        c1 = torch.cat(
            [2 * (qx * qy - qw * qz), 1 - 2 * (qx * qx + qz * qz), 2 * (qy * qz + qw * qx)], 1
        )
        c2 = torch.cat(
            [2 * (qx * qz + qw * qy), 2 * (qy * qz - qw * qx), 1 - 2 * (qx * qx + qy * qy)], 1
        )
        omega_sum = mean_rpm.sum(1, keepdim=True) * (2.0 * math.pi / 60.0)
        v_body = torch.cat(
            [
                (c0 * vel).sum(1, keepdim=True),
                (c1 * vel).sum(1, keepdim=True),
                (c2 * vel).sum(1, keepdim=True),
            ],
            1,
        )
        a_body = -self.drag * (omega_sum / p.mass) * v_body
        a_body = a_body + torch.cat(
            [torch.zeros_like(omega_sum), torch.zeros_like(omega_sum), wrench[:, 0:1] / p.mass], 1
        )
        acc = c0 * a_body[:, 0:1] + c1 * a_body[:, 1:2] + c2 * a_body[:, 2:3]
        acc = acc - torch.tensor([0.0, 0.0, GRAVITY])
        jw = self.inertia * w
        w_dot = (wrench[:, 1:4] - torch.linalg.cross(w, jw)) / self.inertia
        vel = vel + dt * acc
        pos = pos + dt * vel
        w = w + dt * w_dot
        wx, wy, wz = w[:, 0:1], w[:, 1:2], w[:, 2:3]
        q_dot = 0.5 * torch.cat(
            [
                -(qx * wx + qy * wy + qz * wz),
                qw * wx + qy * wz - qz * wy,
                qw * wy - qx * wz + qz * wx,
                qw * wz + qx * wy - qy * wx,
            ],
            1,
        )
        q = q + dt * q_dot
        q = q / q.norm(dim=1, keepdim=True)
        return torch.cat([pos, q, vel, w], 1), new_rpm
