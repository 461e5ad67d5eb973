"""ONNX export of diffusion policies: one graph, parity with torch, model.json, runtime."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnxruntime")

from policy_helpers import IMG, experiment  # noqa: E402

from tether.core.errors import TetherError  # noqa: E402
from tether.core.types import Observation  # noqa: E402

pytestmark = pytest.mark.usefixtures("torch_one_thread")

# torch (DiffusionNet.sample) vs onnxruntime, max abs error over PARITY_SEEDS. The README
# claims < 1e-6. Measured on these tiny 2-step nets (8 seeds): MLP denoiser 3.1e-7, GroupNorm-1
# + SiLU 3.7e-7, one res block per level 8.0e-7: they hold the claim. The GroupNorm-8 nets do
# not: default (Mish) 3.8e-6, image variant 2.4e-6, two res blocks + SiLU 1.8e-6 (float32
# rounding through 5 DDIM steps; the exported graph computes GroupNorm 8 as LayerNorm +
# BatchNorm), so those are held to GROUPNORM8_ATOL instead. Re-measured 2026-11-27 on the
# default net as trained now: 1.2e-5 at seed 7 (4.5e-7 at seed 0); torch's own fast form
# differs from its reference form by 3.6e-6 on that seed: in these 2-step nets a group is
# one channel over 4 time steps, and normalising 4 near-equal values amplifies float32
# rounding. An export bug shows as >= 1e-3. The shipped models: 2.4e-7 (train.json).
README_ATOL = 1e-6
GROUPNORM8_ATOL = 2.5e-5
PARITY_SEEDS = range(8)


def max_parity(net, contract, path: Path) -> float:  # noqa: ANN001
    from tether.policies.diffusion.export import parity

    return max(parity(net, contract, path, seed) for seed in PARITY_SEEDS)


@pytest.fixture(scope="module")
def state_ckpt(tiny_dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tether.policies.diffusion.trainer import DiffusionTrainer

    out = tmp_path_factory.mktemp("state_ckpt")
    DiffusionTrainer.train(experiment(tiny_dataset, steps=2), out, resume=False)
    return out


def test_export_matches_torch_and_follows_model_json(state_ckpt: Path, tmp_path: Path) -> None:
    import onnx

    from tether.policies.diffusion.checkpoint import load_net
    from tether.policies.diffusion.export import export_checkpoint

    path = export_checkpoint(state_ckpt, "onnx", tmp_path)
    meta = json.loads((tmp_path / "model.json").read_text())
    assert meta["format"] == "tether-onnx/1" and meta["trainer"] == "diffusion"
    assert [(i["name"], i["key"], i["shape"]) for i in meta["inputs"]] == [
        ("state", "state", [1, 2, 9]),
        ("env_state", "env_state", [1, 2, 7]),
        ("noise", "noise", [1, 4, 8]),
    ]
    assert meta["outputs"] == [{"name": "actions", "shape": [1, 4, 8]}]
    assert meta["execute_steps"] == 2 and meta["obs_horizon"] == 2
    assert meta["action_dt"] == pytest.approx(1 / 30)
    model = onnx.load(str(path))
    assert [i.name for i in model.graph.input] == ["state", "env_state", "noise"]
    net, contract = load_net(state_ckpt)
    assert max_parity(net, contract, path) <= GROUPNORM8_ATOL


def test_export_image_variant_parity(tiny_image_dataset: Path, tmp_path: Path) -> None:
    from tether.policies.diffusion.checkpoint import load_net
    from tether.policies.diffusion.export import export_checkpoint
    from tether.policies.diffusion.trainer import DiffusionTrainer

    ckpt = tmp_path / "ckpt"
    cfg = experiment(tiny_image_dataset, steps=2, obs_keys=["state", "images/front"])
    DiffusionTrainer.train(cfg, ckpt, resume=False)
    path = export_checkpoint(ckpt, "onnx", tmp_path / "onnx")
    meta = json.loads((tmp_path / "onnx" / "model.json").read_text())
    image = meta["inputs"][1]
    assert image == {
        "name": "image_front",
        "key": "images/front",
        "shape": [1, 2, IMG, IMG, 3],
        "dtype": "uint8",
    }
    net, contract = load_net(ckpt)
    assert max_parity(net, contract, path) <= GROUPNORM8_ATOL


def test_onnx_policy_matches_torch_policy(state_ckpt: Path, tmp_path: Path, panda) -> None:
    """Same seed -> same noise -> the same chunks from the graph and from torch."""
    from tether.policies.config_onnx import OnnxPolicyConfig
    from tether.policies.diffusion.config import DiffusionPolicyConfig
    from tether.policies.diffusion.export import export_checkpoint
    from tether.policies.diffusion.policy import DiffusionPolicy
    from tether.policies.runtime import OnnxPolicy

    path = export_checkpoint(state_ckpt, "onnx", tmp_path)
    ort_policy = OnnxPolicy(OnnxPolicyConfig(model=path, seed=3), panda)
    torch_policy = DiffusionPolicy(DiffusionPolicyConfig(checkpoint=state_ckpt, seed=3), panda)
    assert ort_policy.contract["observation_keys"] == torch_policy.contract["observation_keys"]
    rng = np.random.default_rng(0)
    for k in range(12):
        obs = Observation(
            {
                "state": rng.uniform(-0.5, 0.5, 9).astype(np.float32),
                "env_state": np.array([0.5, 0.1, 0.02, 1, 0, 0, 0], np.float32),
            },
            stamp_ns=k * 10_000_000,
        )
        a, b = ort_policy.act(obs), torch_policy.act(obs)
        np.testing.assert_allclose(a.actions, b.actions, atol=GROUPNORM8_ATOL)
    assert ort_policy.inferences == torch_policy.inferences == 2


def test_tensorrt_says_what_is_missing(state_ckpt: Path, tmp_path: Path) -> None:
    from tether.cli.train import run_export

    try:
        import tensorrt  # noqa: F401

        pytest.skip("TensorRT is installed")
    except ImportError:
        pass
    with pytest.raises(TetherError, match="TensorRT is not installed.*pip install tensorrt"):
        run_export(str(state_ckpt), "tensorrt", str(tmp_path))
    assert (tmp_path / "model.onnx").is_file()  # the ONNX graph is still written


def test_unknown_format_is_rejected(state_ckpt: Path) -> None:
    from tether.policies.diffusion.export import export_checkpoint

    with pytest.raises(TetherError, match="onnx, tensorrt"):
        export_checkpoint(state_ckpt, "tflite", None)


def test_export_mlp_denoiser_parity(tiny_dataset: Path, tmp_path: Path) -> None:
    from tether.policies.diffusion.checkpoint import load_net
    from tether.policies.diffusion.export import export_checkpoint
    from tether.policies.diffusion.trainer import DiffusionTrainer

    ckpt = tmp_path / "ckpt"
    cfg = experiment(tiny_dataset, steps=2, denoiser="mlp", mlp_width=16, mlp_blocks=2, horizon=3)
    DiffusionTrainer.train(cfg, ckpt, resume=False)  # any horizon: no U-Net down-sampling
    path = export_checkpoint(ckpt, "onnx", tmp_path / "onnx")
    net, contract = load_net(ckpt)
    assert type(net.denoiser).__name__ == "MlpDenoiser"
    assert max_parity(net, contract, path) <= README_ATOL


@pytest.mark.parametrize(
    ("norm_groups", "activation", "res_blocks", "mid_blocks", "kernel_size"),
    [
        (8, "mish", 2, None, 3),
        (1, "silu", 2, None, 3),
        (2, "silu", 1, None, 5),
        (1, "mish", 3, None, 3),
        (8, "silu", 1, None, 5),
        (8, "silu", 1, 0, 3),
    ],
)
def test_inference_form_computes_net_sample(
    norm_groups: int, activation: str, res_blocks: int, mid_blocks: int | None, kernel_size: int
) -> None:
    """The node-lean form export traces (folded FiLM step terms, 2D convolutions, one-node
    norms, rewritten Mish) is the same function as DiffusionNet.sample."""
    from policy_helpers import TINY_MODEL

    from tether.policies.diffusion.checkpoint import build_net, synthetic_contract
    from tether.policies.diffusion.config import DiffusionModelConfig
    from tether.policies.diffusion.export import SampleGraph, example_inputs

    cfg = DiffusionModelConfig(
        **{
            **TINY_MODEL,
            "norm_groups": norm_groups,
            "activation": activation,
            "res_blocks": res_blocks,
            "mid_blocks": mid_blocks,
            "kernel_size": kernel_size,
            "horizon": 8,
        }
    )
    contract = synthetic_contract(cfg, {"state": [9], "env_state": [7]})
    torch.manual_seed(0)
    net = build_net(contract).eval()
    with torch.no_grad():  # non-trivial norm affines and biases (trained nets have them)
        for name, p in net.named_parameters():
            if name.endswith(("weight", "bias")) and p.dim() == 1:
                p.add_(0.3 * torch.randn_like(p))
    x = example_inputs(net, contract, seed=4)
    with torch.no_grad():
        ref = SampleGraph(net, 5, fast=False)(*x)
        got = SampleGraph(net, 5)(*x)
    assert ref.shape == got.shape == (1, 8, 8)
    assert float((ref - got).abs().max()) <= 1e-5
    assert float(ref.abs().max()) > 0.0
    assert len(net.denoiser.mid) == (res_blocks if mid_blocks is None else mid_blocks)


def test_binary_actions_snap_to_their_range_in_torch_and_onnx(tmp_path: Path) -> None:
    """A binary action (a gripper) leaves the sampler at one end of its range, in
    DiffusionNet.sample, in the inference form and in the exported graph; the others stay
    continuous."""
    import onnxruntime as ort
    from policy_helpers import TINY_MODEL

    from tether.policies.diffusion.checkpoint import build_net, synthetic_contract
    from tether.policies.diffusion.config import DiffusionModelConfig
    from tether.policies.diffusion.export import SampleGraph, example_inputs, export_onnx

    cfg = DiffusionModelConfig(**{**TINY_MODEL, "binary_actions": ["a7"]})
    contract = synthetic_contract(cfg, {"state": [9], "env_state": [7]})
    contract["action_scale"] = {"min": [-1.0] * 7 + [0.0], "max": [1.0] * 7 + [0.04]}
    torch.manual_seed(0)
    net = build_net(contract).eval()
    plain = build_net({**contract, "model": {**contract["model"], "binary_actions": []}})
    plain.load_state_dict(net.state_dict())
    path = export_onnx(net, contract, tmp_path)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    meta = json.loads((tmp_path / "model.json").read_text())
    for seed in range(4):
        x = example_inputs(net, contract, seed)
        with torch.no_grad():
            ref = SampleGraph(net, 5, fast=False)(*x).numpy()
            fast = SampleGraph(net, 5)(*x).numpy()
            free = SampleGraph(plain.eval(), 5, fast=False)(*x).numpy()
        feeds = {i["name"]: t.numpy() for i, t in zip(meta["inputs"], x, strict=True)}
        got = sess.run(None, feeds)[0]
        for out in (ref, fast, got):
            assert set(np.unique(out[..., 7]).tolist()) <= {0.0, np.float32(0.04)}
            np.testing.assert_allclose(out[..., :7], free[..., :7], atol=1e-5)
        # the snap is to the nearer end of what the unsnapped sampler gives
        np.testing.assert_array_equal(ref[..., 7] > 0.02, free[..., 7] > 0.02)
    assert np.unique(free[..., 7]).size > 2  # untrained: the raw finger values are spread


@pytest.mark.parametrize("scale", [0.0, 0.5])
def test_noise_scale_is_baked_into_the_graph(tmp_path: Path, scale: float) -> None:
    """model.noise_scale: the exported graph scales its noise input by it before sampling
    (0: every noise gives the same chunk, deterministic DDIM), equal to DiffusionNet.sample
    on the scaled noise and to the torch policy's; model.json records it."""
    import onnxruntime as ort
    from policy_helpers import TINY_MODEL

    from tether.policies.diffusion.checkpoint import build_net, synthetic_contract
    from tether.policies.diffusion.config import DiffusionModelConfig
    from tether.policies.diffusion.export import example_inputs, export_onnx

    cfg = DiffusionModelConfig(**{**TINY_MODEL, "noise_scale": scale})
    contract = synthetic_contract(cfg, {"state": [9], "env_state": [7]})
    torch.manual_seed(0)
    net = build_net(contract).eval()
    path = export_onnx(net, contract, tmp_path)
    meta = json.loads((tmp_path / "model.json").read_text())
    assert meta["noise_scale"] == scale
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    x = example_inputs(net, contract, 1)
    outs = []
    for seed in range(3):
        noise = torch.from_numpy(np.random.default_rng(seed).standard_normal(x[-1].shape))
        noise = noise.float()
        feeds = {
            i["name"]: t.numpy() for i, t in zip(meta["inputs"], [*x[:-1], noise], strict=True)
        }
        got = sess.run(None, feeds)[0]
        with torch.no_grad():
            obs = dict(zip(net.obs_keys, x[:-1], strict=True))
            ref = net.sample(obs, noise * scale, cfg.num_inference_steps).numpy()
        np.testing.assert_allclose(got, ref, atol=1e-4)  # the export's parity bound
        outs.append(got)
    if scale == 0.0:
        np.testing.assert_array_equal(outs[0], outs[1])
    else:
        assert np.abs(outs[0] - outs[1]).max() > 1e-3


