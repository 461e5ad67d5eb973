"""Parallel rollouts (tether.policies.residual.workers): the wire format, local workers
against the in-process DummyVecEnv, auto-reset, a dying worker, no processes left behind,
and (slow) a fine-tuning run through Ray actors."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("stable_baselines3")

from tether.core.config import load_config  # noqa: E402
from tether.core.errors import ConfigError, TetherError  # noqa: E402
from tether.policies.residual.workers import make_venv, pack, unpack  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
EXPERIMENT = REPO / "configs/experiments/panda_reach_residual.yaml"
mujoco = pytest.mark.mujoco


def children() -> set[int]:
    """Pids of this process's live children (from /proc)."""
    me, out = os.getpid(), set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == me and fields[0] != "Z":
            out.add(int(entry.name))
    return out


def _cfg(workers: str, overrides: list[str]) -> Any:
    return load_config(EXPERIMENT, [f"finetune.workers={workers}", *overrides])


def _normaliser(cfg: Any) -> Any:
    """A normaliser with non-trivial arrays (they must reach the workers)."""
    from tether.policies.residual.env import ResidualEnv
    from tether.policies.residual.model import NumpyNormaliser, ResidualMLP

    probe = ResidualEnv(cfg, cfg.finetune, None)
    g = np.random.default_rng(0)
    spec = probe.robot_spec
    model = ResidualMLP(
        g.normal(size=probe.obs_dim), g.uniform(0.5, 2.0, probe.obs_dim),
        spec.action.low_array(), spec.action.high_array(), 0.1, (8,),
        relative=probe.relative,
    )  # fmt: skip
    probe.close()
    return NumpyNormaliser(model)


def test_wire_format_round_trips_arrays_and_json() -> None:
    arrays = {
        "obs": np.arange(12, dtype=np.float32).reshape(3, 4),
        "dones": np.array([True, False, True]),
        "seed": np.array(7, np.int64),
        "empty": np.zeros((0, 2)),
    }
    header, back = unpack(pack({"cmd": "step", "infos": [{"is_success": True}]}, arrays))
    assert header == {"cmd": "step", "infos": [{"is_success": True}]}
    assert back.keys() == arrays.keys()
    for k, a in arrays.items():
        assert back[k].dtype == a.dtype and back[k].shape == a.shape
        np.testing.assert_array_equal(back[k], a)
    back["obs"][0, 0] = 1.0  # writable copies
    with pytest.raises(TetherError, match="dtype object"):
        pack({}, {"bad": np.array([{}, None], dtype=object)})


def test_ray_missing_is_one_sentence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    cfg = _cfg("ray", [])
    before = children()
    with pytest.raises(ConfigError, match=r"pip install 'ray") as err:
        make_venv(cfg, cfg.finetune, None, squash=True)
    assert "\n" not in str(err.value)
    assert children() == before


