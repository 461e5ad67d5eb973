"""`tether up` runs the node graph as separate processes over Fast DDS and Ctrl-C stops it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

pytest.importorskip("rclpy")
pytest.importorskip("mujoco")
pytestmark = [pytest.mark.ros, pytest.mark.mujoco, pytest.mark.slow]

from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from ros_helpers import ros_context, spin_until  # noqa: E402
from std_msgs.msg import String  # noqa: E402

from tether_ros import interface as itf  # noqa: E402


def _alive(marker: str) -> list[str]:
    out = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True)
    return out.stdout.split()


def test_up_runs_graph_and_ctrl_c_stops_every_node(repo, tmp_path):
    exp = tmp_path / "up_test.yaml"  # a unique path: pgrep finds exactly this graph's processes
    exp.write_text((repo / "configs/experiments/panda_lift_expert.yaml").read_text())
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tether.cli.main",
            "up",
            str(exp),
            "sim.cameras=[]",
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
            # the expert lifts the cube episode after episode (autostart + auto_reset)
            done = spin_until(ex, lambda: any(e["event"] == "end" for e in events), timeout_s=90)
            node.destroy_node()
        assert done, f"no episode ended; logs:\n{proc.stdout}"
        end = next(e for e in events if e["event"] == "end")
        assert end["success"], end
        assert len(_alive(str(exp))) >= 2  # sim_bridge and policy_server processes
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out
    assert "all nodes stopped" in out
    assert _alive(str(exp)) == []
