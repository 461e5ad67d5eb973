"""The swarm policy's trainer, export and serving (docs/swarm.md): `tether train` writes a
checkpoint and resumes it; the exported graph computes the training world's features for
any number of drones (parity with torch <= 1e-4); the torch-free `onnx` policy serves it
for a whole world or for one drone fed its neighbours."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("onnxruntime")

from tether.core import registry  # noqa: E402
from tether.core.config import load_config  # noqa: E402
from tether.core.errors import TetherError  # noqa: E402
from tether.core.types import NEIGHBOURS_KEY, Observation  # noqa: E402
from tether.sim.quadrotor.swarm import swarm_features  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
TINY = [
    "train.time_budget_s=600",
    "train.total_steps=1024",
    "train.world.sizes=[4]",
    "train.world.drones_per_size=8",
    "train.ppo.n_steps=64",
    "train.ppo.batch_size=256",
    "train.eval_every_steps=100000000",
    "train.eval_episodes=2",
    "train.eval_sizes=[4]",
    "train.hidden=[32,32]",
    "train.imitation_decisions=0",
]


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    from tether.policies.swarm.trainer import SwarmTrainer

    out = tmp_path_factory.mktemp("swarm") / "run"
    cfg = load_config(REPO / "configs/experiments/swarm_ppo.yaml", TINY)
    result = SwarmTrainer.train(cfg, out, resume=False)
    SwarmTrainer.export(out, "onnx", None)
    return out, result


def test_training_writes_checkpoint_curve_and_resumes(
    exported: tuple[Path, dict[str, Any]],
) -> None:
    from tether.policies.swarm.trainer import SwarmTrainer

    out, result = exported
    for name in ("model.safetensors", "contract.json", "train.json", "training_curve.png"):
        assert (out / name).is_file(), name
    assert result["env_steps"] >= 1024 and result["evaluations"]
    contract = json.loads((out / "contract.json").read_text())
    assert contract["features"]["dim"] == 7 + 7 * contract["features"]["neighbours"]
    with pytest.raises(TetherError, match="--resume"):
        SwarmTrainer.train(
            load_config(REPO / "configs/experiments/swarm_ppo.yaml", TINY), out, False
        )
    again = SwarmTrainer.train(
        load_config(REPO / "configs/experiments/swarm_ppo.yaml", TINY), out, True
    )
    assert again["env_steps"] >= 1024


def test_graph_computes_the_worlds_features_for_any_swarm_size(
    exported: tuple[Path, dict[str, Any]],
) -> None:
    import torch

    from tether.policies.swarm.export import SwarmExport, example_swarm
    from tether.policies.swarm.trainer import load_actor

    out, _ = exported
    actor, contract = load_actor(out)
    module = SwarmExport(actor, contract).eval()
    seen: list[np.ndarray] = []
    module.actor.register_forward_hook(lambda m, inp, o: seen.append(inp[0].detach().numpy()))
    f = contract["features"]
    rng = np.random.default_rng(3)
    for n in (1, 2, 5, 7, 16):
        state, goal = example_swarm(rng, n)
        with torch.no_grad():
            module(torch.from_numpy(state), torch.from_numpy(goal))
        s, g = state.reshape(n, 13).astype(np.float64), goal.reshape(n, 7)
        ref = swarm_features(s[:, 0:3], s[:, 7:10], g[:, 0:3], f["neighbours"], f["v_max"])
        np.testing.assert_allclose(seen[-1], ref, atol=1e-5)
    meta = json.loads((out / "onnx" / "model.json").read_text())
    assert meta["parity"] <= 1e-4 and meta["neighbours"] is True
    assert meta["inputs"][0]["shape"] == [1, 1, -1] and meta["outputs"][0]["multiple_of"] == 4


def _policy(model: Path, n: int) -> Any:
    from tether.policies.config_onnx import OnnxPolicyConfig
    from tether.policies.runtime import OnnxPolicy

    spec = registry.load("robot", "crazyflie").spec(
        control_hz=100.0, cameras=(), mode="velocity_setpoint", num_drones=n
    )
    return OnnxPolicy(OnnxPolicyConfig(model=model / "model.onnx"), spec)


def test_onnx_policy_serves_whole_worlds_and_one_drone_with_its_neighbours(
    exported: tuple[Path, dict[str, Any]],
) -> None:
    from tether.policies.swarm.export import example_swarm

    onnx = exported[0] / "onnx"
    rng = np.random.default_rng(4)
    state, goal = example_swarm(rng, 6)
    world = _policy(onnx, 6)
    assert NEIGHBOURS_KEY in world.contract["observation_keys"]
    world.warm_up()
    full = world.act(Observation({"state": state.ravel(), "env_state": goal.ravel()}, 0))
    assert full.actions.shape == (5, 24)  # hold_steps rows, 4 per drone
    # drone 0's server: its state, then its neighbours', and its own goal only
    one = _policy(onnx, 1)
    mine = one.act(Observation({"state": state.ravel(), "env_state": goal.ravel()[:7]}, 0))
    assert mine.actions.shape == (5, 4)
    np.testing.assert_allclose(mine.actions, full.actions[:, :4], atol=1e-6)
    # a lone drone still flies (no neighbours: absent)
    alone = one.act(
        Observation({"state": state.ravel()[:13], "env_state": goal.ravel()[:7]}, 10**9)
    )
    assert alone.actions.shape == (5, 4)
    with pytest.raises(TetherError, match="expects"):
        bad = _policy(onnx, 1)
        bad.act(Observation({"state": state.ravel()[:20], "env_state": goal.ravel()[:7]}, 0))
    with pytest.raises(TetherError, match="4 actions per robot"):
        from tether.policies.config_onnx import OnnxPolicyConfig
        from tether.policies.runtime import OnnxPolicy

        husky = registry.load("robot", "husky").spec(control_hz=20.0, cameras=())
        OnnxPolicy(OnnxPolicyConfig(model=onnx / "model.onnx"), husky.model_copy(update={}))


def test_imitation_fits_the_orca_expert_before_ppo(tmp_path: Path) -> None:
    """DAgger from PID + ORCA (train.imitation_decisions): the imitated actor's commands are
    far closer to ORCA's on fresh scenes than the untrained actor's, and PPO starts from it
    (an evaluation at 0 PPO steps)."""
    import torch

    from tether.policies.nav.model import torch_actor
    from tether.policies.progress import Progress
    from tether.policies.swarm.trainer import SwarmTrainer, imitate, load_actor

    cfg = load_config(
        REPO / "configs/experiments/swarm_ppo.yaml",
        [
            *TINY,
            "train.imitation_decisions=1600",
            "train.imitation_rounds=2",
            "train.imitation_epochs=40",
            "train.imitation_close_weight=5",
        ],
    )
    robot = registry.load("robot", "crazyflie")
    world_cls = registry.load("env", "batched/swarm")
    fresh = world_cls(cfg.train.world, robot, seed=77)
    for _ in range(20):  # mid-flight scenes, flown by the expert
        fresh.step(fresh.expert_actions())
    x = torch.from_numpy(fresh.observe())
    y = torch.from_numpy(fresh.expert_actions().astype(np.float32))
    torch.manual_seed(0)
    actor = torch_actor((32, 32), x.shape[1], (1.0,) * 3)
    with torch.no_grad():
        before = float(((actor(x) - y) ** 2).mean())
    world = world_cls(cfg.train.world, robot, seed=5)
    flown = imitate(actor, world, cfg.train, 1.0, Progress("test"))
    assert flown >= 1600
    with torch.no_grad():
        after = float(((actor(x) - y) ** 2).mean())
    assert after < 0.5 * before, (before, after)
    result = SwarmTrainer.train(cfg, tmp_path / "run", resume=False)
    assert result["imitation_decisions"] >= 1600
    assert result["evaluations"][0]["steps"] == 0
    load_actor(tmp_path / "run")
