"""``sim.type: isaac_ros`` here, with the MuJoCo stand-in behind Isaac Sim's interface
(docs/isaac_sim.md): the contract both sides speak (names, types, QoS, one /clock, from the
Isaac Sim ROS 2 bridge's documented defaults, written out below so a drift fails), episode
starts that place what Tether's task drew, the errors without Isaac, and whole graphs
(`tether demo`: the expert, the diffusion policy in chunks)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rclpy")
pytest.importorskip("mujoco")
pytestmark = [pytest.mark.ros, pytest.mark.mujoco]

from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rclpy.qos import DurabilityPolicy, ReliabilityPolicy  # noqa: E402
from ros_helpers import ros_context, spin_until  # noqa: E402
from rosgraph_msgs.msg import Clock  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

from tether.core import registry  # noqa: E402
from tether.core.config import load_config  # noqa: E402
from tether.core.errors import ConfigError, TetherError  # noqa: E402
from tether.core.experiment import build_task  # noqa: E402
from tether_ros.isaac import interface as isaac  # noqa: E402
from tether_ros.isaac.standin import IsaacStandin, mujoco_twin  # noqa: E402
from tether_ros.sim_bridge import SimBridge  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "configs/experiments/panda_lift_isaac_ros.yaml"
BASE_CONFIG = REPO / "configs/experiments/husky_go_to_goal_isaac_ros.yaml"
SCENE_SCRIPT = REPO / "sim/isaac/isaac_ros_scene.py"
# what Isaac Sim's standard ROS 2 bridge graph nodes speak (docs/isaac_sim.md cites the
# pages): ROS2 Publish Joint State, ROS2 Subscribe Joint State (position targets into the
# Articulation Controller), ROS2 Publish Clock, ROS2 Camera Helper (rgb, camera_info); QoS
# reliable, volatile (keep last 10) unless a node's qosProfile says otherwise
ISAAC_TYPES = {
    "joint_states": "sensor_msgs/msg/JointState",
    "joint_command": "sensor_msgs/msg/JointState",
    "clock": "rosgraph_msgs/msg/Clock",
    "image": "sensor_msgs/msg/Image",
    "camera_info": "sensor_msgs/msg/CameraInfo",
    "object_pose": "geometry_msgs/msg/PoseStamped",
    # a mobile base: ROS2 Subscribe Twist, ROS2 Publish Odometry, ROS2 RTX Lidar Helper
    "cmd_vel": "geometry_msgs/msg/Twist",
    "odom": "nav_msgs/msg/Odometry",
    "scan": "sensor_msgs/msg/LaserScan",
}
SCENE = "tether_isaac_scene"


def _abs(topic: str) -> str:
    return topic if topic.startswith("/") else "/" + topic


class Graph:
    """The stand-in spinning in a thread of its own (the bridge waits for it while it is
    built), the sim bridge and a probe on the test's executor."""

    def __init__(self, ctx, overrides: list[str] | None = None, config: Path = CONFIG) -> None:
        self.cfg = load_config(config, overrides or [])
        self.standin = IsaacStandin(self.cfg, context=ctx)
        self._stop = threading.Event()
        self._ex_standin = SingleThreadedExecutor(context=ctx)
        self._ex_standin.add_node(self.standin)
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()
        self.bridge = SimBridge(self.cfg, context=ctx)
        self.probe = Node("probe", context=ctx)
        self.ex = SingleThreadedExecutor(context=ctx)
        self.ex.add_node(self.bridge)
        self.ex.add_node(self.probe)

    def _spin(self) -> None:
        while not self._stop.is_set():
            self._ex_standin.spin_once(timeout_sec=0.01)
        self.standin.close()  # its renderer's GL context is current in this thread

    def close(self) -> None:
        self.bridge.close()
        self._stop.set()
        self._thread.join(5.0)
        for n in (self.bridge, self.probe, self.standin):
            n.destroy_node()


