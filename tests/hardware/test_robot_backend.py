"""RobotBackend gives a Robot the SimBackend shape, so SimRunner's command path (chunk
validation -> SafetyFilter -> output) drives hardware unchanged. ROS-free, MockArm inside."""

from __future__ import annotations

import numpy as np
import pytest

from tether.core.config import load_config
from tether.core.errors import InvalidCommand
from tether.core.types import ActionChunk
from tether.hardware.mock.arm import MockArm, MockArmConfig
from tether.hardware.mock.clock import ManualClock
from tether.hardware.robots.backend import RobotBackend
from tether.sim.runner import SimRunner
from tether.sim.tasks.lift import LiftTask


def _runner(repo, clock: ManualClock) -> tuple[SimRunner, MockArm]:
    cfg = load_config(repo / "configs/experiments/panda_lift_mock.yaml")
    from tether.core.experiment import robot_spec

    arm = MockArm(robot_spec(cfg), MockArmConfig(latency_s=0.0), clock=clock)
    backend = RobotBackend(arm, task=LiftTask(), pace=False, clock_ns=lambda: round(clock() * 1e9))
    return SimRunner(cfg, backend), arm  # type: ignore[arg-type]


def test_hardware_config_replaces_sim(repo):
    cfg = load_config(repo / "configs/experiments/panda_lift_mock.yaml")
    assert cfg.sim is None and cfg.hardware is not None and cfg.world.control_hz == 100
    from tether.core.errors import ConfigError

    with pytest.raises(ConfigError, match="exactly one of 'sim' and 'hardware'"):
        load_config(repo / "configs/experiments/panda_lift_expert.yaml", ["hardware.type=jtc_arm"])
    with pytest.raises(ConfigError, match="hardware.type"):
        load_config(repo / "configs/experiments/panda_lift_mock.yaml", ["hardware.type=warp"])


def test_reset_places_task_objects_and_time_restarts(repo):
    clock = ManualClock(100.0)
    runner, arm = _runner(repo, clock)
    obs = runner.reset()
    assert arm.is_connected and obs.stamp_ns == 0
    cube = obs["env_state"]
    assert cube.shape == (7,) and 0.3 < cube[0] < 0.8  # where LiftTask's reset put it
    np.testing.assert_allclose(runner.backend.body_pose("cube")[0], cube[:3], atol=1e-6)
    clock.advance(0.01)
    res = runner.step()
    assert res.observation.stamp_ns == 10_000_000 and not res.terminated


def test_commands_take_the_sim_path_to_the_arm(repo):
    clock = ManualClock()
    runner, arm = _runner(repo, clock)
    obs = runner.reset()
    home = runner.measured(obs)
    with pytest.raises(InvalidCommand, match="NaN or inf"):
        runner.submit(ActionChunk(np.full((2, 8), np.nan, np.float32), 0.01, obs.stamp_ns))
    with pytest.raises(InvalidCommand, match="columns"):
        runner.submit(ActionChunk(np.zeros((2, 7), np.float32), 0.01, obs.stamp_ns))
    target = home.copy()
    target[0] += 0.5  # far beyond the safety filter's per-step rate limit
    runner.submit(ActionChunk(np.repeat(target[None], 100, 0), 0.01, obs.stamp_ns))
    for _ in range(30):
        clock.advance(0.01)
        runner.step()
    q = runner.measured(runner.obs)
    assert 0.01 < q[0] - home[0] < 0.5  # moving there, rate-limited, not teleported
    assert runner.safety.stats.rate_limited > 0
    assert np.all(arm.q >= arm.lower) and np.all(arm.q <= arm.upper)


def test_device_settings_are_checked_by_the_device_config(repo):
    from tether.core.errors import ConfigError
    from tether.hardware.mavlink.config_mavlink import MavlinkConfig
    from tether.hardware.robots.factory import MOCK_MAVLINK_URL, device_config, mock_autopilot_url

    exp = repo / "configs/experiments/quad_mavlink_mock.yaml"
    cfg = load_config(exp)
    mav = device_config(MavlinkConfig, cfg.hardware)
    assert mav.url == MOCK_MAVLINK_URL and mav.link_timeout_s == 1.5
    assert mock_autopilot_url(mav.url) == "udpin:127.0.0.1:14560"
    bad = load_config(exp, ["hardware.device.link_timeout=3"])
    with pytest.raises(ConfigError, match=r"hardware\.device\.link_timeout: Extra inputs"):
        device_config(MavlinkConfig, bad.hardware)