def test_binary_actions_must_name_actions() -> None:
    from policy_helpers import TINY_MODEL

    from tether.core.errors import ConfigError
    from tether.policies.diffusion.checkpoint import build_net, synthetic_contract
    from tether.policies.diffusion.config import DiffusionModelConfig

    cfg = DiffusionModelConfig(**{**TINY_MODEL, "binary_actions": ["gripper"]})
    contract = synthetic_contract(cfg, {"state": [9], "env_state": [7]})
    with pytest.raises(ConfigError, match=r"binary_actions: \['gripper'\] not among"):
        build_net(contract)


def _op_counts(path: Path) -> dict[str, int]:
    import collections

    import onnx

    return dict(collections.Counter(n.op_type for n in onnx.load(str(path)).graph.node))


def test_export_graph_is_node_lean(tiny_dataset: Path, tmp_path: Path) -> None:
    """With norm_groups 1 and silu every conv block is Conv + LayerNormalization + Sigmoid/Mul
    (onnxruntime: QuickGelu), FiLM is one MatMul for all blocks and steps, and nothing is
    left of the exporter's GroupNorm/Mish decompositions or shape arithmetic."""
    from tether.policies.diffusion.checkpoint import load_net
    from tether.policies.diffusion.export import export_checkpoint
    from tether.policies.diffusion.trainer import DiffusionTrainer

    ckpt = tmp_path / "ckpt"
    cfg = experiment(tiny_dataset, steps=2, norm_groups=1, activation="silu")
    DiffusionTrainer.train(cfg, ckpt, resume=False)
    path = export_checkpoint(ckpt, "onnx", tmp_path / "onnx")
    net, contract = load_net(ckpt)
    assert max_parity(net, contract, path) <= README_ATOL
    ops = _op_counts(path)
    steps = net.cfg.num_inference_steps  # 5
    # down_dims [8, 16]: 4 down + 2 mid + 2 up residual blocks (2 norms each) + final block
    norms_per_step = 2 * 8 + 1
    assert ops["LayerNormalization"] == steps * norms_per_step
    assert ops["Sigmoid"] == steps * norms_per_step + 1  # + the FiLM activation of cond
    for gone in ("InstanceNormalization", "Softplus", "Tanh", "Shape", "Gemm", "Slice"):
        assert gone not in ops, gone
    assert ops["MatMul"] == 1 and ops["Split"] == 1
    assert ops.get("Transpose", 0) <= 2  # noise in, actions out
    # per residual block at most 12 nodes (2 x conv/norm/sigmoid/mul, FiLM mul/add, residual
    # add, skip conv), per step 16 more (final block, down/up sampling, concat, DDIM update)
    assert sum(ops.values()) - ops.get("Constant", 0) <= steps * (12 * 8 + 16) + 16


