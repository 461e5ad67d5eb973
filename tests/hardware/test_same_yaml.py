"""The promise of the hardware issue: the experiment that runs in the simulator runs against
(mock) hardware with only `sim:` swapped for `hardware:`. Kept by construction: every
*_mock.yaml extends its simulator twin and writes nothing but its name, `sim: null` and a
`hardware:` section, so the two cannot drift apart."""

from __future__ import annotations

from pathlib import Path

import pytest

from tether.core.config import EXTENDS, dump_config, load_config, read_experiment, read_yaml
from tether.core.paths import find_extended

EXPERIMENTS = Path(__file__).resolve().parents[2] / "configs" / "experiments"
MOCKS = sorted(p.name for p in EXPERIMENTS.glob("*_mock.yaml"))
SWAPPED = {"name", "sim", "hardware"}
# what a mock may change besides the swap, and why (nothing else)
EXTRA = {
    # a MAVLink link at 20 Hz, not the 100 Hz simulator: a longer watchdog, the autopilot's
    # hold on a stale command, and a higher takeoff
    "quad_mavlink_mock.yaml": {"safety", "drones"},
    "swarm_mavlink_mock.yaml": {"safety", "drones"},
}


def test_there_are_mock_configs():
    assert {"panda_lift_mock.yaml", "husky_go_to_goal_mock.yaml"} <= set(MOCKS)


@pytest.mark.parametrize("mock", MOCKS)
def test_a_mock_config_is_its_sim_twin_with_hardware_by_construction(mock):
    path = EXPERIMENTS / mock
    own = read_yaml(path)
    assert EXTENDS in own, f"{mock} must extend its simulator twin"
    assert "sim" in own and own["sim"] is None, f"{mock} must drop the twin's sim: (sim: null)"
    assert isinstance(own.get("hardware"), dict)
    allowed = {EXTENDS} | SWAPPED | EXTRA.get(mock, set())
    assert set(own) <= allowed, f"{mock} changes {sorted(set(own) - allowed)} of its twin"

    twin = find_extended(own[EXTENDS], path)
    assert twin is not None
    twin_data = read_experiment(twin)
    assert "sim" in twin_data and "hardware" not in twin_data
    mock_data = read_experiment(path)
    assert "sim" not in mock_data and EXTENDS not in mock_data

    # validated, every default filled in: equal but for the swap
    sim_cfg, hw_cfg = load_config(twin), load_config(path)
    assert sim_cfg.sim is not None and sim_cfg.hardware is None
    assert hw_cfg.sim is None and hw_cfg.hardware is not None
    skip = SWAPPED | EXTRA.get(mock, set())
    rest = lambda cfg: {k: v for k, v in dump_config(cfg).items() if k not in skip}  # noqa: E731
    assert rest(sim_cfg) == rest(hw_cfg)
    if not EXTRA.get(mock):
        assert hw_cfg.hardware.control_hz == sim_cfg.sim.control_hz
