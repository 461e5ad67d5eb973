"""ONNX export of a planner checkpoint: ``model.onnx`` + ``model.json`` (format tether-onnx/1,
docs/model_json.md), served by the generic ``onnx`` policy like any other model.

The graph takes the raw observation, computes the features of features.py and runs the
actor: ``state`` (1, 1, 13: wheel odometry x, y, yaw, vx, wz, then wheel angles and speeds),
``goal`` (1, 1, 2: ``env_state[0:2]``, the model.json input's ``slice``) and ``scan`` (1, 1,
n_beams) in; ``twist`` (1, 1, 2: linear_x m/s, angular_z rad/s) out, one row executed per
control step.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from tether.policies.nav.trainer import TRAINER, load_actor
from tether.policies.runtime import portable_experiment

OPSET = 17
STATE_DIM = 13


class NavExport(nn.Module):
    """Raw observation -> features (as features.features) -> actor -> twist (1, 1, 2)."""

    def __init__(self, actor: nn.Module, contract: dict[str, Any]) -> None:
        super().__init__()
        f = contract["features"]
        self.actor = actor
        self.sectors = int(f["sectors"])
        self.range_cap = float(f["range_cap"])
        self.goal_cap = float(f["goal_cap"])
        self.register_buffer(
            "bounds", torch.tensor(contract["velocity_bounds"], dtype=torch.float32)
        )

    def forward(self, state: torch.Tensor, goal: torch.Tensor, scan: torch.Tensor) -> torch.Tensor:
        s, g, r = state[:, -1], goal[:, -1], scan[:, -1]
        lidar = r.reshape(r.shape[0], self.sectors, -1).amin(-1)
        lidar = torch.clamp(lidar, max=self.range_cap) / self.range_cap
        d = g - s[:, 0:2]
        c, sn = torch.cos(s[:, 2:3]), torch.sin(s[:, 2:3])
        gx = c * d[:, 0:1] + sn * d[:, 1:2]
        gy = -sn * d[:, 0:1] + c * d[:, 1:2]
        dist = torch.sqrt(gx * gx + gy * gy)
        safe = torch.clamp(dist, min=1e-6)
        vel = torch.clamp(s[:, 3:5] / self.bounds, -1.0, 1.0)
        x = torch.cat(
            [
                lidar,
                torch.clamp(dist, max=self.goal_cap) / self.goal_cap,
                gx / safe,
                gy / safe,
                vel,
            ],
            dim=1,
        )
        return self.actor(x)[:, None, :]


def model_json(contract: dict[str, Any]) -> dict[str, Any]:
    """model.json for the exported graph."""
    beams = int(contract["features"]["n_beams"])
    hz = float(contract["control_hz"])
    return {
        "format": "tether-onnx/1",
        "trainer": TRAINER,
        "robot": contract["robot"],
        "action_mode": contract["action_mode"],
        "action_names": contract["action_names"],
        "control_hz": hz,
        "action_dt": 1.0 / hz,
        "obs_horizon": 1,
        "inputs": [
            {"name": "state", "key": "state", "shape": [1, 1, STATE_DIM], "dtype": "float32"},
            {
                "name": "goal",
                "key": "env_state",
                "slice": [0, 2],
                "shape": [1, 1, 2],
                "dtype": "float32",
            },
            {"name": "scan", "key": "scan", "shape": [1, 1, beams], "dtype": "float32"},
        ],
        "outputs": [{"name": "twist", "shape": [1, 1, 2]}],
        "execute_steps": 1,
        "features": contract["features"],
        "description": "learned local planner: wheel odometry (state), the goal "
        "(env_state[0:2], odom frame) and the lidar scan -> twist (linear_x m/s, angular_z "
        "rad/s)",
        "experiment": portable_experiment(contract.get("experiment")),
    }


def export_onnx(checkpoint: Path, out: Path | None = None) -> Path:
    """Export a checkpoint to ``out``/model.onnx (default ``<checkpoint>/onnx``)."""
    actor, contract = load_actor(checkpoint)
    out = out or checkpoint / "onnx"
    out.mkdir(parents=True, exist_ok=True)
    path = out / "model.onnx"
    module = NavExport(actor, contract).eval()
    beams = int(contract["features"]["n_beams"])
    example = (
        torch.zeros((1, 1, STATE_DIM)),
        torch.tensor([[[3.0, 1.0]]]),
        torch.full((1, 1, beams), 4.0),
    )
    torch.onnx.export(
        module,
        example,
        str(path),
        input_names=["state", "goal", "scan"],
        output_names=["twist"],
        opset_version=OPSET,
        dynamo=False,
    )
    meta = model_json(contract)
    meta["parity"] = parity(module, path, beams)
    (out / "model.json").write_text(json.dumps(meta, indent=2))
    return path


def parity(module: nn.Module, path: Path, beams: int, n: int = 64) -> float:
    """Largest |torch - onnxruntime| over ``n`` random observations (m/s, rad/s)."""
    import onnxruntime as ort

    rng = np.random.default_rng(0)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    worst = 0.0
    for _ in range(n):
        state = np.zeros((1, 1, STATE_DIM), np.float32)
        state[0, 0, :5] = rng.uniform([-5, -5, -3.2, -1, -2], [5, 5, 3.2, 1, 2])
        goal = rng.uniform(-8, 8, (1, 1, 2)).astype(np.float32)
        scan = rng.uniform(0.1, 10.0, (1, 1, beams)).astype(np.float32)
        with torch.no_grad():
            ref = module(*(torch.from_numpy(a) for a in (state, goal, scan))).numpy()
        (got,) = sess.run(None, {"state": state, "goal": goal, "scan": scan})
        worst = max(worst, float(np.abs(ref - got).max()))
    return worst
