"""Diffusion policy: data windows, DDIM sampler, training, checkpoints, resume, policy."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from policy_helpers import TINY_MODEL, experiment  # noqa: E402

from tether.core.types import Observation  # noqa: E402
from tether.policies.diffusion.config import DiffusionModelConfig  # noqa: E402

pytestmark = pytest.mark.usefixtures("torch_one_thread")


def test_windows_pad_at_episode_edges(tiny_dataset: Path) -> None:
    from tether.policies.diffusion.dataset import load_windows

    ds = load_windows(tiny_dataset, DiffusionModelConfig(**TINY_MODEL))
    assert len(ds) == 60 and ds.episodes == 3
    # first sample: the first observation repeated, actions 0..3 of episode 0
    assert ds.obs_index[0].tolist() == [0, 0]
    assert ds.action_index[0].tolist() == [0, 1, 2, 3]
    # last sample of episode 0 (frame 19): the last action repeated, never episode 1's
    assert ds.action_index[19].tolist() == [19, 19, 19, 19]
    assert ds.obs_index[20].tolist() == [20, 20]
    lo, hi = ds.stats["action"]
    assert np.all(lo <= ds.action.min(0) + 1e-6) and np.all(hi >= ds.action.max(0) - 1e-6)


def test_ddim_recovers_x0_from_an_exact_noise_predictor() -> None:
    """With the true epsilon, DDIM lands on x0 (then unnormalized into robot units)."""
    from tether.policies.diffusion.checkpoint import build_net, synthetic_contract

    cfg = DiffusionModelConfig(**TINY_MODEL)
    contract = synthetic_contract(cfg, {"state": [9], "env_state": [7]}, action_dim=3)
    contract["action_scale"] = {"min": [0.0, -2.0, 10.0], "max": [1.0, 2.0, 20.0]}
    net = build_net(contract)
    x0 = torch.tensor(np.random.default_rng(0).uniform(-0.9, 0.9, (1, 4, 3)), dtype=torch.float32)
    ab = net.alphas_cumprod

    def oracle(x, t, cond):
        a = ab[t.long()][:, None, None]
        return (x - a.sqrt() * x0) / (1 - a).sqrt()

    net.denoiser.forward = oracle  # type: ignore[method-assign]
    obs = {"state": torch.zeros(1, 2, 9), "env_state": torch.zeros(1, 2, 7)}
    out = net.sample(obs, torch.randn(1, 4, 3), steps=5)
    expected = net.action_norm.inverse(x0)
    np.testing.assert_allclose(out.numpy(), expected.numpy(), atol=1e-4)
    assert float(expected[..., 2].min()) >= 10.0  # really in robot units


def test_train_writes_a_pickle_free_checkpoint_and_resumes(
    tiny_dataset: Path, tmp_path: Path
) -> None:
    from tether.policies.diffusion.trainer import DiffusionTrainer

    out = tmp_path / "ckpt"
    result = DiffusionTrainer.train(experiment(tiny_dataset, steps=3), out, resume=False)
    assert result["steps"] == 3
    names = sorted(p.name for p in out.iterdir())
    assert names == [
        "contract.json",
        "model.safetensors",
        "train_log.json",
        "train_state.json",
        "train_state.safetensors",
        "training_curve.png",
    ]
    contract = json.loads((out / "contract.json").read_text())
    assert contract["trainer"] == "diffusion"
    assert contract["observation_keys"] == ["state", "env_state"]
    assert contract["action_dt"] == pytest.approx(1 / 30)
    assert len(contract["action_names"]) == 8 and contract["control_hz"] == 100
    assert set(contract["normalization"]) == {"state", "env_state"}
    for f in out.iterdir():  # no pickle: JSON, safetensors, PNG only
        assert not f.read_bytes().startswith(b"\x80"), f
    # resume continues the step count and the loss history; a fresh run refuses the dir
    from tether.core.errors import TetherError

    with pytest.raises(TetherError, match="--resume"):
        DiffusionTrainer.train(experiment(tiny_dataset, steps=5), out, resume=False)
    before = json.loads((out / "train_state.json").read_text())["losses"]
    result = DiffusionTrainer.train(experiment(tiny_dataset, steps=5), out, resume=True)
    after = json.loads((out / "train_state.json").read_text())["losses"]
    assert result["steps"] == 5 and len(after) == 5 and after[:3] == before


def test_resume_matches_an_uninterrupted_run(tiny_dataset: Path, tmp_path: Path) -> None:
    from safetensors.torch import load_file

    from tether.policies.diffusion.trainer import DiffusionTrainer

    DiffusionTrainer.train(experiment(tiny_dataset, steps=4), tmp_path / "a", resume=False)
    DiffusionTrainer.train(experiment(tiny_dataset, steps=2), tmp_path / "b", resume=False)
    DiffusionTrainer.train(experiment(tiny_dataset, steps=4), tmp_path / "b", resume=True)
    a = load_file(str(tmp_path / "a" / "model.safetensors"))
    b = load_file(str(tmp_path / "b" / "model.safetensors"))
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=1e-5, atol=1e-6)


def test_resume_on_a_grown_dataset_keeps_the_checkpoints_scaling(
    tiny_dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """More demonstrations appended since: their range differs, but the weights were trained
    with the checkpoint's normalization, so the contract keeps describing it."""
    from policy_helpers import write_dataset
    from safetensors.torch import load_file

    from tether.policies.diffusion.dataset import load_windows
    from tether.policies.diffusion.trainer import DiffusionTrainer

    grown = write_dataset(tmp_path / "grown", episodes=6)
    lo_new = load_windows(grown, DiffusionModelConfig(**TINY_MODEL)).stats["state"][0]
    out = tmp_path / "ckpt"
    DiffusionTrainer.train(experiment(tiny_dataset, steps=2), out, resume=False)
    first = json.loads((out / "contract.json").read_text())
    assert not np.allclose(first["normalization"]["state"]["min"], lo_new)  # it did grow
    capsys.readouterr()
    DiffusionTrainer.train(experiment(grown, steps=4), out, resume=True)
    assert "the checkpoint's is kept" in capsys.readouterr().out
    resumed = json.loads((out / "contract.json").read_text())
    assert resumed["normalization"] == first["normalization"]
    assert resumed["action_scale"] == first["action_scale"]
    assert resumed["step"] == 4 and resumed["dataset"] == str(grown)
    # what the weights hold is what the contract says
    weights = load_file(str(out / "model.safetensors"))
    lo = np.asarray(first["normalization"]["state"]["min"])
    hi = np.asarray(first["normalization"]["state"]["max"])
    np.testing.assert_allclose(weights["norm.state.scale"].numpy(), 2 / (hi - lo), rtol=1e-5)


