# mypy: ignore-errors
"""The Isaac Sim side of ``sim.type: isaac_ros``: a standalone script for Isaac Sim's own
Python that builds the scene of a Tether experiment, its ROS 2 bridge graph with the topic
names of the experiment's ``sim.topics``, and the scene node whose parameters start Tether's
episodes (docs/isaac_sim.md).

    tether check configs/experiments/panda_lift_isaac_ros.yaml > /tmp/panda_lift_isaac.yaml
    ./python.sh sim/isaac/isaac_ros_scene.py /tmp/panda_lift_isaac.yaml [--gui]
    # then, on any machine of the same ROS 2 domain:
    tether up configs/experiments/panda_lift_isaac_ros.yaml sim.standin=false

It takes the experiment as ``tether check`` prints it (resolved, every default filled in), so
it needs neither Tether nor its dependencies inside Isaac Sim's Python.

UNVERIFIED: this script has never run. Isaac Sim needs an RTX GPU and NVIDIA's package index,
and the machines Tether is developed and tested on have neither. It is written against the
Isaac Sim 4.5 / 5.x documentation (``isaacsim.core.api.World``,
``isaacsim.core.prims.SingleArticulation``, ``isaacsim.core.api.objects.DynamicCuboid``, the
``isaacsim.ros2.bridge`` OmniGraph nodes, rclpy from the bridge's bundled ROS 2 libraries).
What it must do is pinned by Tether's stand-in (tether_ros.isaac.standin), which speaks the same
interface and is tested: tests/ros/test_isaac_ros.py also checks that the constants below match
Tether's (tether_ros.isaac.interface).

What it publishes and takes (Isaac's default QoS: reliable, keep last 10):
  - ``topics.joint_states`` (sensor_msgs/JointState) and ``topics.clock``
    (rosgraph_msgs/Clock) from the bridge graph, every rendered frame;
  - ``topics.joint_command`` (sensor_msgs/JointState position targets) into the
    articulation controller;
  - each camera of ``sim.cameras`` as ``topics.image`` (rgb) + ``topics.camera_info``;
  - each task object's pose as ``topics.object_pose`` (geometry_msgs/PoseStamped, world frame,
    stamped with the simulation time). Isaac's own way is /tf; Tether reads PoseStamped
    because tf2_msgs has no PyPI wheel for the machines without a ROS install;
  - parameters ``episode.seed``, ``episode.joint_positions``, ``episode.object_names``,
    ``episode.object_poses`` of the node ``sim.scene_node``: Tether sets them in one
    SetParametersAtomically call; the scene then teleports the arm and the objects there, at
    rest. Tether draws the start from the seed with its own task code, so every engine starts
    an episode of a seed from the same place.

Tasks: the lift task's cube (its ``rest_z`` half-size, 0.1 kg) with the Franka; a mobile base's
go_to_goal (its goal marker) with Isaac's Nova Carter (``--base-usd``, ``--wheel-joints``,
``--wheel-radius``, ``--wheel-distance``), a differential controller on ``topics.cmd_vel``,
odometry on ``topics.odom`` and an RTX lidar as a LaserScan on ``topics.scan``. Tether's robot
description must match the base Isaac simulates (its wheel joints and limits; the Husky has no
Isaac asset here). Other tasks need their objects added in ``build_objects``.
"""

from __future__ import annotations

import argparse
import time

import yaml

# the episode parameters (tether_ros.isaac.interface; a test checks they agree)
SEED = "episode.seed"
JOINT_POSITIONS = "episode.joint_positions"
BASE_POSE = "episode.base_pose"  # mobile bases only (not built by this script yet)
OBJECT_NAMES = "episode.object_names"
OBJECT_POSES = "episode.object_poses"
# Isaac's asset root paths (4.5 / 5.x)
FRANKA_USD = "/Isaac/Robots/FrankaRobotics/FrankaPanda/franka.usd"
BASE_USD = "/Isaac/Robots/NVIDIA/NovaCarter/nova_carter.usd"
ROBOT_PRIM = "/World/robot"


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("experiment", help="the experiment as `tether check <yaml>` prints it")
    ap.add_argument("--gui", action="store_true", help="open Isaac Sim's window")
    # a mobile base (the experiment's sim section has mobile_base:): Isaac's base and its
    # drive; Tether's robot description must match it (wheel joints, limits)
    ap.add_argument("--base-usd", default=BASE_USD, help=f"default {BASE_USD}")
    ap.add_argument(
        "--wheel-joints",
        default="joint_wheel_left,joint_wheel_right",
        help="the left and right drive joints (comma-separated)",
    )
    ap.add_argument("--wheel-radius", type=float, default=0.14, help="m (Nova Carter)")
    ap.add_argument("--wheel-distance", type=float, default=0.413, help="m (Nova Carter)")
    return ap.parse_args()


