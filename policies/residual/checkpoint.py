"""Residual checkpoints, no pickle: ``model.safetensors`` (the residual network with its
normalisation buffers: what export and evaluation need), ``learner.safetensors`` (the whole
SB3 policy: critics, targets, log-std, and the optimizers' state, for ``--resume``) and
``contract.json`` (trainer, algorithm, I/O contract, base, progress, experiment, optimizer
param groups).

SB3's own ``save`` writes a zip with pickled parts, so it is never called.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from tether.core.errors import TetherError
from tether.policies.checkpoint_io import read_contract as read_checked
from tether.policies.checkpoint_io import write_contract
from tether.policies.residual.model import ResidualMLP

TRAINER = "residual"
MODEL = "model.safetensors"
LEARNER = "learner.safetensors"


def _contiguous(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v.detach().contiguous().cpu() for k, v in tensors.items()}


def optimizer_tensors(
    opts: dict[str, torch.optim.Optimizer],
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Optimizer states flattened to ``opt/<name>/<param idx>/<key>`` tensors, plus their
    param groups (JSON)."""
    tensors: dict[str, torch.Tensor] = {}
    groups: dict[str, Any] = {}
    for name, opt in opts.items():
        sd = opt.state_dict()
        for idx, state in sd["state"].items():
            for key, value in state.items():
                tensors[f"opt/{name}/{idx}/{key}"] = torch.as_tensor(value)
        groups[name] = sd["param_groups"]
    return tensors, groups


def load_optimizers(
    opts: dict[str, torch.optim.Optimizer], tensors: dict[str, torch.Tensor], groups: dict[str, Any]
) -> None:
    for name, opt in opts.items():
        if name not in groups:
            continue
        state: dict[int, dict[str, torch.Tensor]] = {}
        prefix = f"opt/{name}/"
        for key, value in tensors.items():
            if key.startswith(prefix):
                idx, _, field = key[len(prefix) :].partition("/")
                state.setdefault(int(idx), {})[field] = value
        opt.load_state_dict({"state": state, "param_groups": groups[name]})


def model_contract(model: ResidualMLP) -> dict[str, Any]:
    return {
        **model.config(),
        "obs_dim": model.obs_dim,
        "action_dim": model.action_dim,
        "limit": [float(x) for x in model.limit],
    }


def save_checkpoint(
    path: Path,
    model: ResidualMLP,
    contract: dict[str, Any],
    learner: dict[str, torch.Tensor] | None = None,
) -> Path:
    """Write the checkpoint directory; ``contract`` (JSON-able) joins the model's facts.
    contract.json is replaced last and atomically, so a crash leaves the previous one."""
    path.mkdir(parents=True, exist_ok=True)
    save_file(_contiguous(model.state_dict()), str(path / MODEL))
    if learner is not None:
        save_file(_contiguous(learner), str(path / LEARNER))
    full = {"trainer": TRAINER, "model": model_contract(model), **contract}
    write_contract(path, full)
    return path


def read_contract(path: Path) -> dict[str, Any]:
    return read_checked(path, "trainer", TRAINER)


def load_model(path: Path) -> tuple[ResidualMLP, dict[str, Any]]:
    """The residual network of a checkpoint and its contract."""
    contract = read_contract(path)
    model = model_from_tensors(load_file(str(path / MODEL)), contract["model"])
    return model, contract


def model_from_tensors(tensors: dict[str, torch.Tensor], m: dict[str, Any]) -> ResidualMLP:
    """The residual network from its state dict and its contract (``model_contract``), in
    eval mode."""
    low = (tensors["act_mid"] - tensors["act_half"]).numpy()
    high = (tensors["act_mid"] + tensors["act_half"]).numpy()
    model = ResidualMLP(
        tensors["obs_offset"].numpy(),
        tensors["obs_scale"].numpy(),
        low,
        high,
        m["scale"],
        m["hidden"],
        m["activation"],
        last_layer_init=0.0,
        out_limit=tensors["limit"].numpy(),
        relative=m.get("relative", ()),
    )
    model.load_state_dict(tensors)
    return model.eval()


def load_learner(path: Path) -> dict[str, torch.Tensor]:
    file = path / LEARNER
    if not file.is_file():
        raise TetherError(f"{path}: no {LEARNER} to resume from")
    return load_file(str(file))


def as_list(x: np.ndarray) -> list[float]:
    return [float(v) for v in np.asarray(x).ravel()]