def test_policy_answers_at_control_rate_and_replans(
    tiny_dataset: Path, tmp_path: Path, panda
) -> None:
    from tether.policies.diffusion.config import DiffusionPolicyConfig
    from tether.policies.diffusion.policy import DiffusionPolicy
    from tether.policies.diffusion.trainer import DiffusionTrainer

    DiffusionTrainer.train(experiment(tiny_dataset, steps=2), tmp_path, resume=False)
    policy = DiffusionPolicy(DiffusionPolicyConfig(checkpoint=tmp_path), panda)
    assert policy.contract["observation_keys"] == ["state", "env_state"]
    env = np.array([0.5, 0.1, 0.02, 1, 0, 0, 0], np.float32)
    ms = 1_000_000
    for t in range(0, 100, 10):
        chunk = policy.act(
            Observation({"state": np.zeros(9, np.float32), "env_state": env}, stamp_ns=t * ms)
        )
        assert chunk.t0_ns == t * ms and chunk.dt == pytest.approx(0.01) and chunk.dim == 8
        assert np.all(np.isfinite(chunk.actions))
    # execute_steps 2 rows of 1/30 s: new predictions at 0, ~67 ms
    assert policy.inferences == 2
    policy.reset()
    policy.act(Observation({"state": np.zeros(9, np.float32), "env_state": env}, stamp_ns=0))
    assert policy.inferences == 3


def test_bad_horizon_is_a_config_error(tiny_dataset: Path, tmp_path: Path) -> None:
    from tether.core.errors import ConfigError
    from tether.policies.diffusion.trainer import DiffusionTrainer

    with pytest.raises(ConfigError, match="horizon"):
        DiffusionTrainer.train(experiment(tiny_dataset, horizon=5), tmp_path, resume=False)


def test_missing_feature_names_the_key(tiny_dataset: Path, tmp_path: Path) -> None:
    from tether.core.errors import TetherError
    from tether.policies.diffusion.trainer import DiffusionTrainer

    cfg = experiment(tiny_dataset, obs_keys=["state", "images/wrist"])
    with pytest.raises(TetherError, match="observation.images.wrist"):
        DiffusionTrainer.train(cfg, tmp_path, resume=False)


