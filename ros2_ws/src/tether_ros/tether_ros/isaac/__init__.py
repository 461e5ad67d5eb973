"""Isaac Sim over its ROS 2 bridge (``sim.type: isaac_ros``, docs/isaac_sim.md): Tether's side
(:mod:`tether_ros.isaac.backend`), the wire both sides share (:mod:`.interface`) and a MuJoCo
stand-in that speaks the Isaac side's interface (:mod:`.standin`)."""
