"""Shared helpers of the ROS-side robots: topic names under a driver namespace, and waiting
for a driver's first message before the node spins."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from rclpy.executors import SingleThreadedExecutor


def driver_topic(namespace: str, topic: str) -> str:
    """``/driver`` + ``joint_states`` -> ``/driver/joint_states``; ``/`` or empty keeps the
    topic relative to the bridge's namespace."""
    ns = namespace.strip("/")
    return f"/{ns}/{topic.strip('/')}" if ns else topic.strip("/")


def wait_for(node: Any, predicate: Callable[[], bool], timeout_s: float) -> bool:
    """Spin ``node`` (not yet in an executor: robots connect while the bridge is built) until
    ``predicate`` holds or ``timeout_s`` passes; returns it."""
    executor = SingleThreadedExecutor(context=node.context)
    executor.add_node(node)
    try:
        deadline = time.monotonic() + timeout_s
        while not predicate() and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.02)
    finally:
        executor.remove_node(node)
        executor.shutdown()
    return predicate()
