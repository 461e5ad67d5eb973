"""Residual RL fine-tuning (tether.policies.residual): the residual model's contract, the env
around a frozen base, checkpoints, export and the fast learning case (reach with a base that
has a known bias)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("stable_baselines3")

from tether.core.config import load_config  # noqa: E402
from tether.core.errors import ConfigError  # noqa: E402
from tether.policies.residual.model import NumpyNormaliser, ResidualMLP  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
EXPERIMENT = REPO / "configs/experiments/panda_reach_residual.yaml"
LIFT_MODEL = REPO / "models/panda_lift_diffusion"


def make_model(
    obs_dim: int = 9,
    dim: int = 3,
    init: float = 1e-3,
    seed: int = 0,
    relative: tuple[tuple[int, int], ...] = (),
) -> ResidualMLP:
    torch.manual_seed(seed)
    g = np.random.default_rng(seed)
    return ResidualMLP(
        g.normal(size=obs_dim),
        g.uniform(0.5, 2.0, obs_dim),
        np.array([-1.0, -2.0, 0.0])[:dim],
        np.array([1.0, 2.0, 0.04])[:dim],
        scale=0.1,
        hidden=(32, 32),
        last_layer_init=init,
        relative=relative,
    )


def test_zero_init_outputs_exactly_zero() -> None:
    model = make_model(init=0.0)
    x = torch.randn(64, 9) * 10
    a = torch.randn(64, 3)
    assert torch.equal(model(x, a), torch.zeros(64, 3))


def test_residual_never_exceeds_its_scale() -> None:
    model = make_model(init=1.0)
    with torch.no_grad():  # saturate the tanh on purpose
        for layer in model.linears:
            layer.weight.mul_(100.0)
    out = model(torch.randn(2000, 9) * 100, torch.randn(2000, 3) * 100)
    limit = torch.tensor([0.1, 0.2, 0.002])
    assert torch.allclose(model.limit, limit)
    assert (out.abs() <= limit + 1e-7).all()
    assert (out.abs().amax(0) > 0.99 * limit).all()  # and it does reach it


@pytest.mark.parametrize("relative", [(), ((0, 6), (3, 6))])
def test_numpy_normaliser_matches_the_model(relative: tuple[tuple[int, int], ...]) -> None:
    model = make_model(relative=relative)
    norm = NumpyNormaliser(model)
    x, a = np.random.default_rng(1).normal(size=9) * 0.01, np.array([0.3, -1.0, 0.01])
    ref = model.features(torch.tensor(x[None], dtype=torch.float32), torch.tensor(a[None]))
    np.testing.assert_allclose(norm.features(x, a), ref[0].numpy(), atol=1e-5)
    assert model.in_dim == 9 + 3 * len(relative) + 3 == ref.shape[1]


def test_relative_positions_are_millimetres_squashed() -> None:
    """finetune.relative_positions: between the normalised features and the base action,
    a's position minus b's in mm as sign(x) log(1 + |x|): 0 mm -> 0, +-1 mm -> +-log 2,
    2 mm -> log 3; a pair outside the features is refused."""
    model = make_model(obs_dim=14, relative=((0, 7),))
    norm = NumpyNormaliser(model)
    x = np.zeros(14)
    x[7:10] = [0.40, -0.10, 0.05]  # b
    x[0:3] = x[7:10] + [0.0, 0.001, -0.001]  # a: 0, +1 mm, -1 mm off b
    rel = norm.features(x, np.zeros(3))[14:17]
    np.testing.assert_allclose(rel, [0.0, np.log(2.0), -np.log(2.0)], atol=1e-4)
    x[1] += 0.001  # 2 mm
    assert norm.features(x, np.zeros(3))[15] == pytest.approx(np.log(3.0), abs=1e-4)
    with pytest.raises(ValueError, match="outside 14 features"):
        make_model(obs_dim=14, relative=((0, 12),))


def test_finetune_section_is_validated() -> None:
    cfg = load_config(EXPERIMENT)
    assert cfg.finetune is not None and cfg.finetune.type == "residual"
    with pytest.raises(ConfigError, match="finetune.scale"):
        load_config(EXPERIMENT, ["finetune.scale=2"])
    with pytest.raises(ConfigError, match=r"finetune\.sacle: unknown field"):
        load_config(EXPERIMENT, ["finetune.sacle=0.1"])


def test_finetune_without_section_is_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    from tether.cli.main import main

    code = main(["finetune", str(REPO / "configs/experiments/panda_reach_expert.yaml")])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "no finetune: section" in err and "\n" not in err


def test_serving_imports_without_torch() -> None:
    code = (
        "import sys, tether.policies.residual.serve; "
        "bad = [m for m in ('torch', 'mujoco', 'stable_baselines3') if m in sys.modules]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("relative", [(), ((9, 16),)])
def test_export_parity(tmp_path: Path, relative: tuple[tuple[int, int], ...]) -> None:
    """The exported graph equals torch, with the relative positions computed inside it."""
    pytest.importorskip("onnxruntime")
    from tether.policies.residual.export import export_residual, parity

    model = make_model(obs_dim=23, dim=3, init=0.5, relative=relative)
    offset = np.array([0.0, 0.05, 0.0])
    path = export_residual(model, ["state", "env_state"], [9, 14], tmp_path, offset)
    assert parity(model, [9, 14], path, offset) <= 1e-4


class FiveRowBase:
    """A fake chunked base: 5-row chunks (row i = query count + i), observes in between."""

    contract = {"observation_keys": ["state"]}

    def __init__(self) -> None:
        self.asked, self.observed = 0, 0

    def reset(self) -> None:
        pass

    def act(self, obs):  # noqa: ANN001, ANN201
        from tether.core.types import ActionChunk

        self.asked += 1
        rows = self.asked * 10 + np.arange(5, dtype=np.float32)[:, None]
        return ActionChunk(rows, 0.01, obs.stamp_ns)

    def observe(self, obs) -> None:  # noqa: ANN001
        self.observed += 1


@pytest.mark.parametrize("replan", ["policy", "chunk_end"])
def test_base_executor_schedules(replan: str) -> None:
    from tether.core.types import Observation
    from tether.policies.residual.base_executor import BaseExecutor

    base = FiveRowBase()
    ex = BaseExecutor(base, replan)  # type: ignore[arg-type]
    rows = [
        float(ex.row(Observation({"state": np.zeros(1)}, stamp_ns=k * 10_000_000))[0])
        for k in range(12)
    ]
    if replan == "chunk_end":  # each chunk runs to its end: rows 10..14, 20..24, 30, 31
        assert rows == [10, 11, 12, 13, 14, 20, 21, 22, 23, 24, 30, 31]
        assert (base.asked, base.observed) == (3, 9)
    else:  # asked every step, its row for now is the first
        assert rows == [10 * (k + 1) for k in range(12)] and base.asked == 12


def test_tcp_residual_moves_the_tcp_by_itself_and_stays_bounded() -> None:
    """finetune.space tcp: a small TCP motion maps to joints that move the TCP by that
    motion (first order, damped least squares), fingers pass through, and no mapped
    correction exceeds the joint-space bound, even at a huge input."""
    from tether.core import registry
    from tether.core.experiment import robot_spec
    from tether.core.kinematics import rotation_error
    from tether.policies.residual.space import ResidualSpace, space_from_meta

    spec = robot_spec(load_config(EXPERIMENT))
    space = ResidualSpace(spec, "tcp", 0.05, (0.01, 0.05), 0.05)
    assert space.dim == 7 and space.n_arm == 7
    np.testing.assert_allclose(space.limit[:6], [0.01] * 3 + [0.05] * 3)
    kin = registry.load("robot", "panda").kinematics
    q = np.array([0.1, 0.3, -0.1, -2.2, 0.05, 2.5, 0.8, 0.04])
    for r in ([0.003, -0.002, 0.001, 0, 0, 0, 0.0], [0, 0, 0, 0, 0, 0.02, 0.001]):
        dq = space.to_joint(q, np.asarray(r))
        p0, R0 = kin.fk(q[:7])
        p1, R1 = kin.fk(q[:7] + dq[:7])
        np.testing.assert_allclose(p1 - p0, r[:3], atol=2e-4)
        np.testing.assert_allclose(rotation_error(R1, R0), r[3:6], atol=2e-3)
        assert dq[7] == pytest.approx(r[6])
    huge = space.to_joint(q, np.array([5.0, -5, 5, 5, -5, 5, 1.0]))
    assert np.all(np.abs(huge) <= space.joint_limit + 1e-12)
    assert np.any(np.abs(huge) == pytest.approx(space.joint_limit))
    # what model.json records rebuilds the same map
    again = space_from_meta(spec, space.describe())
    r = np.array([0.002, 0.001, -0.003, 0.01, 0, 0, 0])
    np.testing.assert_array_equal(again.to_joint(q, r), space.to_joint(q, r))


# ---- with a simulator ------------------------------------------------------------------


mujoco = pytest.mark.mujoco


def _env(overrides: list[str] | None = None, squash: bool = True):  # noqa: ANN202
    pytest.importorskip("mujoco")
    from tether.policies.residual.env import ResidualEnv

    cfg = load_config(EXPERIMENT, overrides or [])
    assert cfg.finetune is not None
    return cfg, ResidualEnv(cfg, cfg.finetune, None, squash=squash)


@mujoco
def test_zero_residual_reproduces_the_base_exactly() -> None:
    """The env with a zero-init residual applies what the base + the safety filter apply
    in the in-process loop (tether.sim.loop), step for step."""
    from tether.core.types import ActionChunk
    from tether.sim.loop import run_local_episode
    from tether.sim.runner import SimRunner

    cfg, env = _env()
    offset = np.asarray(cfg.finetune.base_offset, np.float32)
    model = ResidualMLP(
        np.zeros(env.obs_dim), np.ones(env.obs_dim), env.robot_spec.action.low_array(),
        env.robot_spec.action.high_array(), 0.1, (16,), last_layer_init=0.0,
    )  # fmt: skip
    env.normaliser = NumpyNormaliser(model)
    obs, _ = env.reset(seed=cfg.episodes.seed)
    applied, done = [], False
    while not done:
        residual = model.from_features(torch.as_tensor(obs[None]))[0].detach().numpy()
        assert not residual.any()
        obs, _, term, trunc, info = env.step_residual(residual)
        applied.append(info["applied"])
        done = term or trunc

    class Biased:
        """The experiment's policy plus the known offset (what the env's base is)."""

        def __init__(self, base) -> None:  # noqa: ANN001
            self.base, self.contract = base, base.contract

        def reset(self) -> None:
            self.base.reset()

        def act(self, o):  # noqa: ANN001, ANN202
            c = self.base.act(o)
            return ActionChunk(c.actions + offset, c.dt, c.t0_ns)

    runner = SimRunner(cfg)
    seen: list[np.ndarray] = []
    step = runner.backend.step
    runner.backend.step = lambda a: (seen.append(np.asarray(a)), step(a))[1]  # type: ignore[method-assign]
    from tether.core.experiment import build_policy

    run_local_episode(cfg, runner, Biased(build_policy(cfg, runner.spec)))
    assert len(seen) == len(applied)
    np.testing.assert_array_equal(np.stack(seen), np.stack(applied))


@mujoco
def test_env_bounds_the_residual_and_keeps_the_safety_filter() -> None:
    """A saturated learner action gives a residual of exactly +limit, and base + residual
    reaches the backend through the same SafetyFilter calls as the sim bridge's."""
    from tether.core.safety import SafetyFilter

    cfg, env = _env()
    assert np.all(np.abs(env.to_residual(np.full(8, -1e9))) <= env.limit)
    env.reset(seed=3)
    measured = env.measured().copy()
    t_s = env.obs.stamp_ns * 1e-9
    command = env.base_action + env.limit
    _, _, _, _, info = env.step(np.full(env.robot_spec.action.dim, 1e6))
    ref = SafetyFilter(env.robot_spec, cfg.safety)
    ref.reset(measured)
    ref.command(command, t_s, valid_s=env.robot_spec.dt)
    expected, stale = ref.output(t_s, measured)
    assert not stale
    np.testing.assert_array_equal(info["applied"], expected)
    # the rate limit bit: what reached the simulator is not the raw command
    assert not np.allclose(info["applied"], command)


