"""husky robot folder: robot.py (description), assets/."""
