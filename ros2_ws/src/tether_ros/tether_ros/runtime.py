"""Running nodes: executor choice, clean shutdown on Ctrl-C / SIGTERM, experiment params."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from typing import Any

import rclpy
from rcl_interfaces.msg import ParameterDescriptor
from rclpy._rclpy_pybind11 import RCLError
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter

from tether.core.config import ExperimentConfig, load_config
from tether.core.errors import TetherError


def make_executor(context: Any = None) -> SingleThreadedExecutor:
    """The executor every node spins on.

    rclpy's experimental EventsExecutor would be faster, but with the Kilted PyPI wheels it
    neither answers services nor delivers messages between processes here (and busy-loops a
    core), so the single-threaded executor is used; hot-path endpoints skip QoS-event
    handlers instead (see interface.FAST_PUB).
    """
    return SingleThreadedExecutor(context=context)


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
    """Create the node, spin until Ctrl-C or shutdown, clean up. Returns an exit code."""
    rclpy.init(args=args if args is not None else sys.argv)
    node = None
    code = 0
    try:
        node = factory()
        executor = make_executor()
        executor.add_node(node)
        executor.spin()
    except TetherError as exc:
        print(f"error: {exc}", file=sys.stderr)
        code = 2
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except RCLError:
        # Ctrl-C landed while rclpy was mid-call: a shutdown under way is a clean exit
        if rclpy.ok():
            raise
    finally:
        if node is not None:
            close = getattr(node, "close", None)
            if close is not None:
                close()
            with contextlib.suppress(RCLError):
                node.destroy_node()
        rclpy.try_shutdown()
    return code
