"""Export a residual checkpoint: one model folder (model.json, format tether-residual/1)
holding the base and the residual graph.

Two graphs, not one fused graph: the base is a chunked policy asked once per chunk (a
diffusion base: ~1.5 ms of DDIM per chunk), the residual runs at every control step on
the latest observation and the base's row for that step (tens of microseconds). A fused
graph would have to run the base at every step (the chunk cost at the control rate) or
correct all rows of a chunk from the observation it was planned on (not what was trained);
docs/residual_rl.md has the measured numbers.

``residual.onnx``: inputs one per observation key (1, size) float32 in the contract's order
plus ``base_action`` (1, A) float32, the base's row for this step; output ``action``
(1, A) = base_action + offset + residual. Normalisation, the tanh bound and the scale are
inside the graph.
"""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from tether.core.errors import TetherError
from tether.policies.residual.checkpoint import load_model
from tether.policies.residual.model import ResidualMLP
from tether.policies.runtime import portable_experiment

FORMAT = "tether-residual/1"
OPSET = 17
RESIDUAL_FILE = "residual.onnx"
BASE_DIR = "base"


class ResidualGraph(nn.Module):
    """forward(*observations (1, n_k), base_action (1, A)) -> action (1, A); in tcp
    space -> residual (1, D), which serve.py maps to the joints (space.py)."""

    offset: Tensor

    def __init__(
        self, model: ResidualMLP, offset: np.ndarray | None = None, joint: bool = True
    ) -> None:
        super().__init__()
        self.model = model.eval()
        # joint space: the output is base + offset + residual; else the residual alone
        self.joint = joint
        off = np.zeros(model.action_dim) if offset is None else np.asarray(offset)
        self.register_buffer("offset", torch.as_tensor(off, dtype=torch.float32)[None])

    def forward(self, *inputs: Tensor) -> Tensor:
        obs = torch.cat([x.reshape(x.shape[0], -1) for x in inputs[:-1]], dim=-1)
        base = inputs[-1] + self.offset
        if not self.joint:
            return self.model(obs, base)
        return base + self.model(obs, base)


def example_inputs(model: ResidualMLP, sizes: list[int], seed: int = 0) -> list[Tensor]:
    """Observations around the normalisation centre (+-2 scales) and base actions inside
    the action range. Batch 1."""
    g = np.random.default_rng(seed)
    off, sc = model.obs_offset.numpy(), model.obs_scale.numpy()
    x = off + sc * g.uniform(-2, 2, off.shape)
    out, i = [], 0
    for n in sizes:
        out.append(torch.from_numpy(x[None, i : i + n].astype(np.float32)))
        i += n
    mid, half = model.act_mid.numpy(), model.act_half.numpy()
    a = mid + half * g.uniform(-1, 1, mid.shape)
    return [*out, torch.from_numpy(a[None].astype(np.float32))]


