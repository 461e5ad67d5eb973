"""`colcon build` of ros2_ws gives a ROS-shaped install tree whose nodes run.

On a ROS 2 install, users run `ros2 run tether_ros sim_bridge` and `ros2 launch tether_ros
sim.launch.py`; both only work if executables land in lib/tether_ros, launch files and configs
in share/tether_ros, and the ament index knows the package. The test builds a copy of the
workspace (the package's launch/ and configs/ links resolved, so the real tree stays clean),
then starts the INSTALLED sim_bridge from a shell that sourced install/setup.bash, which is
what puts the install tree's Python package on the path.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("rclpy")
pytest.importorskip("mujoco")
pytestmark = [pytest.mark.ros, pytest.mark.mujoco, pytest.mark.slow]

from colcon_helpers import PKG, REPO, build_workspace, clean_env  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from ros_helpers import ros_context, spin_until  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

from tether_ros import interface as itf  # noqa: E402

EXPERIMENT = REPO / "configs" / "experiments" / "panda_lift_expert.yaml"


def _tail(path: Path, lines: int = 30) -> str:
    return (
        "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""
    )


@pytest.fixture(scope="module", params=[False, True], ids=["copy", "symlink-install"])
def install(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Build a copy of ros2_ws/src once per mode; the install/ folder of that build.

    Both modes: a plain build is what a deployment ships, --symlink-install is what
    docker/Dockerfile and developers use (it breaks with setuptools >= 80, colcon-core#696).
    """
    return build_workspace(tmp_path_factory.mktemp("ros2_ws"), symlink=request.param)


def test_install_tree_is_ros_shaped(install):
    prefix = install / PKG
    for exe in ("sim_bridge", "policy_server"):
        path = prefix / "lib" / PKG / exe
        assert path.is_file() and os.access(path, os.X_OK), path  # where `ros2 run` looks
        shebang = path.read_text().splitlines()[0]
        assert shebang.startswith("#!") and Path(shebang[2:].split()[0]).exists(), shebang
    share = prefix / "share" / PKG
    assert (share / "package.xml").is_file()
    assert (share / "launch" / "sim.launch.py").is_file()  # where `ros2 launch` looks
    assert (share / "configs" / "experiments" / EXPERIMENT.name).is_file()
    assert (share / "configs" / "dds" / "fastdds_shm.xml").is_file()
    # every file of every shipped model, subfolders included (a base + residual model keeps
    # its base in base/), where an installed experiment's models/... resolves
    models = REPO / "models"
    for model in sorted(p for p in models.iterdir() if p.is_dir()):
        assert (model / "model.json").is_file(), model
        for f in sorted(p for p in model.rglob("*") if p.is_file()):
            assert (share / f.relative_to(REPO)).is_file(), f.relative_to(models)
    assert (prefix / "share" / "ament_index" / "resource_index" / "packages" / PKG).is_file()
    assert (install / "setup.bash").is_file()


def test_sourced_setup_finds_the_package(install):
    """After `source install/setup.bash`, the ament index (what ros2 run/launch use) and
    Python both resolve tether_ros to the built workspace, not to the source checkout."""
    probe = (
        "from ament_index_python.packages import get_package_share_directory as share\n"
        "import tether_ros\n"
        f"print(share('{PKG}')); print(tether_ros.__file__)\n"
    )
    out = subprocess.run(
        ["bash", "-c", 'source install/setup.bash && exec "$0" -c "$1"', sys.executable, probe],
        cwd=install.parent,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 0, out.stderr
    share_dir, module = out.stdout.split()
    assert Path(share_dir) == install / PKG / "share" / PKG
    # the workspace's package (install/ or, with --symlink-install, build/ -> src/), not the
    # checkout's editable install that the same interpreter also has
    assert Path(module).resolve().is_relative_to(install.parent), module


def test_installed_sim_bridge_publishes_and_stops_on_sigint(install, panda, tmp_path):
    exe = install / PKG / "lib" / PKG / "sim_bridge"
    ns = f"colcon_test_{os.getpid()}"  # own namespace: no cross-talk with other test nodes
    log = tmp_path / "sim_bridge.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            # exec: SIGINT goes straight to the node (a backgrounded child of a non-interactive
            # shell would have SIGINT ignored), and bash adds nothing to stop
            [
                "bash",
                "-c",
                'source install/setup.bash && exec "$0" "$@"',
                str(exe),
                "--ros-args",
                "-r",
                f"__ns:=/{ns}",
                "-p",
                f"experiment:={EXPERIMENT}",
                "-p",
                "overrides:=['episodes.autostart=false']",
            ],
            cwd=install.parent,
            env=clean_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        states: list[JointState] = []
        with ros_context() as ctx:
            node = Node("colcon_probe", namespace=ns, context=ctx)
            node.create_subscription(JointState, itf.JOINT_STATES, states.append, itf.SENSOR_QOS)
            reset = node.create_client(Trigger, "sim_bridge/reset")
            ex = SingleThreadedExecutor(context=ctx)
            ex.add_node(node)
            alive = lambda: proc.poll() is None  # noqa: E731

            ready = spin_until(ex, lambda: not alive() or reset.service_is_ready(), 30.0)
            assert ready and alive(), f"sim_bridge never came up:\n{_tail(log)}"
            # With autostart=false the bridge publishes one observation at reset, then only
            # while an episode runs; joint_states is best effort, so ask for a fresh reset
            # (which republishes) until one arrives. The answered reset also proves the node
            # is spinning, so the SIGINT below tests shutdown of a running node, not one still
            # starting up.
            answered = False
            deadline = time.monotonic() + 20.0
            while alive() and time.monotonic() < deadline and not (answered and states):
                future = reset.call_async(Trigger.Request())
                spin_until(ex, lambda f=future: f.done() or not alive(), 5.0)
                answered = answered or (future.done() and future.result().success)
                spin_until(ex, lambda: bool(states) or not alive(), 1.0)
            node.destroy_node()
        assert answered, f"sim_bridge never answered ~/reset:\n{_tail(log)}"
        assert states, f"no JointState on /{ns}/joint_states:\n{_tail(log)}"
        msg = states[0]
        assert tuple(msg.name) == tuple(panda.state_names)
        assert len(msg.name) == 9
        assert len(msg.position) == 9 and all(math.isfinite(p) for p in msg.position)

        assert alive(), _tail(log)
        proc.send_signal(signal.SIGINT)
        try:
            rc = proc.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            pytest.fail(f"sim_bridge ignored SIGINT for 5 s:\n{_tail(log)}")
        assert rc == 0, f"exit code {rc} after SIGINT:\n{_tail(log)}"
        assert "Traceback" not in log.read_text(errors="replace"), _tail(log)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
