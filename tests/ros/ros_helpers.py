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