def test_norm_groups_must_divide_down_dims(tiny_dataset: Path, tmp_path: Path) -> None:
    from tether.core.errors import ConfigError
    from tether.policies.diffusion.trainer import DiffusionTrainer

    with pytest.raises(ConfigError, match="norm_groups"):
        DiffusionTrainer.train(experiment(tiny_dataset, norm_groups=3), tmp_path, resume=False)


def test_image_strides_set_the_keypoints_feature_map() -> None:
    """``image_strides``: unset, the stages after the first halve the map (96x96: stem 48,
    then 48, 24, 12); [1, 2, 1] keeps 24x24 for the keypoints. A keypoint then moves
    with a bright spot in the image in steps of the finer grid, and a stride per stage
    other than 1 or 2, or one missing, is refused."""
    import torch

    from tether.core.errors import ConfigError
    from tether.policies.diffusion.model import ImageEncoder

    torch.manual_seed(0)
    default = ImageEncoder(96, 96, [4, 8, 8], 2)
    fine = ImageEncoder(96, 96, [4, 8, 8], 2, [1, 2, 1])
    assert default.pool.grid.shape == (12 * 12, 2)
    assert fine.pool.grid.shape == (24 * 24, 2)
    img = torch.zeros(1, 96, 96, 3, dtype=torch.uint8)
    assert default(img).shape == fine(img).shape == (1, 4)
    # both encoders' weights as a spot detector: the keypoints follow where the spot is
    with torch.no_grad():
        for enc in (default, fine):
            xs = []
            for col in (30, 34):
                spot = img.clone()
                spot[0, 40:44, col : col + 4] = 255
                xs.append(float(enc(spot)[0, 0]))
            assert xs[0] != xs[1]
    for bad in ([1, 2], [1, 3, 2]):
        with pytest.raises(ConfigError, match="image_strides"):
            ImageEncoder(96, 96, [4, 8, 8], 2, bad)


def test_silu_single_group_unet_trains_and_samples(tiny_dataset: Path, tmp_path: Path) -> None:
    """The latency-friendly architecture (norm_groups 1, silu) is stored in the contract and
    rebuilt from it on load."""
    from tether.policies.diffusion.checkpoint import load_net
    from tether.policies.diffusion.trainer import DiffusionTrainer

    cfg = experiment(tiny_dataset, steps=2, norm_groups=1, activation="silu")
    DiffusionTrainer.train(cfg, tmp_path, resume=False)
    net, contract = load_net(tmp_path)
    assert contract["model"]["norm_groups"] == 1 and contract["model"]["activation"] == "silu"
    norms = [m for m in net.modules() if isinstance(m, torch.nn.GroupNorm)]
    assert norms and all(m.num_groups == 1 for m in norms)
    assert any(isinstance(m, torch.nn.SiLU) for m in net.modules())
    assert not any(isinstance(m, torch.nn.Mish) for m in net.denoiser.modules())
    obs = {"state": torch.zeros(1, 2, 9), "env_state": torch.zeros(1, 2, 7)}
    with torch.no_grad():
        out = net.sample(obs, torch.randn(1, 4, 8), steps=3)
    assert out.shape == (1, 4, 8) and bool(torch.isfinite(out).all())


