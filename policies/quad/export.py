"""ONNX export of a hover checkpoint: ``model.onnx`` + ``model.json`` (docs/model_json.md).

The graph takes the raw observation (``state`` (1, 13), ``env_state`` (1, 7), SI units),
computes the 18 features, runs the policy and maps it to rotor speeds: ``rpm`` (1, 1, 4).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from tether.policies.quad.checkpoint import TRAINER, load_policy
from tether.policies.quad.model import ENV_STATE_DIM, STATE_DIM, HoverExport
from tether.policies.runtime import portable_experiment

OPSET = 17


def example_inputs() -> tuple[torch.Tensor, torch.Tensor]:
    """A hover-like (state, env_state) pair, shapes (1, 13) and (1, 7)."""
    state = torch.zeros((1, STATE_DIM))
    state[0, 0:3] = torch.tensor([0.1, -0.2, 0.9])
    state[0, 3:7] = torch.tensor([0.98, 0.1, -0.1, 0.14])
    state[0, 7:13] = torch.tensor([0.2, -0.1, 0.3, 0.5, -0.4, 0.2])
    env_state = torch.tensor([[0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0]])
    return state, env_state


def model_json(contract: dict[str, Any]) -> dict[str, Any]:
    """model.json for the exported graph."""
    return {
        "format": "tether-onnx/1",
        "trainer": TRAINER,
        "robot": contract["robot"],
        "action_mode": contract["action_mode"],
        "action_names": contract["action_names"],
        "control_hz": contract["control_hz"],
        "action_dt": 1.0 / contract["control_hz"],
        "obs_horizon": 1,
        "inputs": [
            {"name": "state", "key": "state", "shape": [1, STATE_DIM], "dtype": "float32"},
            {
                "name": "env_state",
                "key": "env_state",
                "shape": [1, ENV_STATE_DIM],
                "dtype": "float32",
            },
        ],
        "outputs": [{"name": "rpm", "shape": [1, 1, 4]}],
        "execute_steps": 1,
        "units": "rpm",
        "description": "hover at env_state[0:3]: state (x y z m, qw qx qy qz, v world m/s, "
        "w body rad/s) -> rotor speeds",
        # the experiment it was trained in: `tether eval <this folder>` runs it there
        "experiment": portable_experiment(contract.get("experiment")),
    }


def export_onnx(checkpoint: Path, out: Path | None = None) -> Path:
    """Export a checkpoint to ``out``/model.onnx (default ``<checkpoint>/export``)."""
    model, contract = load_policy(checkpoint)
    out = out or checkpoint / "export"
    if out.suffix == ".onnx":
        out, name = out.parent, out.name
    else:
        name = "model.onnx"
    out.mkdir(parents=True, exist_ok=True)
    path = out / name
    module = HoverExport(model).eval()
    torch.onnx.export(
        module,
        example_inputs(),
        str(path),
        input_names=["state", "env_state"],
        output_names=["rpm"],
        opset_version=OPSET,
        dynamo=False,
    )
    (out / (path.stem + ".json" if name != "model.onnx" else "model.json")).write_text(
        json.dumps(model_json(contract), indent=2)
    )
    return path