@mujoco
@pytest.mark.parametrize("space", ["joint", "tcp"])
def test_held_residual_is_hold_steps_control_steps_of_one_residual(space: str) -> None:
    """finetune.hold_steps: one learner step applies the same residual on hold_steps
    control steps (what step_residual applies step by step; in tcp space mapped to the
    joints at each step's base row), sums the reward and says how many control steps it
    took."""
    _, held = _env(["finetune.hold_steps=4", f"finetune.space={space}"])
    _, ref = _env([f"finetune.space={space}"])
    held.reset(seed=5)
    ref.reset(seed=5)
    action = np.linspace(-1.0, 1.0, held.space.dim).astype(np.float32)
    for _ in range(3):
        _, reward, _, _, info = held.step(action)
        applied, total = [], 0.0
        for _ in range(4):
            joint = ref.space.to_joint(ref.base_action, ref.to_residual(action))
            _, r, _, _, ref_info = ref.step_residual(joint)
            applied.append(ref_info["applied"])
            total += r
        assert info["control_steps"] == 4
        np.testing.assert_array_equal(info["applied"], applied[-1])
        assert reward == pytest.approx(total)
    assert held.steps == ref.steps == 12
    # the last step of an episode takes only what is left of it
    held.steps = held.max_steps - 2
    _, _, _, truncated, info = held.step(action)
    assert truncated and info["control_steps"] == 2


@mujoco
def test_offpolicy_is_resfit_shaped() -> None:
    """SAC with LayerNorm critics, n-step returns, UTD x envs updates per step, a zero
    residual at start, and a replay buffer warm-started with base-only transitions."""
    from stable_baselines3.common.buffers import NStepReplayBuffer
    from stable_baselines3.common.vec_env import DummyVecEnv
    from torch import nn

    from tether.policies.residual import offpolicy

    cfg, env = _env(["finetune.hidden=[16]", "finetune.last_layer_init=0"], squash=False)
    fcfg = cfg.finetune
    model = ResidualMLP(
        np.zeros(env.obs_dim), np.ones(env.obs_dim), env.robot_spec.action.low_array(),
        env.robot_spec.action.high_array(), 0.1, (16,), last_layer_init=0.0,
    )  # fmt: skip
    env.normaliser = NumpyNormaliser(model)
    venv = DummyVecEnv([lambda: env])
    algo = offpolicy.make_sac(venv, fcfg, model)
    for q in algo.critic.q_networks:
        assert any(isinstance(m, nn.LayerNorm) for m in q)
    assert isinstance(algo.replay_buffer, NStepReplayBuffer)
    assert algo.replay_buffer.n_steps == fcfg.offpolicy.n_step
    assert algo.gradient_steps == fcfg.offpolicy.utd
    assert not algo.policy.actor.mu.weight.any()
    assert offpolicy.warm_start(algo, venv, 30) == 30
    assert algo.replay_buffer.size() == 30
    assert not algo.replay_buffer.actions[:30].any()


@mujoco
def test_training_episodes_can_end_before_the_tasks_limit() -> None:
    """finetune.train_episode_s truncates the training envs' episodes (0.5 s: 50 control
    steps at 100 Hz) and leaves the evaluation env at the task's 2 s."""
    from stable_baselines3.common.vec_env import DummyVecEnv

    from tether.policies.residual.trainer import limit_training_episodes

    cfg, env = _env(["finetune.train_episode_s=0.5"])
    _, eval_env = _env(["finetune.train_episode_s=0.5"])
    venv = DummyVecEnv([lambda: env])
    limit_training_episodes(venv, cfg.finetune, eval_env)
    venv.reset()
    steps, done = 0, False
    while not done:
        _, _, dones, infos = venv.step(np.zeros((1, env.space.dim), np.float32))
        steps, done = steps + 1, bool(dones[0])
    assert steps == 50 and infos[0]["TimeLimit.truncated"]
    assert eval_env.max_steps == 200


