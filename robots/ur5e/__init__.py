"""ur5e robot folder: robot.py (description), assets/."""
