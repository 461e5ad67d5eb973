"""A stand-in exported drone policy (model.onnx + model.json, docs/model_json.md): a
velocity-setpoint P controller toward the target, actions = [clip(k (p* - p), +-1), 0]."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np


def write_velocity_standin(out: Path, gain: float = 1.5) -> Path:
    """Write out/model.onnx + out/model.json; returns the .onnx path."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    out.mkdir(parents=True, exist_ok=True)
    state = helper.make_tensor_value_info("state", TensorProto.FLOAT, [1, 1, 13])
    env = helper.make_tensor_value_info("env_state", TensorProto.FLOAT, [1, 1, 7])
    actions = helper.make_tensor_value_info("actions", TensorProto.FLOAT, [1, 1, 4])
    consts: dict[str, np.ndarray] = {
        "start": np.array([0], np.int64),
        "end": np.array([3], np.int64),
        "axis": np.array([2], np.int64),
        "gain": np.array(gain, np.float32),
        "lo": np.array(-1.0, np.float32),
        "hi": np.array(1.0, np.float32),
        "zero": np.zeros((1, 1, 1), np.float32),
    }
    nodes = [
        helper.make_node("Slice", ["state", "start", "end", "axis"], ["p"]),
        helper.make_node("Slice", ["env_state", "start", "end", "axis"], ["p_ref"]),
        helper.make_node("Sub", ["p_ref", "p"], ["err"]),
        helper.make_node("Mul", ["err", "gain"], ["v"]),
        helper.make_node("Clip", ["v", "lo", "hi"], ["v_clipped"]),
        helper.make_node("Concat", ["v_clipped", "zero"], ["actions"], axis=2),
    ]
    graph = helper.make_graph(
        nodes,
        "velocity_standin",
        [state, env],
        [actions],
        initializer=[numpy_helper.from_array(v, k) for k, v in consts.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 9
    path = out / "model.onnx"
    onnx.save(model, str(path))
    contract = {
        "format": "tether-onnx/1",
        "trainer": "test",
        "robot": "crazyflie",
        "action_mode": "velocity_setpoint",
        "action_names": ["vx", "vy", "vz", "yaw_rate"],
        "control_hz": 100.0,
        "action_dt": 0.01,
        "obs_horizon": 1,
        "inputs": [
            {"name": "state", "key": "state", "shape": [1, 1, 13], "dtype": "float32"},
            {"name": "env_state", "key": "env_state", "shape": [1, 1, 7], "dtype": "float32"},
        ],
        "outputs": [{"name": "actions", "shape": [1, 1, 4]}],
        "execute_steps": 1,
    }
    (out / "model.json").write_text(json.dumps(contract))
    return path
