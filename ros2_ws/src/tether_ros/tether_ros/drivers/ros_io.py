"""Shared helpers of the ROS-side robots: topic names under a driver namespace, and waiting
for a driver's first message before the node spins."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from rclpy.duration import Duration
from rclpy.executors import SingleThreadedExecutor

from tether.core.errors import ConfigError

# how long a robot's disconnect waits for its driver to acknowledge the last (stop) command
ACK_TIMEOUT_S = 1.0


def driver_topic(namespace: str, topic: str) -> str:
    """``/driver`` + ``joint_states`` -> ``/driver/joint_states``; ``/`` or empty keeps the
    topic relative to the bridge's namespace."""
    ns = namespace.strip("/")
    return f"/{ns}/{topic.strip('/')}" if ns else topic.strip("/")


def check_apart(node: Any, namespace: str) -> None:
    """ConfigError when the driver's ``namespace`` is ``node``'s own: the driver's topics
    (joint_states, cmd_vel, odom) would collide with the ones the bridge publishes."""
    if namespace.strip("/") == node.get_namespace().strip("/"):
        raise ConfigError(
            f"hardware.driver_namespace '{namespace}' is the bridge's own namespace: the "
            "driver's topics would collide with Tether's (set ros.namespace or "
            "hardware.driver_namespace apart)"
        )


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


def wait_acked(publisher: Any, timeout_s: float = ACK_TIMEOUT_S) -> bool:
    """Wait until every matched (reliable) subscriber acknowledged what ``publisher`` sent,
    at most ``timeout_s``: a stop command published right before the node goes must reach
    the driver, not die in a send queue. True when acknowledged (or nobody listens)."""
    return bool(publisher.wait_for_all_acked(Duration(nanoseconds=round(timeout_s * 1e9))))