ARGS = parse_args()
with open(ARGS.experiment) as f:
    EXP = yaml.safe_load(f)
SIM = EXP["sim"]
if SIM.get("type") != "isaac_ros":
    raise SystemExit(f"{ARGS.experiment}: sim.type is {SIM.get('type')!r}, not isaac_ros")
TOPICS = SIM["topics"]
BASE = "mobile_base" in SIM  # the resolved sim section of a base carries its lidar

# SimulationApp first: nothing from isaacsim (or omni) imports before it
from isaacsim import SimulationApp  # noqa: E402

simulation_app = SimulationApp({"headless": not ARGS.gui})

import numpy as np  # noqa: E402
import omni.graph.core as og  # noqa: E402
from isaacsim.core.api import World  # noqa: E402
from isaacsim.core.api.objects import DynamicCuboid, VisualCuboid  # noqa: E402
from isaacsim.core.prims import SingleArticulation  # noqa: E402
from isaacsim.core.utils.extensions import enable_extension  # noqa: E402
from isaacsim.core.utils.prims import create_prim  # noqa: E402
from isaacsim.core.utils.stage import add_reference_to_stage  # noqa: E402
from isaacsim.core.utils.types import ArticulationAction  # noqa: E402
from isaacsim.storage.native import get_assets_root_path  # noqa: E402

enable_extension("isaacsim.ros2.bridge")
simulation_app.update()

import rclpy  # noqa: E402  (the bridge's bundled ROS 2 libraries)
from geometry_msgs.msg import PoseStamped  # noqa: E402
from rcl_interfaces.msg import SetParametersResult  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402


def build_world() -> tuple[World, SingleArticulation, dict]:
    control_dt = 1.0 / float(SIM["control_hz"])
    # physics at least 240 Hz and a whole number of steps per control period
    substeps = max(1, int(np.ceil(control_dt / min(float(SIM["physics_dt"]), 1 / 240))))
    world = World(
        stage_units_in_meters=1.0, physics_dt=control_dt / substeps, rendering_dt=control_dt
    )
    world.scene.add_default_ground_plane()  # the table top at z = 0, as in Tether's scenes
    root = get_assets_root_path()
    if root is None:
        raise SystemExit("Isaac Sim's asset root is not reachable (Nucleus or a local mirror)")
    usd = root + ARGS.base_usd if BASE else root + FRANKA_USD
    add_reference_to_stage(usd_path=usd, prim_path=ROBOT_PRIM)
    robot = world.scene.add(SingleArticulation(prim_path=ROBOT_PRIM, name="robot"))
    return world, robot, build_objects(world)


def build_objects(world: World) -> dict:
    """The task's objects by name (lift: its cube; a base's go_to_goal: its goal marker)."""
    task = EXP["task"]
    if task["type"] == "go_to_goal":
        goal = VisualCuboid(
            prim_path="/World/goal",
            name="goal",
            position=np.array([1.0, 0.0, 0.005]),
            scale=np.array([0.3, 0.3, 0.01]),
            color=np.array([0.1, 0.8, 0.1]),
        )
        return {"goal": world.scene.add(goal)}
    if task["type"] != "lift":
        raise SystemExit(
            f"task {task['type']!r}: the scene script builds the lift task's cube only; add "
            "the task's objects in build_objects()"
        )
    size = 2.0 * float(task.get("rest_z", 0.025))
    cube = DynamicCuboid(
        prim_path="/World/cube",
        name="cube",
        position=np.array([0.5, 0.0, size / 2]),
        scale=np.array([size, size, size]),
        mass=0.1,
        color=np.array([0.8, 0.1, 0.1]),
    )
    return {"cube": world.scene.add(cube)}


# where Tether's Panda scenes look from (docs/isaac_sim.md): "front" faces the robot across
# the table; "wrist" rides on the hand. Positions in m, orientations w, x, y, z (USD camera
# convention: it looks down its -z axis).
CAMERA_POSES = {
    "front": ((1.3, 0.0, 0.6), (0.5963, 0.3799, 0.3799, 0.5963)),
    "wrist": ((0.05, 0.0, 0.04), (0.0, 0.7071, 0.7071, 0.0)),
}


