"""ROS 2 nodes of Tether: thin shells around tether.core (conversions, bridges, policy server)."""
