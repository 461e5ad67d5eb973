"""LeRobotDataset v3.0 (the format of LeRobot 0.4.4): crash-safe writer, validating reader, recovery.

Usage::

    from tether.core.data.lerobot import LeRobotWriter, LeRobotReader

    w = LeRobotWriter("ds", fps=30, robot_type="panda", features={
        "observation.state": {"dtype": "float32", "shape": [9], "names": None},
        "action": {"dtype": "float32", "shape": [8], "names": None},
        "observation.images.front": {"dtype": "video", "shape": [96, 96, 3]},
    })
    w.start_episode("lift the cube")
    w.add_frame({"observation.state": s, "action": a, "observation.images.front": rgb})
    w.save_episode()
    w.finalize()
    ep = LeRobotReader("ds").episode(0)   # dict of numpy arrays + decoded frames
    merge_datasets(["ds", "ds2"], "both")   # episodes of both, videos copied, not re-encoded

Heavy dependencies (pyarrow, pandas, av) load on first use, not on import.
"""

from __future__ import annotations

from .lerobot_merge import merge_datasets
from .lerobot_reader import CODEBASE_VERSION, DatasetError, DatasetWriteError, LeRobotReader
from .lerobot_stats import aggregate_stats, feature_stats, image_stats
from .lerobot_writer import LeRobotWriter, recover

__all__ = [
    "CODEBASE_VERSION",
    "DatasetError",
    "DatasetWriteError",
    "LeRobotReader",
    "LeRobotWriter",
    "aggregate_stats",
    "feature_stats",
    "image_stats",
    "merge_datasets",
    "recover",
]
