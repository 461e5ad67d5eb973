"""The promise of the hardware issue: the experiment YAML that runs in the simulator runs
against (mock) hardware with only `sim:` swapped for `hardware:`. Each *_mock.yaml must be
its simulator twin with that one section (and the name) changed, and both must parse."""

from __future__ import annotations

import pytest

from tether.core.config import parse_experiment, read_yaml

PAIRS = [
    ("panda_lift_expert.yaml", "panda_lift_mock.yaml"),
    ("husky_go_to_goal.yaml", "husky_go_to_goal_mock.yaml"),
]


@pytest.mark.parametrize(("sim_file", "hw_file"), PAIRS)
def test_mock_config_differs_from_its_sim_twin_only_in_sim_vs_hardware(repo, sim_file, hw_file):
    sim = read_yaml(repo / "configs/experiments" / sim_file)
    hw = read_yaml(repo / "configs/experiments" / hw_file)
    assert "sim" in sim and "hardware" not in sim
    assert "hardware" in hw and "sim" not in hw
    rest = lambda d: {k: v for k, v in d.items() if k not in ("name", "sim", "hardware")}  # noqa: E731
    assert rest(sim) == rest(hw)
    # the shared parts agree on what the hardware section repeats
    assert sim["sim"].get("control_hz") == hw["hardware"].get("control_hz")
    parse_experiment(sim, sim_file)
    parse_experiment(hw, hw_file)
