"""Quadrotor hover policies: a batched-simulator trainer (torch PPO), an SB3 PPO trainer on
vectorized PyBullet envs, ONNX export and sim-to-sim evaluation. Registered as trainer
``quad_hover``; its config (``config_quad``) is a light import, everything else needs torch."""