def test_export_is_far_smaller_than_tracing_sample(state_ckpt: Path, tmp_path: Path) -> None:
    """The default architecture (GroupNorm 8, Mish): the inference form still drops the
    per-step FiLM/step-embedding work and the GroupNorm shape arithmetic."""
    from tether.policies.diffusion.checkpoint import load_net
    from tether.policies.diffusion.export import export_checkpoint

    path = export_checkpoint(state_ckpt, "onnx", tmp_path)
    net, contract = load_net(state_ckpt)
    assert max_parity(net, contract, path) <= GROUPNORM8_ATOL
    ops = _op_counts(path)
    for gone in ("InstanceNormalization", "Softplus", "Shape", "Gemm", "Sin", "Cos"):
        assert gone not in ops, gone
    steps = net.cfg.num_inference_steps
    assert ops["LayerNormalization"] == steps * 17
    assert ops["BatchNormalization"] == steps * 17  # the per-channel affine of GroupNorm 8
    assert ops["Log"] == steps * 17 + 1  # Mish as x * tanh(log(1 + e^x))


def test_mish_rewrite_matches_torch_mish() -> None:
    from tether.policies.diffusion.inference import mish

    x = torch.cat([torch.linspace(-30, 30, 1001), torch.tensor([-1e4, -100.0, 100.0, 1e4])])
    np.testing.assert_allclose(mish(x).numpy(), torch.nn.functional.mish(x).numpy(), atol=2e-6)


