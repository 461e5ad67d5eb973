"""Drone tasks and the quad_pid policy on both engines, at the values README and
docs/quadrotor.md claim: hover holds within 5 mm, the figure-eight is tracked within 8 mm RMS."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tether.core.config import load_config
from tether.core.experiment import build_policy

REPO = Path(__file__).resolve().parents[2]
EXPERIMENTS = REPO / "configs" / "experiments"
ENGINES = [
    pytest.param("pybullet", marks=pytest.mark.pybullet),
    pytest.param("mujoco", marks=pytest.mark.mujoco),
]
# hover: the drone stays this close (m) to its target over the last 5 s of the episode (the
# README's "< 5 mm"; measured 0.3-2.3 mm over the three action modes, both engines)
HOVER_BOUND = 0.005
# figure-eight (1 m x 0.5 m, 8 s loop), RMS position error (m) over the second loop (the
# README's "7-8 mm"; measured 7.1 mm in rotor_rpm / thrust_rates, 7.8 mm in
# velocity_setpoint, both engines)
FIGURE_EIGHT_RMS_BOUND = 0.008


def _runner(name: str, engine: str, *overrides: str) -> Any:
    pytest.importorskip(engine)
    from tether.sim.runner import SimRunner

    cfg = load_config(EXPERIMENTS / name, [f"sim.type={engine}", "sim.cameras=[]", *overrides])
    return cfg, SimRunner(cfg)


def _episode(cfg: Any, runner: Any, watch_from_s: float = 1e9) -> tuple[dict[str, Any], float]:
    """Run one episode in-process; returns the summary and the largest distance of any
    drone to its target from ``watch_from_s`` on."""
    policy = build_policy(cfg, runner.spec)
    obs = runner.reset()
    policy.reset()
    worst = 0.0
    while not runner.done:
        chunk = policy.act(obs)
        runner.submit(chunk)
        runner.step()
        obs = runner.obs
        if obs.stamp_s >= watch_from_s:
            worst = max(worst, float(np.max(runner.task.distance(runner.backend))))
    return runner.summary(), worst


@pytest.mark.slow
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("mode", ["rotor_rpm", "thrust_rates", "velocity_setpoint"])
def test_pid_hover_from_thrown_start(engine: str, mode: str) -> None:
    cfg, runner = _runner(
        "quad_pid_hover.yaml", engine, f"sim.quadrotor.action_mode={mode}", "episodes.seed=3"
    )
    try:
        assert runner.spec.action.mode == mode
        summary, worst = _episode(cfg, runner, watch_from_s=10.0)
        assert summary["success"] and summary["steps"] == 1500
        assert worst < HOVER_BOUND, worst
    finally:
        runner.backend.close()


@pytest.mark.slow
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("mode", ["rotor_rpm", "thrust_rates", "velocity_setpoint"])
def test_pid_figure_eight_two_drones(engine: str, mode: str) -> None:
    cfg, runner = _runner("quad_pid_figure_eight.yaml", engine, f"sim.quadrotor.action_mode={mode}")
    try:
        assert runner.backend.num_drones == 2
        summary, _ = _episode(cfg, runner)
        rms = runner.task.rms_error()
        assert rms.shape == (2,) and np.all(rms < FIGURE_EIGHT_RMS_BOUND), rms
        assert summary["success"]
    finally:
        runner.backend.close()


@pytest.mark.slow
@pytest.mark.parametrize("engine", ENGINES)
def test_pid_waypoints(engine: str) -> None:
    cfg, runner = _runner(
        "quad_pid_hover.yaml", engine, "task={type: waypoints}", "sim.quadrotor.num_drones=2"
    )
    try:
        summary, _ = _episode(cfg, runner)
        task = runner.task
        assert summary["success"] and summary["sim_time_s"] < task.max_duration_s
        np.testing.assert_array_equal(task.index, len(task.cfg.waypoints) - 1)
        assert np.all(task.distance(runner.backend) <= task.cfg.radius)
    finally:
        runner.backend.close()


@pytest.mark.pybullet
def test_hover_task_rules() -> None:
    """Crash when 2 m off, success only at the time limit after the full window."""
    cfg, runner = _runner(
        "quad_pid_hover.yaml",
        "pybullet",
        "task.max_duration_s=0.3",
        "task.success_window_s=0.2",
        "task.random_start=false",
    )
    sim, task = runner.backend, runner.task
    try:
        hover = np.full(4, sim.params.hover_rpm)
        sim.reset(0)
        flags = [sim.step(hover) for _ in range(30)]
        assert [r.terminated for r in flags] == [False] * 29 + [True]
        assert flags[-1].info["is_success"] and not flags[-1].info["failed"]
        # the target 15 cm above the hovering drone: never within 10 cm, no success
        sim.reset(0)
        sim.set_body_pose("target", np.array([0.0, 0.0, 1.15]), np.array([1.0, 0, 0, 0]))
        task.targets = np.array([[0.0, 0.0, 1.15]])
        last = [sim.step(hover) for _ in range(30)][-1]
        assert not last.terminated and last.truncated and not last.info["is_success"]
        sim.reset(0)
        sim.set_body_pose("cf0", np.array([2.5, 0.0, 1.0]), np.array([1.0, 0, 0, 0]))
        res = sim.step(hover)
        assert res.info["failed"] and res.truncated and not res.terminated
    finally:
        sim.close()
