"""Mock hardware with the interfaces of real drivers: an arm that follows joint trajectories
(ros2_control JointTrajectoryController-like), a differential-drive base, and a PX4-like
autopilot that speaks MAVLink on UDP loopback. Each implements core's Robot protocol."""
