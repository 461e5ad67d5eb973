"""SimRunner wires the safety layer: the Panda's forward kinematics keeps end-effector targets
inside safety.workspace."""

from __future__ import annotations

import numpy as np
import pytest

from tether.core.config import load_config
from tether.core.types import ActionChunk
from tether.sim.robots import panda_kinematics

pytestmark = [pytest.mark.mujoco]


def test_panda_targets_outside_the_workspace_box_are_not_applied(repo):
    pytest.importorskip("mujoco")
    from tether.sim.runner import SimRunner

    exp = repo / "configs/experiments/panda_lift_expert.yaml"
    probe = SimRunner(load_config(exp, ["sim.cameras=[]"]))
    home = probe.measured(probe.reset()).copy()
    probe.backend.close()
    p = panda_kinematics.fk(home[:7].astype(np.float64))[0]
    box = f"{{low: {(p - 0.05).tolist()}, high: {(p + 0.05).tolist()}}}"
    runner = SimRunner(load_config(exp, ["sim.cameras=[]", f"safety.workspace={box}"]))
    try:
        obs = runner.reset()
        target = runner.measured(obs).copy()
        target[1] += 0.6  # shoulder forward: the hand leaves the 10 cm box
        runner.submit(ActionChunk(np.repeat(target[None], 100, 0), runner.spec.dt, obs.stamp_ns))
        sent: list[np.ndarray] = []
        real = runner.backend.step

        def spy(action):
            sent.append(np.array(action, copy=True))
            return real(action)

        runner.backend.step = spy
        for _ in range(60):
            runner.step()
        ee = np.array([panda_kinematics.fk(a[:7].astype(np.float64))[0] for a in sent])
        assert np.all(np.abs(ee - p) <= 0.05 + 1e-6)
        assert runner.safety.stats.workspace_blocked > 0
        assert sent[-1][1] > home[1] + 0.01  # it moved as far as the box allows
    finally:
        runner.backend.close()