def camera_prim(name: str) -> str:
    """A camera prim for camera ``name`` (created once): the wrist camera under the hand."""
    if name not in CAMERA_POSES:
        raise SystemExit(f"camera {name!r}: add its pose to CAMERA_POSES")
    pos, quat = CAMERA_POSES[name]
    path = f"{ROBOT_PRIM}/panda_hand/{name}_camera" if name == "wrist" else f"/World/{name}_camera"
    create_prim(path, "Camera", translation=np.array(pos), orientation=np.array(quat))
    return path


def build_base_graph() -> None:
    """A base's bridge graph: cmd_vel (Twist) through the differential controller into the
    wheels, odometry, the wheels' joint states, an RTX lidar as a LaserScan, the clock."""
    import omni.kit.commands

    keys = og.Controller.Keys
    lidar_ok, lidar = omni.kit.commands.execute(
        "IsaacSensorCreateRtxLidar",
        path="/lidar",
        parent=f"{ROBOT_PRIM}/chassis_link",
        config="Example_Rotary_2D",
    )
    wheels = [j.strip() for j in ARGS.wheel_joints.split(",")]
    og.Controller.edit(
        {"graph_path": "/World/TetherBaseBridge", "evaluator_name": "execution"},
        {
            keys.CREATE_NODES: [
                ("tick", "omni.graph.action.OnPlaybackTick"),
                ("context", "isaacsim.ros2.bridge.ROS2Context"),
                ("sim_time", "isaacsim.core.nodes.IsaacReadSimulationTime"),
                ("twist", "isaacsim.ros2.bridge.ROS2SubscribeTwist"),
                ("diff", "isaacsim.robot.wheeled_robots.DifferentialController"),
                ("wheels", "isaacsim.core.nodes.IsaacArticulationController"),
                ("odometry", "isaacsim.core.nodes.IsaacComputeOdometry"),
                ("pub_odom", "isaacsim.ros2.bridge.ROS2PublishOdometry"),
                ("pub_js", "isaacsim.ros2.bridge.ROS2PublishJointState"),
                ("pub_clock", "isaacsim.ros2.bridge.ROS2PublishClock"),
                ("rp_lidar", "isaacsim.core.nodes.IsaacCreateRenderProduct"),
                ("scan", "isaacsim.ros2.bridge.ROS2RtxLidarHelper"),
            ],
            keys.SET_VALUES: [
                ("twist.inputs:topicName", TOPICS["cmd_vel"]),
                ("diff.inputs:wheelRadius", ARGS.wheel_radius),
                ("diff.inputs:wheelDistance", ARGS.wheel_distance),
                ("wheels.inputs:robotPath", ROBOT_PRIM),
                ("wheels.inputs:jointNames", wheels),
                ("odometry.inputs:chassisPrim", ROBOT_PRIM),
                ("pub_odom.inputs:topicName", TOPICS["odom"]),
                ("pub_js.inputs:topicName", TOPICS["joint_states"]),
                ("pub_js.inputs:targetPrim", ROBOT_PRIM),
                ("pub_clock.inputs:topicName", TOPICS["clock"].lstrip("/")),
                ("rp_lidar.inputs:cameraPrim", str(lidar.GetPath()) if lidar_ok else "/lidar"),
                ("scan.inputs:type", "laser_scan"),
                ("scan.inputs:topicName", TOPICS["scan"]),
                ("scan.inputs:frameId", "laser"),
            ],
            keys.CONNECT: [
                *[
                    ("tick.outputs:tick", f"{n}.inputs:execIn")
                    for n in ("twist", "wheels", "odometry", "pub_js", "pub_clock", "rp_lidar")
                ],
                ("twist.outputs:execOut", "diff.inputs:execIn"),
                ("twist.outputs:linearVelocity", "diff.inputs:linearVelocity"),
                ("twist.outputs:angularVelocity", "diff.inputs:angularVelocity"),
                ("diff.outputs:velocityCommand", "wheels.inputs:velocityCommand"),
                ("odometry.outputs:execOut", "pub_odom.inputs:execIn"),
                ("odometry.outputs:position", "pub_odom.inputs:position"),
                ("odometry.outputs:orientation", "pub_odom.inputs:orientation"),
                ("odometry.outputs:linearVelocity", "pub_odom.inputs:linearVelocity"),
                ("odometry.outputs:angularVelocity", "pub_odom.inputs:angularVelocity"),
                ("rp_lidar.outputs:execOut", "scan.inputs:execIn"),
                ("rp_lidar.outputs:renderProductPath", "scan.inputs:renderProductPath"),
                *[
                    ("context.outputs:context", f"{n}.inputs:context")
                    for n in ("twist", "pub_odom", "pub_js", "pub_clock", "scan")
                ],
                *[
                    ("sim_time.outputs:simulationTime", f"{n}.inputs:timeStamp")
                    for n in ("pub_odom", "pub_js", "pub_clock")
                ],
            ],
        },
    )


