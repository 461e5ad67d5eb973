"""`run_node` (every Tether node's main): a stop signal while the node is being built is a
clean stop (exit 0, nothing on stderr) even when the code it interrupted reports the
interruption as its own failure (an `import onnxruntime` cut short by Ctrl-C surfaced as
"onnxruntime is not installed" under launch, exit 2); a real failure without a signal is
still one sentence and exit 2."""

from __future__ import annotations

import os
import signal

import pytest

pytest.importorskip("rclpy")
pytestmark = pytest.mark.ros

from tether.core.errors import TetherError  # noqa: E402
from tether_ros.runtime import run_node  # noqa: E402


def _interrupted_build():
    """A factory whose import is cut short by Ctrl-C and says so in its own words."""
    try:
        os.kill(os.getpid(), signal.SIGINT)  # the handler runs before the next line
        raise AssertionError("the signal did not interrupt the build")
    except KeyboardInterrupt:
        raise TetherError("onnxruntime is not installed: pip install onnxruntime") from None


def _failed_build():
    raise TetherError("model file not found: models/nothing/model.onnx")


def test_a_signal_while_the_node_is_built_is_a_clean_stop(capsys):
    before = signal.getsignal(signal.SIGINT)  # SIG_IGN where CI runs in the background
    assert run_node(_interrupted_build, args=[]) == 0
    assert "error" not in capsys.readouterr().err
    # run_node put the previous handler back
    assert signal.getsignal(signal.SIGINT) == before


def test_a_failure_without_a_signal_is_one_sentence_and_exit_2(capsys):
    assert run_node(_failed_build, args=[]) == 2
    err = capsys.readouterr().err
    assert err.strip() == "error: model file not found: models/nothing/model.onnx"


HANGING_NODE = """
import os, signal, threading, time
from rclpy.node import Node
from tether_ros import runtime
runtime.TEARDOWN_S = 1.0

class Hangs(Node):
    def __init__(self):
        super().__init__("hangs")
        self.create_timer(0.05, lambda: None)
        threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT)).start()

    def close(self):
        print("closed", flush=True)

    def destroy_node(self):
        time.sleep(60)  # as rclpy's destroy_when_not_in_use did, rarely, in CI

raise SystemExit(runtime.run_node(Hangs, args=[]))
"""


def test_a_teardown_that_hangs_still_exits_after_the_safe_stop():
    """A node whose destroy_node never returns (an rclpy teardown hang seen in CI): after
    SIGINT, close() (the safe stop) runs, then the process exits 0 within the teardown
    watchdog's limit, saying so and dumping the stacks."""
    import subprocess
    import sys
    import time

    t0 = time.monotonic()
    r = subprocess.run(
        [sys.executable, "-c", HANGING_NODE], capture_output=True, text=True, timeout=30
    )
    took = time.monotonic() - t0
    assert r.returncode == 0, r.stderr
    assert "closed" in r.stdout
    assert "teardown did not finish in 1 s" in r.stderr and "destroy_node" in r.stderr
    assert took < 20


def test_a_teardown_that_hangs_holding_the_gil_still_ends():
    """The same hang inside C code that holds the GIL (rclpy's event __exit__ in CI: the
    Python watchdog thread never ran and the node lived on after SIGINT): faulthandler's C
    watchdog ends the process after twice the teardown limit, exit 1 with the stacks,
    after close() (the safe stop)."""
    import subprocess
    import sys
    import time

    held = HANGING_NODE.replace(
        "time.sleep(60)", "__import__('ctypes').PyDLL(None).sleep(60)  # libc, GIL held"
    )
    assert held != HANGING_NODE
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-c", held], capture_output=True, text=True, timeout=30)
    took = time.monotonic() - t0
    assert r.returncode == 1, r.stderr
    assert "closed" in r.stdout
    assert "Timeout (0:00:02)!" in r.stderr and "destroy_node" in r.stderr
    assert took < 20


def test_nodes_spin_on_the_executor_their_experiment_names(repo):
    from types import SimpleNamespace

    from rclpy.executors import SingleThreadedExecutor
    from ros_helpers import ros_context

    from tether.core.config import load_config
    from tether_ros.runtime import make_executor, node_executor_kind

    path = repo / "configs/experiments/panda_lift_expert.yaml"
    cfg = load_config(path, [])
    assert cfg.ros.executor == "events"  # the default, measured by benchmarks/ros_loop.py
    assert node_executor_kind(SimpleNamespace(cfg=cfg)) == "events"
    old = load_config(path, ["ros.executor=default"])
    assert node_executor_kind(SimpleNamespace(cfg=old)) == "default"
    assert node_executor_kind(SimpleNamespace()) == "default"  # a node without an experiment
    with ros_context() as ctx:
        events = make_executor(ctx, kind="events")
        single = make_executor(ctx, kind="default")
        assert "EventsExecutor" in type(events).__name__
        assert isinstance(single, SingleThreadedExecutor)
        events.shutdown()
        single.shutdown()


SIGNAL_INSIDE_SIGNAL_NODE = """
import signal, sys
from rclpy.node import Node
from tether_ros import runtime


class Stops(Node):
    def __init__(self):
        super().__init__("stops")
        self.create_timer(0.05, self.first_signal)
        self.done = False

    def first_signal(self):
        if self.done:
            return
        self.done = True
        handler = signal.getsignal(signal.SIGINT)

        # a second signal lands at every line the first handler runs, however deep (inside
        # threading.Event.set() with its lock held, where the old handler deadlocked): the
        # trace function runs untraced, so the nested handler is a plain second signal
        def at_each_line(frame, event, arg):
            if event == "line":
                handler(signal.SIGTERM, None)
            return at_each_line

        sys.settrace(lambda frame, event, arg: at_each_line)
        try:
            handler(signal.SIGINT, None)
        finally:
            sys.settrace(None)
        print("handled", flush=True)

    def close(self):
        print("closed", flush=True)


raise SystemExit(runtime.run_node(Stops, args=[]))
"""


def test_a_signal_inside_the_signal_handler_still_ends_in_the_safe_stop():
    """Ctrl-C twice in quick succession (or launch's SIGINT then SIGTERM): the second signal
    can land while the first handler runs. The node still leaves its spin loop, runs close()
    and exits 0; a handler that took a lock (threading.Event.set) hung here for good."""
    import subprocess
    import sys

    try:
        r = subprocess.run(
            [sys.executable, "-c", SIGNAL_INSIDE_SIGNAL_NODE],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"the node hung in its signal handler: {exc.stdout!r}") from None
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["handled", "closed"], r.stdout
