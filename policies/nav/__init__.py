"""A learned local planner for mobile bases (issue #20): lidar, the goal from odometry and
the last command in, a twist out (docs/base_planner.md)."""
