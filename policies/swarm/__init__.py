"""The decentralised drone-swarm policy: PPO with one shared actor per drone (docs/swarm.md)."""