def export_residual(
    model: ResidualMLP,
    keys: list[str],
    sizes: list[int],
    out_dir: Path,
    offset: np.ndarray | None = None,
    joint: bool = True,
) -> Path:
    """Write out_dir/residual.onnx; returns its path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    graph = ResidualGraph(model, offset, joint).eval()
    path = out_dir / RESIDUAL_FILE
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(
            graph,
            tuple(example_inputs(model, sizes)),
            str(path),
            input_names=[*keys, "base_action"],
            output_names=["action" if joint else "residual"],
            opset_version=OPSET,
            dynamo=False,
            do_constant_folding=True,
        )
    return path


def parity(
    model: ResidualMLP,
    sizes: list[int],
    path: Path,
    offset: np.ndarray | None = None,
    joint: bool = True,
) -> float:
    """Max abs difference between torch and onnxruntime (CPU) over a few random inputs."""
    import onnxruntime as ort

    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    graph = ResidualGraph(model, offset, joint).eval()
    err = 0.0
    for seed in range(8):
        x = example_inputs(model, sizes, seed)
        with torch.no_grad():
            ref = graph(*x).numpy()
        got = sess.run(None, {n: t.numpy() for n, t in zip(names, x, strict=True)})[0]
        err = max(err, float(np.abs(got - ref).max()))
    return err


def model_json(contract: dict[str, Any], keys: list[str], sizes: list[int], base: Any) -> dict:
    m = contract["model"]
    space = contract.get("residual_space") or {"space": "joint", "joint_limit": m["limit"]}
    return {
        "format": FORMAT,
        "trainer": "residual",
        "robot": contract["robot"],
        "action_names": contract["action_names"],
        "control_hz": contract["control_hz"],
        # the frozen base: an exported model folder beside this file, or a policy section
        "base": base,
        # when the base is asked for a chunk (tether.policies.residual.base_executor)
        "base_replan": contract["base"].get("replan", "policy"),
        # the residual is decided every hold_steps control steps and held in between
        # (finetune.hold_steps; serve.py)
        "hold_steps": int(contract.get("hold_steps", 1)),
        "residual": {
            "model": RESIDUAL_FILE,
            "inputs": [
                *[
                    {"name": k, "key": k, "shape": [1, n], "dtype": "float32"}
                    for k, n in zip(keys, sizes, strict=True)
                ],
                {
                    "name": "base_action",
                    "key": "base_action",
                    "shape": [1, len(contract["action_names"])],
                },
            ],
            "outputs": (
                [{"name": "action", "shape": [1, len(m["limit"])]}]
                if space["space"] == "joint"
                else [{"name": "residual", "shape": [1, len(m["limit"])]}]
            ),
            # where the residual acts (policies/residual/space.py); tcp: the graph outputs
            # the TCP motion, mapped to the joints at each step's base row by the runtime
            "space": space,
            # informative: what the graph bakes in
            "scale": m["scale"],
            "limit": m["limit"],
            "base_offset": contract["base"].get("offset"),
            "hidden": m["hidden"],
            "activation": m["activation"],
        },
        "algorithm": contract.get("algorithm"),
        "result": contract.get("result"),
        # the experiment it was trained in, for `tether eval <this folder>`: without the
        # finetune and policy sections (the base is above) and this machine's paths
        "experiment": portable_experiment(
            {k: v for k, v in contract["experiment"].items() if k != "finetune"}
        ),
    }


def observation_sizes(model: ResidualMLP, contract: dict[str, Any]) -> list[int]:
    """Sizes of the observation keys (from the experiment's first observation layout)."""
    sizes = contract.get("observation_sizes")
    if sizes is None:
        raise TetherError("checkpoint contract lacks observation_sizes")
    if sum(sizes) != model.obs_dim:
        raise TetherError(f"observation sizes {sizes} do not add up to {model.obs_dim}")
    return [int(s) for s in sizes]


def export_checkpoint(checkpoint: Path, fmt: str, out: Path | None) -> Path:
    """`tether export CKPT` of a residual checkpoint: the folder out (default CKPT/export)
    with model.json, residual.onnx and, for a base that is a model folder, base/."""
    if fmt != "onnx":
        raise TetherError(f"--format {fmt}: a residual model exports as onnx only so far")
    model, contract = load_model(checkpoint)
    keys = list(contract["observation_keys"])
    sizes = observation_sizes(model, contract)
    out_dir = out or checkpoint / "export"
    offset = contract["base"].get("offset")
    off = np.asarray(offset) if offset else None
    joint = (contract.get("residual_space") or {}).get("space", "joint") == "joint"
    path = export_residual(model, keys, sizes, out_dir, off, joint)
    err = parity(model, sizes, path, off, joint)
    base: dict[str, Any]
    if contract["base"].get("model"):
        src = Path(contract["base"]["model"])
        src = src if src.is_dir() else src.parent
        dst = out_dir / BASE_DIR
        if dst.exists():
            shutil.rmtree(dst)
        shutil.copytree(src, dst)
        base = {"model": BASE_DIR}
    else:
        base = {"policy": contract["base"]["policy"]}
    meta = model_json(contract, keys, sizes, base)
    meta["residual"]["parity_max_abs"] = err
    (out_dir / "model.json").write_text(json.dumps(meta, indent=2))
    print(f"{path}: base + residual, torch/onnxruntime max abs error {err:.2e}")
    if err > 1e-4:
        raise TetherError(f"{path}: onnxruntime differs from torch by {err:.2e} (> 1e-4)")
    return out_dir / "model.json"
