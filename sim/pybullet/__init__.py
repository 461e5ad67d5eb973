"""PyBullet backend: the Franka Panda on a table, behind the same SimBackend contract as
MuJoCo. Import ``tether.sim.pybullet.backend`` to build one (it imports pybullet)."""
