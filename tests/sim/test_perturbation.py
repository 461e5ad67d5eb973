"""DART-style noise injection for recording (``sim.perturb_std``): the simulator applies a
smooth random offset to the arm joints' commands, the fingers and the published command
stay as they were, the same seed gives the same offsets, and it is off by default."""

from __future__ import annotations

import numpy as np
import pytest

from tether.core.config import load_config
from tether.core.errors import ConfigError
from tether.core.types import ActionChunk
from tether.sim.runner import Perturbation, perturbation


def test_the_offset_has_the_configured_std_and_time_constant() -> None:
    dt, tau, std = 0.01, 0.5, 0.004
    p = Perturbation(7, std, tau, dt)
    p.reset(3)
    zero = np.zeros(8, np.float32)
    offsets = np.array([p.apply(zero)[:7] for _ in range(40_000)])
    # stationary from the first step: no warm-up transient
    assert abs(offsets.std() / std - 1.0) < 0.1
    assert abs(offsets[:200].std() / std - 1.0) < 0.5
    # an OU process: the lag-tau autocorrelation is exp(-1)
    lag = round(tau / dt)
    x = offsets - offsets.mean(0)
    corr = (x[:-lag] * x[lag:]).mean() / x.var()
    assert abs(corr - np.exp(-1.0)) < 0.08
    # the last element (a gripper) is never touched
    assert np.all(np.array([p.apply(zero)[7] for _ in range(100)]) == 0.0)


def test_the_same_seed_gives_the_same_offsets() -> None:
    a, b = Perturbation(3, 0.01, 0.5, 0.01), Perturbation(3, 0.01, 0.5, 0.01)
    a.reset(7)
    b.reset(7)
    x = np.zeros(4, np.float32)
    np.testing.assert_array_equal([a.apply(x) for _ in range(50)], [b.apply(x) for _ in range(50)])
    b.reset(8)
    a.reset(7)
    assert not np.array_equal(a.apply(x), b.apply(x))


def test_off_by_default_and_only_for_arms(repo) -> None:
    lift = repo / "configs/experiments/panda_lift_expert.yaml"
    spec_cfg = load_config(lift)
    from tether.core import registry

    panda = registry.load("robot", "panda").spec()
    assert perturbation(spec_cfg, panda) is None
    p = perturbation(load_config(lift, ["sim.perturb_std=0.002"]), panda)
    assert p is not None and p.dims == 7 and p.std == 0.002
    husky = registry.load("robot", "husky").spec()
    base = load_config(repo / "configs/experiments/husky_go_to_goal.yaml", ["sim.perturb_std=0.01"])
    with pytest.raises(ConfigError, match="perturbs an arm's joint commands"):
        perturbation(base, husky)


@pytest.mark.mujoco
def test_the_simulator_gets_the_offset_and_the_command_stays_clean(repo) -> None:
    """The backend receives command + offset on the arm joints (the safety filter in
    between), the chunk the runner holds (what the recorder stores) is unchanged."""
    pytest.importorskip("mujoco")
    from tether.sim.runner import SimRunner

    exp = repo / "configs/experiments/panda_lift_expert.yaml"
    sent: dict[str, list[np.ndarray]] = {}
    for name, extra in (("clean", []), ("dart", ["sim.perturb_std=0.01"])):
        runner = SimRunner(load_config(exp, ["sim.cameras=[]", *extra]))
        try:
            obs = runner.reset()
            hold = runner.measured(obs).copy()
            chunk = ActionChunk(np.repeat(hold[None], 300, 0), runner.spec.dt, obs.stamp_ns)
            runner.submit(chunk)
            real, got = runner.backend.step, []

            def spy(action, real=real, got=got):
                got.append(np.array(action, copy=True))
                return real(action)

            runner.backend.step = spy
            for _ in range(200):
                runner.step()
            np.testing.assert_array_equal(runner.chunk.actions, chunk.actions)
            sent[name] = np.array(got) - hold
        finally:
            runner.backend.close()
    assert np.abs(sent["clean"]).max() < 1e-6
    arm = sent["dart"][:, :7]
    # the rate limit lets the offset through (it moves at most ~0.01 rad per 0.5 s)
    assert 0.004 < arm.std() < 0.02
    assert np.abs(sent["dart"][:, 7]).max() < 1e-6
