"""tether.policies.runtime: any graph that follows docs/model_json.md, onnxruntime only."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tether.core.errors import TetherError
from tether.core.types import Observation
from tether.policies.config_onnx import OnnxPolicyConfig

H, D = 4, 8


def make_model(
    tmp: Path, obs_horizon: int = 2, names: tuple[str, str] = ("state", "noise")
) -> Path:
    """actions = noise + mean(state stack): a graph whose output reveals both inputs."""
    import onnx
    from onnx import TensorProto, helper

    state = helper.make_tensor_value_info(names[0], TensorProto.FLOAT, [1, obs_horizon, 9])
    noise = helper.make_tensor_value_info(names[1], TensorProto.FLOAT, [1, H, D])
    out = helper.make_tensor_value_info("actions", TensorProto.FLOAT, [1, H, D])
    axes = helper.make_tensor("axes", TensorProto.INT64, [2], [1, 2])
    nodes = [
        helper.make_node("ReduceMean", [names[0], "axes"], ["m"], keepdims=1),
        helper.make_node("Add", [names[1], "m"], ["actions"]),
    ]
    graph = helper.make_graph(nodes, "probe", [state, noise], [out], initializer=[axes])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 9
    path = tmp / "model.onnx"
    onnx.save(model, str(path))
    contract = {
        "format": "tether-onnx/1",
        "trainer": "test",
        "robot": "panda",
        "action_mode": "joint_position",
        "action_names": [f"a{i}" for i in range(D)],
        "control_hz": 100.0,
        "action_dt": 0.03,
        "obs_horizon": obs_horizon,
        "inputs": [
            {"name": "state", "key": "state", "shape": [1, obs_horizon, 9], "dtype": "float32"},
            {"name": "noise", "key": "noise", "shape": [1, H, D], "dtype": "float32"},
        ],
        "outputs": [{"name": "actions", "shape": [1, H, D]}],
        "execute_steps": 2,
    }
    (tmp / "model.json").write_text(json.dumps(contract))
    return path


def test_runtime_imports_without_torch() -> None:
    code = (
        "import sys, tether.policies.runtime, tether.policies.config_onnx; "
        "bad = [m for m in ('torch', 'mujoco', 'rclpy') if m in sys.modules]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_policy_feeds_seeded_noise_and_stacked_observations(tmp_path: Path, panda) -> None:
    from tether.policies.runtime import OnnxPolicy

    path = make_model(tmp_path)
    policy = OnnxPolicy(OnnxPolicyConfig(model=path, seed=7), panda)
    assert policy.contract["observation_keys"] == ["state"]
    ms = 1_000_000
    chunk = None
    for t in range(0, 40, 10):  # 100 Hz; values grow with time
        chunk = policy.act(Observation({"state": np.full(9, t, np.float32)}, stamp_ns=t * ms))
    assert chunk is not None and policy.inferences == 1
    noise = np.random.default_rng(7).standard_normal((1, H, D)).astype(np.float32)[0]
    # the first prediction saw two copies of the first observation (value 0): plan == noise
    np.testing.assert_allclose(policy.plan.actions, noise, atol=1e-6)
    # at 60 ms the executed part (2 rows x 30 ms) has passed: a new prediction from the
    # observations at 30 and 60 ms (mean 45)
    for t in range(40, 70, 10):
        policy.act(Observation({"state": np.full(9, t, np.float32)}, stamp_ns=t * ms))
    assert policy.inferences == 2
    noise2 = np.random.default_rng(7).standard_normal((2, H, D)).astype(np.float32)[1]
    np.testing.assert_allclose(policy.plan.actions, noise2 + 45.0, atol=1e-5)


def test_chunk_mode_observes_every_step_and_predicts_on_request(tmp_path: Path, panda) -> None:
    """In chunk mode the policy server calls observe() at the control rate and act() only
    when a chunk is requested: the stack still holds observations action_dt apart."""
    from tether.policies.runtime import OnnxPolicy

    policy = OnnxPolicy(OnnxPolicyConfig(model=make_model(tmp_path), seed=7), panda)
    ms = 1_000_000
    for t in range(0, 100, 10):  # 100 Hz observations, no predictions
        policy.observe(Observation({"state": np.full(9, t, np.float32)}, stamp_ns=t * ms))
    assert policy.inferences == 0
    policy.replan()  # a request at 90 ms, for the observation just observed
    policy.act(Observation({"state": np.full(9, 90, np.float32)}, stamp_ns=90 * ms))
    assert policy.inferences == 1
    noise = np.random.default_rng(7).standard_normal((1, H, D)).astype(np.float32)[0]
    # stacked: the observations at 60 and 90 ms (mean 75), not the first one
    np.testing.assert_allclose(policy.plan.actions, noise + 75.0, atol=1e-5)


def test_unavailable_provider_names_what_is_missing(tmp_path: Path, panda) -> None:
    import onnxruntime as ort

    from tether.core.config import RuntimeConfig
    from tether.policies.runtime import OnnxPolicy

    if "TensorrtExecutionProvider" in ort.get_available_providers():
        pytest.skip("this onnxruntime has TensorRT")
    path = make_model(tmp_path)
    runtime = RuntimeConfig(provider="tensorrt")
    with pytest.raises(TetherError, match="TensorrtExecutionProvider.*TensorRT") as err:
        OnnxPolicy(OnnxPolicyConfig(model=path, runtime=runtime), panda)
    assert "runtime.fallback" in str(err.value) and "\n" not in str(err.value)


def test_fallback_runs_on_the_cpu_and_says_so(tmp_path: Path, panda, capsys) -> None:
    """runtime.fallback: a missing TensorRT runs on the next provider this onnxruntime has
    (here the CPU), with the same actions, a warning, and a report naming both."""
    import onnxruntime as ort

    from tether.core.config import RuntimeConfig
    from tether.policies.runtime import OnnxPolicy

    if "TensorrtExecutionProvider" in ort.get_available_providers():
        pytest.skip("this onnxruntime has TensorRT")
    path = make_model(tmp_path)
    obs = Observation({"state": np.full(9, 3.0, np.float32)}, stamp_ns=0)
    cpu = OnnxPolicy(OnnxPolicyConfig(model=path), panda)
    assert cpu.runtime_report == {"provider": "cpu", "requested": "cpu"}
    capsys.readouterr()
    runtime = RuntimeConfig(provider="tensorrt", fallback=True)
    fell = OnnxPolicy(OnnxPolicyConfig(model=path, runtime=runtime), panda)
    report = fell.runtime_report
    assert report["provider"] == "cpu" and report["requested"] == "tensorrt"
    assert "TensorrtExecutionProvider" in report["fallback"]
    assert "running on cuda" in report["fallback"] or "running on cpu" in report["fallback"]
    assert "warning:" in capsys.readouterr().err
    np.testing.assert_array_equal(cpu.act(obs).actions, fell.act(obs).actions)


def test_tensorrt_gets_its_cache_and_fp16_then_cuda_then_cpu(tmp_path: Path, monkeypatch):
    """What a GPU machine's session is given (onnxruntime here has no GPU providers, so
    the list they would get is checked, not a run): TensorRT with its engine cache and fp16
    flag, CUDA for the nodes TensorRT does not take, the CPU last."""
    import onnxruntime as ort

    from tether.core.config import RuntimeConfig
    from tether.policies.runtime import choose_providers

    have = ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"]
    monkeypatch.setattr(ort, "get_available_providers", lambda: have)
    choice = choose_providers(RuntimeConfig(provider="tensorrt", trt_fp16=False), tmp_path)
    assert choice.used == "tensorrt" and choice.note is None
    trt, cuda, cpu = choice.providers
    assert trt == (
        "TensorrtExecutionProvider",
        {
            "trt_engine_cache_enable": True,
            "trt_engine_cache_path": str(tmp_path / "trt_cache"),
            "trt_fp16_enable": False,
        },
    )
    assert (cuda, cpu) == ("CUDAExecutionProvider", "CPUExecutionProvider")
    own = RuntimeConfig(provider="tensorrt", trt_cache=tmp_path / "engines")
    assert choose_providers(own, tmp_path).providers[0][1]["trt_engine_cache_path"] == str(
        tmp_path / "engines"
    )
    assert choose_providers(RuntimeConfig(provider="cuda"), tmp_path).providers == have[1:]


def test_a_gpu_provider_that_cannot_start_is_not_a_silent_cpu_run(tmp_path: Path, monkeypatch):
    """onnxruntime builds a session on the CPU by itself when the GPU provider it was given
    cannot start (no device, a missing CUDA library; here: a CPU-only build told it has
    CUDA). That is an error unless runtime.fallback allows it."""
    import onnxruntime as ort

    from tether.core.config import RuntimeConfig
    from tether.policies.runtime import open_session

    if "CUDAExecutionProvider" in ort.get_available_providers():
        pytest.skip("this onnxruntime has CUDA")
    real = ort.get_available_providers()
    monkeypatch.setattr(ort, "get_available_providers", lambda: ["CUDAExecutionProvider", *real])
    path = make_model(tmp_path)
    with pytest.raises(TetherError, match="could not start CUDAExecutionProvider"):
        open_session(path, runtime=RuntimeConfig(provider="cuda"))
    session, choice = open_session(path, runtime=RuntimeConfig(provider="cuda", fallback=True))
    assert choice.used == "cpu" and "could not start" in (choice.note or "")
    assert session.get_providers() == ["CPUExecutionProvider"]


def test_the_experiment_runtime_reaches_the_onnx_policy() -> None:
    """The top-level ``runtime:`` section fills an ONNX policy's unset ``runtime``; one set in
    the policy section wins; a provider Tether does not know is a config error naming it."""
    from tether.core.config import ConfigError, parse_experiment
    from tether.core.experiment import with_runtime

    data = {
        "name": "x",
        "sim": {"type": "mujoco"},
        "task": {"type": "lift"},
        "policy": {"type": "onnx", "model": "m.onnx"},
        "runtime": {"provider": "cuda", "fallback": True},
    }
    pcfg = with_runtime(parse_experiment(data))
    assert pcfg.runtime.provider == "cuda" and pcfg.runtime.fallback
    data["policy"]["runtime"] = {"provider": "tensorrt"}
    assert with_runtime(parse_experiment(data)).runtime.provider == "tensorrt"
    data["runtime"] = {"provider": "npu"}
    with pytest.raises(ConfigError, match="runtime.provider"):
        parse_experiment(data)


def test_contract_errors_are_one_line(tmp_path: Path, panda) -> None:
    from tether.policies.runtime import OnnxPolicy

    path = make_model(tmp_path, names=("obs", "noise"))  # graph input 'obs' vs model.json 'state'
    with pytest.raises(TetherError, match="differ from model.json"):
        OnnxPolicy(OnnxPolicyConfig(model=path), panda)
    (tmp_path / "model.json").unlink()
    with pytest.raises(TetherError, match="no model.json"):
        OnnxPolicy(OnnxPolicyConfig(model=path), panda)


def test_wrong_observation_size_is_reported(tmp_path: Path, panda) -> None:
    from tether.policies.runtime import OnnxPolicy

    policy = OnnxPolicy(OnnxPolicyConfig(model=make_model(tmp_path)), panda)
    with pytest.raises(TetherError, match="observation 'state'"):
        policy.act(Observation({"state": np.zeros(5, np.float32)}, stamp_ns=0))


def test_onnx_policy_type_is_registered(tmp_path: Path) -> None:
    from tether.core.config import parse_experiment
    from tether.core.errors import ConfigError

    data = {
        "name": "x",
        "sim": {"type": "mujoco"},
        "task": {"type": "lift"},
        "policy": {"type": "onnx", "model": "m.onnx", "runtime": {"provider": "cuda"}},
    }
    cfg = parse_experiment(data)
    assert cfg.policy.threads == 1 and cfg.policy.runtime.provider == "cuda"
    data["policy"] = {"type": "onnx", "model": "m.onnx", "runtime": {"provider": "npu"}}
    with pytest.raises(ConfigError, match="policy.runtime.provider"):
        parse_experiment(data)


def test_onnxruntime_that_fails_to_import_is_not_called_missing(monkeypatch):
    """An installed onnxruntime whose import fails (a broken install, an import cut short)
    says so and why, instead of telling the user to install it."""
    import builtins

    from tether.policies import runtime

    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == "onnxruntime":
            raise ImportError("cannot import name 'InferenceSession' (partially initialized)")
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "onnxruntime", raising=False)
    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(TetherError, match="installed but could not be imported.*partially"):
        runtime._import_ort()


def test_missing_onnxruntime_says_how_to_install(monkeypatch):
    import builtins

    from tether.policies import runtime

    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == "onnxruntime":
            raise ModuleNotFoundError("No module named 'onnxruntime'", name="onnxruntime")
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "onnxruntime", raising=False)
    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(TetherError, match="not installed: pip install onnxruntime"):
        runtime._import_ort()
