"""Recorder under load: two 640x480 cameras at 30 Hz plus state, recorded at 30 fps over
ROS 2 for a long episode. Reports frames expected / written / dropped, the recorder
process's CPU use and the dataset write throughput. Writes benchmarks/results/recorder.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from common import write_result  # noqa: E402

from tether.core.config import load_config  # noqa: E402

EXPERIMENT = str(REPO / "configs/experiments/panda_lift_expert.yaml")
CAMERAS = (
    "sim.cameras=[{name: front, width: 640, height: 480, fps: 30}, "
    "{name: wrist, width: 640, height: 480, fps: 30}]"
)


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _dir_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def run(duration_s: float, fps: int) -> dict[str, Any]:
    from std_msgs.msg import Bool, String

    from tether_ros import interface as itf
    from tether_ros.graph import GraphProcesses, graph_env, plan_graph
    from tether_ros.recorder import RECORDER_READY, RECORDER_STATUS
    from tether_ros.supervisor import EpisodeSupervisor

    ov = [
        CAMERAS,
        "policy.type=hold",
        "ros.rate_mode=realtime",
        "sim.control_hz=100",
        f"task.max_duration_s={duration_s}",
        "episodes.autostart=false",
        "episodes.auto_reset=false",
    ]
    cfg = load_config(EXPERIMENT, ov)
    env = graph_env(cfg)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ds"
        rec = {"output": str(root), "fps": fps, "keep_failures": True}
        with (
            GraphProcesses(plan_graph(EXPERIMENT, ov, recorder=rec), env) as graph,
            EpisodeSupervisor(cfg, graph, env) as sup,
        ):
            status: list[dict[str, Any]] = []
            sup.node.create_subscription(
                String, RECORDER_STATUS, lambda m: status.append(json.loads(m.data)), itf.EVENT_QOS
            )
            ready: list[bool] = []
            sup.node.create_subscription(
                Bool, RECORDER_READY, lambda m: ready.append(m.data), itf.EVENT_QOS
            )
            sup.wait_ready()
            # the recorder has heard every stream an episode needs: no first frame is lost
            sup.spin_until(lambda: any(ready), 60, "the recorder to hear the robot and the policy")
            pid = graph.procs["recorder"].pid
            cpu0, t0 = _cpu_s(pid), time.monotonic()
            result = sup.run_episode()
            sup.spin_until(lambda: bool(status), 300, "the recorder to save")
            wall = time.monotonic() - t0
            cpu = _cpu_s(pid) - cpu0
        size = _dir_bytes(root)
    st = status[0]
    expected = int(round(result["sim_time_s"] * fps)) + 1  # frames at 0, 1/fps, ..., T
    return {
        "duration_sim_s": result["sim_time_s"],
        "fps": fps,
        "cameras": "2 x 640x480 @ 30 Hz",
        "frames_expected": expected,
        "frames_written": st.get("frames", 0),
        "frames_dropped": st.get("dropped", 0),
        "frames_missing": max(0, expected - st.get("frames", 0)),
        "sim_control_hz": result["control_hz"],
        "recorder_cpu_percent_of_one_core": 100.0 * cpu / wall,
        "wall_s": wall,
        "dataset_bytes": size,
        "write_mb_per_s": size / wall / 1e6,
        "raw_image_mb_per_s": 2 * 640 * 480 * 3 * 30 / 1e6,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--duration", type=float, default=120.0, help="episode length, sim seconds")
    p.add_argument("--fps", type=int, default=30)
    args = p.parse_args()
    res = run(args.duration, args.fps)
    print(json.dumps(res, indent=2))
    write_result("recorder", res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
