"""Running nodes: executor choice, clean shutdown on Ctrl-C / SIGTERM, experiment params."""

from __future__ import annotations

import contextlib
import faulthandler
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

import rclpy
from rcl_interfaces.msg import ParameterDescriptor
from rclpy._rclpy_pybind11 import RCLError
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.signals import SignalHandlerOptions

from tether.core.config import ExperimentConfig, load_config
from tether.core.errors import TetherError

# how long the spin loop waits for work before it looks whether a signal asked it to stop (s)
SIGNAL_POLL_S = 0.1
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
# the longest the teardown after close() may take: rclpy's destroy_node has hung (rarely,
# in ``destroy_when_not_in_use``) in CI runs of the installed graphs; by then close() has
# made the robot safe, so the process exits with its code instead of hanging
TEARDOWN_S = 5.0


def make_executor(context: Any = None, kind: str = "default") -> Any:
    """The executor a node spins on (``ros.executor``): rclpy's SingleThreadedExecutor, or
    its EventsExecutor (``events``), which runs each ready callback from the middleware's
    events instead of rebuilding a wait set on every spin. Both are driven by ``spin_once``
    (the EventsExecutor's ``spin()`` does not return on a signal here). Hot-path endpoints
    skip QoS-event handlers either way (see interface.FAST_PUB)."""
    if kind == "events":
        from rclpy.experimental import EventsExecutor

        return EventsExecutor(context=context)
    return SingleThreadedExecutor(context=context)


def node_executor_kind(node: Any) -> str:
    """``ros.executor`` of the experiment a node runs (``default`` for nodes without one)."""
    cfg = getattr(node, "cfg", None)
    ros = getattr(cfg, "ros", None)
    return str(getattr(ros, "executor", "default"))


def experiment_from_params(node: Node) -> ExperimentConfig:
    """Load the experiment YAML named by the ``experiment`` parameter with ``overrides``."""
    path: str = node.declare_parameter("experiment", "").value
    overrides: list[str] | None = node.declare_parameter(
        "overrides",
        Parameter.Type.STRING_ARRAY,
        ParameterDescriptor(description="dotted overrides, e.g. policy.steps=10"),
    ).value
    if not path:
        raise TetherError(
            f"{node.get_name()}: set the 'experiment' parameter to an experiment YAML"
        )
    return load_config(path, [o for o in overrides or [] if o])


def run_node(factory: Callable[[], Node], args: list[str] | None = None) -> int:
    """Create the node, spin until SIGINT / SIGTERM (or shutdown), clean up. Returns an exit
    code: 0 for a signal, 2 for a TetherError (one sentence on stderr).

    rclpy's own signal handler is off: it would shut the context down the moment Ctrl-C
    lands, before the node's ``close()`` could tell the hardware to stop (a bridge's last
    command would fail with "publisher's context is invalid"). Here a signal only ends the
    spin; ``close()`` (a bridge's safe stop) runs while the context is valid, then the node
    and the context go. A signal while the node is being built (a driver being waited for)
    interrupts that as Ctrl-C did.
    """
    rclpy.init(
        args=args if args is not None else sys.argv,
        signal_handler_options=SignalHandlerOptions.NO,
    )
    # a plain flag, not a threading.Event: Event.set() takes a lock, and a second signal
    # landing while the first handler holds it re-entered set() and deadlocked the node
    # before its close() (the safe stop) could run
    stop = {"requested": False}
    spinning = False

    def on_signal(signum: int, _frame: Any) -> None:
        stop["requested"] = True
        if not spinning:
            raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, on_signal) for sig in STOP_SIGNALS}
    # SIGUSR1 prints every thread's stack to stderr (the node's log) and the node goes on:
    # what a test or an operator sends to a node that does not stop, to see where it is
    with contextlib.suppress(ValueError, RuntimeError, OSError):
        faulthandler.register(signal.SIGUSR1, all_threads=True)
    node = None
    executor = None
    code = 0
    try:
        node = factory()
        executor = make_executor(kind=node_executor_kind(node))
        executor.add_node(node)
        spinning = True  # from here a signal ends the loop below instead of raising
        while not stop["requested"] and rclpy.ok():
            executor.spin_once(timeout_sec=SIGNAL_POLL_S)
    except TetherError as exc:
        if not stop["requested"]:
            print(f"error: {exc}", file=sys.stderr)
            code = 2
        # else: Ctrl-C landed while the node was being built, and the code it interrupted
        # (an import, a driver wait) reported the interruption as its own failure: the
        # user asked to stop, so this is a clean stop, not a misleading error
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except RCLError:
        # the context went away mid-call (an external shutdown): a clean exit
        if rclpy.ok():
            raise
    finally:
        spinning = True  # a second Ctrl-C must not cut the safe stop short
        watchdog: threading.Timer | None = None
        try:
            if node is not None:
                close = getattr(node, "close", None)
                if close is not None:
                    close()
                watchdog = _teardown_watchdog(node.get_name(), lambda: code)
                # the backstop: a teardown stuck in C with the GIL held (rclpy's event
                # __exit__ was seen so in CI) starves the watchdog thread above; faulthandler's
                # own C thread needs no GIL: it dumps the stacks and exits 1
                faulthandler.dump_traceback_later(2 * TEARDOWN_S, exit=True)
                with contextlib.suppress(RCLError):
                    node.destroy_node()
            if executor is not None:
                executor.shutdown()
        finally:
            rclpy.try_shutdown()
            if watchdog is not None:
                watchdog.cancel()
                faulthandler.cancel_dump_traceback_later()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    return code


def _teardown_watchdog(name: str, code: Callable[[], int]) -> threading.Timer:
    """Exit the process with ``code()`` if the teardown takes longer than TEARDOWN_S (the
    node's stack goes to stderr first, so the log shows where it hung)."""

    def expire() -> None:
        print(
            f"{name}: teardown did not finish in {TEARDOWN_S:g} s (rclpy destroy_node); "
            "exiting (the node had stopped safely)",
            file=sys.stderr,
            flush=True,
        )
        faulthandler.dump_traceback(all_threads=True)
        os._exit(code())

    timer = threading.Timer(TEARDOWN_S, expire)
    timer.daemon = True
    timer.start()
    return timer
