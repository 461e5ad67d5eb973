"""policy.type lerobot, Tether's side: the wire protocol, the worker process's life, the
observation history it sends and the errors a user sees. LeRobot itself is replaced by a
stand-in worker (lerobot_standin.py) here; test_lerobot_real.py runs the real one where
`make lerobot-env` has built it."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from lerobot_helpers import standin_checkpoint, standin_python

from tether.core import registry
from tether.core.errors import ConfigError, TetherError
from tether.core.types import Observation
from tether.policies.lerobot import protocol
from tether.policies.lerobot.config import LerobotPolicyConfig
from tether.policies.lerobot.policy import LerobotPolicy, dataset_fps, observation_key

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def panda():
    return registry.load("robot", "panda").spec(control_hz=100.0)


def _policy(tmp_path: Path, spec, **ckpt) -> LerobotPolicy:
    cfg = LerobotPolicyConfig(
        checkpoint=standin_checkpoint(tmp_path / "ckpt", **ckpt),
        python=standin_python(tmp_path / "env"),
        start_timeout_s=30,
        infer_timeout_s=10,
    )
    return LerobotPolicy(cfg, spec)


def _obs(t_s: float, state: np.ndarray, **extra: np.ndarray) -> Observation:
    data = {"state": state.astype(np.float32), "env_state": np.zeros(7, np.float32), **extra}
    return Observation(data, stamp_ns=round(t_s * 1e9))


# --- the wire ---------------------------------------------------------------------------


def test_messages_round_trip_through_a_pipe_with_their_arrays() -> None:
    r, w = os.pipe()
    arrays = {
        "a": np.arange(6, dtype=np.float32).reshape(2, 3),
        "img": np.ones((2, 4, 4, 3), np.uint8),
    }
    with os.fdopen(w, "wb", buffering=0) as out, os.fdopen(r, "rb", buffering=0) as inp:
        protocol.send(out, {"op": "infer", "task": "lift the cube"}, arrays)
        protocol.send(out, {"op": "reset"})
        header, got = protocol.receive(inp, timeout_s=5)
        assert header == {"op": "infer", "task": "lift the cube"}
        assert got.keys() == arrays.keys()
        for k in arrays:
            np.testing.assert_array_equal(got[k], arrays[k])
            assert got[k].dtype == arrays[k].dtype
        assert protocol.receive(inp, timeout_s=5) == ({"op": "reset"}, {})


def test_garbage_eof_and_silence_are_protocol_errors() -> None:
    r, w = os.pipe()
    with os.fdopen(w, "wb", buffering=0) as out, os.fdopen(r, "rb", buffering=0) as inp:
        out.write(b"\x00\x00\x00\x00\x00\x00\x00\x00")  # a zero-length header
        with pytest.raises(protocol.ProtocolError, match="not a tether-lerobot/1 frame"):
            protocol.receive(inp, timeout_s=5)
        t0 = time.monotonic()
        with pytest.raises(protocol.ProtocolError, match="timed out"):
            protocol.receive(inp, timeout_s=0.2)
        assert time.monotonic() - t0 < 5
        out.write(protocol.encode({"op": "x"})[:5])
        out.close()
        with pytest.raises(protocol.ProtocolError, match="closed the pipe"):
            protocol.receive(inp, timeout_s=5)
    with pytest.raises(protocol.ProtocolError, match="not JSON"):
        protocol.receive(_bytes_stream(b"\x03\x00\x00\x00\x00\x00\x00\x00abc"), timeout_s=5)


def _bytes_stream(data: bytes) -> io.BufferedReader:
    r, w = os.pipe()
    os.write(w, data)
    os.close(w)
    return os.fdopen(r, "rb", buffering=0)


def test_no_pickle_in_the_protocol() -> None:
    """safetensors carries the arrays: a message holds JSON and raw tensor bytes only."""
    src = (REPO / "policies" / "lerobot" / "protocol.py").read_text()
    assert "pickle" not in src.replace("no pickle", "")
    assert "safetensors" in src


# --- features and the frame rate -----------------------------------------------------------


def test_lerobot_features_map_to_tether_observation_keys() -> None:
    assert observation_key("observation.state") == "state"
    assert observation_key("observation.environment_state") == "env_state"
    assert observation_key("observation.images.front") == "images/front"
    with pytest.raises(TetherError, match="'observation.velocity', which no Tether observation"):
        observation_key("observation.velocity")


def test_fps_comes_from_the_training_dataset_or_must_be_given(tmp_path: Path) -> None:
    ckpt = standin_checkpoint(tmp_path / "a", fps=15.0)
    assert dataset_fps(ckpt) == 15.0
    bare = standin_checkpoint(tmp_path / "b", fps=None)
    with pytest.raises(TetherError, match="set policy.fps"):
        dataset_fps(bare)


# --- the worker process ---------------------------------------------------------------------


def test_the_chunk_comes_from_frames_one_dataset_period_apart(tmp_path: Path, panda) -> None:
    """The stand-in's 'ramp' chunk starts at the oldest frame it was sent and steps by the
    newest minus the oldest: two frames 1/30 s apart, as the dataset's were."""
    policy = _policy(tmp_path, panda, mode="ramp", fps=30.0, n_obs_steps=2)
    try:
        assert policy.obs_keys == ["state", "env_state"]
        chunk = None
        for k in range(4):  # observations at 100 Hz, state = time in ms
            t = k * 0.01
            chunk = policy.act(_obs(t, np.full(9, t * 1000.0)))
            if k == 0:
                # after a reset the first observation stands in for the missing one
                np.testing.assert_allclose(chunk.actions[0], np.zeros(8), atol=1e-6)
        policy.replan()
        t = 0.05
        chunk = policy.act(_obs(t, np.full(9, 50.0)))
        # frames: the newest (50 ms) and the one 1/30 s before it (the 10 ms observation is
        # the latest at or before 16.7 ms)
        np.testing.assert_allclose(chunk.actions[0], np.full(8, 10.0), atol=1e-4)
        step_per_row = (50.0 - 10.0) * (100.0 / 30.0) ** -1  # rows resampled to 100 Hz
        np.testing.assert_allclose(chunk.actions[1] - chunk.actions[0], step_per_row, rtol=1e-4)
        assert policy.inferences == 2
        assert policy.contract["action_dt"] == pytest.approx(1 / 30)
        assert policy.contract["lerobot"]["policy_type"] == "standin"
    finally:
        policy.close()