def build_bridge_graph() -> None:
    """Isaac's standard bridge graph: joint states, joint commands into the articulation
    controller, the clock, and a camera helper pair per camera."""
    keys = og.Controller.Keys
    nodes = [
        ("tick", "omni.graph.action.OnPlaybackTick"),
        ("context", "isaacsim.ros2.bridge.ROS2Context"),
        ("sim_time", "isaacsim.core.nodes.IsaacReadSimulationTime"),
        ("pub_js", "isaacsim.ros2.bridge.ROS2PublishJointState"),
        ("sub_js", "isaacsim.ros2.bridge.ROS2SubscribeJointState"),
        ("controller", "isaacsim.core.nodes.IsaacArticulationController"),
        ("pub_clock", "isaacsim.ros2.bridge.ROS2PublishClock"),
    ]
    values = [
        ("pub_js.inputs:topicName", TOPICS["joint_states"]),
        ("pub_js.inputs:targetPrim", ROBOT_PRIM),
        ("sub_js.inputs:topicName", TOPICS["joint_command"]),
        ("controller.inputs:robotPath", ROBOT_PRIM),
        ("pub_clock.inputs:topicName", TOPICS["clock"].lstrip("/")),
    ]
    connect = [
        ("tick.outputs:tick", "pub_js.inputs:execIn"),
        ("tick.outputs:tick", "sub_js.inputs:execIn"),
        ("tick.outputs:tick", "pub_clock.inputs:execIn"),
        ("tick.outputs:tick", "controller.inputs:execIn"),
        ("context.outputs:context", "pub_js.inputs:context"),
        ("context.outputs:context", "sub_js.inputs:context"),
        ("context.outputs:context", "pub_clock.inputs:context"),
        ("sim_time.outputs:simulationTime", "pub_js.inputs:timeStamp"),
        ("sim_time.outputs:simulationTime", "pub_clock.inputs:timeStamp"),
        ("sub_js.outputs:jointNames", "controller.inputs:jointNames"),
        ("sub_js.outputs:positionCommand", "controller.inputs:positionCommand"),
    ]
    for cam in SIM.get("cameras", []):
        name = cam["name"]
        prim = camera_prim(name)
        nodes += [
            (f"rp_{name}", "isaacsim.core.nodes.IsaacCreateRenderProduct"),
            (f"rgb_{name}", "isaacsim.ros2.bridge.ROS2CameraHelper"),
            (f"info_{name}", "isaacsim.ros2.bridge.ROS2CameraInfoHelper"),
        ]
        values += [
            (f"rp_{name}.inputs:cameraPrim", prim),
            (f"rp_{name}.inputs:width", int(cam["width"])),
            (f"rp_{name}.inputs:height", int(cam["height"])),
            (f"rgb_{name}.inputs:type", "rgb"),
            (f"rgb_{name}.inputs:topicName", TOPICS["image"].format(camera=name)),
            (f"rgb_{name}.inputs:frameId", f"{name}_optical_frame"),
            (f"info_{name}.inputs:topicName", TOPICS["camera_info"].format(camera=name)),
            (f"info_{name}.inputs:frameId", f"{name}_optical_frame"),
        ]
        connect += [
            ("tick.outputs:tick", f"rp_{name}.inputs:execIn"),
            (f"rp_{name}.outputs:execOut", f"rgb_{name}.inputs:execIn"),
            (f"rp_{name}.outputs:execOut", f"info_{name}.inputs:execIn"),
            (f"rp_{name}.outputs:renderProductPath", f"rgb_{name}.inputs:renderProductPath"),
            (f"rp_{name}.outputs:renderProductPath", f"info_{name}.inputs:renderProductPath"),
            ("context.outputs:context", f"rgb_{name}.inputs:context"),
            ("context.outputs:context", f"info_{name}.inputs:context"),
        ]
    og.Controller.edit(
        {"graph_path": "/World/TetherBridge", "evaluator_name": "execution"},
        {keys.CREATE_NODES: nodes, keys.SET_VALUES: values, keys.CONNECT: connect},
    )