def test_one_res_block_per_level_halves_the_graph(tiny_dataset: Path, tmp_path: Path) -> None:
    from tether.policies.diffusion.checkpoint import load_net
    from tether.policies.diffusion.export import export_checkpoint
    from tether.policies.diffusion.trainer import DiffusionTrainer

    counts = {}
    for blocks in (1, 2):
        ckpt = tmp_path / f"rb{blocks}"
        cfg = experiment(tiny_dataset, steps=2, activation="silu", res_blocks=blocks)
        DiffusionTrainer.train(cfg, ckpt, resume=False)
        path = export_checkpoint(ckpt, "onnx", ckpt / "onnx")
        net, contract = load_net(ckpt)
        assert max_parity(net, contract, path) <= (README_ATOL if blocks == 1 else GROUPNORM8_ATOL)
        counts[blocks] = _op_counts(path)
    steps = 5
    # norms per step: 2 per residual block (down 2 levels, mid, up 1 level) + the final block
    assert counts[2]["LayerNormalization"] == steps * (2 * (4 + 2 + 2) + 1)
    assert counts[1]["LayerNormalization"] == steps * (2 * (2 + 1 + 1) + 1)


def test_warm_up_runs_both_forms_and_changes_no_chunk(
    tiny_image_dataset: Path, tmp_path: Path, panda
) -> None:
    """The policy server's warm-up (one inference on zeros of the contract's shapes, image
    inputs uint8) runs in torch and in onnxruntime, draws no noise and counts no inference:
    a warmed policy answers with the very chunks of a cold one."""
    from tether.policies.config_onnx import OnnxPolicyConfig
    from tether.policies.diffusion.config import DiffusionPolicyConfig
    from tether.policies.diffusion.export import export_checkpoint
    from tether.policies.diffusion.policy import DiffusionPolicy
    from tether.policies.diffusion.trainer import DiffusionTrainer
    from tether.policies.runtime import OnnxPolicy

    ckpt = tmp_path / "ckpt"
    cfg = experiment(tiny_image_dataset, steps=2, obs_keys=["state", "images/front"])
    DiffusionTrainer.train(cfg, ckpt, resume=False)
    path = export_checkpoint(ckpt, "onnx", tmp_path / "onnx")

    def pair() -> list:
        return [
            OnnxPolicy(OnnxPolicyConfig(model=path, seed=5), panda),
            DiffusionPolicy(DiffusionPolicyConfig(checkpoint=ckpt, seed=5), panda),
        ]

    warm, cold = pair(), pair()
    for p in warm:
        p.warm_up()
        assert p.inferences == 0
    rng = np.random.default_rng(1)
    for k in range(6):
        obs = Observation(
            {
                "state": rng.uniform(-0.5, 0.5, 9).astype(np.float32),
                "images/front": rng.integers(0, 255, (IMG, IMG, 3), dtype=np.uint8),
            },
            stamp_ns=k * 10_000_000,
        )
        for w, c in zip(warm, cold, strict=True):
            np.testing.assert_array_equal(w.act(obs).actions, c.act(obs).actions)


