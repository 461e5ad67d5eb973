"""`tether up` flies drones: the sim bridge and one policy server per drone as processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import yaml

pytest.importorskip("rclpy")
pytest.importorskip("pybullet")
pytestmark = [pytest.mark.ros, pytest.mark.pybullet, pytest.mark.slow]

from geometry_msgs.msg import PoseStamped  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from ros_helpers import ros_context, spin_until  # noqa: E402

from tether_ros import conversions as conv  # noqa: E402
from tether_ros import interface as itf  # noqa: E402


def _alive(marker: str) -> list[str]:
    return subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.split()


def test_up_flies_two_drones_to_their_targets_and_ctrl_c_stops_every_node(repo, tmp_path):
    data = yaml.safe_load((repo / "configs/experiments/quad_pid_hover.yaml").read_text())
    data["sim"]["cameras"] = []
    data["sim"]["quadrotor"]["num_drones"] = 2
    data["task"]["max_duration_s"] = 600
    # lockstep: under load the loop slows down instead of acting on late commands
    data["ros"] = {"rate_mode": "lockstep", "lockstep_timeout_s": 2.0}
    exp = tmp_path / "drone_up_test.yaml"  # a unique path: pgrep finds exactly this graph
    exp.write_text(yaml.safe_dump(data))
    proc = subprocess.Popen(
        [sys.executable, "-m", "tether.cli.main", "up", str(exp)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=dict(os.environ),
    )
    try:
        odom: dict[str, list[np.ndarray]] = {"cf0": [], "cf1": []}
        stamps: dict[str, list[int]] = {"cf0": [], "cf1": []}
        target: dict[str, np.ndarray] = {}
        with ros_context() as ctx:
            node = Node("drone_up_probe", context=ctx)
            for ns in odom:

                def on_odom(m: Odometry, ns: str = ns) -> None:
                    odom[ns].append(conv.odometry_to_state(m))
                    stamps[ns].append(conv.from_time(m.header.stamp))

                node.create_subscription(Odometry, f"/{ns}/odom", on_odom, itf.SENSOR_QOS)
                node.create_subscription(
                    PoseStamped,
                    f"/{ns}/objects/target/pose",
                    lambda m, ns=ns: target.__setitem__(ns, conv.pose_to_array(m)),
                    itf.SENSOR_QOS,
                )
            ex = SingleThreadedExecutor(context=ctx)
            ex.add_node(node)
            # thrown starts; each policy server brings its drone to its own target
            flew = spin_until(
                ex,
                lambda: all(s and s[-1] >= 6_000_000_000 for s in stamps.values()),
                timeout_s=180,
            )
            t_wall = time.monotonic()
            s0 = stamps["cf0"][-1] if stamps["cf0"] else 0
            spin_until(ex, lambda: False, 3.0)
            sim_per_wall = (stamps["cf0"][-1] - s0) * 1e-9 / (time.monotonic() - t_wall)
            node.destroy_node()
        assert flew, f"drones did not fly for 6 s of sim time; logs:\n{proc.stdout}"
        for ns in odom:
            err = np.linalg.norm(odom[ns][-1][:3] - target[ns][:3])
            assert err < 0.1, (ns, err)
        assert target["cf1"][1] - target["cf0"][1] == pytest.approx(1.0, abs=1e-3)
        print(f"sim time per wall second: {sim_per_wall:.2f} (contended machine)")
        assert len(_alive(str(exp))) >= 3  # sim_bridge and two policy servers
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out
    assert "all nodes stopped" in out
    assert _alive(str(exp)) == []
