"""The VLA pipeline (docs/vla.md) on a synthetic dataset where only the instruction tells two
behaviours apart: the trained flow-matching policy follows the instruction, in torch and in
the exported ONNX graph served without torch; the graph with FiLM image encoders matches
torch; without an instruction the policy holds the arm; an unknown instruction still acts
and is reported with its nearest training instruction."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnxruntime")
pytest.importorskip("tokenizers")

from policy_helpers import (  # noqa: E402
    LEFT,
    RIGHT,
    start_state,
    vla_experiment,
    write_language_dataset,
)

from tether.core.types import Observation  # noqa: E402

pytestmark = pytest.mark.usefixtures("torch_one_thread")


@pytest.fixture(scope="module")
def language_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_language_dataset(tmp_path_factory.mktemp("ds_lang") / "lang")


@pytest.fixture(scope="module")
def trained(language_dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """600 steps of a small MLP flow head on [state, instruction] (~5 s)."""
    from tether.policies.diffusion.trainer import DiffusionTrainer

    torch.set_num_threads(1)
    cfg = vla_experiment(
        language_dataset, 600, denoiser="mlp", mlp_width=64, mlp_blocks=2, num_inference_steps=8
    )
    out = tmp_path_factory.mktemp("vla") / "ckpt"
    DiffusionTrainer.train(cfg, out, resume=False)
    return out


def _obs(q: np.ndarray, text: str | None, stamp: int = 0) -> Observation:
    return Observation({"state": q.astype(np.float32)}, stamp_ns=stamp, instruction=text)


def test_the_policy_follows_the_instruction_in_torch_and_onnx(trained: Path) -> None:
    from tether.core.experiment import robot_spec
    from tether.policies.config_onnx import OnnxPolicyConfig
    from tether.policies.diffusion.config import DiffusionPolicyConfig
    from tether.policies.diffusion.export import export_checkpoint
    from tether.policies.diffusion.policy import DiffusionPolicy
    from tether.policies.runtime import OnnxPolicy

    model = export_checkpoint(trained, "onnx", None)  # asserts parity <= 1e-4
    cfg = vla_experiment(trained, 1)
    spec = robot_spec(cfg)
    q = start_state(1)  # a state both instructions were shown in (frame 5 of pair 1)
    q[:7] += 0.05
    for policy in (
        DiffusionPolicy(DiffusionPolicyConfig(checkpoint=trained), spec),
        OnnxPolicy(OnnxPolicyConfig(model=model), spec),
    ):
        firsts = {}
        for text, side in ((LEFT, 1.0), (RIGHT, -1.0)):
            policy.reset()
            a = policy.act(_obs(q, text)).actions[0]
            want = np.concatenate([q[:7] + 0.1 * side, [0.04 if side > 0 else 0.0]])
            assert np.abs(a[:7] - want[:7]).max() < 0.05, (type(policy).__name__, text, a)
            assert abs(a[7] - want[7]) < 0.01
            firsts[text] = a
        assert np.abs(firsts[LEFT][:7] - firsts[RIGHT][:7]).min() > 0.1
        # a new instruction mid-chunk: the next action already follows it
        policy.reset()
        policy.act(_obs(q, LEFT, 0))
        b = policy.act(_obs(q, RIGHT, 10_000_000)).actions[0]
        assert np.abs(b[:7] - (q[:7] - 0.1)).max() < 0.05
        # no instruction yet: hold the arm where it is (the joints and the first finger)
        policy.reset()
        policy.language.instruction = None
        hold = policy.act(_obs(q, None, 0))
        np.testing.assert_allclose(hold.actions[0], q[:8].astype(np.float32))
        # words it was never trained on: it still acts, and says how far they are
        policy.act(_obs(q, "go up please", 20_000_000))
        status = policy.language.status()
        assert status["instruction"] == "go up please"
        assert status["nearest_training_instruction"] in (LEFT, RIGHT)
        assert status["similarity"] < 0.9


def test_the_exported_folder_carries_its_text_encoder(trained: Path, tmp_path, monkeypatch):
    """`tether export` of a VLA copies the encoder it was trained with into the folder, so the
    folder runs where no encoder was built (TETHER_TEXT_ENCODERS pointing at nothing)."""
    from tether.core.experiment import robot_spec
    from tether.policies.config_onnx import OnnxPolicyConfig
    from tether.policies.diffusion.export import export_checkpoint
    from tether.policies.runtime import OnnxPolicy

    model = export_checkpoint(trained, "onnx", tmp_path / "folder")
    local = model.parent / "text_encoder"
    assert (local / "text_encoder.onnx").is_file() and (local / "tokenizer.json").is_file()
    monkeypatch.setenv("TETHER_TEXT_ENCODERS", str(tmp_path / "no_encoders_here"))
    policy = OnnxPolicy(OnnxPolicyConfig(model=model), robot_spec(vla_experiment(trained, 1)))
    assert policy.language.encoder.folder == local
    q = start_state(1)
    a = policy.act(_obs(q, LEFT)).actions[0]
    assert np.abs(a[:7] - (q[:7] + 0.1)).max() < 0.05


@pytest.mark.parametrize("strides", [None, [1, 1]])
def test_flow_graph_with_film_images_matches_torch(
    language_dataset: Path, tmp_path: Path, strides: list[int] | None
) -> None:
    """FiLM image encoders + the flow U-Net: random weights (the FiLM layers start at zero,
    so an untrained net would hide them), exported, onnxruntime vs torch <= 1e-4, and the
    image features change with the instruction; also with the finer last feature map of
    ``image_strides`` [1, 1]."""
    from tether.policies.diffusion.checkpoint import build_net
    from tether.policies.diffusion.dataset import load_windows
    from tether.policies.diffusion.export import example_inputs, export_onnx, parity
    from tether.policies.diffusion.model import FilmImageEncoder
    from tether.policies.diffusion.trainer import make_contract

    cfg = vla_experiment(
        language_dataset,
        1,
        obs_keys=["state", "images/front", "instruction"],
        obs_horizon=2,
        image_strides=strides,
    )
    ds = load_windows(language_dataset, cfg.train.model, None, cfg.train.text_encoder)
    assert ds.instructions == [LEFT, RIGHT]
    contract = make_contract(cfg, cfg.train, ds)
    net = build_net(contract).eval()
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.3)
    enc = next(iter(net.encoders.values()))
    assert isinstance(enc, FilmImageEncoder)
    inputs = example_inputs(net, contract)
    img = inputs[1][:, 0]
    t1, t2 = (torch.nn.functional.normalize(torch.randn(1, 384, generator=g), dim=1) for _ in "ab")
    assert (enc(img, t1) - enc(img, t2)).abs().max() > 1e-3
    path = export_onnx(net, contract, tmp_path / "onnx")
    assert parity(net, contract, path) <= 1e-4


def test_text_norm_centres_the_training_instructions_inside_the_graph(
    language_dataset: Path, tmp_path: Path
) -> None:
    """model.text_norm: the contract carries the training instructions' mean and scale; the
    network sees the two instructions as opposite unit-RMS vectors (the raw unit embeddings
    differ by a few hundredths per element); the exported graph matches torch <= 1e-4 and
    the statistics cannot be left out."""
    from tether.core.errors import ConfigError
    from tether.policies.diffusion.checkpoint import build_net
    from tether.policies.diffusion.dataset import load_windows
    from tether.policies.diffusion.export import export_onnx, parity
    from tether.policies.diffusion.trainer import make_contract
    from tether.policies.vla.text_encoder import DEFAULT_ENCODER, TextEncoder, text_encoder_dir

    cfg = vla_experiment(language_dataset, 1, text_norm=True)
    ds = load_windows(language_dataset, cfg.train.model, None, cfg.train.text_encoder)
    contract = make_contract(cfg, cfg.train, ds)
    stats = contract["normalization"]["instruction"]
    enc = TextEncoder(text_encoder_dir(cfg.train.text_encoder or DEFAULT_ENCODER))
    raw = np.stack([enc.encode(t) for t in (LEFT, RIGHT)])
    np.testing.assert_allclose(stats["mean"], raw.mean(0), atol=1e-6)
    net = build_net(contract).eval()
    assert net.text_norm is not None
    seen = net.text_norm(torch.from_numpy(raw)).numpy()
    np.testing.assert_allclose(np.sqrt((seen**2).mean()), 1.0, rtol=1e-5)
    np.testing.assert_allclose(seen[0], -seen[1], atol=1e-5)
    assert np.abs(raw[0] - raw[1]).mean() < 0.1 < np.abs(seen[0] - seen[1]).mean()
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in net.parameters():
            if p.dtype.is_floating_point:
                p.copy_(torch.randn(p.shape, generator=g) * 0.3)
    path = export_onnx(net, contract, tmp_path / "onnx")
    assert parity(net, contract, path) <= 1e-4
    without = {k: v for k, v in contract["normalization"].items() if k != "instruction"}
    with pytest.raises(ConfigError, match="text_norm"):
        build_net({**contract, "normalization": without})


def test_guidance_follows_the_instruction_harder_inside_the_graph(
    language_dataset: Path, tmp_path: Path
) -> None:
    """model.guidance (instruction guidance, classifier-free guidance's form): each step
    goes along null + w * (instruction - null), the null instruction being zeros after
    text_norm. w = 0 is the null prediction alone: the instruction no longer matters; w = 1
    is the plain conditional sample; w = 2 moves twice as far from the null as w = 1 on the
    first step; the exported graph (the node-lean sampler) matches torch <= 1e-4."""
    from tether.policies.diffusion.checkpoint import build_net
    from tether.policies.diffusion.dataset import load_windows
    from tether.policies.diffusion.export import example_inputs, export_onnx, parity
    from tether.policies.diffusion.trainer import make_contract

    cfg = vla_experiment(
        language_dataset,
        1,
        obs_keys=["state", "images/front", "instruction"],
        text_norm=True,
        num_inference_steps=1,
    )
    ds = load_windows(language_dataset, cfg.train.model, None, cfg.train.text_encoder)
    contract = make_contract(cfg, cfg.train, ds)
    nets = {}
    for w in (0.0, 1.0, 2.0):
        c = {**contract, "model": {**contract["model"], "guidance": w}}
        net = build_net(c).eval()
        g = torch.Generator().manual_seed(0)
        with torch.no_grad():
            for p in net.parameters():
                if p.dtype.is_floating_point:
                    p.copy_(torch.randn(p.shape, generator=g) * 0.3)
        nets[w] = (net, c)
    inputs = example_inputs(nets[1.0][0], contract)
    other = [x.clone() for x in inputs]
    other[2] = -other[2]  # another instruction, same scene and noise

    def sample(w: float, x: list) -> torch.Tensor:
        net = nets[w][0]
        obs = dict(zip(net.obs_keys, x[:-1], strict=True))
        with torch.no_grad():
            return net.sample(obs, x[-1], 1)

    torch.testing.assert_close(sample(0.0, inputs), sample(0.0, other))
    assert (sample(1.0, inputs) - sample(1.0, other)).abs().max() > 1e-3
    # one Euler step from the noise along null + 2 * (instruction - null)
    from tether.policies.diffusion.model import flow_timesteps

    net = nets[2.0][0]
    obs = dict(zip(net.obs_keys, inputs[:-1], strict=True))
    noise = inputs[-1]
    t = torch.full((1,), flow_timesteps(net.cfg, 1)[0])
    with torch.no_grad():
        v_text = net.denoiser(noise, t, net.encode(obs))
        v_null = net.denoiser(noise, t, net.encode(obs, False))
        want = net.to_actions((noise + v_null + 2.0 * (v_text - v_null)).clamp(-1.0, 1.0))
    torch.testing.assert_close(sample(2.0, inputs), want)
    net, c = nets[2.0]
    path = export_onnx(net, c, tmp_path / "onnx")
    assert parity(net, c, path) <= 1e-4


def test_text_dropout_trains_the_null_instruction(language_dataset: Path) -> None:
    """model.text_dropout: the fraction of training samples whose instruction is the null
    one (zeros after text_norm), drawn from the loss's generator."""
    from tether.policies.diffusion.checkpoint import build_net
    from tether.policies.diffusion.dataset import load_windows
    from tether.policies.diffusion.trainer import make_contract

    cfg = vla_experiment(language_dataset, 1, text_norm=True, text_dropout=0.25)
    ds = load_windows(language_dataset, cfg.train.model, None, cfg.train.text_encoder)
    contract = make_contract(cfg, cfg.train, ds)
    net = build_net(contract)
    seen: list[torch.Tensor] = []
    encode = net.encode

    def spy(obs, keep=True, image_feats=None, poses=None):  # type: ignore[no-untyped-def]
        seen.append(torch.as_tensor(keep))
        return encode(obs, keep, image_feats, poses)

    net.encode = spy  # type: ignore[method-assign]
    b = 4000
    obs = {
        "state": torch.zeros(b, 1, 9),
        "instruction": torch.nn.functional.normalize(torch.randn(b, 1, 384), dim=-1),
    }
    net.loss(obs, torch.zeros(b, 4, 8), torch.Generator().manual_seed(0))
    dropped = 1.0 - seen[0].float().mean().item()
    assert 0.22 < dropped < 0.28


def test_paraphrases_draw_wordings_of_each_episodes_group(
    language_dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """train.paraphrases: each sample's instruction becomes a wording drawn from the group of
    the instruction its episode was recorded with, never another group's; the contract lists
    every wording trained on and text_norm centres on them; an instruction in no group, or
    in two, is refused by name; the trainer reads the groups from YAML."""
    from tether.core.errors import TetherError
    from tether.policies.diffusion.dataset import load_windows
    from tether.policies.diffusion.trainer import DiffusionTrainer, make_contract
    from tether.policies.vla.text_encoder import DEFAULT_ENCODER, TextEncoder, text_encoder_dir

    groups = {
        "left": [LEFT, "go to the left", "Head left."],
        "right": [RIGHT, "go to the right"],
        "unused": ["jump"],
    }
    cfg = vla_experiment(language_dataset, 1, text_norm=True)
    ds = load_windows(language_dataset, cfg.train.model, None, cfg.train.text_encoder, groups)
    wordings = [LEFT, "go to the left", "head left", RIGHT, "go to the right"]
    assert ds.instructions == wordings
    enc = TextEncoder(text_encoder_dir(cfg.train.text_encoder or DEFAULT_ENCODER))
    emb = np.stack([enc.encode(t) for t in wordings])
    left = np.abs(ds.obs["instruction"][ds.obs_index[:, -1]] - enc.encode(LEFT)).max(-1) < 1e-6
    assert 0 < left.sum() < len(left)
    rng = np.random.default_rng(0)
    idx = np.arange(len(ds))
    drawn: set[int] = set()
    for _ in range(20):
        x = ds.paraphrase(idx, rng)
        assert x.shape == (len(ds), 1, emb.shape[1])
        which = np.abs(x[:, 0, None] - emb[None]).max(-1).argmin(-1)
        np.testing.assert_allclose(x[:, 0], emb[which], atol=1e-6)
        assert (which[left] < 3).all() and (which[~left] >= 3).all()
        drawn |= set(which.tolist())
    assert drawn == set(range(5))
    contract = make_contract(cfg, cfg.train, ds)
    assert contract["instructions"] == wordings
    np.testing.assert_allclose(
        contract["normalization"]["instruction"]["mean"], emb.mean(0), atol=1e-6
    )
    with pytest.raises(TetherError, match="'move to the right' is in no group"):
        load_windows(language_dataset, cfg.train.model, None, None, {"left": [LEFT]})
    with pytest.raises(TetherError, match="'move to the left' is in 2 groups"):
        load_windows(language_dataset, cfg.train.model, None, None, {**groups, "x": [LEFT]})
    # through the trainer: the groups come from a YAML file
    (tmp_path / "groups.yaml").write_text(
        "left: [move to the left, go to the left]\nright: [move to the right]\n"
    )
    cfg = vla_experiment(language_dataset, 2, text_norm=True)
    cfg.train.paraphrases = tmp_path / "groups.yaml"
    DiffusionTrainer.train(cfg, tmp_path / "ckpt", resume=False)
    assert "instructions: 2 groups of" in capsys.readouterr().out
    import json

    got = json.loads((tmp_path / "ckpt" / "contract.json").read_text())["instructions"]
    assert got == [LEFT, "go to the left", RIGHT]
    (tmp_path / "bad.yaml").write_text("left: move to the left\n")
    cfg.train.paraphrases = tmp_path / "bad.yaml"
    with pytest.raises(TetherError, match="list of wordings"):
        DiffusionTrainer.train(cfg, tmp_path / "ckpt2", resume=False)


def test_an_unseen_wording_is_anchored_to_the_training_wordings_nearest_it(
    trained: Path, language_dataset: Path, tmp_path: Path
) -> None:
    """`text_anchor`: the instruction reaches the policy as the softmax(cosine / T) blend of
    the training instructions' embeddings: a training wording stays itself, an unseen one
    near "move to the left" acts as that one does; the model folder carries the temperature
    (model.json), a policy config overrides it, `raw` turns it off; the torch policy on the
    checkpoint reads it the same way."""
    import json
    import shutil

    from tether.core.errors import ConfigError
    from tether.core.experiment import robot_spec
    from tether.policies.config_onnx import OnnxPolicyConfig
    from tether.policies.diffusion.export import export_checkpoint
    from tether.policies.runtime import OnnxPolicy
    from tether.policies.vla.language import anchor_temperature

    ckpt = tmp_path / "ckpt"
    shutil.copytree(trained, ckpt)
    contract = json.loads((ckpt / "contract.json").read_text())
    contract["text_anchor"] = 0.02
    (ckpt / "contract.json").write_text(json.dumps(contract))
    model = export_checkpoint(ckpt, "onnx", tmp_path / "folder")
    assert json.loads(model.with_suffix(".json").read_text())["text_anchor"] == 0.02
    spec = robot_spec(vla_experiment(trained, 1))
    anchored = OnnxPolicy(OnnxPolicyConfig(model=model), spec)
    raw = OnnxPolicy(OnnxPolicyConfig(model=model, text_anchor="raw"), spec)
    assert anchored.language.anchor == 0.02 and raw.language.anchor is None
    unseen = "go over to the left side"
    enc = anchored.language.encoder
    left, right, text = (enc.encode(t) for t in (LEFT, RIGHT, unseen))
    assert text @ left < 0.95 and text @ left > text @ right  # unseen, nearer LEFT
    q = start_state(1)
    q[:7] += 0.05

    fresh = {id(p): p.state() for p in (anchored, raw)}

    def first_action(policy: OnnxPolicy, instruction: str) -> np.ndarray:
        policy.load_state(fresh[id(policy)])  # the same noise each time
        return policy.act(_obs(q, instruction)).actions[0]

    # the embedding the graph gets: the unseen wording's is (almost) LEFT's, a training
    # wording's is its own; raw leaves both as the encoder gives them
    assert anchored.language.embedding(_obs(q, unseen)) @ left > 0.999
    assert anchored.language.embedding(_obs(q, RIGHT)) @ right > 0.999
    np.testing.assert_array_equal(raw.language.embedding(_obs(q, unseen)), text)
    np.testing.assert_allclose(
        first_action(anchored, unseen), first_action(anchored, LEFT), atol=1e-3
    )
    np.testing.assert_allclose(first_action(anchored, RIGHT), first_action(raw, RIGHT), atol=5e-3)
    # the torch policy on the checkpoint reads the same contract entry
    from tether.policies.diffusion.config import DiffusionPolicyConfig
    from tether.policies.diffusion.policy import DiffusionPolicy

    torch_policy = DiffusionPolicy(DiffusionPolicyConfig(checkpoint=ckpt), spec)
    assert torch_policy.language.embedding(_obs(q, unseen)) @ left > 0.999
    status = anchored.language.status(unseen)
    assert status["nearest_training_instruction"] == LEFT
    assert 1.0 <= status["anchored_wordings"] < 1.1
    assert "anchored_wordings" not in raw.language.status(unseen)
    # the trainer writes the temperature into the checkpoint's contract
    from tether.policies.diffusion.trainer import DiffusionTrainer

    out = tmp_path / "anchor_ckpt"
    cfg = vla_experiment(language_dataset, 2, denoiser="mlp", mlp_width=16, text_anchor=0.05)
    DiffusionTrainer.train(cfg, out, resume=False)
    assert json.loads((out / "contract.json").read_text())["text_anchor"] == 0.05
    with pytest.raises(ConfigError, match="positive temperature"):
        anchor_temperature({"text_anchor": 0.02}, -1.0)


def test_task_experts_give_each_group_of_wordings_its_own_denoiser(
    language_dataset: Path, tmp_path: Path
) -> None:
    """model.task_experts: one U-Net per group of train.paraphrases, mixed by the
    instruction's nearness to each group's wordings. A training wording drives its own
    group's expert (weight > 0.99) and trains only that one; the sparse training path and
    the dense one agree; the exported graph matches torch <= 1e-4; train.init_from seeds
    every expert with a shared denoiser, so the mixture acts as that denoiser did; without
    groups it is refused."""
    import json

    from tether.core.errors import ConfigError, TetherError
    from tether.policies.diffusion.checkpoint import load_net
    from tether.policies.diffusion.export import example_inputs, export_onnx, parity
    from tether.policies.diffusion.model import ExpertDenoiser
    from tether.policies.diffusion.trainer import DiffusionTrainer
    from tether.policies.vla.text_encoder import DEFAULT_ENCODER, TextEncoder, text_encoder_dir

    (tmp_path / "groups.yaml").write_text(
        "left: [move to the left, go to the left]\nright: [move to the right]\n"
    )
    unet = {"obs_keys": ["state", "instruction"], "down_dims": [8, 16], "kernel_size": 3}
    shared = vla_experiment(language_dataset, 2, **unet)
    shared.train.paraphrases = tmp_path / "groups.yaml"
    DiffusionTrainer.train(shared, tmp_path / "shared", resume=False)
    cfg = vla_experiment(language_dataset, 2, task_experts=True, **unet)
    cfg.train.paraphrases = tmp_path / "groups.yaml"
    cfg.train.init_from = tmp_path / "shared"
    cfg.train.lr = 1e-12  # (two steps that leave the copied weights as they are)
    DiffusionTrainer.train(cfg, tmp_path / "experts", resume=False)
    net, contract = load_net(tmp_path / "experts")
    assert contract["instruction_groups"] == [[0, 1], [2]]
    assert isinstance(net.denoiser, ExpertDenoiser) and len(net.denoiser.experts) == 2
    enc = TextEncoder(text_encoder_dir(cfg.train.text_encoder or DEFAULT_ENCODER))
    emb = torch.from_numpy(np.stack([enc.encode(t) for t in (LEFT, "go to the left", RIGHT)]))
    torch.testing.assert_close(net.expert_wordings, emb / emb.norm(dim=-1, keepdim=True))
    gate = net.expert_gate(emb)
    assert (gate[:2, 0] > 0.99).all() and gate[2, 1] > 0.99
    torch.testing.assert_close(gate.sum(-1), torch.ones(3))

    # init_from: both experts hold the shared denoiser, so the mixture samples as it did
    ref, _ = load_net(tmp_path / "shared")
    x = example_inputs(net, contract)
    obs = {"state": x[0], "instruction": x[1]}
    with torch.no_grad():
        torch.testing.assert_close(
            net.sample(obs, x[2], 4), ref.sample(obs, x[2], 4), atol=1e-5, rtol=0
        )

    # distinct experts: the training path (each expert on its samples) = the dense one,
    # and a batch of left wordings trains the left expert only
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in net.denoiser.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.3)
    b = 6
    text = emb[torch.tensor([0, 1, 2, 0, 2, 1])][:, None]
    batch = {"state": x[0].repeat(b, 1, 1), "instruction": text}
    xt, t = torch.randn(b, 4, 8, generator=g), torch.rand(b, generator=g) * 100
    cond = net.encode(batch)
    with torch.no_grad():
        dense = net.denoiser.eval()(xt, t, cond)
        sparse = net.denoiser.train()(xt, t, cond)
    torch.testing.assert_close(sparse, dense, atol=1e-3, rtol=0)
    net.train()
    left = {"state": x[0].repeat(2, 1, 1), "instruction": emb[:2, None]}
    net.loss(left, torch.zeros(2, 4, 8), g).backward()
    grads = [
        sum(float(p.grad.abs().sum()) for p in e.parameters() if p.grad is not None)
        for e in net.denoiser.experts
    ]
    assert grads[0] > 0 and grads[1] < 0.01 * grads[0]  # (the gate: > 0.99 and < 0.01)
    net.eval()
    path = export_onnx(net, contract, tmp_path / "onnx")
    assert parity(net, contract, path) <= 1e-4

    bad = vla_experiment(language_dataset, 1, task_experts=True, **unet)
    with pytest.raises(ConfigError, match="task_experts"):
        DiffusionTrainer.train(bad, tmp_path / "bad", resume=False)
    cfg.train.init_from = tmp_path / "nowhere"
    with pytest.raises(TetherError, match="init_from: .*nowhere holds no model.safetensors"):
        DiffusionTrainer.train(cfg, tmp_path / "bad2", resume=False)
    assert json.loads((tmp_path / "experts" / "contract.json").read_text())["model"]["task_experts"]
