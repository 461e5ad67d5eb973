"""Tether's side of `tether export --tensorrt` with a FAKE engine (TensorRT needs an NVIDIA
GPU; these tests are not the proof that an engine builds or runs, docs/isaac_sim.md says
what is unverified): the parity check against onnxruntime's CPU, its tolerance per
precision, and what model.json records."""

from __future__ import annotations

import json
import types
from pathlib import Path

import numpy as np
import pytest

from tether.core.errors import TetherError


def _fake(monkeypatch, delta: float) -> list[bool]:
    """A fake tensorrt module and engine: the "engine" answers onnxruntime's CPU output
    plus ``delta``. Returns the fp16 flags build_engine was called with."""
    import tether.policies.tensorrt as trt_mod
    from tether.policies.runtime import open_session

    built: list[bool] = []

    def build(onnx_path: Path, fp16: bool = True) -> bytes:
        built.append(fp16)
        return b"fake-engine:" + str(onnx_path).encode()

    def run(engine: bytes, feeds: dict) -> dict:
        path = Path(engine.decode().split(":", 1)[1])
        session, _ = open_session(path)
        name = session.get_outputs()[0].name
        return {name: session.run([name], feeds)[0] + np.float32(delta)}

    monkeypatch.setattr(
        trt_mod, "import_tensorrt", lambda: types.SimpleNamespace(__version__="0-fake")
    )
    monkeypatch.setattr(trt_mod, "build_engine", build)
    monkeypatch.setattr(trt_mod, "run_engine", run)
    monkeypatch.setattr(trt_mod, "_gpu_name", lambda: "fake GPU")
    return built


def test_export_records_the_build_and_its_parity_in_model_json(tmp_path, monkeypatch):
    from test_runtime import make_model

    from tether.policies.tensorrt import ENGINE_FILE, export_tensorrt

    path = make_model(tmp_path)
    built = _fake(monkeypatch, 1e-3)
    out = export_tensorrt(path, fp16=True)
    assert out == tmp_path / ENGINE_FILE and out.read_bytes().startswith(b"fake-engine")
    rec = json.loads((tmp_path / "model.json").read_text())["tensorrt"]
    assert built == [True]
    assert rec["engine"] == ENGINE_FILE and rec["fp16"] is True and rec["gpu"] == "fake GPU"
    assert rec["tensorrt_version"] == "0-fake"
    assert rec["parity_max_abs_error"] == pytest.approx(1e-3, rel=1e-3)


def test_an_engine_far_from_onnxruntime_is_refused_and_not_recorded(tmp_path, monkeypatch):
    from test_runtime import make_model

    from tether.policies.tensorrt import PARITY_TOL, export_tensorrt

    path = make_model(tmp_path)
    before = (tmp_path / "model.json").read_text()
    _fake(monkeypatch, 2 * PARITY_TOL[True])
    with pytest.raises(TetherError, match="differs from onnxruntime.*--no-fp16"):
        export_tensorrt(path, fp16=True)
    # fp32 is held to the tighter bound: an error fp16 would pass fails it
    _fake(monkeypatch, 2 * PARITY_TOL[False])
    with pytest.raises(TetherError, match="differs from onnxruntime"):
        export_tensorrt(path, fp16=False)
    assert (tmp_path / "model.json").read_text() == before


def test_example_inputs_follow_model_json(tmp_path):
    from test_runtime import make_model

    from tether.policies.runtime import read_contract
    from tether.policies.tensorrt import example_feeds

    contract = read_contract(make_model(tmp_path))
    contract["inputs"].append(
        {"name": "img", "key": "images/front", "shape": [1, 1, 4, 4, 3], "dtype": "uint8"}
    )
    feeds = example_feeds(contract)
    assert feeds["state"].shape == (1, 2, 9) and feeds["state"].dtype == np.float32
    assert feeds["img"].dtype == np.uint8 and feeds["img"].shape == (1, 1, 4, 4, 3)
