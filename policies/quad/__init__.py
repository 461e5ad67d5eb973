"""Quadrotor hover policies that command the rotors directly: a batched-simulator trainer
(analytic policy gradients through a differentiable Crazyflie), an SB3 PPO trainer on
vectorized PyBullet envs, ONNX export and sim-to-sim evaluation. Registered as trainer
``quad_hover``; its config (``config_quad``) is a light import, everything else needs torch."""
