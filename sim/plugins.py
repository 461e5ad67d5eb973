"""What the simulation layer registers (tether.core.registry discovers this table): engines,
their per-kind backends, tasks, and the scripted policies that need no training. Light:
strings only."""

from __future__ import annotations

from tether.core.registry import Entry

PLUGINS = {
    "sim": {
        # an engine: its config class; the target builds its backend for the robot's kind
        "mujoco": Entry(
            "tether.sim.mujoco.config_mujoco:MujocoConfig", "tether.sim.factory:build_backend"
        ),
        "pybullet": Entry(
            "tether.sim.pybullet.config_pybullet:PybulletConfig",
            "tether.sim.factory:build_backend",
        ),
        # Isaac Sim in process (docs/isaac_sim.md; needs an RTX GPU); isaac_ros, Isaac Sim
        # over its ROS 2 bridge, is registered by tether_ros
        "isaacsim": Entry(
            "tether.sim.isaac.config_isaac:IsaacSimConfig", "tether.sim.factory:build_backend"
        ),
    },
    # "<engine>/<kind>": a class taking (cfg, robot=<description>, task=...); its config
    # class (when set) validates ``sim:`` for that kind: the engine's fields plus the kind's
    "backend": {
        "mujoco/arm": Entry(None, "tether.sim.mujoco.backend:MujocoBackend"),
        "pybullet/arm": Entry(None, "tether.sim.pybullet.backend:PybulletBackend"),
        # ``missing``: a function saying in one sentence why the engine cannot run here (None
        # when it can); the conformance suite skips with it
        "isaacsim/arm": Entry(
            None,
            "tether.sim.isaac.isaacsim_backend:IsaacSimBackend",
            {"missing": "tether.sim.isaac.isaacsim_backend:isaac_missing"},
        ),
        "mujoco/quadcopter": Entry(
            "tether.sim.mujoco.config_mujoco:MujocoQuadrotorConfig",
            "tether.sim.mujoco.quadrotor:MujocoQuadrotorBackend",
        ),
        "pybullet/quadcopter": Entry(
            "tether.sim.pybullet.config_pybullet:PybulletQuadrotorConfig",
            "tether.sim.pybullet.quadrotor:PybulletQuadrotorBackend",
        ),
        "mujoco/mobile_base": Entry(
            "tether.sim.mujoco.config_mujoco:MujocoMobileBaseConfig",
            "tether.sim.mujoco.mobile_base:MujocoMobileBase",
        ),
        "pybullet/mobile_base": Entry(
            "tether.sim.pybullet.config_pybullet:PybulletMobileBaseConfig",
            "tether.sim.pybullet.mobile_base:PybulletMobileBase",
        ),
    },
    # training simulators (not SimBackends: no ``sim.type`` names them); trainers look them up
    # by name; ``protocol`` says what the target returns
    "env": {
        # the numpy hover task of N drones at once (tether.core.protocols.BatchedEnv); a
        # factory taking (n, robot=<description>, coarse=..., seed=..., episode_s=...)
        "batched/quadcopter": Entry(
            None,
            "tether.sim.quadrotor.batched_env:batched_hover_env",
            {"protocol": "tether.core.protocols:BatchedEnv"},
        ),
        # N mobile bases on the obstacle course, kinematic, with domain randomisation: the
        # learned local planner's training world (docs/base_planner.md); the class takes
        # (cfg, robot description, n, control_hz, seed=...)
        "batched/mobile_base": Entry(
            "tether.sim.config_nav_world:NavWorldConfig",
            "tether.sim.nav_world:BatchedNavWorld",
        ),
        # worlds of N Crazyflies (numpy physics, downwash), one RL agent per drone
        "batched/swarm": Entry(
            "tether.sim.quadrotor.config_swarm_world:SwarmWorldConfig",
            "tether.sim.quadrotor.swarm_world:BatchedSwarmWorld",
        ),
        # the gymnasium view of any experiment's backend + task (tether.sim.make_env)
        "gym/any": Entry(None, "tether.sim.gym_env:make_env", {"protocol": "gymnasium.Env"}),
    },
    # options: ``expert``, the policy type of the task's scripted expert (`--teleop scripted`);
    # ``task``, the sentence a recorded dataset gives the task's episodes (LeRobot's task)
    "task": {
        # arm tasks
        "reach": Entry(
            "tether.sim.tasks.config_tasks:ReachConfig",
            "tether.sim.tasks.reach:ReachTask",
            {"expert": "scripted_expert", "task": "reach the target"},
        ),
        "lift": Entry(
            "tether.sim.tasks.config_tasks:LiftConfig",
            "tether.sim.tasks.lift:LiftTask",
            {"expert": "scripted_expert", "task": "lift the cube"},
        ),
        # peg-in-hole: a precision task (docs/insert.md)
        "insert": Entry(
            "tether.sim.tasks.config_tasks:InsertConfig",
            "tether.sim.tasks.insert:InsertTask",
            {"expert": "insert_expert", "task": "insert the peg into the hole"},
        ),
        # one table scene, four sub-tasks asked for in words (docs/multitask.md); each
        # episode's task string is its instruction
        "multitask": Entry(
            "tether.sim.tasks.config_tasks:MultitaskConfig",
            "tether.sim.tasks.multitask:MultitaskTask",
            {"expert": "multitask_expert", "task": "follow the instruction"},
        ),
        # mobile-base tasks
        "go_to_goal": Entry(
            "tether.sim.tasks.config_base_tasks:GoToGoalConfig",
            "tether.sim.tasks.go_to_goal:GoToGoalTask",
            {"expert": "base_expert", "task": "drive to the goal"},
        ),
        "obstacle_course": Entry(
            "tether.sim.tasks.config_base_tasks:ObstacleCourseConfig",
            "tether.sim.tasks.obstacle_course:ObstacleCourseTask",
            {"expert": "base_expert", "task": "drive to the goal around the obstacles"},
        ),
        # drone tasks: tether.sim.tasks.quad_tasks, docs/quadrotor.md
        "hover": Entry(
            "tether.sim.tasks.config_quad_tasks:HoverConfig",
            "tether.sim.tasks.quad_tasks:HoverTask",
            {"expert": "quad_pid", "task": "recover and hover at the target"},
        ),
        "waypoints": Entry(
            "tether.sim.tasks.config_quad_tasks:WaypointsConfig",
            "tether.sim.tasks.quad_tasks:WaypointsTask",
            {"expert": "quad_pid", "task": "fly through the waypoints in order"},
        ),
        "figure_eight": Entry(
            "tether.sim.tasks.config_quad_tasks:FigureEightConfig",
            "tether.sim.tasks.quad_tasks:FigureEightTask",
            {"expert": "quad_pid", "task": "fly a figure eight"},
        ),
        # N drones to their goals without touching (docs/swarm.md)
        "swarm": Entry(
            "tether.sim.tasks.config_quad_tasks:SwarmConfig",
            "tether.sim.tasks.swarm_task:SwarmTask",
            {"expert": "swarm_orca", "task": "fly every drone to its goal without collisions"},
        ),
    },
    "policy": {
        "scripted_expert": Entry(
            "tether.sim.experts.config_expert:ScriptedExpertConfig",
            "tether.sim.experts.expert:ScriptedExpert",
        ),
        "insert_expert": Entry(
            "tether.sim.experts.config_expert:InsertExpertConfig",
            "tether.sim.experts.insert_expert:InsertExpert",
        ),
        "multitask_expert": Entry(
            "tether.sim.experts.config_expert:MultitaskExpertConfig",
            "tether.sim.experts.multitask_expert:MultitaskExpert",
        ),
        "base_expert": Entry(
            "tether.sim.experts.config_base_expert:BaseExpertConfig",
            "tether.sim.experts.base_expert:BaseExpert",
        ),
        # a classical local planner for mobile bases (Dynamic Window Approach), the
        # baseline of the learned planner (docs/mobile_base.md)
        "dwa": Entry(
            "tether.sim.experts.config_base_expert:DWAConfig",
            "tether.sim.experts.dwa:DWAPlanner",
        ),
        "quad_pid": Entry(
            "tether.sim.quadrotor.config_quadrotor:QuadPIDConfig",
            "tether.sim.quadrotor.pid_policy:QuadPIDPolicy",
        ),
        # PID + reciprocal collision avoidance for drone swarms (docs/swarm.md)
        "swarm_orca": Entry(
            "tether.sim.quadrotor.config_quadrotor:SwarmOrcaConfig",
            "tether.sim.quadrotor.orca_policy:SwarmOrcaPolicy",
        ),
    },
}
