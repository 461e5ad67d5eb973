"""ROS-side hardware: robots whose driver speaks ROS 2 (ros2_control JointTrajectoryController arms, cmd_vel bases)."""
