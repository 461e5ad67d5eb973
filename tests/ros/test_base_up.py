"""`tether up configs/experiments/husky_go_to_goal.yaml`: sim_bridge and policy_server as
processes over Fast DDS; the base expert drives the Husky to its goal from odom, scan and
base_pose, and Ctrl-C stops the graph."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

pytest.importorskip("rclpy")
pytest.importorskip("pybullet")
pytestmark = [pytest.mark.ros, pytest.mark.pybullet, pytest.mark.slow]

from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from ros_helpers import ros_context, spin_until  # noqa: E402
from std_msgs.msg import String  # noqa: E402

from tether_ros import interface as itf  # noqa: E402


def test_up_drives_the_husky_to_its_goal(repo, tmp_path):
    exp = tmp_path / "husky_up_test.yaml"
    exp.write_text((repo / "configs/experiments/husky_go_to_goal.yaml").read_text())
    cmd = [sys.executable, "-m", "tether.cli.main", "up", str(exp), "sim.cameras=[]"]
    cmd += ["task.distance_range=[1.5, 2.0]", "--log-dir", str(tmp_path / "logs")]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=dict(os.environ)
    )
    try:
        events: list[dict] = []
        with ros_context() as ctx:
            node = Node("up_probe", context=ctx)
            node.create_subscription(
                String,
                itf.EPISODE_STATUS,
                lambda m: events.append(json.loads(m.data)),
                itf.EVENT_QOS,
            )
            ex = SingleThreadedExecutor(context=ctx)
            ex.add_node(node)
            done = spin_until(ex, lambda: any(e["event"] == "end" for e in events), timeout_s=120)
            node.destroy_node()
        assert done, "no episode ended"
        end = next(e for e in events if e["event"] == "end")
        assert end["success"], end
        assert end["rejected"] == 0
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            out = proc.communicate()[0]
    assert proc.returncode == 0, out
