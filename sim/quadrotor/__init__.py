"""Quadrotor dynamics, control and batched simulation (Crazyflie 2.x class)."""