@mujoco
def test_td3_is_resfit_shaped_and_the_critic_burns_in_alone() -> None:
    """The default off-policy learner: TD3 with LayerNorm critics, n-step returns, the
    actor (and its target) starting at the zero residual; the warm start stores the base
    with TD3's exploration noise; the critic burn-in moves the critics, never the actor."""
    from stable_baselines3.common.buffers import NStepReplayBuffer
    from stable_baselines3.common.vec_env import DummyVecEnv
    from torch import nn

    from tether.policies.residual import offpolicy

    cfg, env = _env(["finetune.hidden=[16]", "finetune.last_layer_init=0",
                     "finetune.offpolicy.action_noise=0.2", "finetune.offpolicy.batch_size=16"],
                    squash=False)  # fmt: skip
    fcfg = cfg.finetune
    assert fcfg.offpolicy.learner == "td3"
    model = ResidualMLP(
        np.zeros(env.obs_dim), np.ones(env.obs_dim), env.robot_spec.action.low_array(),
        env.robot_spec.action.high_array(), 0.1, (16,), last_layer_init=0.0,
    )  # fmt: skip
    env.normaliser = NumpyNormaliser(model)
    venv = DummyVecEnv([lambda: env])
    algo = offpolicy.make(venv, fcfg, model)
    for q in algo.critic.q_networks:
        assert any(isinstance(m, nn.LayerNorm) for m in q)
    assert isinstance(algo.replay_buffer, NStepReplayBuffer)
    assert algo.replay_buffer.n_steps == fcfg.offpolicy.n_step
    x = torch.as_tensor(venv.reset())
    with torch.no_grad():
        assert not algo.actor(x).any() and not algo.actor_target(x).any()
    assert offpolicy.warm_start(algo, venv, 40, fcfg.offpolicy.action_noise) == 40
    stored = algo.replay_buffer.actions[:40]
    assert 0.1 < float(np.std(stored)) < 0.3 and np.abs(stored).max() <= 1.0
    actor = [p.detach().clone() for p in algo.actor.parameters()]
    critic = [p.detach().clone() for p in algo.critic.parameters()]
    losses = offpolicy.critic_warmup(algo, 150)
    assert len(losses) == 2
    assert all(torch.equal(a, b) for a, b in zip(actor, algo.actor.parameters(), strict=True))
    assert any(not torch.equal(a, b) for a, b in zip(critic, algo.critic.parameters(), strict=True))


class _Threshold(__import__("gymnasium").Env):  # type: ignore[misc]
    """A toy scene for the group-relative learner: each episode's seed draws a threshold
    ``c`` in [-0.3, 0.5] and a length of 3 to 7 steps; at its end the episode succeeds
    (reward 1) if the mean of the tanh of its actions exceeds ``c``. The zero residual
    succeeds where ``c < 0`` (3 in 8); a residual of +0.6 always does. Observation:
    [c, t / 7, 0 (a base action)]. ``starts``: (seed, steps this env had taken) per reset."""

    max_steps = 7

    def __init__(self) -> None:
        import gymnasium as gym

        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (3,), np.float32)
        self.action_space = gym.spaces.Box(-5.0, 5.0, (1,), np.float32)
        self.starts: list[tuple[int, int]] = []
        self.next_seed: int | None = None
        self.c, self.t, self.length, self.total, self.clock = 0.0, 0, 5, 0.0, 0

    def _obs(self) -> np.ndarray:
        return np.array([self.c, self.t / 7, 0.0], np.float32)

    def reset(self, *, seed: int | None = None, options: object = None) -> tuple:
        if seed is None and self.next_seed is not None:
            seed, self.next_seed = self.next_seed, None
        super().reset(seed=seed)
        episode = seed if seed is not None else int(self.np_random.integers(2**31 - 1))
        self.starts.append((episode, self.clock))
        self.c = float(np.random.default_rng(episode).uniform(-0.3, 0.5))
        self.length = 3 + episode % 5
        self.t, self.total = 0, 0.0
        return self._obs(), {}

    def step(self, action: np.ndarray) -> tuple:
        self.total += float(np.tanh(action[0]))
        self.t += 1
        self.clock += 1
        done = self.t == self.length
        success = done and self.total / self.t > self.c
        return self._obs(), float(success), done, False, {"is_success": success}


def _learn_toy_scene(envs: list[Any], grpo_cfg: dict[str, Any]) -> tuple[Any, float, float]:
    """GRPO (grpo_cfg over the toy defaults) on ``envs`` for 500 decisions per env: the
    learner, and the deterministic residual's success on 200 toy scenes before and after."""
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.vec_env import DummyVecEnv

    from tether.policies.residual import grpo
    from tether.policies.residual.config import FinetuneConfig

    fcfg = FinetuneConfig(
        algorithm="grpo", n_envs=len(envs), seed=3,
        grpo={"group_size": 4, "episodes_per_update": 16, "lr": 3e-3, "init_std": 0.5,
              **grpo_cfg},
    )  # fmt: skip
    torch.manual_seed(0)
    model = ResidualMLP(np.zeros(2), np.ones(2), np.array([-1.0]), np.array([1.0]), 1.0, [16])
    venv = DummyVecEnv([lambda e=e: e for e in envs])

    class Go(BaseCallback):  # type: ignore[misc]
        def _on_step(self) -> bool:
            return True

    def success(scenes: np.ndarray) -> float:
        x = torch.as_tensor(np.stack([[c, 0.0, 0.0] for c in scenes]), dtype=torch.float32)
        with torch.no_grad():
            return float(np.mean(torch.tanh(model.net(x))[:, 0].numpy() > scenes))

    scenes = np.random.default_rng(7).uniform(-0.3, 0.5, 200)
    before = success(scenes)
    algo = grpo.make(venv, fcfg, model)
    algo.learn(total_timesteps=len(envs) * 5 * 100, callback=Go())
    return algo, before, success(scenes)


@pytest.mark.parametrize(("window", "gate"), [(None, None), (2, None), (None, 0.05)])
def test_grpo_groups_share_scenes_and_learn_from_mixed_groups(
    window: int | None, gate: float | None
) -> None:
    """Each seed is run by group_size episodes, started close together in time although
    episode lengths differ (each env has one episode queued); updates use only groups whose
    outcomes differ; on the toy scene the deterministic residual goes from the base's 3 in 8
    to nearly every scene, exploring at every step, only in one window per episode, or with
    the noise gated by the success predictor."""
    from collections import Counter

    envs = [_Threshold() for _ in range(6)]
    algo, before, after = _learn_toy_scene(
        envs, {"explore_window": window, "explore_gate_floor": gate, "gate_warmup_episodes": 8}
    )
    starts: dict[int, list[int]] = {}
    for env in envs:
        for seed, clock in env.starts:
            starts.setdefault(seed, []).append(clock)
    sizes = Counter(len(c) for c in starts.values())
    assert sizes[4] >= 100 and set(sizes) <= {1, 2, 3, 4}  # the last groups may be unfinished
    # (with the gate, its warm-up episodes too: one per seed, the mean only)
    assert sum(n for size, n in sizes.items() if size < 4) <= 3 + (8 if gate else 0)
    assert max(max(c) - min(c) for c in starts.values()) <= 2 * _Threshold.max_steps
    assert algo.updates and all(u["mixed"] <= u["groups"] for u in algo.updates)
    assert any(u["mixed"] < u["groups"] for u in algo.updates)  # uniform groups skipped
    assert before < 0.6
    assert after >= 0.9
    if gate is not None:
        assert algo.gate is not None and algo.gate.episodes >= 100  # one per group (the mean)