@mujoco
def test_local_workers_give_the_inline_transitions() -> None:
    """Same seeds, same actions: 3 envs in 2 local workers step exactly as DummyVecEnv
    (observations, float32 rewards, dones, infos with terminal_observation and
    TimeLimit.truncated, reset infos), through time-limit ends and auto-resets; close()
    leaves no process behind."""
    short = ["task.max_duration_s=0.3", "finetune.n_envs=3", "finetune.n_workers=2"]
    # relative positions in the input too (the workers must compute them as inline does)
    short.append("finetune.relative_positions=[[target,target]]")
    inline_cfg, local_cfg = _cfg("inline", short), _cfg("local", short)
    norm = _normaliser(inline_cfg)
    before = children()
    ref = make_venv(inline_cfg, inline_cfg.finetune, norm, squash=True)
    venv = make_venv(local_cfg, local_cfg.finetune, norm, squash=True)
    try:
        assert type(venv).__name__ == "RolloutVecEnv" and len(venv.worker_pids) == 2
        assert set(venv.worker_pids) <= children()
        assert venv.observation_space == ref.observation_space
        assert venv.action_space == ref.action_space
        for v in (ref, venv):
            v.seed(21)
        np.testing.assert_array_equal(venv.reset(), ref.reset())
        assert venv.reset_infos == ref.reset_infos == [{"seed": s} for s in (21, 22, 23)]
        g = np.random.default_rng(3)
        ends = 0
        for _ in range(70):  # 30-step episodes: two auto-resets per env
            actions = g.normal(size=(3, *venv.action_space.shape)).astype(np.float32)
            got, want = venv.step(actions), ref.step(actions)
            for a, b in zip(got[:3], want[:3], strict=True):
                assert a.dtype == b.dtype
                np.testing.assert_array_equal(a, b)
            for info, expected in zip(got[3], want[3], strict=True):
                assert info.keys() == expected.keys()
                for key in expected:
                    np.testing.assert_array_equal(info[key], expected[key])
            ends += int(got[2].sum())
            for i in np.flatnonzero(got[2]):
                assert got[3][i]["TimeLimit.truncated"] is True
                assert "terminal_observation" in got[3][i]
            assert len(venv.reset_infos) == 3
        assert ends == 6
        assert venv.get_attr("max_steps") == [30, 30, 30]
        assert venv.get_attr("steps", indices=[2]) == ref.get_attr("steps", indices=[2])
    finally:
        venv.close()
        ref.close()
    assert children() == before


@mujoco
def test_evaluations_on_the_workers_give_the_inline_outcomes() -> None:
    """A run's evaluation split over 2 local workers (evaluation.evaluate with the venv):
    seed by seed the inline outcomes (success, final distance, control steps) with a
    residual that moves the arm and with the base alone, in the order of the seeds; the
    training envs keep their episodes; close() leaves no process behind."""
    import torch

    from tether.policies.residual.env import ResidualEnv
    from tether.policies.residual.evaluation import evaluate, run_seeds
    from tether.policies.residual.model import NumpyNormaliser, ResidualMLP

    short = ["task.max_duration_s=0.4", "finetune.n_envs=2", "finetune.n_workers=2",
             "finetune.hold_steps=3"]  # fmt: skip
    inline_cfg, local_cfg = _cfg("inline", short), _cfg("local", short)
    env = ResidualEnv(inline_cfg, inline_cfg.finetune, None)
    spec = env.robot_spec
    torch.manual_seed(0)
    model = ResidualMLP(
        np.zeros(env.obs_dim), np.ones(env.obs_dim), spec.action.low_array(),
        spec.action.high_array(), 0.3, (16,), last_layer_init=1.0,
    )  # fmt: skip
    env.normaliser = NumpyNormaliser(model)
    seeds = [7, 8, 9, 10, 11]
    want = run_seeds(env, model, seeds)
    base = run_seeds(env, None, seeds)
    # the residual matters: the workers must get it, not run the base
    assert not np.allclose(want["distance"], base["distance"], atol=1e-3)
    before = children()
    venv = make_venv(local_cfg, local_cfg.finetune, env.normaliser, squash=True)
    try:
        venv.seed(3)
        venv.reset()
        for _ in range(4):
            venv.step(np.zeros((2, *venv.action_space.shape), np.float32))
        training = venv.get_attr("steps")
        assert venv.evaluate_seeds(model, seeds) == want
        assert venv.evaluate_seeds(None, seeds) == base
        record = evaluate(env, model, len(seeds), seeds[0], venv)
        assert record == evaluate(env, model, len(seeds), seeds[0])
        assert record["env_steps"] == sum(want["steps"])
        assert venv.get_attr("steps") == training
    finally:
        venv.close()
        env.close()
    assert children() == before