def test_the_standin_and_the_bridge_speak_isaacs_interface():
    with ros_context() as ctx:
        g = Graph(ctx)
        try:
            t = g.cfg.sim.topics
            topics = {
                "joint_states": t.joint_states,
                "joint_command": t.joint_command,
                "clock": t.clock,
                "image": t.image.format(camera="front"),
                "camera_info": t.camera_info.format(camera="front"),
                "object_pose": t.object_pose.format(name="cube"),
            }
            # who publishes what: the Isaac side everything but the command, Tether the command
            writer = {k: SCENE for k in topics} | {"joint_command": "sim_bridge_isaac"}
            reader = {k: "sim_bridge_isaac" for k in topics} | {"joint_command": SCENE}
            reader.pop("camera_info")  # Tether re-derives camera_info from its CameraSpec

            def discovered() -> bool:
                return all(
                    g.probe.get_publishers_info_by_topic(_abs(topic)) for topic in topics.values()
                ) and all(g.probe.get_subscriptions_info_by_topic(_abs(topics[k])) for k in reader)

            assert spin_until(g.ex, discovered, 15)
            for key, topic in topics.items():
                pubs = g.probe.get_publishers_info_by_topic(_abs(topic))
                # one writer on each: /clock above all (the bridge does not publish one)
                assert [p.node_name for p in pubs] == [writer[key]], (key, pubs)
                assert pubs[0].topic_type == ISAAC_TYPES[key], (key, pubs[0].topic_type)
                qos = pubs[0].qos_profile
                assert qos.reliability == ReliabilityPolicy.RELIABLE, (key, qos)
                assert qos.durability == DurabilityPolicy.VOLATILE, (key, qos)
                if key in reader:
                    subs = g.probe.get_subscriptions_info_by_topic(_abs(topic))
                    assert reader[key] in [s.node_name for s in subs], (key, subs)
                    own = next(s for s in subs if s.node_name == reader[key])
                    assert own.topic_type == ISAAC_TYPES[key]
                    assert own.qos_profile.reliability == ReliabilityPolicy.RELIABLE
            # and Tether's own topics carry Isaac's state on (what every node reads)
            for own_topic in ("/joint_states", "/objects/cube/pose", "/camera/front/image_raw"):
                pubs = g.probe.get_publishers_info_by_topic(own_topic)
                assert [p.node_name for p in pubs] == ["sim_bridge"], (own_topic, pubs)
        finally:
            g.close()


def test_a_base_speaks_isaacs_twist_odometry_and_scan():
    """A Husky over isaac_ros: cmd_vel (Twist) from Tether's bridge to the Isaac side;
    odom, scan and the wheels' joint_states back; Tether's own odom / scan / cmd_vel carry
    them on; a twist the bridge passes moves the base the stand-in simulates."""
    with ros_context() as ctx:
        g = Graph(ctx, config=BASE_CONFIG)
        try:
            t = g.cfg.sim.topics
            topics = {
                "cmd_vel": t.cmd_vel,
                "odom": t.odom,
                "scan": t.scan,
                "joint_states": t.joint_states,
            }
            writer = {k: SCENE for k in topics} | {"cmd_vel": "sim_bridge_isaac"}
            reader = {k: "sim_bridge_isaac" for k in topics} | {"cmd_vel": SCENE}

            def discovered() -> bool:
                return all(
                    g.probe.get_publishers_info_by_topic(_abs(x))
                    and g.probe.get_subscriptions_info_by_topic(_abs(x))
                    for x in topics.values()
                )

            assert spin_until(g.ex, discovered, 15)
            for key, topic in topics.items():
                pubs = g.probe.get_publishers_info_by_topic(_abs(topic))
                assert [p.node_name for p in pubs] == [writer[key]], (key, pubs)
                assert pubs[0].topic_type == ISAAC_TYPES[key], (key, pubs[0].topic_type)
                assert pubs[0].qos_profile.reliability == ReliabilityPolicy.RELIABLE
                subs = g.probe.get_subscriptions_info_by_topic(_abs(topic))
                assert reader[key] in [x.node_name for x in subs], (key, subs)
            for own in ("/odom", "/scan"):
                assert [p.node_name for p in g.probe.get_publishers_info_by_topic(own)] == [
                    "sim_bridge"
                ]
            # the bridge's scan is Isaac's (64 beams, as the experiment's lidar says)
            runner = g.bridge.io.runner
            assert runner.obs["scan"].shape == (64,)
            x0 = float(runner.obs["state"][0])
            runner.submit_command(np.array([0.5, 0.0]))
            g.bridge.io.running = True
            assert spin_until(
                g.ex, lambda: float(g.standin.backend.observe()["base_pose"][0]) > x0 + 0.05, 10
            )
        finally:
            g.close()


