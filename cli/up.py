"""`tether up`: run an experiment's node graph as separate processes, without `ros2 launch`."""

from __future__ import annotations

import signal
import time
from pathlib import Path

from tether.core.config import load_config


def run_up(experiment: str, overrides: list[str], log_dir: str | None = None) -> int:
    """Start the nodes, wait for Ctrl-C (or a node dying), stop them all. Exit code."""
    from tether_ros.graph import GraphProcesses, graph_env, plan_graph

    cfg = load_config(experiment, overrides)
    nodes = plan_graph(experiment, overrides)
    graph = GraphProcesses(nodes, graph_env(cfg), Path(log_dir) if log_dir else None)
    stop = {"requested": False}

    def _request_stop(_sig: int, _frame: object) -> None:
        stop["requested"] = True

    signal.signal(signal.SIGINT, _request_stop)
    signal.signal(signal.SIGTERM, _request_stop)
    print(f"tether up: {cfg.name}: " + ", ".join(n.key for n in nodes) + " (Ctrl-C stops)")
    graph.start()
    code = 0
    try:
        while not stop["requested"]:
            dead = graph.dead()
            if dead:
                name, rc = dead[0]
                print(f"error: node {name} exited with code {rc}; stopping the graph")
                code = 1
                break
            time.sleep(0.1)
    finally:
        graph.stop()
    print("tether up: all nodes stopped")
    return code