@mujoco
def test_auto_reset_hands_over_the_terminal_observation() -> None:
    """The unbiased expert succeeds (the episode terminates): the worker's info holds the
    episode's last observation, and the returned one is the next episode's first, drawn
    from the env's own generator as a single ResidualEnv does it."""
    from tether.policies.residual.env import ResidualEnv

    cfg = _cfg("local", ["finetune.base_offset=null", "finetune.n_envs=2", "finetune.n_workers=2"])
    norm = _normaliser(cfg)
    single = ResidualEnv(cfg, cfg.finetune, norm)
    venv = make_venv(cfg, cfg.finetune, norm, squash=True)
    try:
        venv.seed(11)
        first = venv.reset()
        np.testing.assert_array_equal(first[1], single.reset(seed=12)[0])  # worker 1's env
        zeros = np.zeros((2, *venv.action_space.shape), np.float32)
        for _ in range(single.max_steps):
            obs, rewards, dones, infos = venv.step(zeros)
            last, _, term, trunc, _ = single.step(zeros[1])
            assert bool(dones[1]) == (term or trunc)
            if dones[1]:
                break
        assert term and not trunc, "the unbiased expert should succeed within the time limit"
        info = infos[1]
        assert info["is_success"] is True and info["TimeLimit.truncated"] is False
        np.testing.assert_array_equal(info["terminal_observation"], last)
        assert rewards.dtype == np.float32
        nxt, reset_info = single.reset()
        np.testing.assert_array_equal(obs[1], nxt)
        assert venv.reset_infos[1] == reset_info
    finally:
        venv.close()
        single.close()


@mujoco
def test_a_dead_worker_is_a_tether_error_naming_it() -> None:
    """A worker's own error comes back as a TetherError naming it; a killed worker makes
    the next step raise one (within a deadline, no hang); close() still cleans up."""
    cfg = _cfg("local", ["finetune.n_envs=2", "finetune.n_workers=2"])
    before = children()
    venv = make_venv(cfg, cfg.finetune, None, squash=True)
    try:
        venv.seed(0)
        venv.reset()
        with pytest.raises(TetherError, match=r"rollout worker 0 .*AttributeError"):
            venv.env_method("no_such_method", indices=[0])
        os.kill(venv.worker_pids[1], signal.SIGKILL)
        caught: list[BaseException] = []

        def step() -> None:
            try:
                venv.step(np.zeros((2, *venv.action_space.shape), np.float32))
            except BaseException as exc:  # noqa: BLE001 - handed to the test thread
                caught.append(exc)

        thread = threading.Thread(target=step, daemon=True)
        thread.start()
        thread.join(timeout=60)
        assert not thread.is_alive(), "step() hung on a dead worker"
        assert len(caught) == 1 and isinstance(caught[0], TetherError)
        assert f"rollout worker 1 (pid {venv.worker_pids[1]}) died" in str(caught[0])
    finally:
        venv.close()
    assert children() == before


@mujoco
@pytest.mark.slow
def test_finetune_through_ray_actors(tmp_path: Path) -> None:
    """A few PPO iterations of the reach case with its 2 envs in 2 Ray actors on a local,
    loopback-only Ray: the run completes, counts exactly its env steps and checkpoints."""
    ray = pytest.importorskip("ray")
    from tether.policies.residual.trainer import train

    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        _node_ip_address="127.0.0.1",
        log_to_driver=False,
    )
    try:
        args = ["finetune.workers=ray", "finetune.n_envs=2", "finetune.n_workers=2",
                "finetune.total_env_steps=1000", "finetune.eval_every_steps=400",
                "finetune.eval_episodes=1", "finetune.hidden=[16]", "finetune.ppo.n_steps=100",
                "finetune.ppo.batch_size=100", "finetune.ppo.epochs=2"]  # fmt: skip
        result = train(load_config(EXPERIMENT, args), tmp_path, resume=False)
        assert ray.is_initialized()  # the run used the Ray it found, and left it running
    finally:
        ray.shutdown()
    # 200 steps of observation statistics + SB3 steps, 2 at a time, stopped at the budget
    assert result["env_steps"] == 1000
    contract = json.loads((tmp_path / "contract.json").read_text())
    assert contract["train_state"]["env_steps"] == 1000
    assert (tmp_path / "model.safetensors").is_file() and (tmp_path / "train.json").is_file()
    assert len(contract["train_state"]["evals"]) >= 2
