"""Dense reward and success of reach and lift, on states built through each backend
(set_body_pose, and the scripted expert to bring the hand down to the cube): the reward rises
as the hand approaches and as the cube rises, and success flips exactly at the documented
threshold (reach: 2 cm, lift: 8 cm)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from tether.core import registry
from tether.sim.experts.config_expert import ScriptedExpertConfig
from tether.sim.tasks.config_tasks import LiftConfig, ReachConfig

DEPENDENCIES = {"mujoco": "mujoco", "pybullet": "pybullet"}
BACKENDS = [
    pytest.param("mujoco", marks=pytest.mark.mujoco),
    pytest.param("pybullet", marks=pytest.mark.pybullet),
]
IDENTITY = np.array([1.0, 0.0, 0.0, 0.0])
EPS = 1e-6  # m, far below any physics effect and far above float64 rounding


def _sim(backend: str, task: Any) -> Any:
    pytest.importorskip(DEPENDENCIES[backend])
    cfg = registry.config_class("sim", backend)()
    return registry.build("sim", cfg, robot="panda", task=task)


@pytest.fixture(params=BACKENDS)
def reach(request: pytest.FixtureRequest) -> Iterator[tuple[Any, Any]]:
    from tether.sim.tasks.reach import ReachTask

    task = ReachTask(ReachConfig())
    sim = _sim(request.param, task)
    sim.reset(0)
    yield sim, task
    sim.close()


@pytest.fixture(params=BACKENDS)
def lift(request: pytest.FixtureRequest) -> Iterator[tuple[Any, Any]]:
    from tether.sim.tasks.lift import LiftTask

    task = LiftTask(LiftConfig())
    sim = _sim(request.param, task)
    sim.reset(0)
    yield sim, task
    sim.close()


def test_reach_reward_rises_as_the_hand_approaches(reach: tuple[Any, Any]) -> None:
    sim, task = reach
    tcp = sim.ee_pose()[0]
    direction = np.array([0.6, -0.48, 0.64])  # unit length
    rewards = []
    for d in (0.4, 0.2, 0.1, 0.05, 0.03, 0.02, 0.01, 0.0):
        sim.set_body_pose("target", tcp + d * direction, IDENTITY)
        assert task.distance(sim) == pytest.approx(d, abs=1e-6)
        rewards.append(task.reward(sim))
    assert all(b > a for a, b in zip(rewards, rewards[1:], strict=False)), rewards
    assert rewards[0] < 0.01  # 40 cm away: nothing
    assert rewards[5] == pytest.approx(0.80, abs=0.01)  # documented: 0.8 at 2 cm
    assert rewards[-1] == pytest.approx(1.0)  # documented: 1 on target


def test_reach_success_flips_at_the_success_radius(reach: tuple[Any, Any]) -> None:
    sim, task = reach
    radius = task.cfg.success_radius
    assert radius == 0.02
    tcp = sim.ee_pose()[0]
    for direction in (np.array([1.0, 0.0, 0.0]), np.array([0.0, 0.6, -0.8])):
        sim.set_body_pose("target", tcp + (radius + EPS) * direction, IDENTITY)
        assert not task.success(sim)
        sim.set_body_pose("target", tcp + (radius - EPS) * direction, IDENTITY)
        assert task.success(sim)


def _hand_at_the_cube(sim: Any, task: Any) -> np.ndarray:
    """Drive the scripted expert until the TCP is within 1 cm of the resting cube; the TCP
    positions on the way (the approach)."""
    from tether.sim.experts.expert import ScriptedExpert

    expert = ScriptedExpert(ScriptedExpertConfig(), sim.spec, task.cfg)
    obs = sim.reset(0)
    expert.reset()
    for _ in range(int(4.0 * sim.spec.control_hz)):
        cube = sim.body_pose("cube")[0]
        if np.linalg.norm(sim.ee_pose()[0] - cube) < 0.01:
            return cube
        obs = sim.step(expert.act(obs).actions[0]).observation
    raise AssertionError("the expert never brought the hand to the cube")


def test_lift_reward_rises_as_the_hand_approaches(lift: tuple[Any, Any]) -> None:
    """Cube on the table (no lift term): the reward grows as the TCP-cube distance shrinks."""
    sim, task = lift
    cube, quat = sim.body_pose("cube")
    tcp = sim.ee_pose()[0]
    rewards, dists = [], []
    for f in (0.0, 0.5, 0.8, 0.95, 1.0):  # slide the cube towards the TCP, then onto it
        sim.set_body_pose("cube", cube + f * (tcp - cube), quat)
        dists.append(float(np.linalg.norm(sim.ee_pose()[0] - sim.body_pose("cube")[0])))
        rewards.append(task.reward(sim))
    assert all(b < a for a, b in zip(dists, dists[1:], strict=False)), dists
    assert all(b > a for a, b in zip(rewards, rewards[1:], strict=False)), rewards
    assert rewards[0] < 0.1 < rewards[-1]


def test_lift_reward_rises_as_the_cube_rises(lift: tuple[Any, Any]) -> None:
    """The hand down at the cube (brought there by the expert): raising the cube past the
    TCP raises the reward; the same heights away from the hand do not pay."""
    sim, task = lift
    _hand_at_the_cube(sim, task)
    tcp = sim.ee_pose()[0]
    _, quat = sim.body_pose("cube")
    rewards, heights = [], []
    for dz in np.linspace(-0.02, 0.025, 10):  # all within the 3 cm of the lift term
        sim.set_body_pose("cube", tcp + [0.0, 0.0, dz], quat)
        heights.append(task.height(sim))
        rewards.append(task.reward(sim))
    assert all(b > a for a, b in zip(heights, heights[1:], strict=False)), heights
    assert all(b > a for a, b in zip(rewards, rewards[1:], strict=False)), rewards
    assert rewards[-1] > 1.0  # the lift term (up to 2) now counts on top of reaching (<= 1)
    # the highest of those heights, 10 cm to the side of the hand: reaching term only
    sim.set_body_pose("cube", tcp + [0.0, 0.1, 0.025], quat)
    assert task.reward(sim) < 1.0 - np.tanh(10 * 0.1) + 1e-6


def test_lift_success_flips_at_the_lift_height(lift: tuple[Any, Any]) -> None:
    sim, task = lift
    cfg = task.cfg
    assert (cfg.lift_height, cfg.rest_z) == (0.08, 0.025)
    cube, quat = sim.body_pose("cube")
    assert task.height(sim) == pytest.approx(0.0, abs=1e-6) and not task.success(sim)
    for z, lifted in ((cfg.lift_height - EPS, False), (cfg.lift_height + EPS, True)):
        sim.set_body_pose("cube", np.array([cube[0], cube[1], cfg.rest_z + z]), quat)
        assert task.success(sim) is lifted, z