@pytest.mark.parametrize("branch", ["all", "failures"])
def test_grpo_branches_a_group_from_its_first_episodes_decisions(branch: str) -> None:
    """grpo.branch: a group's first episode runs the mean and the env keeps its decisions;
    the group's other episodes start at one of them (the same scene, on the same env, with
    the steps before it as the mean took them) and explore from there; "failures" spends
    no episode on a scene the mean solves; the kept decisions are freed with the group;
    the deterministic residual learns the toy scene as from the reset."""
    from tether.policies.residual.branching import BranchPoints

    class Branching(BranchPoints, _Threshold):
        def __init__(self) -> None:
            super().__init__()
            self.restored: list[tuple[float, int, float]] = []

        def reset(self, **kw: object) -> tuple:
            out = super().reset(**kw)
            self.branch_reset()
            return out

        def step(self, action: np.ndarray) -> tuple:
            self.branch_decision()
            return super().step(action)

        def snapshot(self) -> tuple[float, int, int, float]:
            return self.c, self.t, self.length, self.total

        def restore(self, snap: tuple[float, int, int, float]) -> np.ndarray:
            self.c, self.t, self.length, self.total = snap
            self.restored.append((self.c, self.t, self.total))
            return self._obs()

    envs = [Branching() for _ in range(4)]
    algo, before, after = _learn_toy_scene(envs, {"branch": branch, "branch_span": [0.0, 0.6]})
    restored = [r for env in envs for r in env.restored]
    # each branch starts where the mean's episode was at that decision: in the first 60 %
    # of its steps (t of at most 4 of 7), in its scene
    assert all(t <= 4 for _, t, _ in restored)
    assert any(t > 0 for _, t, _ in restored) and any(total != 0 for _, _, total in restored)
    # 3 branches per branched scene (those of the groups still running when it stopped,
    # at most one per env, may be short)
    assert algo.branched >= 30
    assert 3 * (algo.branched - 4) <= len(restored) <= 3 * algo.branched
    if branch == "failures":  # scenes the mean solved were not branched
        assert algo.unbranched >= 10
    else:
        assert algo.unbranched == 0
    assert all(len(env._branches) <= 2 for env in envs)  # freed with their groups
    assert algo.updates and any(u["mixed"] for u in algo.updates)
    assert before < 0.6
    assert after >= 0.9
    with pytest.raises(KeyError, match="no branch point 9 of episode"):
        envs[0].restore_branch(next(iter(envs[0]._branches)), 9)


def test_grpo_exploration_curriculum_starts_late_and_moves_to_the_start() -> None:
    """explore_curriculum_steps: a group explores from a start drawn in [late / 2, late]
    to the episode's end, late sliding from the horizon to 0 over the curriculum; the
    steps before the start run the mean; with explore_window it is one or the other."""
    from pydantic import ValidationError

    from tether.policies.residual import grpo
    from tether.policies.residual.config import FinetuneConfig

    fcfg = FinetuneConfig(
        algorithm="grpo",
        seed=0,
        hold_steps=10,
        grpo={"explore_curriculum_steps": 10_000, "group_size": 2},
    )
    model = ResidualMLP(np.zeros(2), np.ones(2), np.array([-1.0]), np.array([1.0]), 1.0, [8])
    algo = grpo.GroupPPO(None, fcfg, model)
    algo.horizon = 100

    def starts(at: int) -> list[int]:
        algo.num_timesteps = at  # decisions: 10 control steps each (the curriculum's unit)
        windows = [algo._window() for _ in range(200)]
        assert all(w is not None and w[1] > 10**6 for w in windows)  # to the episode's end
        return [w[0] for w in windows if w is not None]

    first, half, done = starts(0), starts(500), starts(1000)
    assert min(first) >= 50 and max(first) <= 100 and np.ptp(first) > 30
    assert min(half) >= 25 and max(half) <= 50
    assert set(done) == {0}
    episode = grpo._Episode(window=(60, 2**31))
    assert not episode.explores(59) and episode.explores(60) and episode.explores(99)
    with pytest.raises(ValidationError, match="set one"):
        FinetuneConfig(grpo={"explore_curriculum_steps": 1000, "explore_window": 5})


def test_grpo_replays_the_scenes_the_mean_fails() -> None:
    """grpo.replay_failures: a completed group whose mean episode failed queues its seed;
    new groups take queued seeds (oldest first) with that probability, each at most
    replay_max times; a scene the mean solves is not queued; off, no seed repeats."""
    from pydantic import ValidationError

    from tether.policies.residual import grpo
    from tether.policies.residual.config import FinetuneConfig

    model = ResidualMLP(np.zeros(2), np.ones(2), np.array([-1.0]), np.array([1.0]), 1.0, [8])

    def learner(p: float) -> grpo.GroupPPO:
        fcfg = FinetuneConfig(
            algorithm="grpo", seed=0,
            grpo={"explore_gate_floor": 0.05, "gate_warmup_episodes": 0, "group_size": 4,
                  "replay_failures": p, "replay_max": 2},
        )  # fmt: skip
        return grpo.GroupPPO(None, fcfg, model)

    def complete(algo: grpo.GroupPPO, seed: int, mean_succeeds: bool) -> None:
        grp = grpo._Group(seed, 4, None)
        mean = grpo._Episode(greedy=True)
        mean.success = mean_succeeds
        explored = [grpo._Episode() for _ in range(3)]
        explored[0].success = True  # the noise's outcome does not decide
        grp.done = [mean, *explored]
        algo._note_outcome(grp)

    algo = learner(0.5)
    complete(algo, 11, mean_succeeds=False)
    complete(algo, 12, mean_succeeds=True)
    complete(algo, 13, mean_succeeds=False)
    complete(algo, 11, mean_succeeds=False)  # already queued: once
    assert list(algo._replay) == [11, 13]
    seeds = [algo._next_seed(4) for _ in range(400)]
    assert seeds.count(11) == 1 and seeds.count(13) == 1 and 12 not in seeds
    assert seeds.index(11) < seeds.index(13)  # oldest first
    assert algo.replays == 2 and not algo._replay
    assert algo._next_seed(1) not in (11, 13)  # a warm-up group of one takes a fresh seed
    # the mean fails it again: queued again until replay_max replays
    complete(algo, 11, mean_succeeds=False)
    assert list(algo._replay) == [11]
    while algo._replay:
        algo._next_seed(4)
    complete(algo, 11, mean_succeeds=False)
    assert not algo._replay  # replayed twice (replay_max): no more
    # about replay_failures of the new groups replay while the queue holds seeds
    algo = learner(0.5)
    for seed in range(1000):
        complete(algo, seed, mean_succeeds=False)
    drawn = [algo._next_seed(4) for _ in range(400)]
    assert 150 < sum(s < 1000 for s in drawn) < 250
    # off: nothing is queued
    off = learner(0.0)
    complete(off, 11, mean_succeeds=False)
    assert not off._replay
    with pytest.raises(ValidationError, match="set one"):
        FinetuneConfig(grpo={"replay_failures": 0.5, "branch": "failures"})


