"""Real robots behind the ROS 2 interfaces their drivers already expose (ros2_control
JointTrajectoryController arms, cmd_vel / odom bases) or behind their SDKs (MAVLink
autopilots, Crazyflies), each a core ``Robot``; ``RobotBackend`` gives a Robot the
SimBackend shape so the hardware bridge runs the sim bridge's command path."""