def test_a_chunk_lasts_its_execute_steps_then_the_next_is_predicted(tmp_path: Path, panda):
    policy = _policy(tmp_path, panda, mode="hold", fps=100.0)  # n_action_steps 4
    try:
        for k in range(12):
            policy.act(_obs(k * 0.01, np.full(9, float(k))))
        assert policy.inferences == 3  # at steps 0, 4, 8
        policy.reset()
        policy.act(_obs(0.0, np.zeros(9)))
        assert policy.inferences == 4
    finally:
        policy.close()


def test_the_worker_exits_with_the_policy(tmp_path: Path, panda) -> None:
    policy = _policy(tmp_path, panda)
    proc = policy.worker.proc
    assert proc.poll() is None
    policy.close()
    assert proc.wait(5) == 0  # EOF on its stdin: a clean exit


def test_the_worker_exits_when_its_parent_dies(tmp_path: Path) -> None:
    """No orphaned LeRobot process: a parent killed with SIGKILL closes the pipe."""
    helpers, folder = str(Path(__file__).parent), str(tmp_path)
    code = (
        f"import sys; sys.path.insert(0, {helpers!r})\n"
        "from lerobot_helpers import standin_checkpoint, standin_python\n"
        "from pathlib import Path\n"
        "from tether.core import registry\n"
        "from tether.policies.lerobot.config import LerobotPolicyConfig\n"
        "from tether.policies.lerobot.policy import LerobotPolicy\n"
        f"t = Path({folder!r})\n"
        "cfg = LerobotPolicyConfig(\n"
        "    checkpoint=standin_checkpoint(t / 'c'), python=standin_python(t / 'e'))\n"
        "p = LerobotPolicy(cfg, registry.load('robot', 'panda').spec(control_hz=100.0))\n"
        "print(p.worker.proc.pid, flush=True)\n"
        "import time; time.sleep(60)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        worker_pid = int(parent.stdout.readline())
        parent.kill()
        parent.wait(5)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and _alive(worker_pid):
            time.sleep(0.05)
        assert not _alive(worker_pid), "the worker outlived its parent"
    finally:
        parent.kill()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/stat")
    return not (status.exists() and status.read_text().split(")")[-1].split()[0] == "Z")


# --- what a user sees when something is wrong -------------------------------------------------


def test_no_lerobot_environment_says_how_to_build_it(tmp_path: Path, panda, monkeypatch) -> None:
    monkeypatch.delenv("TETHER_LEROBOT_PYTHON", raising=False)
    cfg = LerobotPolicyConfig(
        checkpoint=standin_checkpoint(tmp_path / "c"), python=tmp_path / "missing" / "python"
    )
    with pytest.raises(TetherError, match="LeRobot environment is not built.*make lerobot-env"):
        LerobotPolicy(cfg, panda)


def test_a_folder_that_is_no_checkpoint_is_refused(tmp_path: Path, panda) -> None:
    cfg = LerobotPolicyConfig(checkpoint=tmp_path, python=standin_python(tmp_path / "e"))
    with pytest.raises(TetherError, match="not a LeRobot checkpoint.*pretrained_model"):
        LerobotPolicy(cfg, panda)


def test_a_checkpoint_step_folder_is_accepted(tmp_path: Path, panda) -> None:
    standin_checkpoint(tmp_path / "last" / "pretrained_model")
    cfg = LerobotPolicyConfig(checkpoint=tmp_path / "last", python=standin_python(tmp_path / "e"))
    policy = LerobotPolicy(cfg, panda)
    policy.close()


@pytest.mark.parametrize(
    ("mode", "match"),
    [
        ("fail", "LeRobot \\(start of .*\\): no such policy type 'standin'"),
        ("crash", "exited with code 3 during start"),
    ],
)
def test_a_worker_that_cannot_load_fails_at_start(tmp_path: Path, panda, mode, match) -> None:
    with pytest.raises(TetherError, match=match):
        _policy(tmp_path, panda, mode=mode)


def test_an_action_size_that_is_not_the_robots_is_refused(tmp_path: Path, panda) -> None:
    with pytest.raises(ConfigError, match="outputs 6 actions, robot panda takes 8"):
        _policy(tmp_path, panda, action_dim=6)


def test_an_inference_error_is_reported_with_the_workers_reason(tmp_path: Path, panda) -> None:
    policy = _policy(tmp_path, panda, mode="error")
    try:
        with pytest.raises(TetherError, match="stand-in refuses \\(task 'lift'\\)"):
            policy.act(Observation(_obs(0.0, np.zeros(9)).data, 0, instruction="lift"))
    finally:
        policy.close()


def test_a_camera_of_another_size_is_named(tmp_path: Path, panda) -> None:
    inputs = {
        "observation.state": {"type": "STATE", "shape": [9]},
        "observation.images.front": {"type": "VISUAL", "shape": [3, 96, 96]},
    }
    policy = _policy(tmp_path, panda, inputs=inputs)
    try:
        assert policy.obs_keys == ["state", "images/front"]
        obs = Observation(
            {"state": np.zeros(9, np.float32), "images/front": np.zeros((64, 64, 3), np.uint8)}
        )
        with pytest.raises(
            TetherError, match="'images/front' has shape \\(3, 64, 64\\).*\\(3, 96, 96\\)"
        ):
            policy.act(obs)
        policy.reset()
        good = Observation(
            {"state": np.zeros(9, np.float32), "images/front": np.zeros((96, 96, 3), np.uint8)},
            stamp_ns=1,
        )
        assert policy.act(good).actions.shape[1] == 8
    finally:
        policy.close()


def test_tethers_side_imports_without_torch() -> None:
    """What runs on the robot computer beside onnxruntime: LeRobot's torch stays in the worker."""
    code = (
        "import sys, tether.policies.lerobot.policy; "
        "bad = [m for m in ('torch', 'lerobot', 'mujoco', 'rclpy') if m in sys.modules]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_lerobot_is_a_registered_policy_type() -> None:
    assert "lerobot" in registry.available("policy")
    assert registry.config_class("policy", "lerobot") is LerobotPolicyConfig
