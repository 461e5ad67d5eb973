"""Export a diffusion checkpoint to one ONNX graph (encoder + fixed-step DDIM loop +
normalization + action scaling) plus model.json (docs/model_json.md); TensorRT engines are
built from that graph where TensorRT is installed."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from tether.core.errors import TetherError
from tether.policies.diffusion.checkpoint import load_net
from tether.policies.diffusion.config import IMAGE_PREFIX, TEXT_KEY
from tether.policies.diffusion.inference import FastSampler
from tether.policies.diffusion.model import DiffusionNet
from tether.policies.runtime import portable_experiment
from tether.policies.vla.language import LANGUAGE_KEYS

# 17: LayerNormalization. Newer opsets add Mish (18) and GroupNormalization (18, 21), but
# onnxruntime's CPU provider (1.31) only expands them into their function bodies (Softplus,
# Tanh, Mul; some twenty reshape/reduce nodes per GroupNormalization), so they buy nothing
OPSET = 17
FORMATS = ("onnx", "tensorrt")


def input_name(key: str) -> str:
    """Graph input name of an observation key: images/front -> image_front."""
    if key.startswith(IMAGE_PREFIX):
        return "image_" + key[len(IMAGE_PREFIX) :]
    return key


class SampleGraph(nn.Module):
    """forward(*observations, noise) -> actions (1, H, D): what the ONNX graph computes.

    ``fast`` (what export traces): the node-lean inference form of ``net.sample``
    (tether.policies.diffusion.inference: FiLM step terms folded into constants, 2D
    convolutions, one-node norms and activations); otherwise ``net.sample`` itself, the
    reference the parity check compares onnxruntime against.
    """

    def __init__(self, net: DiffusionNet, steps: int, fast: bool = True) -> None:
        super().__init__()
        self.net = net
        self.steps = steps
        self.keys = list(net.obs_keys)
        self.sampler = FastSampler(net, steps) if fast else None

    def forward(self, *inputs: Tensor) -> Tensor:
        obs = dict(zip(self.keys, inputs[:-1], strict=True))
        noise = inputs[-1] * self.net.cfg.noise_scale
        if self.sampler is not None:
            return self.sampler(obs, noise)  # type: ignore[no-any-return]
        return self.net.sample(obs, noise, self.steps)


def example_inputs(net: DiffusionNet, contract: dict[str, Any], seed: int = 0) -> list[Tensor]:
    """Plausible raw inputs (batch 1): low-dim values inside the training range, random
    images, standard-normal noise. Order: observation keys, then noise."""
    g = np.random.default_rng(seed)
    m = net.cfg
    out = []
    for key in m.obs_keys:
        shape = [1, m.obs_horizon, *contract["obs_shapes"][key]]
        if key.startswith(IMAGE_PREFIX):
            out.append(torch.from_numpy(g.integers(0, 256, shape, dtype=np.uint8)))
        elif key == TEXT_KEY:  # a unit vector, as the text encoder gives
            v = g.standard_normal(shape).astype(np.float32)
            out.append(torch.from_numpy(v / np.linalg.norm(v, axis=-1, keepdims=True)))
        else:
            lo = np.asarray(contract["normalization"][key]["min"])
            hi = np.asarray(contract["normalization"][key]["max"])
            x = lo + (hi - lo) * g.random(shape)
            out.append(torch.from_numpy(x.astype(np.float32)))
    noise = g.standard_normal((1, m.horizon, net.action_dim)).astype(np.float32)
    return [*out, torch.from_numpy(noise)]


def model_json(net: DiffusionNet, contract: dict[str, Any], steps: int) -> dict[str, Any]:
    """The I/O contract of the exported graph (docs/model_json.md)."""
    m = net.cfg
    inputs = []
    for key in m.obs_keys:
        shape = [1, m.obs_horizon, *contract["obs_shapes"][key]]
        dtype = "uint8" if key.startswith(IMAGE_PREFIX) else "float32"
        inputs.append({"name": input_name(key), "key": key, "shape": shape, "dtype": dtype})
    chunk = [1, m.horizon, net.action_dim]
    inputs.append({"name": "noise", "key": "noise", "shape": chunk, "dtype": "float32"})
    return {
        "format": "tether-onnx/1",
        "trainer": "diffusion",
        "robot": contract["robot"],
        "action_mode": contract["action_mode"],
        "action_names": contract["action_names"],
        "control_hz": contract["control_hz"],
        "action_dt": contract["action_dt"],
        "obs_horizon": m.obs_horizon,
        "inputs": inputs,
        "outputs": [{"name": "actions", "shape": chunk}],
        "execute_steps": m.execute_steps,
        # informative: what the graph bakes in
        "num_inference_steps": steps,
        "noise_scale": m.noise_scale,
        "joint_names": contract.get("joint_names", contract["action_names"]),
        "normalization": contract["normalization"],
        "action_scale": contract["action_scale"],
        # the experiment it was trained in: `tether eval <this folder>` runs it there
        "experiment": portable_experiment(contract.get("experiment")),
        # a VLA: the text encoder the instruction input needs, the instructions it was
        # trained on and how an instruction is anchored to them (docs/vla.md)
        **{k: contract[k] for k in LANGUAGE_KEYS if k in contract},
    }


def export_onnx(
    net: DiffusionNet, contract: dict[str, Any], out_dir: Path, steps: int | None = None
) -> Path:
    """Write out_dir/model.onnx + model.json; returns the .onnx path."""
    steps = steps or net.cfg.num_inference_steps
    out_dir.mkdir(parents=True, exist_ok=True)
    meta = model_json(net, contract, steps)
    graph = SampleGraph(net.eval(), steps).eval()
    path = out_dir / "model.onnx"
    with torch.no_grad(), warnings.catch_warnings():
        # the DDIM loop and shapes are meant to be constants of the traced graph
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        # the TorchScript exporter (dynamo=False) is deprecated but unrolls a Python loop
        # into one flat graph with shared weights, which is exactly what is wanted here
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(
            graph,
            tuple(example_inputs(net, contract)),
            str(path),
            input_names=[i["name"] for i in meta["inputs"]],
            output_names=["actions"],
            opset_version=OPSET,
            dynamo=False,
            do_constant_folding=True,
        )
    (out_dir / "model.json").write_text(json.dumps(meta, indent=2))
    return path


def parity(net: DiffusionNet, contract: dict[str, Any], path: Path, seed: int = 0) -> float:
    """Max abs difference between torch (``net.sample``, what the torch policy runs) and
    onnxruntime (CPU) on the same inputs and noise."""
    import onnxruntime as ort

    x = example_inputs(net, contract, seed)
    meta = json.loads((path.parent / "model.json").read_text())
    with torch.no_grad():
        ref = SampleGraph(net, meta["num_inference_steps"], fast=False)(*x).numpy()
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feeds = {i["name"]: t.numpy() for i, t in zip(meta["inputs"], x, strict=True)}
    got = sess.run(None, feeds)[0]
    return float(np.abs(got - ref).max())


def export_checkpoint(checkpoint: Path, fmt: str, out: Path | None) -> Path:
    """`tether export CKPT [--out DIR]` (default DIR: CKPT/onnx): the ONNX graph and
    model.json (`--tensorrt` then builds an engine from it: tether.policies.tensorrt)."""
    if fmt not in FORMATS:
        raise TetherError(f"--format {fmt}: choose one of {', '.join(FORMATS)}")
    net, contract = load_net(checkpoint)
    out_dir = out or checkpoint / "onnx"
    path = export_onnx(net, contract, out_dir)
    err = parity(net, contract, path)
    meta = json.loads((out_dir / "model.json").read_text())
    sampler = "Euler (flow)" if net.cfg.objective == "flow" else "DDIM"
    print(
        f"{path}: {meta['num_inference_steps']} {sampler} steps in one graph, torch/onnxruntime "
        f"max abs error {err:.2e}"
    )
    if err > 1e-4:
        raise TetherError(f"{path}: onnxruntime differs from torch by {err:.2e} (> 1e-4)")
    if "text_encoder" in meta:
        bundle_text_encoder(meta["text_encoder"], out_dir)
    return path


def bundle_text_encoder(record: dict[str, Any], out_dir: Path) -> Path:
    """Copy the text encoder a VLA was trained with (checked against its hashes) into the
    exported folder's ``text_encoder/``, so the folder runs on a machine that never built it
    (the runtime prefers the folder's own copy; docs/vla.md)."""
    import shutil

    from tether.policies.vla.language import LOCAL_ENCODER, expected_encoder
    from tether.policies.vla.text_encoder import check_folder, encoders_root

    src = encoders_root() / record["name"]
    check_folder(src, expected_encoder(record))
    dst = out_dir / LOCAL_ENCODER
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    mb = sum(f.stat().st_size for f in dst.iterdir()) / 1e6
    print(f"{dst}: the text encoder {record['name']} ({mb:.0f} MB), checked against the model")
    return dst