def test_grpo_refreshed_log_probs_let_an_update_run_after_the_mean_moved() -> None:
    """grpo.refresh_log_probs: after the mean moved (as self-imitation moves it) by a step
    that is small against the noise but large against the gated noise (std x 0.05), the
    stored log-probabilities are far from the policy's: the KL early stop ends the update
    before its first minibatch and nothing is learnt. Refreshed at the update's start, the
    same update runs its epochs and moves the mean from the failure's action towards the
    success's."""
    import torch

    from tether.policies.residual import grpo
    from tether.policies.residual.config import FinetuneConfig

    def update(refresh: bool) -> tuple[dict[str, float], float]:
        torch.manual_seed(0)
        model = ResidualMLP(np.zeros(2), np.ones(2), np.array([-1.0]), np.array([1.0]), 1.0, [8])
        fcfg = FinetuneConfig(
            algorithm="grpo", seed=0,
            grpo={"group_size": 2, "init_std": 0.3, "epochs": 5, "batch_size": 64,
                  "target_kl": 0.02, "refresh_log_probs": refresh},
        )  # fmt: skip
        algo = grpo.GroupPPO(None, fcfg, model)
        g = np.random.default_rng(1)
        obs = [g.standard_normal(3).astype(np.float32) for _ in range(64)]  # 2 features + base
        x = torch.as_tensor(np.stack(obs))
        with torch.no_grad():
            mean = algo.policy.net(x).numpy()
        gate = torch.full((64,), 0.05)
        episodes = []
        for success, sign in ((True, 1.0), (False, -1.0)):
            ep = grpo._Episode()
            ep.obs = obs
            ep.actions = [m + sign * 0.015 for m in mean]  # one gated std either way
            with torch.no_grad():
                dist = algo.policy.distribution(x)
                ep.logp = algo._log_prob(dist, gate, torch.as_tensor(np.stack(ep.actions)))
            ep.logp = ep.logp.tolist()
            ep.gate = gate.tolist()
            ep.success, ep.ret = success, float(success)
            episodes.append(ep)
        with torch.no_grad():  # the mean moves by 0.03, 2 gated stds, 0.1 of the noise
            algo.policy.net[-1].bias += 0.03
            before = algo.policy.net(x).mean().item()
        algo._update([episodes])
        with torch.no_grad():
            after = algo.policy.net(x).mean().item()
        return algo.updates[-1], after - before

    stale, moved_stale = update(refresh=False)
    assert stale["stale_kl"] > 0.5 and stale["epochs"] == 0.0 and moved_stale == 0.0
    fresh, moved = update(refresh=True)
    assert fresh["stale_kl"] == pytest.approx(stale["stale_kl"])
    assert fresh["epochs"] > 0.0
    # the group-relative gradient points from the failed episode's action to the
    # successful one's (+0.03), wherever the mean now is
    assert moved > 1e-4


def test_grpo_success_gate_quiets_the_noise_where_episodes_succeed() -> None:
    """The gate learns P(success | observation) from finished episodes and scales the
    noise by 1 - P (not below its floor); the stored gate makes the update's
    log-probabilities those the actions were drawn with."""
    from tether.policies.residual.grpo import GroupPPO, SuccessGate

    gen = torch.Generator().manual_seed(0)
    g = SuccessGate(3, floor=0.05)
    x = lambda c: torch.tensor([[c, 0.5, 0.0]], dtype=torch.float32)  # noqa: E731
    assert float(g.gate(x(0.4))[0]) == 1.0  # too few episodes: no gating yet
    rng = np.random.default_rng(0)
    for _ in range(200):  # success exactly where c < 0, as the toy scene's zero residual
        c = float(rng.uniform(-0.3, 0.5))
        g.add([np.array([c, t / 7, 0.0], np.float32) for t in range(5)], c < 0)
    for _ in range(10):
        g.fit(gen)
    assert float(g.gate(x(-0.2))[0]) < 0.2  # heading for a success: little noise
    assert float(g.gate(x(0.3))[0]) > 0.8  # heading for a failure: nearly all of it
    assert float(g.gate(x(-5.0))[0]) >= 0.05  # never below the floor

    dist = torch.distributions.Normal(torch.zeros(4, 2), torch.full((4, 2), 0.3))
    gate = torch.tensor([1.0, 0.5, 0.1, 0.05])
    a = torch.randn(4, 2, generator=gen) * 0.3 * gate[:, None]
    expected = torch.distributions.Normal(torch.zeros(4, 2), 0.3 * gate[:, None]).log_prob(a)
    torch.testing.assert_close(GroupPPO._log_prob(dist, gate, a), expected.sum(-1))


def test_grpo_self_imitation_pulls_the_mean_towards_what_succeeded_per_state() -> None:
    """grpo.self_imitation: the decisions of successful episodes are kept and the mean is
    regressed onto them. In a state where only the episodes whose noise pushed up
    succeeded, the mean moves up; in a state where successes took the noise both ways,
    it stays; failures are not kept."""
    from tether.policies.residual import grpo
    from tether.policies.residual.config import FinetuneConfig

    fcfg = FinetuneConfig(
        algorithm="grpo", seed=0,
        grpo={"self_imitation": 1.0, "imitation_steps": 50, "batch_size": 64, "lr": 3e-3},
    )  # fmt: skip
    torch.manual_seed(0)
    model = ResidualMLP(np.zeros(2), np.ones(2), np.array([-1.0]), np.array([1.0]), 1.0, [16])
    algo = grpo.GroupPPO(None, fcfg, model)
    fix, keep = np.array([0.3, 0.2, 0.0], np.float32), np.array([-0.2, 0.6, 0.0], np.float32)

    def mean(x: np.ndarray) -> float:
        with torch.no_grad():
            return float(algo.policy.distribution(torch.as_tensor(x[None])).mean[0, 0])

    m_fix, m_keep = mean(fix), mean(keep)
    rng = np.random.default_rng(0)
    for _ in range(20):
        group = []
        for _ in range(8):
            up, down = m_fix + abs(rng.normal(0.3, 0.1)), m_fix - abs(rng.normal(0.3, 0.1))
            for a, won in ((up, True), (down, False)):
                ep = grpo._Episode()
                ep.obs, ep.actions, ep.success = [fix] * 3, [np.array([a], np.float32)] * 3, won
                group.append(ep)
            ep = grpo._Episode()  # a scene the noise does not decide: both ways succeed
            ep.obs = [keep, keep]
            ep.actions = [np.array([m_keep + d], np.float32) for d in (0.3, -0.3)]
            ep.success = True
            group.append(ep)
        algo.updates.append({"groups": 1.0, "mixed": 1.0, "kl": 0.0, "epochs": 0.0})
        algo._imitate([group])
    assert mean(fix) - m_fix > 0.2  # towards the successes' +0.3
    assert abs(mean(keep) - m_keep) < 0.05
    assert algo.updates[-1]["kept"] == 20 * 8 * (3 + 2)  # only the successes' decisions
    assert "kept successes" in algo.status()


class _KnownLogit(torch.nn.Module):
    """A success gate's predictor with a known answer: the logit is ``scale`` x the first
    feature."""

    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.scale * x[:, :1]


def test_grpo_value_baseline_blames_the_decisions_taken_where_the_mean_would_succeed() -> None:
    """grpo.value_baseline: each explored decision's baseline mixes its group's mean return
    with the success gate's P(success | observation). A failure is blamed on the decisions
    taken where the mean succeeds (P 0.9), hardly on those after the scene was lost (P 0.1);
    a success credits the decisions that turned a lost scene. Without it every decision of
    an episode gets the same group-relative advantage. It needs the gate."""
    from tether.policies.residual import grpo
    from tether.policies.residual.config import FinetuneConfig, GRPOConfig

    model = ResidualMLP(np.zeros(2), np.ones(2), np.array([-1.0]), np.array([1.0]), 1.0, [16])
    good = np.array([math.log(9.0), 0.0], np.float32)  # P = 0.9
    lost = np.array([-math.log(9.0), 0.0], np.float32)  # P = 0.1

    def advantages(w: float) -> dict[bool, list[float]]:
        fcfg = FinetuneConfig(
            algorithm="grpo", seed=0, grpo={"explore_gate_floor": 0.05, "value_baseline": w}
        )
        algo = grpo.GroupPPO(None, fcfg, model)
        assert algo.gate is not None
        algo.gate.net = _KnownLogit(1.0)
        algo.gate.episodes = 20  # as after the warm-up: the predictor is used
        out = {}
        for won in (True, False):
            ep = grpo._Episode()
            ep.obs, ep.ret = [good, lost], float(won)
            out[won] = algo._advantages(ep, [0, 1], 0.5)
        return out

    plain = advantages(0.0)
    assert plain[False] == [-0.5, -0.5] and plain[True] == [0.5, 0.5]
    full = advantages(1.0)
    np.testing.assert_allclose(full[False], [-0.9, -0.1], atol=1e-6)
    np.testing.assert_allclose(full[True], [0.1, 0.9], atol=1e-6)
    half = advantages(0.5)
    np.testing.assert_allclose(half[False], [-0.7, -0.3], atol=1e-6)
    with pytest.raises(ValueError, match="explore_gate_floor"):
        GRPOConfig(value_baseline=0.5)
    with pytest.raises(ValueError, match="reward: sparse"):
        FinetuneConfig(
            algorithm="grpo", reward="dense",
            grpo={"explore_gate_floor": 0.05, "value_baseline": 0.5},
        )  # fmt: skip


