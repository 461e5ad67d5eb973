"""Isaac Sim: the config of ``sim.type: isaac_ros`` (a running Isaac Sim over its ROS 2
bridge; Tether's side is tether_ros.isaac) and the script Isaac Sim's own Python runs
(``isaac_ros_scene.py``, docs/isaac_sim.md)."""