@pytest.mark.parametrize(
    ("action_dim", "norm_groups", "res_blocks", "mid_blocks", "activation"),
    [(4, 8, 1, 0, "silu"), (8, 1, 2, None, "mish"), (4, 4, 2, 1, "silu")],
)
def test_grouped_experts_compute_each_expert(
    action_dim: int, norm_groups: int, res_blocks: int, mid_blocks: int | None, activation: str
) -> None:
    """model.task_experts' K U-Nets in the exported graph as one GroupedUnet (grouped convs,
    norms over the K channel blocks, FiLM terms side by side): block k of its output is
    expert k's prediction at every step, with as many convolutions as one expert has (the
    per-node overhead is what batch 1 pays). Covers a shared input's identity skip
    (action_dim = the first width), one-group and grouped norms, mid blocks or none."""
    from tether.policies.diffusion.inference import FastUnet, GroupedUnet
    from tether.policies.diffusion.model import ConditionalUnet1d

    torch.manual_seed(0)
    k, cond_dim, horizon, steps = 3, 6, 8, [90, 50, 10]
    unets = []
    for _ in range(k):
        u = ConditionalUnet1d(
            action_dim, cond_dim, [8, 16], 3, 8, norm_groups, activation, res_blocks, mid_blocks
        ).eval()
        with torch.no_grad():  # distinct experts with non-trivial affines and biases
            for p in u.parameters():
                p.add_(0.3 * torch.randn_like(p))
        unets.append(FastUnet(u, horizon, steps))
    grouped = GroupedUnet(unets)

    def convs(m: torch.nn.Module) -> int:
        kinds = (torch.nn.Conv2d, torch.nn.ConvTranspose2d)
        return sum(isinstance(c, kinds) for c in m.modules())

    assert convs(grouped) == convs(unets[0])
    x = torch.randn(2, action_dim, 1, horizon)
    cond = torch.randn(2, cond_dim)
    with torch.no_grad():
        films = grouped.films(cond)
        for s in range(len(steps)):
            got = grouped(x, films[s]).unflatten(1, (k, -1))
            assert got.shape == (2, k, action_dim, 1, horizon)
            for e, u in enumerate(unets):
                ref = u(x, u.films(cond)[s])
                assert float((got[:, e] - ref).abs().max()) <= 1e-5
                assert float(ref.abs().max()) > 0.0
            # the experts differ, so a mix-up of their blocks would show
            assert float((got[:, 0] - got[:, 1]).abs().max()) > 1e-2