def test_grpo_advantage_weighted_imitation_pulls_hardest_where_the_mean_loses() -> None:
    """grpo.imitation_weighting: advantage weighs each kept decision by 1 - P(success |
    observation) (self-imitation learning's (R - V)+). Two nearly equal observations the
    network cannot tell apart, one the mean wins (P 0.9) and one it loses (P 0.1), whose
    successes took opposite actions (-0.4 and +0.4 from the mean): uniform weighting
    averages them (the mean stays), advantage weighting follows the lost scene's fix
    (0.1 x -0.4 + 0.9 x 0.4 = +0.32). It needs the gate."""
    from tether.policies.residual import grpo
    from tether.policies.residual.config import FinetuneConfig, GRPOConfig

    won = np.array([0.01 * math.log(9.0), 0.0, 0.0], np.float32)  # P = 0.9
    lost = np.array([-0.01 * math.log(9.0), 0.0, 0.0], np.float32)  # P = 0.1

    def moves(weighting: str) -> float:
        fcfg = FinetuneConfig(
            algorithm="grpo", seed=0,
            grpo={"explore_gate_floor": 0.05, "self_imitation": 1.0, "imitation_steps": 200,
                  "batch_size": 64, "lr": 3e-3, "imitation_weighting": weighting},
        )  # fmt: skip
        torch.manual_seed(0)
        model = ResidualMLP(np.zeros(2), np.ones(2), np.array([-1.0]), np.array([1.0]), 1.0, [16])
        algo = grpo.GroupPPO(None, fcfg, model)
        assert algo.gate is not None
        algo.gate.net = _KnownLogit(100.0)  # steep: the two observations get P 0.9 and 0.1
        algo.gate.episodes = 20  # as after the warm-up: the predictor is used
        with torch.no_grad():
            start = float(algo.policy.distribution(torch.as_tensor(lost[None])).mean[0, 0])
        ep = grpo._Episode()
        ep.obs = [won, lost] * 10
        ep.actions = [np.array([start - 0.4], np.float32), np.array([start + 0.4], np.float32)] * 10
        ep.success = True
        algo.updates.append({"groups": 1.0, "mixed": 1.0, "kl": 0.0, "epochs": 0.0})
        algo._imitate([[ep]])
        with torch.no_grad():
            x = torch.as_tensor(np.stack([won, lost]))
            return float(algo.policy.distribution(x).mean.mean()) - start

    assert abs(moves("uniform")) < 0.08
    assert 0.2 < moves("advantage") < 0.4
    with pytest.raises(ValueError, match="explore_gate_floor"):
        GRPOConfig(self_imitation=1.0, imitation_weighting="advantage")


@mujoco
@pytest.mark.slow
def test_grpo_residual_removes_a_known_bias_with_sparse_reward(tmp_path: Path) -> None:
    """Reach with a base offset by 0.03 rad on shoulder and elbow (it stops ~3 cm from the
    target; 2 cm counts), sparse reward: the group-relative learner succeeds on most unseen
    seeds within 100,000 env steps (about a minute here; 100 % at 80,000-88,000 in two runs)."""
    from tether.policies.residual.trainer import train

    cfg = load_config(
        EXPERIMENT,
        ["finetune.algorithm=grpo", "finetune.reward=sparse",
         "finetune.base_offset=[0.0,0.03,0.0,-0.03,0.0,0.0,0.0,0.0]", "finetune.n_envs=8",
         "finetune.grpo.group_size=8", "finetune.grpo.episodes_per_update=16",
         "finetune.grpo.init_std=0.2", "finetune.total_env_steps=100000",
         "finetune.eval_episodes=10"],
    )  # fmt: skip
    result = train(cfg, tmp_path, resume=False)
    assert result["env_steps"] <= 100000 + 1000
    assert result["base_success"] <= 0.1
    assert result["last_eval_success"] >= 0.7
    # the best evaluation's residual is kept aside (sparse-reward evaluations swing)
    best = json.loads((tmp_path / "best" / "contract.json").read_text())
    assert best["train_state"]["evals"][-1][2] == result["best_eval_success"]


@mujoco
@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["ppo", "offpolicy", "grpo"])
def test_checkpoint_round_trip_and_resume(tmp_path: Path, algorithm: str) -> None:
    """A short run writes safetensors + contract.json; the model reloads to the same
    outputs; --resume restores the learner (weights and optimizer) and keeps counting."""
    from safetensors.torch import load_file

    from tether.policies.residual.checkpoint import load_model
    from tether.policies.residual.trainer import train

    args = ["finetune.total_env_steps=1200", "finetune.eval_every_steps=400",
            "finetune.eval_episodes=1", "finetune.hidden=[16]",
            f"finetune.algorithm={algorithm}", "finetune.offpolicy.utd=1",
            "finetune.offpolicy.base_rollout_steps=200", "finetune.grpo.group_size=2",
            "finetune.grpo.episodes_per_update=2"]  # fmt: skip
    cfg = load_config(EXPERIMENT, args)
    first = train(cfg, tmp_path, resume=False)
    assert first["env_steps"] >= 1200
    assert not list(tmp_path.glob("*.pkl")) and not list(tmp_path.glob("*.zip"))
    model, contract = load_model(tmp_path)
    assert contract["trainer"] == "residual" and contract["algorithm"] == algorithm
    x = torch.randn(5, model.obs_dim)
    a = torch.randn(5, model.action_dim)
    saved = load_file(str(tmp_path / "model.safetensors"))
    again = ResidualMLP(
        saved["obs_offset"].numpy(), saved["obs_scale"].numpy(),
        (saved["act_mid"] - saved["act_half"]).numpy(),
        (saved["act_mid"] + saved["act_half"]).numpy(), 0.1, [16],
    )  # fmt: skip
    again.load_state_dict(saved)
    assert torch.equal(again(x, a), model(x, a))
    learner = load_file(str(tmp_path / "learner.safetensors"))
    assert any(k.startswith("opt/") for k in learner)
    # resuming with nothing left to do writes back exactly what it restored
    train(cfg, tmp_path, resume=True)
    restored = load_file(str(tmp_path / "learner.safetensors"))
    assert restored.keys() == learner.keys()
    assert all(torch.equal(restored[k], learner[k]) for k in learner)
    # as if the run had stopped at a success target of 0.5 (reached at its last evaluation):
    # resumed with the default target (1.0) it trains on instead of stopping there
    path = tmp_path / "contract.json"
    stopped = json.loads(path.read_text())
    evals = stopped["train_state"]["evals"]
    evals[-1][2] = 0.5
    stopped["train_state"]["solved"] = {"env_steps": evals[-1][0], "wall_s": evals[-1][1]}
    path.write_text(json.dumps(stopped))
    cfg2 = load_config(EXPERIMENT, [*args[1:], "finetune.total_env_steps=2000"])
    second = train(cfg2, tmp_path, resume=True)
    assert second["env_steps"] >= 2000
    # the resumed learner started from the saved one: its weights moved on from there
    resumed = load_file(str(tmp_path / "learner.safetensors"))
    assert resumed.keys() == learner.keys()
    assert (
        json.loads((tmp_path / "contract.json").read_text())["base_eval"] == contract["base_eval"]
    )


