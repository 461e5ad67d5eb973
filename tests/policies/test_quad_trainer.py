"""quad_hover trainer: learning signal, checkpoint contract, resume, ONNX export parity."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")

from tether.core.config import load_config  # noqa: E402
from tether.core.types import Observation  # noqa: E402
from tether.policies.quad.apg import TrainState, rollout_cost, train_apg  # noqa: E402
from tether.policies.quad.checkpoint import (  # noqa: E402
    load_optimizer_state,
    load_policy,
    save_checkpoint,
)
from tether.policies.quad.config_quad import QuadHoverTrainConfig  # noqa: E402
from tether.policies.quad.diff_sim import DiffQuadrotor  # noqa: E402
from tether.policies.quad.evaluate import numpy_policy  # noqa: E402
from tether.policies.quad.export import export_onnx  # noqa: E402
from tether.policies.quad.model import HoverActor, HoverExport  # noqa: E402
from tether.robots.crazyflie.robot import CRAZYFLIE  # noqa: E402
from tether.sim.quadrotor.batched_env import BatchedHoverEnv  # noqa: E402

torch.set_num_threads(1)
EXPERIMENT = Path(__file__).resolve().parents[2] / "configs/experiments/quad_hover.yaml"


def _lively_actor(seed: int = 0) -> HoverActor:
    """A policy whose outputs vary with the state (the fresh one sits near hover rpm)."""
    torch.manual_seed(seed)
    actor = HoverActor((32, 32))
    with torch.no_grad():
        actor.actor[-1].weight.mul_(40.0)
    return actor


def _initial_batch(n: int, seed: int) -> tuple[Any, Any]:
    env = BatchedHoverEnv(n, seed=seed)
    env.reset(seed)
    return torch.from_numpy(env.state.astype(np.float32)), torch.full((n, 4), CRAZYFLIE.hover_rpm)


def test_policy_gradient_through_the_sim_lowers_the_cost() -> None:
    """Adam steps on the analytic gradient of the 0.6 s cost from fixed thrown starts."""
    cfg = QuadHoverTrainConfig()
    torch.manual_seed(0)
    model, sim = HoverActor((32, 32)), DiffQuadrotor()
    s, rpm = _initial_batch(64, 11)
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    costs = []
    for _ in range(6):
        loss, *_ = rollout_cost(model, sim, s, rpm, 60, cfg.batched)
        costs.append(float(loss.detach()))
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert costs[-1] < 0.93 * costs[0], costs
    assert costs[-1] < costs[-2] < costs[-3], costs


def test_train_apg_counts_steps_and_restarts_drones() -> None:
    cfg = QuadHoverTrainConfig.model_validate(
        {
            "eval_drones": 8,
            "max_env_steps": 32 * 50 * 3,
            "hidden": [16, 16],
            "batched": {"num_envs": 32, "horizon": 50},
        }
    )
    torch.manual_seed(0)
    model = HoverActor(cfg.hidden)
    w0 = model.actor[0].weight.detach().clone()
    opt = torch.optim.Adam(model.parameters(), lr=cfg.batched.lr)
    state = train_apg(cfg, model, opt, TrainState())
    assert state.updates == 3 and state.env_steps == 32 * 50 * 3
    assert [h[0] for h in state.history] == [1600, 3200, 4800]
    assert state.solved_at is None
    assert not torch.equal(model.actor[0].weight, w0)


def test_checkpoint_round_trip(tmp_path: Path) -> None:
    from tether.cli.train import trainer_of_checkpoint
    from tether.policies.quad.trainer import QuadHoverTrainer

    actor = _lively_actor()
    opt = torch.optim.Adam(actor.parameters(), lr=1e-3)
    actor.mean(torch.randn(8, 18)).pow(2).sum().backward()
    opt.step()
    save_checkpoint(tmp_path, actor, {"path": "batched", "train_state": {"updates": 3}}, opt)
    loaded, contract = load_policy(tmp_path)
    x = torch.randn(16, 18)
    torch.testing.assert_close(loaded.mean(x), actor.mean(x))
    assert contract["trainer"] == "quad_hover" and contract["hidden"] == [32, 32]
    assert contract["action"]["hover_rpm"] == pytest.approx(CRAZYFLIE.hover_rpm)
    opt_state = load_optimizer_state(tmp_path, contract)
    assert opt_state is not None
    fresh = torch.optim.Adam(loaded.parameters(), lr=1e-3)
    fresh.load_state_dict(opt_state)
    ref = opt.state_dict()["state"]
    for idx, st in fresh.state_dict()["state"].items():
        torch.testing.assert_close(st["exp_avg"], ref[idx]["exp_avg"])
    path, trainer = trainer_of_checkpoint(tmp_path)
    assert path == tmp_path and trainer is QuadHoverTrainer
    assert not list(tmp_path.glob("*.pt")) and not list(tmp_path.glob("*.pkl"))


def test_onnx_export_matches_torch_and_the_env_path(tmp_path: Path) -> None:
    actor = _lively_actor(1)
    save_checkpoint(tmp_path / "ckpt", actor, {"path": "batched"})
    path = export_onnx(tmp_path / "ckpt", tmp_path / "export")
    meta = json.loads((tmp_path / "export" / "model.json").read_text())
    assert meta["format"] == "tether-onnx/1" and meta["trainer"] == "quad_hover"
    assert [i["key"] for i in meta["inputs"]] == ["state", "env_state"]
    assert meta["outputs"][0]["shape"] == [1, 1, 4]
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    env = BatchedHoverEnv(50, seed=2)
    obs = env.reset(2)
    ref_rpm = env.action_to_rpm(numpy_policy(actor)(obs))
    export = HoverExport(actor).eval()
    spread = []
    for i in range(50):
        state = env.state[i : i + 1].astype(np.float32)
        env_state = np.array([[*env.target, 1.0, 0.0, 0.0, 0.0]], np.float32)
        got = sess.run(None, {"state": state, "env_state": env_state})[0]
        want = export(torch.from_numpy(state), torch.from_numpy(env_state)).detach().numpy()
        assert got.shape == (1, 1, 4)
        # <= 1e-4 in normalized action units (rpm / hover rpm)
        np.testing.assert_allclose(got / CRAZYFLIE.hover_rpm, want / CRAZYFLIE.hover_rpm, atol=1e-4)
        np.testing.assert_allclose(got[0, 0], ref_rpm[i], rtol=1e-5)
        spread.append(got[0, 0])
    assert np.ptp(np.array(spread), axis=0).min() > 100.0  # the outputs do depend on the state


def test_onnx_runtime_policy_serves_the_export(tmp_path: Path) -> None:
    from tether.policies.config_onnx import OnnxPolicyConfig
    from tether.policies.runtime import OnnxPolicy
    from tether.robots.crazyflie.robot import crazyflie_spec

    actor = _lively_actor(2)
    save_checkpoint(tmp_path / "ckpt", actor, {"path": "batched"})
    path = export_onnx(tmp_path / "ckpt")
    assert path == tmp_path / "ckpt" / "export" / "model.onnx"
    policy = OnnxPolicy(OnnxPolicyConfig(model=path), crazyflie_spec(100.0, "rotor_rpm"))
    env = BatchedHoverEnv(3, seed=4)
    obs = env.reset(4)
    want = env.action_to_rpm(numpy_policy(actor)(obs))
    for i in range(3):
        o = Observation(
            {
                "state": env.state[i].astype(np.float32),
                "env_state": np.array([*env.target, 1, 0, 0, 0], np.float32),
            },
            stamp_ns=10_000_000 * (i + 1),
        )
        chunk = policy.act(o)
        np.testing.assert_allclose(chunk.actions[0], want[i], rtol=1e-5)


def test_train_and_resume_through_the_trainer(tmp_path: Path) -> None:
    from tether.policies.quad.trainer import QuadHoverTrainer

    ov = [
        "train.max_env_steps=3200",
        "train.eval_drones=8",
        "train.hidden=[16, 16]",
        "train.batched.num_envs=32",
        "train.batched.horizon=50",
    ]
    cfg = load_config(EXPERIMENT, ov)
    res = QuadHoverTrainer.train(cfg, tmp_path, resume=False)
    assert res["updates"] == 2 and not res["solved"]
    assert (tmp_path / "training_curve.png").stat().st_size > 1000
    first, _ = load_policy(tmp_path)
    cfg2 = load_config(EXPERIMENT, [*ov[1:], "train.max_env_steps=6400"])
    res2 = QuadHoverTrainer.train(cfg2, tmp_path, resume=True)
    assert res2["updates"] == 4 and res2["env_steps"] == 6400
    second, contract = load_policy(tmp_path)
    assert contract["train_state"]["updates"] == 4
    x = torch.randn(4, 18)
    assert not torch.allclose(first.mean(x), second.mean(x))
    with pytest.raises(Exception, match="already holds a checkpoint"):
        QuadHoverTrainer.train(cfg, tmp_path, resume=False)


def test_sb3_actor_weights_copy_exactly() -> None:
    gym = pytest.importorskip("gymnasium")
    pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.policies import ActorCriticPolicy

    from tether.policies.quad.sb3_ppo import actor_from_sb3

    torch.manual_seed(0)
    policy = ActorCriticPolicy(
        gym.spaces.Box(-np.inf, np.inf, (18,), np.float32),
        gym.spaces.Box(-1.0, 1.0, (4,), np.float32),
        lambda _: 3e-4,
        net_arch={"pi": [16, 16], "vf": [16, 16]},
        activation_fn=torch.nn.Tanh,
    )
    actor = actor_from_sb3(policy, (16, 16))
    obs = np.random.default_rng(0).normal(size=(20, 18)).astype(np.float32)
    want, _ = policy.predict(obs, deterministic=True)
    got = np.clip(numpy_policy(actor)(obs), -1.0, 1.0)
    np.testing.assert_allclose(got, want, atol=1e-5)


@pytest.mark.slow
@pytest.mark.timeout(300)  # the 200 s wall budget below fits well inside it
def test_batched_path_trains_to_the_success_bar(tmp_path: Path) -> None:
    """Path (b) end to end: trained until 95 % of 1000 drones pass in the 10 ms simulator,
    then >= 90 % of 1000 fresh drones pass in the 2 ms reference model.

    Bounded by steps, not by the wall clock: seeded training on one torch thread is the same
    run on any machine, so it must solve within the step budget (the shipped model solved
    at 51 updates of 256 x 100 steps, models/quad_hover/train.json; the budget is 80). The
    wall budget only stops a far too slow machine with the trainer's own report, well before
    this test's timeout; it never decides the outcome on a working one."""
    from tether.cli.train import EvalOptions
    from tether.policies.quad.trainer import QuadHoverTrainer

    step_budget = 80 * 256 * 100
    cfg = load_config(EXPERIMENT, [f"train.max_env_steps={step_budget}", "train.time_budget_s=200"])
    assert cfg.train.batched.num_envs == 256 and cfg.train.batched.horizon == 100
    res = QuadHoverTrainer.train(cfg, tmp_path, resume=False)
    assert res["solved"], res
    assert res["solved_at"]["env_steps"] <= step_budget, res
    ev = QuadHoverTrainer.evaluate(
        tmp_path, EvalOptions(episodes=1000, seed=123, out=tmp_path / "ev")
    )
    assert ev["success_rate"] >= 0.9, ev
    assert (tmp_path / "ev" / "trajectories.png").is_file()
