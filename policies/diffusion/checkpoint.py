"""Checkpoints without pickle: ``contract.json`` (the I/O contract + network config),
``model.safetensors`` (EMA weights, what eval and export use) and, for resuming,
``train_state.safetensors`` + ``train_state.json`` (raw weights, AdamW moments, RNG states,
step, loss history)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from tether.core.data.lerobot_reader import atomic_write_json
from tether.core.errors import ConfigError, TetherError
from tether.policies.checkpoint_io import CONTRACT
from tether.policies.checkpoint_io import read_contract as read_checked
from tether.policies.diffusion.config import (
    IMAGE_PREFIX,
    TEXT_KEY,
    DiffusionModelConfig,
    low_dim,
)
from tether.policies.diffusion.model import DiffusionNet

WEIGHTS = "model.safetensors"
TRAIN_STATE = "train_state.safetensors"
TRAIN_META = "train_state.json"
CKPT_FORMAT = "tether-diffusion/1"


def build_net(contract: dict[str, Any]) -> DiffusionNet:
    """An untrained network with the architecture and normalization a contract describes."""
    cfg = DiffusionModelConfig.model_validate(contract["model"])
    norm = contract["normalization"]
    low = {
        k: (np.asarray(norm[k]["min"]), np.asarray(norm[k]["max"]))
        for k in cfg.obs_keys
        if low_dim(k)
    }
    images = {
        k: (int(contract["obs_shapes"][k][0]), int(contract["obs_shapes"][k][1]))
        for k in cfg.obs_keys
        if k.startswith(IMAGE_PREFIX)
    }
    scale = contract["action_scale"]
    return DiffusionNet(
        cfg,
        low,
        images,
        (np.asarray(scale["min"]), np.asarray(scale["max"])),
        contract.get("action_names"),
        int(contract["obs_shapes"][TEXT_KEY][0]) if TEXT_KEY in cfg.obs_keys else None,
        norm.get(TEXT_KEY) if cfg.text_norm else None,
        contract.get("instruction_groups"),
        _pose_range(contract) if cfg.pose_readout else None,
    )


def _pose_range(contract: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """model.pose_readout's scaling: the environment_state's min and max in training."""
    pr = contract.get("pose_readout")
    if pr is None:
        raise ConfigError("model.pose_readout: the contract has no pose_readout range")
    return np.asarray(pr["min"]), np.asarray(pr["max"])


def read_contract(path: Path) -> dict[str, Any]:
    return read_checked(path, "format", CKPT_FORMAT)


def load_net(path: str | Path) -> tuple[DiffusionNet, dict[str, Any]]:
    """The EMA network of a checkpoint directory, in eval mode, and its contract."""
    path = Path(path)
    contract = read_contract(path)
    net = build_net(contract)
    weights = path / WEIGHTS
    if not weights.is_file():
        raise TetherError(f"{path}: no {WEIGHTS}")
    net.load_state_dict(load_file(str(weights)))
    return net.eval(), contract


def _optimizer_tensors(opt: torch.optim.Optimizer) -> tuple[dict[str, torch.Tensor], Any]:
    sd = opt.state_dict()
    tensors = {
        f"opt.{idx}.{name}": value.detach().clone().contiguous()
        if torch.is_tensor(value)
        else torch.tensor(value)
        for idx, st in sd["state"].items()
        for name, value in st.items()
    }
    return tensors, sd["param_groups"]


def save_checkpoint(
    out: Path,
    contract: dict[str, Any],
    net: DiffusionNet,
    ema: DiffusionNet,
    opt: torch.optim.Optimizer,
    gen: torch.Generator,
    rng: np.random.Generator,
    meta: dict[str, Any],
    aux: torch.nn.Module | None = None,
) -> None:
    """Write (replace) the checkpoint in ``out``: weights first, contract last. ``aux``: a
    training-only head (train.aux_env_state), kept in the training state for --resume."""
    out.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in ema.state_dict().items()}, str(out / WEIGHTS))
    opt_tensors, groups = _optimizer_tensors(opt)
    state = {f"net.{k}": v.contiguous() for k, v in net.state_dict().items()}
    state.update(opt_tensors)
    if aux is not None:
        state.update({f"aux.{k}": v.contiguous() for k, v in aux.state_dict().items()})
    state["torch_rng"] = gen.get_state()
    save_file(state, str(out / TRAIN_STATE))
    atomic_write_json(
        out / TRAIN_META,
        {**meta, "param_groups": groups, "numpy_rng": rng.bit_generator.state},
    )
    atomic_write_json(out / CONTRACT, contract)


def load_train_state(
    path: Path,
    net: DiffusionNet,
    ema: DiffusionNet,
    opt: torch.optim.Optimizer,
    gen: torch.Generator,
    rng: np.random.Generator,
    aux: torch.nn.Module | None = None,
) -> dict[str, Any]:
    """Restore what save_checkpoint wrote; returns the meta (step, losses)."""
    meta = json.loads((path / TRAIN_META).read_text())
    state = load_file(str(path / TRAIN_STATE))
    has_aux = any(k.startswith("aux.") for k in state)
    if has_aux != (aux is not None):
        raise TetherError(
            f"{path}: the run was trained {'with' if has_aux else 'without'} "
            f"train.aux_env_state; resume it {'with' if has_aux else 'without'} it too"
        )
    net.load_state_dict({k[4:]: v for k, v in state.items() if k.startswith("net.")})
    if aux is not None:
        aux.load_state_dict({k[4:]: v for k, v in state.items() if k.startswith("aux.")})
    ema.load_state_dict(load_file(str(path / WEIGHTS)))
    per_param: dict[int, dict[str, torch.Tensor]] = {}
    for key, value in state.items():
        if key.startswith("opt."):
            _, idx, name = key.split(".", 2)
            per_param.setdefault(int(idx), {})[name] = value
    opt.load_state_dict({"state": per_param, "param_groups": meta["param_groups"]})
    gen.set_state(state["torch_rng"])
    rng.bit_generator.state = meta["numpy_rng"]
    return meta


def synthetic_contract(
    model: DiffusionModelConfig,
    obs_shapes: dict[str, list[int]],
    action_dim: int = 8,
    action_dt: float = 1 / 30,
    control_hz: float = 100.0,
    action_names: list[str] | None = None,
) -> dict[str, Any]:
    """A contract with unit normalization ranges, for benchmarks and tests of an untrained
    network (latency and export do not depend on the weights). ``action_names`` default to
    a0, a1, ... (``model.binary_actions`` must be among them)."""
    norm: dict[str, Any] = {
        k: {"min": [-1.0] * shape[0], "max": [1.0] * shape[0]}
        for k, shape in obs_shapes.items()
        if low_dim(k)
    }
    names = list(action_names) if action_names else [f"a{i}" for i in range(action_dim)]
    action_dim = len(names)
    return {
        "format": CKPT_FORMAT,
        "trainer": "diffusion",
        "robot": "panda",
        "action_mode": "joint_position",
        "action_names": names,
        "joint_names": names,
        "control_hz": control_hz,
        "action_dt": action_dt,
        "observation_keys": list(model.obs_keys),
        "obs_shapes": {k: list(v) for k, v in obs_shapes.items()},
        "obs_horizon": model.obs_horizon,
        "horizon": model.horizon,
        "execute_steps": model.execute_steps,
        "normalization": norm,
        "action_scale": {"min": [-1.0] * action_dim, "max": [1.0] * action_dim},
        "model": model.model_dump(mode="json"),
    }
