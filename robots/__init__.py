"""Robots, one folder each: ``robots/<name>/robot.py`` defines ``ROBOT`` (a description from
tether.core.robot) and ``assets/`` holds its models. See docs/adding_a_robot.md."""
