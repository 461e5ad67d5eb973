"""`tether up` on the Panda lift experiment with mock hardware: three processes (mock
ros2_control arm, hardware bridge, policy server) over Fast DDS; the expert's commands move
the arm, episodes end on their time limit, Ctrl-C stops everything."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("rclpy")
pytestmark = [pytest.mark.ros, pytest.mark.slow]

from geometry_msgs.msg import PoseStamped  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from ros_helpers import ros_context, spin_until  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import String  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

from tether_ros import interface as itf  # noqa: E402


def test_up_runs_the_mock_hardware_graph(repo, tmp_path):
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tether.cli.main",
            "up",
            str(repo / "configs/experiments/panda_lift_mock.yaml"),
            "task.max_duration_s=4",
            "--log-dir",
            str(tmp_path / "logs"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=dict(os.environ),
    )
    try:
        events: list[dict] = []
        driver: list[np.ndarray] = []
        with ros_context() as ctx:
            node = Node("up_probe", context=ctx)
            node.create_subscription(
                String,
                itf.EPISODE_STATUS,
                lambda m: events.append(json.loads(m.data)),
                itf.EVENT_QOS,
            )
            node.create_subscription(
                JointState,
                "/driver/joint_states",
                lambda m: driver.append(np.array(m.position)),
                itf.SENSOR_QOS,
            )
            ex = SingleThreadedExecutor(context=ctx)
            ex.add_node(node)
            ended = spin_until(ex, lambda: any(e["event"] == "end" for e in events), 120)
            node.destroy_node()
        logs = "\n".join(p.read_text() for p in (tmp_path / "logs").glob("*.log"))
        assert ended, f"no episode ended; logs:\n{logs}"
        end = next(e for e in events if e["event"] == "end")
        got = {k: end[k] for k in ("steps", "control_hz", "stale_steps", "rejected", "wall_s")}
        # The episode ends on its step count (4 s at 100 Hz: 400 steps, none dropped, every
        # command accepted; 22 of 22 runs on the shared 2-core machine, load 1.0-4.8). What a
        # loaded machine costs a realtime graph is rate (98.15-100.46 Hz in those runs): a
        # wall-clock number, measured by benchmarks (ros_loop, drone_loop), not asserted here.
        # stale_steps (1-73) is not bounded: the bridge autostarts the episode before the
        # policy server's first answer, so it mostly measures that process's start-up.
        assert end["steps"] == 400 and end["rejected"] == 0, got
        # range of motion seen by the probe (it may subscribe after the arm started moving)
        moved = np.ptp(np.array(driver), axis=0).max()
        assert moved > 0.05, "the expert's commands never moved the mock arm"
        print(f"episode: {got}, arm moved {moved:.2f} rad")
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out
    assert "mock_arm" in out and "hardware_bridge" in out and "all nodes stopped" in out


def _free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_up_flies_the_mock_autopilot_in_its_own_process(repo, tmp_path):
    """mock_autopilot and hardware_bridge as processes, real MAVLink between them over UDP."""
    url = f"udpout:127.0.0.1:{_free_udp_port()}"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tether.cli.main",
            "up",
            str(repo / "configs/experiments/quad_mavlink_mock.yaml"),
            f"hardware.device.url={url}",
            "--log-dir",
            str(tmp_path / "logs"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=dict(os.environ),
    )
    try:
        z: list[float] = []
        with ros_context() as ctx:
            node = Node("up_probe", context=ctx)
            node.create_subscription(
                Odometry, itf.ODOM, lambda m: z.append(m.pose.pose.position.z), itf.SENSOR_QOS
            )
            ex = SingleThreadedExecutor(context=ctx)
            ex.add_node(node)
            results = {}
            for service in (itf.TAKEOFF, itf.LAND):
                client = node.create_client(Trigger, service)
                assert spin_until(ex, lambda c=client: c.service_is_ready(), 60), _logs(tmp_path)
                fut = client.call_async(Trigger.Request())
                assert spin_until(ex, fut.done, 30)
                results[service] = fut.result()
                high = service == itf.TAKEOFF
                assert spin_until(
                    ex, lambda h=high: bool(z) and (z[-1] > 1.3 if h else z[-1] < 0.05), 30
                )
            node.destroy_node()
        assert all(r.success for r in results.values()), results
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out
    assert "mock_autopilot" in out and "all nodes stopped" in out


def _logs(tmp_path) -> str:
    return "\n".join(p.read_text() for p in (tmp_path / "logs").glob("*.log"))


def test_up_drives_the_mock_base_to_its_goal(repo, tmp_path):
    """mock_base (cmd_vel / odom / scan) + hardware_bridge + policy_server (base_expert)."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tether.cli.main",
            "up",
            str(repo / "configs/experiments/husky_go_to_goal_mock.yaml"),
            "episodes.auto_reset=false",
            "task.max_duration_s=60",
            "--log-dir",
            str(tmp_path / "logs"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=dict(os.environ),
    )
    try:
        pos: list[np.ndarray] = []
        goal: list[np.ndarray] = []
        with ros_context() as ctx:
            node = Node("up_probe", context=ctx)
            node.create_subscription(
                Odometry,
                "/driver/odom",
                lambda m: pos.append(np.array([m.pose.pose.position.x, m.pose.pose.position.y])),
                itf.SENSOR_QOS,
            )
            node.create_subscription(
                PoseStamped,
                itf.object_pose_topic("goal"),
                lambda m: goal.append(np.array([m.pose.position.x, m.pose.position.y])),
                itf.SENSOR_QOS,
            )
            ex = SingleThreadedExecutor(context=ctx)
            ex.add_node(node)
            assert spin_until(ex, lambda: bool(pos) and bool(goal), 60), _logs(tmp_path)
            start = float(np.linalg.norm(goal[-1] - pos[-1]))
            dist: list[float] = []

            def near() -> bool:
                dist.append(float(np.linalg.norm(goal[-1] - pos[-1])))
                return dist[-1] < 0.6  # the task's success radius is 0.5 m

            reached = spin_until(ex, near, timeout_s=60)
            node.destroy_node()
        assert reached, (start, dist[::200], _logs(tmp_path))
        print(f"base drove from {start:.2f} m to {np.linalg.norm(goal[-1] - pos[-1]):.2f} m")
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out
