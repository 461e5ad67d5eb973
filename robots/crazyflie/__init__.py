"""crazyflie robot folder: robot.py (description), assets/."""