@mujoco
@pytest.mark.slow
@pytest.mark.parametrize(("hold", "space"), [(1, "joint"), (3, "joint"), (3, "tcp")])
def test_export_serves_base_plus_residual(tmp_path: Path, hold: int, space: str) -> None:
    """A checkpoint on an ONNX base (the shipped lift diffusion model) exports to one folder
    whose residual_onnx policy equals base row + offset + torch residual (<= 1e-4); with
    hold_steps the torch residual of every hold-th observation, held in between; in tcp
    space that residual mapped to the joints at each row."""
    pytest.importorskip("onnxruntime")
    from tether.core.experiment import robot_spec
    from tether.core.types import Observation
    from tether.policies.config_onnx import OnnxPolicyConfig
    from tether.policies.residual.checkpoint import save_checkpoint
    from tether.policies.residual.config import ResidualOnnxConfig
    from tether.policies.residual.export import export_checkpoint
    from tether.policies.residual.serve import ResidualOnnxPolicy
    from tether.policies.runtime import OnnxPolicy

    cfg = load_config(REPO / "configs/experiments/panda_lift_diffusion.yaml")
    spec = robot_spec(cfg)
    from tether.policies.residual.space import ResidualSpace

    g = np.random.default_rng(0)
    rspace = ResidualSpace(spec, space, 0.1)  # type: ignore[arg-type]
    model = ResidualMLP(
        np.zeros(16), np.ones(16), spec.action.low_array(), spec.action.high_array(), 0.1,
        (32, 32), last_layer_init=0.5, out_limit=rspace.limit,
    )  # fmt: skip
    offset = [0.0, 0.02, 0, 0, 0, 0, 0, 0]
    contract = {
        "algorithm": "ppo", "robot": "panda", "action_names": list(spec.action.names),
        "control_hz": spec.control_hz, "observation_keys": ["state", "env_state"],
        "observation_sizes": [9, 7], "base": {"model": str(LIFT_MODEL), "offset": offset},
        "experiment": {"name": "x"}, "hold_steps": hold,
        "residual_space": rspace.describe(),
    }  # fmt: skip
    ckpt = save_checkpoint(tmp_path / "ckpt", model, contract)
    meta_path = export_checkpoint(ckpt, "onnx", tmp_path / "export")
    meta = json.loads(meta_path.read_text())
    assert meta["format"] == "tether-residual/1" and meta["residual"]["parity_max_abs"] <= 1e-4
    assert meta["hold_steps"] == hold
    import onnx

    graph = onnx.load(str(tmp_path / "export" / meta["residual"]["model"])).graph
    dims = [[d.dim_value for d in i.type.tensor_type.shape.dim] for i in graph.input]
    assert dims == [i["shape"] for i in meta["residual"]["inputs"]]
    served = ResidualOnnxPolicy(ResidualOnnxConfig(model=tmp_path / "export"), spec, cfg.task)
    base = OnnxPolicy(OnnxPolicyConfig(model=LIFT_MODEL), spec, cfg.task)
    for k in range(30):  # more than one chunk: 8 rows of 33 ms are executed per plan
        obs = Observation(
            {"state": g.uniform(-0.5, 0.5, 9).astype(np.float32),
             "env_state": g.uniform(-0.5, 0.5, 7).astype(np.float32)},
            stamp_ns=k * 10_000_000,
        )  # fmt: skip
        got = served.act(obs).actions[0]
        row = base.act(obs).action_at(obs.stamp_ns) + np.float32(offset)
        x = np.concatenate([obs["state"], obs["env_state"]])[None]
        if k % hold == 0:
            with torch.no_grad():
                residual = model(torch.tensor(x), torch.tensor(row[None]))[0].numpy()
        np.testing.assert_allclose(got, row + rspace.to_joint(row, residual), atol=1e-4)
    assert served.executor.queries == 30  # asked every step: it replans on its own
    assert served.base.inferences == 2  # type: ignore[attr-defined]


@mujoco
@pytest.mark.slow
def test_ppo_residual_removes_a_known_bias(tmp_path: Path) -> None:
    """Reach with a base whose shoulder and elbow are offset by 0.06 rad (it stops ~6 cm
    from the target; 2 cm counts): PPO with dense reward, within 60,000 env steps (about a
    minute here), succeeds on most unseen seeds and more than halves the final TCP error."""
    from tether.policies.residual.trainer import train

    cfg = load_config(EXPERIMENT, ["finetune.total_env_steps=60000", "finetune.eval_episodes=10"])
    result = train(cfg, tmp_path, resume=False)
    assert result["env_steps"] <= 60000 + 800  # the budget, give or take one rollout
    assert result["base_success"] <= 0.1
    assert result["last_eval_success"] >= 0.6
    assert result["last_eval_final_distance_m"] < 0.5 * result["base_final_distance_m"]
    assert (tmp_path / "learning_curve.png").is_file()
    # what would be deployed (exported ONNX, residual_onnx policy, the in-process loop with
    # the sim bridge's runner and safety filter) does what the training env measured
    from tether.cli.train import EvalOptions
    from tether.policies.residual.trainer import ResidualTrainer

    opts = EvalOptions(episodes=10, seed=cfg.finetune.eval_seed, out=tmp_path / "eval", video=False)
    before = sorted(p.name for p in tmp_path.iterdir())
    summary = ResidualTrainer.evaluate(tmp_path, opts)
    assert abs(summary["success_rate"] - result["last_eval_success"]) <= 0.1
    # the export it serves is its own (two evaluations of one run at once do not clash on
    # CKPT/export): the checkpoint folder holds what it held, plus the eval output only
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(before + ["eval"])


@pytest.mark.slow
def test_fused_graph_equals_two_graphs(tmp_path: Path) -> None:
    """The fused layout (measured against the two-graph export in docs/residual_rl.md)
    computes the same action as base graph -> residual graph."""
    ort = pytest.importorskip("onnxruntime")
    from tether.policies.residual.checkpoint import save_checkpoint
    from tether.policies.residual.export import export_checkpoint
    from tether.policies.residual.latency import fuse

    meta = json.loads((LIFT_MODEL / "model.json").read_text())
    low, high = np.zeros(8, np.float32) - 1, np.ones(8, np.float32)
    model = ResidualMLP(np.zeros(16), np.ones(16), low, high, 0.1, (32,), last_layer_init=0.5)
    contract = {
        "algorithm": "ppo", "robot": "panda", "action_names": meta["action_names"],
        "control_hz": 100.0, "observation_keys": ["state", "env_state"],
        "observation_sizes": [9, 7], "base": {"model": str(LIFT_MODEL), "offset": None},
        "experiment": {"name": "x"},
    }  # fmt: skip
    ckpt = save_checkpoint(tmp_path / "ckpt", model, contract)
    export_checkpoint(ckpt, "onnx", tmp_path / "export")
    fused = ort.InferenceSession(str(fuse(tmp_path / "export", tmp_path / "fused.onnx")))
    base = ort.InferenceSession(str(tmp_path / "export/base/model.onnx"))
    res = ort.InferenceSession(str(tmp_path / "export/residual.onnx"))
    g = np.random.default_rng(0)
    feeds = {i["name"]: g.uniform(-0.5, 0.5, i["shape"]).astype(np.float32) for i in meta["inputs"]}
    chunk = base.run(None, feeds)[0]
    two = res.run(None, {"state": feeds["state"][:, -1], "env_state": feeds["env_state"][:, -1],
                         "base_action": chunk[:, 0]})[0]  # fmt: skip
    np.testing.assert_allclose(fused.run(None, feeds)[0], two, atol=1e-5)


INSERT_RESIDUAL = REPO / "configs/experiments/panda_insert_residual.yaml"


