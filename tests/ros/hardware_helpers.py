"""Test helpers for the hardware bridge: run a mock driver node on its own executor in a
background thread, as it would run in its own process on a robot."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rclpy.executors import SingleThreadedExecutor


@contextmanager
def spinning(node: Any) -> Iterator[None]:
    executor = SingleThreadedExecutor(context=node.context)
    executor.add_node(node)
    stop = threading.Event()

    def run() -> None:
        while not stop.is_set() and node.context.ok():
            executor.spin_once(timeout_sec=0.02)

    thread = threading.Thread(target=run, name=f"spin-{node.get_name()}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)
        executor.remove_node(node)
        executor.shutdown()
