"""MAVLink companion-computer client (pymavlink): PX4 offboard / ArduPilot guided velocity
control with heartbeats both ways and link-loss failsafe."""