def test_pose_readout_estimates_the_poses_from_the_images_and_conditions_on_them(
    tiny_image_dataset: Path, tmp_path: Path
) -> None:
    """model.pose_readout: a head inside the model learns the cube's pose from the image
    (its loss falls as train.aux_env_state's does), its estimate feeds the denoiser (changing
    the head changes the chunk), it exports with parity, and it is refused without its loss
    or a camera."""
    import torch

    from tether.core.errors import ConfigError
    from tether.policies.diffusion.checkpoint import load_net
    from tether.policies.diffusion.export import export_checkpoint
    from tether.policies.diffusion.trainer import DiffusionTrainer

    def cfg(steps: int, weight: float, keys: list[str]) -> object:
        c = experiment(tiny_image_dataset, steps=steps, obs_keys=keys, pose_readout=True)
        c.train.aux_env_state = weight
        c.train.checkpoint_every = 100
        return c

    DiffusionTrainer.train(cfg(200, 1.0, ["state", "images/front"]), tmp_path / "r", resume=False)
    aux = json.loads((tmp_path / "r" / "train_state.json").read_text())["aux_losses"]
    assert np.mean(aux[:5]) > 0.05 and np.mean(aux[-20:]) < 0.2 * np.mean(aux[:5]), aux[::20]
    contract = json.loads((tmp_path / "r" / "contract.json").read_text())
    assert len(contract["pose_readout"]["min"]) == 7  # the cube's pose
    assert contract["observation_keys"] == ["state", "images/front"]  # no pose input
    net, _ = load_net(tmp_path / "r")
    assert any(k.startswith("pose_head.") for k in net.state_dict())
    rng = np.random.default_rng(0)
    shapes, to = contract["obs_shapes"], contract["obs_horizon"]
    obs = {
        "state": torch.from_numpy(rng.normal(0, 0.1, (2, to, *shapes["state"])).astype(np.float32)),
        "images/front": torch.from_numpy(
            rng.integers(0, 255, (2, to, *shapes["images/front"]), dtype=np.uint8)
        ),
    }
    noise = torch.from_numpy(
        rng.normal(size=(2, net.cfg.horizon, net.action_dim)).astype(np.float32)
    )
    with torch.no_grad():
        before = net.sample(obs, noise, 3)
        net.pose_head.mlp[-1].bias.add_(1.0)  # type: ignore[index, union-attr]
        after = net.sample(obs, noise, 3)
    assert float((after - before).abs().max()) > 1e-3
    export_checkpoint(tmp_path / "r", "onnx", None)  # asserts parity <= 1e-4
    with pytest.raises(ConfigError, match="aux_env_state"):
        DiffusionTrainer.train(cfg(2, 0.0, ["state", "images/front"]), tmp_path / "a", resume=False)
    with pytest.raises(ConfigError, match="camera"):
        DiffusionTrainer.train(cfg(2, 1.0, ["state"]), tmp_path / "b", resume=False)


def test_aux_env_state_teaches_the_image_encoder_the_poses_and_stays_out_of_the_model(
    tiny_image_dataset: Path, tmp_path: Path
) -> None:
    """train.aux_env_state: the image features learn to predict the cube's pose (the image
    is the only input that tells its side), the head lives in the training state only (the
    model's weights and contract are those of a run without it, and it exports), resume
    keeps it, and resuming without it or asking for it without a camera is refused."""
    from safetensors.torch import load_file

    from tether.core.errors import ConfigError, TetherError
    from tether.policies.diffusion.checkpoint import TRAIN_STATE, load_net
    from tether.policies.diffusion.export import export_checkpoint
    from tether.policies.diffusion.trainer import DiffusionTrainer

    def cfg(steps: int, weight: float, keys: list[str]) -> object:
        c = experiment(tiny_image_dataset, steps=steps, obs_keys=keys)
        c.train.aux_env_state = weight
        c.train.checkpoint_every = 100
        return c

    cams = ["state", "images/front"]
    DiffusionTrainer.train(cfg(200, 1.0, cams), tmp_path / "aux", resume=False)
    meta = json.loads((tmp_path / "aux" / "train_state.json").read_text())
    aux = meta["aux_losses"]
    assert len(aux) == 200
    # the cube's x is +-0.5 (scaled: +-1) by side, the rest constant (0): a head reading
    # nothing stays near 1/7; reading the image's side it goes to ~0
    assert np.mean(aux[:5]) > 0.05 and np.mean(aux[-20:]) < 0.2 * np.mean(aux[:5]), aux[::20]
    DiffusionTrainer.train(cfg(1, 0.0, cams), tmp_path / "plain", resume=False)
    with_aux = load_file(str(tmp_path / "aux" / "model.safetensors"))
    plain = load_file(str(tmp_path / "plain" / "model.safetensors"))
    assert sorted(with_aux) == sorted(plain)
    a, b = (json.loads((tmp_path / d / "contract.json").read_text()) for d in ("aux", "plain"))
    assert a["normalization"].keys() == b["normalization"].keys()
    assert "env_state" not in a["observation_keys"]
    assert any(k.startswith("aux.") for k in load_file(str(tmp_path / "aux" / TRAIN_STATE)))
    net, _ = load_net(tmp_path / "aux")
    assert not any(k.startswith("aux") for k in net.state_dict())
    export_checkpoint(tmp_path / "aux", "onnx", None)  # asserts parity <= 1e-4
    DiffusionTrainer.train(cfg(220, 1.0, cams), tmp_path / "aux", resume=True)
    assert len(json.loads((tmp_path / "aux" / "train_state.json").read_text())["aux_losses"]) == 220
    with pytest.raises(TetherError, match="aux_env_state"):
        DiffusionTrainer.train(cfg(240, 0.0, cams), tmp_path / "aux", resume=True)
    with pytest.raises(ConfigError, match="camera"):
        DiffusionTrainer.train(cfg(2, 1.0, ["state"]), tmp_path / "nocam", resume=False)
