"""The MuJoCo arm backend's step hot path (issue #22) changes no outcome: its observation
equals the generic ``arm_observation`` read through ``body_pose`` / ``ee_pose`` bit for
bit, and each task's one-pass ``score`` gives the success of the plain numpy formulas and
their reward (bit for bit for lift and reach, to rounding for insert), at every step of
expert episodes and of noisy ones (which miss, so every branch of the rewards runs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytestmark = pytest.mark.mujoco
pytest.importorskip("mujoco")

from tether.core import registry  # noqa: E402
from tether.core.config import load_config  # noqa: E402
from tether.core.experiment import build_policy, build_task  # noqa: E402
from tether.core.kinematics import quat_to_mat  # noqa: E402
from tether.sim.scoring import arm_observation  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
EXPERIMENTS = {
    "lift": ("panda_lift_expert.yaml", []),
    "insert": ("panda_insert_expert.yaml", []),
    "insert_fine": ("panda_insert_expert.yaml", ["task.align_fine=0.5"]),
    "reach": ("panda_reach_residual.yaml", []),
}


def lift_oracle(task: Any, sim: Any) -> tuple[float, bool]:
    cube = sim.body_pose("cube")[0]
    dist = float(np.linalg.norm(sim.ee_pose()[0] - cube))
    height = cube[2] - task.cfg.rest_z
    reward = 1.0 - np.tanh(10.0 * dist)
    if dist < 0.03:
        reward += 2.0 * float(np.clip(height / task.cfg.lift_height, 0.0, 1.0))
    return float(reward), bool(height >= task.cfg.lift_height)


def reach_oracle(task: Any, sim: Any) -> tuple[float, bool]:
    d = float(np.linalg.norm(sim.ee_pose()[0] - sim.body_pose("target")[0]))
    return float(1.0 - np.tanh(10.0 * d)), d <= task.cfg.success_radius


def insert_oracle(task: Any, sim: Any) -> tuple[float, bool]:
    c = task.cfg
    pos, quat = sim.body_pose("peg")
    axis = quat_to_mat(quat)[:, 2]
    top, bottom = pos + axis * (c.peg_length / 2), pos - axis * (c.peg_length / 2)
    hole, hole_quat = sim.body_pose("hole")
    insertion = float(hole[2] + c.fixture_height - bottom[2])
    offset = (quat_to_mat(hole_quat).T @ (bottom - hole))[:2]
    inside = bool(np.all(np.abs(offset) <= task.hole_size / 2))
    reach = float(np.linalg.norm(sim.ee_pose()[0] - top))
    reward = 1.0 - np.tanh(10.0 * reach)
    if reach < 0.03:
        entry = hole + np.array([0.0, 0.0, c.fixture_height])
        gap = float(np.linalg.norm(bottom - entry))
        reward += 1.0 - np.tanh(10.0 * gap)
        reward += c.align_fine * (1.0 - np.tanh(100.0 * gap))
        if inside:
            reward += 2.0 * float(np.clip(insertion / c.depth, 0.0, 1.0))
    tilt = float(np.arccos(min(1.0, abs(quat_to_mat(quat)[2, 2]))))
    return float(reward), inside and insertion >= c.depth and tilt <= c.max_tilt


# lift and reach score with numpy's own arithmetic: bit for bit; insert in Python floats
# (another summation order in its norms): to rounding
REWARD_TOL = {"lift": 0.0, "reach": 0.0, "insert": 1e-12, "insert_fine": 1e-12}
ORACLES = {
    "lift": lift_oracle,
    "insert": insert_oracle,
    "insert_fine": insert_oracle,
    "reach": reach_oracle,
}


@pytest.mark.parametrize("task_name", list(EXPERIMENTS))
def test_the_fast_step_reads_and_scores_what_the_plain_formulas_give(task_name: str) -> None:
    experiment, overrides = EXPERIMENTS[task_name]
    cfg = load_config(REPO / "configs/experiments" / experiment, ["sim.cameras=[]", *overrides])
    task = build_task(cfg)
    sim = registry.build("sim", cfg.sim, robot=cfg.robot, task=task)
    policy = build_policy(cfg)
    oracle = ORACLES[task_name]
    rng = np.random.default_rng(0)
    outcomes, branches = [], set()
    try:
        for seed, noise in ((0, 0.0), (1, 0.15)):
            obs = sim.reset(seed)
            policy.reset()
            for _ in range(1500):
                action = np.asarray(policy.act(obs).actions[0], np.float64)
                if noise:
                    action[:-1] += rng.normal(0.0, noise, action.size - 1)
                    action = np.clip(
                        action, sim.spec.action.low_array(), sim.spec.action.high_array()
                    )
                result = sim.step(action)
                obs = result.observation
                plain = arm_observation(
                    sim, sim.data.qpos[sim._qadr], sim.data.qvel[sim._dadr], sim._objects
                )
                assert obs.data.keys() == plain.data.keys()
                for key, value in plain.data.items():
                    assert obs.data[key].dtype == value.dtype, key
                    assert np.array_equal(obs.data[key], value), key
                reward, success = oracle(task, sim)
                fast = task.score(sim)
                assert (result.reward, result.info["is_success"]) == fast
                assert fast[1] == success
                assert abs(fast[0] - reward) <= REWARD_TOL[task_name], (fast[0], reward)
                branches.add((round(reward), success))
                if success or result.truncated:
                    break
            outcomes.append(success)
    finally:
        sim.close()
    # the expert's episode succeeds; the noisy one is scored too (success or not)
    assert outcomes[0]
    assert len(branches) >= 2, branches