class Scene(Node):
    """Object poses out, episode starts in (the parameters above)."""

    def __init__(self, world: World, robot: SingleArticulation, objects: dict) -> None:
        super().__init__(SIM["scene_node"].strip("/").split("/")[-1])
        self.world, self.robot, self.objects = world, robot, objects
        self.pubs = {
            n: self.create_publisher(PoseStamped, TOPICS["object_pose"].format(name=n), 10)
            for n in objects
        }
        self.declare_parameter(SEED, -1)
        self.declare_parameter(JOINT_POSITIONS, Parameter.Type.DOUBLE_ARRAY)
        self.declare_parameter(BASE_POSE, Parameter.Type.DOUBLE_ARRAY)
        self.declare_parameter(OBJECT_NAMES, Parameter.Type.STRING_ARRAY)
        self.declare_parameter(OBJECT_POSES, Parameter.Type.DOUBLE_ARRAY)
        self.add_on_set_parameters_callback(self.on_params)

    def on_params(self, params: list) -> SetParametersResult:
        given = {p.name: p.value for p in params}
        if SEED not in given:
            return SetParametersResult(successful=True)
        q = np.asarray(given.get(JOINT_POSITIONS) or [], np.float64)
        base_pose = np.asarray(given.get(BASE_POSE) or [], np.float64)
        names = list(given.get(OBJECT_NAMES) or [])
        poses = np.asarray(given.get(OBJECT_POSES) or [], np.float64)
        if BASE:
            if base_pose.size != 7:
                return SetParametersResult(successful=False, reason=f"{BASE_POSE}: 7 values")
            self.robot.set_world_pose(position=base_pose[:3], orientation=base_pose[3:])
            self.robot.set_linear_velocity(np.zeros(3))
            self.robot.set_angular_velocity(np.zeros(3))
            self.robot.set_joint_velocities(np.zeros(self.robot.num_dof))
        elif q.size != self.robot.num_dof:
            return SetParametersResult(
                successful=False,
                reason=f"{JOINT_POSITIONS}: {q.size} values, the articulation has "
                f"{self.robot.num_dof} joints {self.robot.dof_names}",
            )
        if poses.size != 7 * len(names) or any(n not in self.objects for n in names):
            return SetParametersResult(
                successful=False,
                reason=f"{OBJECT_POSES}: 7 values for each of {list(self.objects)}",
            )
        if not BASE:
            self.robot.set_joint_positions(q)
            self.robot.set_joint_velocities(np.zeros_like(q))
            self.robot.apply_action(ArticulationAction(joint_positions=q))
        for i, name in enumerate(names):
            obj = self.objects[name]
            obj.set_world_pose(
                position=poses[7 * i : 7 * i + 3], orientation=poses[7 * i + 3 : 7 * i + 7]
            )
            obj.set_linear_velocity(np.zeros(3))
            obj.set_angular_velocity(np.zeros(3))
        return SetParametersResult(successful=True)

    def publish_poses(self) -> None:
        t = float(self.world.current_time)
        for name, obj in self.objects.items():
            pos, quat = obj.get_world_pose()  # quaternion w, x, y, z
            msg = PoseStamped()
            msg.header.stamp.sec = int(t)
            msg.header.stamp.nanosec = int(round((t - int(t)) * 1e9)) % 1_000_000_000
            msg.header.frame_id = "world"
            p, o = msg.pose.position, msg.pose.orientation
            p.x, p.y, p.z = (float(v) for v in pos)
            o.w, o.x, o.y, o.z = (float(v) for v in quat)
            self.pubs[name].publish(msg)


def main() -> None:
    world, robot, objects = build_world()
    if BASE:
        build_base_graph()
    else:
        build_bridge_graph()
    world.reset()
    rclpy.init()
    scene = Scene(world, robot, objects)
    dt = 1.0 / float(SIM["control_hz"])
    command = TOPICS["cmd_vel"] if BASE else TOPICS["joint_command"]
    print(f"Isaac scene ready: {TOPICS['joint_states']} / {command}, node {scene.get_name()}")
    world.play()
    next_t = time.monotonic()
    while simulation_app.is_running():
        rclpy.spin_once(scene, timeout_sec=0.0)  # episode starts land between steps
        world.step(render=True)  # one control period (rendering_dt), the graph ticks
        scene.publish_poses()
        next_t += dt  # real time, as Tether's bridge steps on the wall clock
        time.sleep(max(0.0, next_t - time.monotonic()))
    scene.destroy_node()
    rclpy.shutdown()
    simulation_app.close()


if __name__ == "__main__":
    main()
