"""Hover checkpoints: ``model.safetensors`` (policy weights), ``optimizer.safetensors`` (Adam
state, for ``--resume``) and ``contract.json`` (trainer, I/O contract, experiment, progress).

Both training paths write this format, so `tether eval` and `tether export` serve both.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from tether.core.errors import TetherError
from tether.policies.checkpoint_io import read_contract as read_checked
from tether.policies.checkpoint_io import write_contract
from tether.policies.quad.model import ACTION_DIM, OBS_DIM, HoverActor
from tether.robots.crazyflie.robot import CRAZYFLIE, STATE_NAMES

TRAINER = "quad_hover"
MODEL = "model.safetensors"
OPTIMIZER = "optimizer.safetensors"


def policy_contract(model: HoverActor) -> dict[str, Any]:
    """The policy's I/O contract: features, action map, robot, rate."""
    return {
        "trainer": TRAINER,
        "robot": "crazyflie",
        "action_mode": "rotor_rpm",
        "action_names": ["rotor0", "rotor1", "rotor2", "rotor3"],
        "control_hz": 100.0,
        "hidden": list(model.hidden),
        "observation": {
            "dim": OBS_DIM,
            "layout": "position - target (3, m), rotation matrix world-from-body row-major "
            "(9), linear velocity world (3, m/s), angular velocity body (3, rad/s)",
            "scale": [float(x) for x in model.feature_scale],
            "state_names": list(STATE_NAMES),
        },
        "action": {
            "dim": ACTION_DIM,
            "map": "rpm = hover_rpm * (1 + 0.5 * clip(a, -1, 1))",
            "hover_rpm": CRAZYFLIE.hover_rpm,
        },
    }


def save_checkpoint(
    path: Path,
    model: HoverActor,
    extra: dict[str, Any],
    optimizer: torch.optim.Optimizer | None = None,
) -> Path:
    """Write the checkpoint directory ``path``; ``extra`` joins the contract (JSON-able)."""
    path.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(path / MODEL))
    contract = {**policy_contract(model), **extra}
    if optimizer is not None:
        tensors: dict[str, torch.Tensor] = {}
        sd = optimizer.state_dict()
        for idx, st in sd["state"].items():
            for key, value in st.items():
                tensors[f"{idx}/{key}"] = torch.as_tensor(value).contiguous()
        save_file(tensors, str(path / OPTIMIZER))
        contract["optimizer"] = {"param_groups": sd["param_groups"]}
    write_contract(path, contract)
    return path


def read_contract(path: Path) -> dict[str, Any]:
    """contract.json of a hover checkpoint directory."""
    return read_checked(path, "trainer", TRAINER)


def load_policy(path: Path) -> tuple[HoverActor, dict[str, Any]]:
    """The policy (eval mode) and the contract of a checkpoint directory."""
    contract = read_contract(path)
    model = HoverActor(tuple(contract["hidden"]))
    if not (path / MODEL).is_file():
        raise TetherError(f"{path}: checkpoint has no {MODEL}")
    model.load_state_dict(load_file(str(path / MODEL)))
    model.eval()
    return model, contract


def load_optimizer_state(path: Path, contract: dict[str, Any]) -> dict[str, Any] | None:
    """Adam state_dict saved beside the weights, or None when there is none."""
    file = path / OPTIMIZER
    if not file.is_file() or "optimizer" not in contract:
        return None
    state: dict[int, dict[str, torch.Tensor]] = {}
    for key, value in load_file(str(file)).items():
        idx, _, name = key.partition("/")
        state.setdefault(int(idx), {})[name] = value
    return {"state": state, "param_groups": contract["optimizer"]["param_groups"]}
