"""Test helpers for rclpy: own contexts, spin until a condition holds or a deadline passes."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import rclpy
from rclpy.executors import SingleThreadedExecutor


@contextmanager
def ros_context() -> Iterator[rclpy.Context]:
    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    try:
        yield ctx
    finally:
        rclpy.try_shutdown(context=ctx)


def spin_until(
    executor: SingleThreadedExecutor, predicate: Callable[[], bool], timeout_s: float = 10.0
) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not predicate():
        executor.spin_once(timeout_sec=0.01)
    return predicate()


def episode_end(ctx: rclpy.Context, nodes: list, timeout_s: float = 240.0) -> dict:  # type: ignore[type-arg]
    """Spin ``nodes`` (a bridge and its policy servers) with a probe on episode_status until
    the first episode's end event, which it returns; destroys every node."""
    import json

    from rclpy.node import Node
    from std_msgs.msg import String

    from tether_ros import interface as itf

    events: list[dict] = []  # type: ignore[type-arg]
    probe = Node("episode_probe", context=ctx)
    probe.create_subscription(
        String, itf.EPISODE_STATUS, lambda m: events.append(json.loads(m.data)), itf.EVENT_QOS
    )
    ex = SingleThreadedExecutor(context=ctx)
    for n in (*nodes, probe):
        ex.add_node(n)
    try:
        assert spin_until(ex, lambda: any(e["event"] == "end" for e in events), timeout_s)
        return next(e for e in events if e["event"] == "end")
    finally:
        for n in (probe, *reversed(nodes)):
            n.destroy_node()