def test_a_reset_places_what_tethers_task_drew_and_the_clock_runs_on():
    """An episode start is the seed's: the arm pose and the cube Tether's task code draws for
    it, the very place MuJoCo's own reset of that seed gives; Isaac's clock (here the
    stand-in's) never goes back, and the bridge's observation stamps follow it."""
    with ros_context() as ctx:
        g = Graph(ctx)
        clock: list[int] = []
        g.probe.create_subscription(
            Clock, "/clock", lambda m: clock.append(m.clock.sec * 10**9 + m.clock.nanosec), 10
        )
        reset = g.probe.create_client(Trigger, "sim_bridge/reset")
        twin = registry.build("sim", mujoco_twin(g.cfg.sim), robot="panda", task=build_task(g.cfg))
        try:
            assert reset.wait_for_service(5.0)
            runner = g.bridge.io.runner
            for _ in range(2):
                before = runner.obs.stamp_ns
                fut = reset.call_async(Trigger.Request())
                assert spin_until(g.ex, fut.done, 15) and fut.result().success
                seed = runner.seed
                ref = twin.reset(seed)
                cube, _ = g.standin.backend.body_pose("cube")
                np.testing.assert_allclose(cube, twin.body_pose("cube")[0], atol=2e-3)
                got = runner.obs["state"][:7]
                np.testing.assert_allclose(got, ref["state"][:7], atol=isaac_tol())
                assert runner.obs.stamp_ns > before
                n = len(clock)
                assert spin_until(g.ex, lambda n=n: len(clock) > n + 5, 5)
            assert clock == sorted(clock) and len(set(clock)) > 10
        finally:
            twin.close()
            g.close()


def isaac_tol() -> float:
    from tether_ros.isaac.backend import RESET_TOLERANCE

    return RESET_TOLERANCE


def test_without_isaac_the_bridge_says_what_is_missing():
    cfg = load_config(CONFIG, ["sim.standin=false", "sim.connect_timeout_s=1"])
    with ros_context() as ctx, pytest.raises(TetherError) as err:
        SimBridge(cfg, context=ctx)
    msg = str(err.value)
    assert "no Isaac Sim answered" in msg and "isaac_joint_states" in msg
    assert "isaac_ros_scene.py" in msg and "sim.standin=true" in msg and "\n" not in msg


def test_in_process_use_is_refused_in_one_sentence():
    cfg = load_config(CONFIG)
    with pytest.raises(ConfigError, match="run it in the node graph"):
        registry.build("sim", cfg.sim, robot="panda", task=build_task(cfg))


def test_the_scene_script_speaks_tethers_names():
    """The Isaac-side script cannot import Tether: its episode parameters must equal
    tether_ros.isaac.interface's, and it must read every topic of ``sim.topics``."""
    from tether.sim.isaac.config_isaac import IsaacTopics

    source = SCENE_SCRIPT.read_text()
    consts = {
        node.targets[0].id: node.value.value
        for node in ast.parse(source).body
        if isinstance(node, ast.Assign)
        and isinstance(node.targets[0], ast.Name)
        and isinstance(node.value, ast.Constant)
    }
    for name in ("SEED", "JOINT_POSITIONS", "BASE_POSE", "OBJECT_NAMES", "OBJECT_POSES"):
        assert consts[name] == getattr(isaac, name), name
    for key in IsaacTopics.model_fields:
        assert f'TOPICS["{key}"]' in source, key
    assert "SimulationApp(" in source.split("import numpy")[0]  # before any isaacsim import


def _demo(tmp_path: Path, name: str, *extra: str, config: Path = CONFIG) -> dict:
    out = tmp_path / name
    cmd = [sys.executable, "-m", "tether.cli.main", "demo", "--config", str(config)]
    r = subprocess.run(
        [*cmd, "--no-video", "--out", str(out), *extra],
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads((out / "summary.json").read_text())


@pytest.mark.slow
def test_the_expert_and_the_diffusion_policy_run_through_isaacs_interface(tmp_path):
    """`tether demo` of the Isaac experiments (stand-in, separate processes): the scripted
    expert lifts in at least 9 of 10 episodes, each episode's time is Isaac's since its
    start; the shipped diffusion policy runs in chunks through the chunk executor; the
    Husky's expert reaches its goal in at least 2 of 3."""
    s = _demo(tmp_path, "expert", "--episodes", "10")
    assert s["successes"] >= 9, s["per_episode"]
    for e in s["per_episode"]:
        # steps at the control rate, over Isaac's time since the start (not its whole clock)
        assert e["steps"] == pytest.approx(e["sim_time_s"] * 100, rel=0.1), e
        assert e["rejected"] == 0, e
    model = REPO / "models/panda_lift_diffusion/model.onnx"
    d = _demo(
        tmp_path, "diffusion", "--episodes", "3",
        "policy.type=onnx", f"policy.model={model}", "ros.chunked=true",
    )  # fmt: skip
    assert d["successes"] >= 1, d["per_episode"]
    assert d["chunk_executor"]["chunks"] >= 6, d["chunk_executor"]
    # the executor's rows reach Isaac: the bridge's filter accepts them every step
    for e in d["per_episode"]:
        assert e["safety"]["accepted"] > 0.5 * e["steps"], e
    # and a mobile base: the Husky's go-to-goal expert over cmd_vel / odom / scan
    b = _demo(tmp_path, "base", "--episodes", "3", config=BASE_CONFIG)
    assert b["successes"] >= 2, b["per_episode"]