@mujoco
def test_the_env_gives_the_residual_the_peg_to_hole_offset() -> None:
    """finetune.relative_positions=[[peg, hole]] on peg-in-hole: the learner's observation
    holds the peg's position minus the hole's, in squashed mm, as the simulator has them;
    an object the task does not have, or no env_state to read it from, is one sentence."""
    from tether.policies.residual.env import ResidualEnv

    cfg = load_config(INSERT_RESIDUAL, ["finetune.relative_positions=[[peg,hole]]"])
    assert cfg.finetune is not None
    env = ResidualEnv(cfg, cfg.finetune, None)
    try:
        assert env.keys == ["state", "env_state"] and env.task.objects == ("peg", "hole")
        n = env.obs_dim
        model = ResidualMLP(
            np.zeros(n), np.ones(n), env.robot_spec.action.low_array(),
            env.robot_spec.action.high_array(), 0.02, (8,), relative=env.relative,
        )  # fmt: skip
        env.normaliser = NumpyNormaliser(model)
        assert env.observation_space.shape == (model.in_dim,)
        env.reset(seed=3)
        for _ in range(40):
            obs = env.step_residual(np.zeros(env.robot_spec.action.dim))[0]
        peg = np.asarray(env.backend.body_pose("peg")[0])
        hole = np.asarray(env.backend.body_pose("hole")[0])
        mm = (peg - hole) * 1000.0
        assert np.abs(mm).max() > 10.0  # the peg is still far from the hole
        np.testing.assert_allclose(obs[n : n + 3], np.sign(mm) * np.log1p(np.abs(mm)), atol=1e-4)
    finally:
        env.close()
    for bad, match in [
        (["finetune.relative_positions=[[peg,lid]]"], "lid is not an object of task"),
        (
            ["finetune.relative_positions=[[peg,hole]]", "finetune.observation_keys=[state]"],
            "reads the objects' positions from env_state",
        ),
    ]:
        cfg = load_config(INSERT_RESIDUAL, bad)
        assert cfg.finetune is not None
        with pytest.raises(ConfigError, match=match):
            ResidualEnv(cfg, cfg.finetune, None)


def test_an_onnx_base_goes_back_to_a_saved_state(panda) -> None:  # noqa: ANN001
    """OnnxPolicy.state / load_state: after going back, the same observations give the same
    chunks, the sampler's noise included (the lift model samples from noise 1)."""
    from tether.core.types import Observation
    from tether.policies.config_onnx import OnnxPolicyConfig
    from tether.policies.runtime import OnnxPolicy

    base = OnnxPolicy(OnnxPolicyConfig(model=LIFT_MODEL, seed=2), panda)
    g = np.random.default_rng(0)
    stream = [
        Observation(
            {
                "state": g.uniform(-0.5, 0.5, 9).astype(np.float32),
                "env_state": g.uniform(-0.5, 0.5, 7).astype(np.float32),
            },
            stamp_ns=k * 10_000_000,
        )  # fmt: skip
        for k in range(60)
    ]
    for obs in stream[:10]:
        base.act(obs)
    saved = base.state()
    first = [base.act(obs).actions for obs in stream[10:]]
    assert base.inferences - saved["inferences"] >= 2  # chunks sampled after the save
    for again in range(2):
        base.load_state(saved)
        again_chunks = [base.act(o).actions for o in stream[10:]]
        for k, (a, b) in enumerate(zip(first, again_chunks, strict=True)):
            np.testing.assert_array_equal(b, a, err_msg=f"try {again}, step {k}")
    base.reset()
    other = [base.act(obs).actions for obs in stream[10:]]
    assert not all(np.array_equal(a, b) for a, b in zip(first, other, strict=True))


@mujoco
@pytest.mark.parametrize(
    ("experiment", "overrides"),
    [
        ("panda_insert_residual", []),
        # the VLA base: its cameras' latest frames and the instruction in force go back too
        ("panda_multitask_vla_residual", ["task.subtasks=[lift_red]", "task.max_duration_s=4"]),
    ],
)
def test_an_env_snapshot_replays_the_episode_from_there(
    experiment: str, overrides: list[str]
) -> None:
    """ResidualEnv.snapshot / restore: the simulator, the base's chunk and state, the safety
    filter and the env's counters go back, so the same learner actions from a restored
    snapshot give the same observations, rewards and applied actions, into another episode
    and more than once; a base that cannot save its state is one sentence."""
    from tether.policies.residual.env import ResidualEnv

    cfg = load_config(REPO / f"configs/experiments/{experiment}.yaml", overrides)
    assert cfg.finetune is not None
    env = ResidualEnv(cfg, cfg.finetune, None)
    actions = np.random.default_rng(1).normal(0.0, 1.0, (20, *env.action_space.shape))

    def run() -> list[tuple[np.ndarray, float, np.ndarray]]:
        out = []
        for a in actions:
            obs, reward, term, trunc, info = env.step(a)
            out.append((obs, reward, info["applied"]))
            if term or trunc:
                break
        return out

    try:
        env.reset(seed=3)
        for _ in range(15):
            env.step(np.zeros(env.action_space.shape))
        at, steps = env.observation(), env.steps
        snap = env.snapshot()
        first = run()
        assert len(first) == len(actions) and env.steps > steps
        for again in range(2):
            env.reset(seed=4 + again)
            np.testing.assert_array_equal(env.restore(snap), at)
            assert env.steps == steps
            for k, (a, b) in enumerate(zip(first, run(), strict=True)):
                np.testing.assert_array_equal(b[0], a[0], err_msg=f"obs, step {k}")
                assert b[1] == a[1]
                np.testing.assert_array_equal(b[2], a[2], err_msg=f"applied, step {k}")
    finally:
        env.close()
    cfg = load_config(EXPERIMENT, [])
    assert cfg.finetune is not None
    env = ResidualEnv(cfg, cfg.finetune, None)
    try:
        with pytest.raises(ConfigError, match="cannot save its episode state"):
            env.snapshot()
    finally:
        env.close()


VLA_RESIDUAL = REPO / "configs/experiments/panda_multitask_vla_residual.yaml"


def test_residual_inputs_are_state_keys_only() -> None:
    """A base that observes cameras keeps them; the residual's inputs are arrays, chosen
    in finetune.observation_keys or else the base's keys without its cameras."""
    from tether.policies.residual.env import observation_keys

    class Base:
        contract = {"observation_keys": ["state", "images/wrist", "images/front"]}

    assert observation_keys(Base()) == ["state"]  # type: ignore[arg-type]
    assert observation_keys(Base(), ["state", "env_state"]) == ["state", "env_state"]  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="images/wrist are images"):
        observation_keys(Base(), ["state", "images/wrist"])  # type: ignore[arg-type]
    Base.contract = {"observation_keys": ["images/wrist"]}
    with pytest.raises(ConfigError, match="observes only images"):
        observation_keys(Base())  # type: ignore[arg-type]


@mujoco
def test_a_vla_base_sees_its_cameras_and_instruction_in_the_env() -> None:
    """The shipped VLA as the frozen base (images + instruction in, a black box that
    returns chunks): with a zero residual the env applies, step for step, what the
    in-process loop applies with the VLA alone (its cameras rendered at their fps in sim
    time, the episode's instruction), over 1.5 s of a lift-red episode (3 chunks)."""
    from tether.core.experiment import build_policy
    from tether.policies.residual.env import ResidualEnv
    from tether.sim.loop import run_local_episode
    from tether.sim.runner import SimRunner

    ov = ["task.subtasks=[lift_red]", "task.max_duration_s=1.5", "episodes.seed=1003"]
    cfg = load_config(VLA_RESIDUAL, ov)
    assert cfg.finetune is not None
    env = ResidualEnv(cfg, cfg.finetune)
    assert env.keys == ["state", "env_state"] and [c.name for c in env.cameras] == [
        "table",
        "wrist",
    ]
    env.reset(seed=1003)
    applied, done = [], False
    while not done:
        _, _, term, trunc, info = env.step_residual(np.zeros(env.robot_spec.action.dim))
        applied.append(info["applied"])
        done = term or trunc
    env.close()
    assert env.executor.queries >= 3

    model = REPO / "models/panda_multitask_vla/model.onnx"
    loop_cfg = load_config(VLA_RESIDUAL, [*ov, "policy.type=onnx", f"policy.model={model}"])
    runner = SimRunner(loop_cfg)
    seen: list[np.ndarray] = []
    step = runner.backend.step
    runner.backend.step = lambda a: (seen.append(np.asarray(a)), step(a))[1]  # type: ignore[method-assign]
    run_local_episode(loop_cfg, runner, build_policy(loop_cfg, runner.spec))
    assert len(seen) == len(applied) == 150
    np.testing.assert_array_equal(np.stack(seen), np.stack(applied))
    # the arm moved (not a held pose on both sides)
    assert np.abs(np.stack(applied)[-1] - np.stack(applied)[0]).max() > 0.05
