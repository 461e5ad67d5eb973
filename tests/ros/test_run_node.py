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
