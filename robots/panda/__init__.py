"""panda robot folder: robot.py (description), assets/."""
