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

Tasks: the lift task's cube (its ``rest_z`` half-size, 0.1 kg). Other tasks need their
objects added in ``build_objects`` (the names are the task's ``objects``).
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
ROBOT_PRIM = "/World/panda"


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("experiment", help="the experiment as `tether check <yaml>` prints it")
    ap.add_argument("--gui", action="store_true", help="open Isaac Sim's window")
    return ap.parse_args()


ARGS = parse_args()
with open(ARGS.experiment) as f:
    EXP = yaml.safe_load(f)
SIM = EXP["sim"]
if SIM.get("type") != "isaac_ros":
    raise SystemExit(f"{ARGS.experiment}: sim.type is {SIM.get('type')!r}, not isaac_ros")
TOPICS = SIM["topics"]

# SimulationApp first: nothing from isaacsim (or omni) imports before it
from isaacsim import SimulationApp  # noqa: E402

simulation_app = SimulationApp({"headless": not ARGS.gui})

import numpy as np  # noqa: E402
import omni.graph.core as og  # noqa: E402
from isaacsim.core.api import World  # noqa: E402
from isaacsim.core.api.objects import DynamicCuboid  # noqa: E402
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
    add_reference_to_stage(usd_path=root + FRANKA_USD, prim_path=ROBOT_PRIM)
    robot = world.scene.add(SingleArticulation(prim_path=ROBOT_PRIM, name="panda"))
    return world, robot, build_objects(world)


def build_objects(world: World) -> dict:
    """The task's objects by name (the lift task: its cube)."""
    task = EXP["task"]
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
        names = list(given.get(OBJECT_NAMES) or [])
        poses = np.asarray(given.get(OBJECT_POSES) or [], np.float64)
        if q.size != self.robot.num_dof:
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
    build_bridge_graph()
    world.reset()
    rclpy.init()
    scene = Scene(world, robot, objects)
    dt = 1.0 / float(SIM["control_hz"])
    print(
        f"Isaac scene ready: {TOPICS['joint_states']} / {TOPICS['joint_command']}, node {scene.get_name()}"
    )
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
