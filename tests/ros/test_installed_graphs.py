"""Every experiment runs from the colcon-installed package, the way `ros2 launch` runs it.

The `launch` library is not available here, so the test does what launch_ros does for each
node of ``plan_graph`` (the function sim.launch.py and hardware.launch.py call): it starts the
installed console script ``<install>/lib/tether_ros/<exe> --ros-args -r __node:=<name>
[-r __ns:=<ns>] --params-file <file>`` from a sourced install, with a working directory
outside the repository, and the experiment taken from ``share/tether_ros``. A graph passes
when it reaches its first action (a command on the policy's topic, or at the mock driver for
hardware), then stops cleanly on SIGINT as on Ctrl-C.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import time
from pathlib import Path

import pytest

pytest.importorskip("rclpy")
pytest.importorskip("mujoco")
pytest.importorskip("pybullet")
pytestmark = [pytest.mark.ros, pytest.mark.mujoco, pytest.mark.pybullet, pytest.mark.slow]

from colcon_helpers import (  # noqa: E402
    PKG,
    REPO,
    build_workspace,
    launch_ros_command,
    sourced_env,
    write_params_file,
)
from geometry_msgs.msg import Twist  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from ros_helpers import ros_context  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402
from trajectory_msgs.msg import JointTrajectory  # noqa: E402

from tether.core.config import load_config  # noqa: E402
from tether.core.experiment import robot_spec  # noqa: E402
from tether.sim.factory import robot_kind  # noqa: E402
from tether_ros import interface as itf  # noqa: E402
from tether_ros.chunk_executor import ACTION_CHUNK  # noqa: E402
from tether_ros.drivers.jtc_arm import driver_names  # noqa: E402
from tether_ros.drivers.ros_io import driver_topic  # noqa: E402
from tether_ros.graph import NodeSpec, graph_env, plan_graph  # noqa: E402

EXPERIMENTS = sorted(p.name for p in (REPO / "configs" / "experiments").glob("*.yaml"))
# Experiments that serve a model the user trains (runs/...: not on a fresh machine) run with
# the shipped model of the same robot and task in its place; without it, the policy server
# names the missing file (test_a_missing_model_is_one_sentence).
STAND_INS = {
    "quad_hover.yaml": ["policy.model=models/quad_hover"],
    "panda_lift_diffusion_mlp.yaml": ["policy.model=models/panda_lift_diffusion"],
    # one policy server process per drone: four of the eight keep the graph's start within
    # the time limit on two cores (tests/ros/test_swarm_ros.py flies them)
    "swarm_orca.yaml": ["sim.quadrotor.num_drones=4"],
    "swarm_ppo.yaml": ["sim.quadrotor.num_drones=4"],
}
FIRST_ACTION_S = 90.0


@pytest.fixture(scope="module")
def install(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_workspace(tmp_path_factory.mktemp("ros2_ws"))


@pytest.fixture(scope="module")
def env(install: Path) -> dict[str, str]:
    return sourced_env(install)


def _tail(path: Path, lines: int = 25) -> str:
    text = path.read_text(errors="replace") if path.exists() else ""
    return "\n".join(text.splitlines()[-lines:])


class InstalledGraph:
    """The nodes of a plan started as launch_ros starts them; SIGINT stops them all."""

    def __init__(self, install: Path, nodes: list[NodeSpec], env: dict[str, str], cwd: Path):
        self.install, self.nodes, self.env, self.cwd = install, nodes, env, cwd
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def log(self, key: str) -> Path:
        return self.cwd / f"{key}.log"

    def start(self) -> None:
        for node in self.nodes:
            params = write_params_file(self.cwd / f"{node.key}.params.yaml", node.parameters)
            cmd = launch_ros_command(
                self.install, node.executable, node.name, node.namespace, params
            )
            with self.log(node.key).open("wb") as out:
                self.procs[node.key] = subprocess.Popen(
                    cmd,
                    cwd=self.cwd,
                    env=self.env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )

    def dead(self) -> list[str]:
        return [k for k, p in self.procs.items() if p.poll() is not None]

    def report(self) -> str:
        return "\n".join(
            f"--- {k} (exit {p.poll()}):\n{_tail(self.log(k))}" for k, p in self.procs.items()
        )

    def interrupt(self, timeout_s: float = 15.0) -> dict[str, int | None]:
        """SIGINT to every node at once (launch's Ctrl-C); exit codes (None: still running)."""
        for p in self.procs.values():
            with contextlib.suppress(ProcessLookupError):
                p.send_signal(signal.SIGINT)
        deadline = time.monotonic() + timeout_s
        for p in self.procs.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(max(0.1, deadline - time.monotonic()))
        stuck = [p for p in self.procs.values() if p.poll() is None]
        for p in stuck:  # its stacks into its log (run_node's SIGUSR1), for the report
            with contextlib.suppress(ProcessLookupError):
                p.send_signal(signal.SIGUSR1)
        if stuck:
            time.sleep(1.0)
        return {k: p.poll() for k, p in self.procs.items()}

    def kill(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()


def _command_probe(node: Node, cfg, nodes: list[NodeSpec]) -> list[object]:
    """Subscribe to where the graph's first action shows; the list the messages land in."""
    got: list[object] = []
    hw = cfg.hardware
    if hw is not None and hw.type == "jtc_arm":
        controller, _ = driver_names(hw, robot_spec(cfg))
        topic = driver_topic(hw.driver_namespace, f"{controller}/joint_trajectory")
        node.create_subscription(JointTrajectory, topic, got.append, itf.COMMAND_QOS)
        return got
    if hw is not None and hw.type == "twist_base":
        topic = driver_topic(hw.driver_namespace, itf.CMD_VEL)
        node.create_subscription(Twist, topic, got.append, itf.COMMAND_QOS)
        return got
    if any(n.name == "chunk_executor" for n in nodes):
        # the executor holds the measured position from its first joint state on: the
        # graph's first *policy* action is the policy server's first chunk
        for ns in sorted({n.namespace.strip("/") for n in nodes if n.name == "chunk_executor"}):
            full = f"/{ns}/{ACTION_CHUNK}" if ns else f"/{ACTION_CHUNK}"
            node.create_subscription(JointTrajectory, full, got.append, itf.COMMAND_QOS)
        return got
    kind = robot_kind(cfg.robot)
    msg_type, topic = {
        "arm": (JointTrajectory, itf.JOINT_TRAJECTORY),
        # the base policies answer on joint_trajectory too (one point: vx, wz); the bridge
        # turns it into the base's twist
        "mobile_base": (JointTrajectory, itf.JOINT_TRAJECTORY),
        "quadcopter": (JointState, itf.CMD_LOW_LEVEL),
    }[kind]
    for ns in sorted({n.namespace.strip("/") for n in nodes if n.name == "policy_server"}):
        full = f"/{ns}/{topic}" if ns else f"/{topic}"
        node.create_subscription(msg_type, full, got.append, itf.COMMAND_QOS)
    return got


def _spin_until(ex, graph: InstalledGraph, pred, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not pred():
        dead = graph.dead()
        assert not dead, f"{dead} exited before {what}:\n{graph.report()}"
        assert time.monotonic() < deadline, f"no {what} within {timeout_s:.0f} s:\n{graph.report()}"
        ex.spin_once(timeout_sec=0.05)


def _absolute(cfg, name: str) -> str:
    """A topic or service name under the experiment's namespace (a hardware fleet: under
    its first drone's)."""
    parts = [cfg.ros.namespace.strip("/")]
    if cfg.hardware is not None and cfg.hardware.fleet:
        parts.append(cfg.hardware.fleet[0].namespace.strip("/"))
    ns = "/".join(p for p in parts if p)
    return f"/{ns}/{name}" if ns else f"/{name}"


def _mavlink_takes_off(node: Node, ex, graph: InstalledGraph, cfg) -> None:
    """A MAVLink drone has no policy in the graph: the first action is a takeoff, and the
    mock autopilot climbing (odom) shows the command reached it."""
    z: list[float] = []
    node.create_subscription(
        Odometry,
        _absolute(cfg, itf.ODOM),
        lambda m: z.append(m.pose.pose.position.z),
        itf.SENSOR_QOS,
    )
    takeoff = node.create_client(Trigger, _absolute(cfg, itf.TAKEOFF))
    _spin_until(ex, graph, lambda: bool(z), FIRST_ACTION_S, "odom from the autopilot")
    _spin_until(ex, graph, takeoff.service_is_ready, FIRST_ACTION_S, "the takeoff service")
    future = takeoff.call_async(Trigger.Request())
    _spin_until(ex, graph, future.done, 30.0, "an answer to takeoff")
    assert future.result().success, future.result().message
    _spin_until(ex, graph, lambda: z[-1] > 0.3, 60.0, "the drone climbing after takeoff")


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_installed_graph_reaches_its_first_action(name, install, env, tmp_path):
    experiment = install / PKG / "share" / PKG / "configs" / "experiments" / name
    assert experiment.is_file(), f"{name} is not installed in share/{PKG}"
    overrides = STAND_INS.get(name, [])
    cfg = load_config(experiment, overrides)
    nodes = plan_graph(experiment, overrides)  # what sim.launch.py / hardware.launch.py run
    graph_cwd = tmp_path / "cwd"  # not the repository: relative paths must not depend on it
    graph_cwd.mkdir()
    graph = InstalledGraph(install, nodes, graph_env(cfg, base=env), graph_cwd)
    try:
        with ros_context() as ctx:
            node = Node("installed_graph_probe", context=ctx)
            ex = SingleThreadedExecutor(context=ctx)
            ex.add_node(node)
            mavlink = cfg.hardware is not None and cfg.hardware.type == "mavlink"
            got = [] if mavlink else _command_probe(node, cfg, nodes)
            graph.start()
            if mavlink:
                _mavlink_takes_off(node, ex, graph, cfg)
            else:
                if not cfg.episodes.autostart:  # the demo's graph waits to be started
                    start = node.create_client(Trigger, _absolute(cfg, "sim_bridge/start_episode"))
                    _spin_until(ex, graph, start.service_is_ready, FIRST_ACTION_S, "start_episode")
                    start.call_async(Trigger.Request())
                _spin_until(ex, graph, lambda: bool(got), FIRST_ACTION_S, "first action")
            ex.shutdown()  # before the node and the context go (nothing left to tear down later)
            node.destroy_node()
        codes = graph.interrupt()
        bad = {k: c for k, c in codes.items() if c != 0}
        assert not bad, f"after SIGINT: {bad}\n{graph.report()}"
        for key in graph.procs:
            assert "Traceback" not in graph.log(key).read_text(errors="replace"), graph.report()
    finally:
        graph.kill()


def test_a_missing_model_is_one_sentence(install, env, tmp_path):
    """An experiment whose model does not exist yet (it is trained by the user) stops its
    policy server with one line naming the file, from the installed package too."""
    experiment = install / PKG / "share" / PKG / "configs" / "experiments" / "quad_hover.yaml"
    cfg = load_config(experiment)
    nodes = [n for n in plan_graph(experiment) if n.name == "policy_server"]
    graph = InstalledGraph(install, nodes, graph_env(cfg, base=env), tmp_path)
    graph.start()
    try:
        proc = graph.procs[nodes[0].key]
        rc = proc.wait(timeout=60)
        text = graph.log(nodes[0].key).read_text(errors="replace")
        assert rc == 2, text
        assert "error: model file not found:" in text and "runs/quad_hover" in text, text
        assert "tether export" in text and "Traceback" not in text, text
    finally:
        graph.kill()
