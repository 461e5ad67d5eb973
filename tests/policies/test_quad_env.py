"""The training simulators of the quad_hover trainer against the numpy reference model, and
how the trainer gets them: through the registry and the BatchedEnv protocol (that it never
imports tether.sim is tests/test_layering.py's to check)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tether.core.protocols import BatchedEnv  # noqa: E402
from tether.policies.quad.diff_sim import DiffQuadrotor  # noqa: E402
from tether.policies.quad.model import hover_features  # noqa: E402
from tether.policies.quad.simulators import hover_env  # noqa: E402
from tether.sim.quadrotor.batched_env import BatchedHoverEnv  # noqa: E402
from tether.sim.quadrotor.coarse_env import CoarseHoverEnv  # noqa: E402

torch.set_num_threads(1)


def _open_loop(n: int, steps: int, seed: int = 1) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.uniform(-0.3, 0.3, (n, 4)) for _ in range(steps)]


def test_the_trainer_gets_its_simulators_from_the_registry() -> None:
    """simulators.hover_env builds the registered "batched/quadcopter" simulator for the
    Crazyflie: the reference model, or the coarse training model; both are BatchedEnvs and
    draw the same episodes for a seed as the classes they stand for."""
    fine, coarse = hover_env(8, seed=2), hover_env(8, coarse=True, seed=2)
    assert type(fine) is BatchedHoverEnv and type(coarse) is CoarseHoverEnv
    for env in (fine, coarse):
        assert isinstance(env, BatchedEnv)
        assert env.success_radius == 0.1 and env.episode_steps * env.control_dt == 15.0
    np.testing.assert_array_equal(fine.reset(2), BatchedHoverEnv(8, seed=2).reset(2))


def test_coarse_env_tracks_the_fine_model() -> None:
    """One 10 ms RK4 step (mean rotor speed held) vs five 2 ms steps: same initial states,
    same open-loop commands for 0.2 s; documented bound 1 mm, 0.01 m/s, 0.1 rad/s."""
    fine, coarse = BatchedHoverEnv(64, seed=3), CoarseHoverEnv(64, seed=3)
    np.testing.assert_array_equal(fine.reset(3), coarse.reset(3))
    for a in _open_loop(64, 20):
        fine.step(a)
        coarse.step(a)
    diff = np.abs(coarse.state - fine.state)
    assert diff[:, 0:3].max() < 1e-3
    assert diff[:, 7:10].max() < 1e-2
    assert diff[:, 10:13].max() < 0.1
    # and the coarse model is not trivially equal: the gap is real but small
    assert diff.max() > 1e-6


def test_diff_sim_tracks_the_numpy_model() -> None:
    """The differentiable Euler model stays within 1 cm / 0.05 rad/s... of the fine model
    over 0.2 s of the same open-loop commands."""
    fine = BatchedHoverEnv(64, seed=4)
    fine.reset(4)
    sim = DiffQuadrotor()
    s = torch.from_numpy(fine.state.astype(np.float32))
    rpm = torch.from_numpy(fine.motor_rpm.astype(np.float32))
    for a in _open_loop(64, 20, seed=2):
        fine.step(a)
        s, rpm = sim.step(s, rpm, torch.from_numpy(fine.action_to_rpm(a).astype(np.float32)))
    diff = np.abs(s.numpy() - fine.state)
    assert diff[:, 0:3].max() < 0.01
    assert diff[:, 7:10].max() < 0.03
    assert diff[:, 10:13].max() < 0.1
    np.testing.assert_allclose(rpm.numpy(), fine.motor_rpm, rtol=1e-5)


def test_diff_sim_gradient_points_downhill() -> None:
    """A step along minus the gradient of the distance after 0.5 s lowers it."""
    fine = BatchedHoverEnv(16, seed=5)
    fine.reset(5)
    sim = DiffQuadrotor()
    s0 = torch.from_numpy(fine.state.astype(np.float32))
    target = torch.tensor([0.0, 0.0, 1.0])

    def final_distance(actions: Any) -> Any:
        s, rpm = s0, torch.full((16, 4), sim.params.hover_rpm)
        for a in actions:
            s, rpm = sim.step(s, rpm, sim.params.hover_rpm * (1 + 0.5 * a))
        return (s[:, 0:3] - target).norm(dim=1).mean()

    actions = torch.zeros((50, 16, 4), requires_grad=True)
    before = final_distance(actions)
    before.backward()
    with torch.no_grad():
        after = final_distance(-0.02 * actions.grad / actions.grad.abs().max())
    assert float(after) < float(before.detach()) - 1e-3


def test_features_match_the_env_observation() -> None:
    env = BatchedHoverEnv(32, seed=6)
    obs = env.reset(6)
    feats = hover_features(
        torch.from_numpy(env.state.astype(np.float32)),
        torch.tensor(env.target, dtype=torch.float32),
    )
    np.testing.assert_allclose(feats.numpy(), obs, atol=1e-6)


class _ScriptedDistances:
    """Stands in for a BatchedHoverEnv: 10 drones, 1 s control steps, 12 s episodes; drones
    7-9 leave the 10 cm ball at t = 5 s, the others stay at 5 cm."""

    n, episode_steps, success_steps, control_dt = 10, 12, 10, 1.0
    success_radius = 0.1
    target = np.zeros(3)
    state = np.zeros((10, 13))

    def reset(self, seed: int) -> np.ndarray:
        self.t = 0
        return np.zeros((self.n, 18), dtype=np.float32)

    def step(self, action: np.ndarray) -> tuple[Any, ...]:
        dist = np.full(self.n, 0.05)
        if self.t >= 5:
            dist[7:] = 0.5
        self.t += 1
        obs = np.zeros((self.n, 18), dtype=np.float32)
        info = {"distance": dist, "final_obs": obs}
        return obs, np.zeros(self.n), np.zeros(self.n, dtype=bool), None, info


def test_giving_up_early_reports_an_upper_bound_not_zero() -> None:
    """An eval that stops once the target is out of reach reports how many could still
    succeed (>= the true rate), never 0 % for a policy that mostly works."""
    from tether.policies.quad.batched_eval import evaluate_batched

    def act(obs: np.ndarray) -> np.ndarray:
        return np.zeros((obs.shape[0], 4))

    full = evaluate_batched(act, _ScriptedDistances())  # type: ignore[arg-type]
    assert full["success_rate"] == pytest.approx(0.7) and full["gave_up_at_s"] is None
    early = evaluate_batched(act, _ScriptedDistances(), give_up_below=0.8)  # type: ignore[arg-type]
    assert early["gave_up_at_s"] == pytest.approx(6.0)
    assert early["success_rate"] == pytest.approx(0.7)  # 7 drones could still succeed
    assert early["success_rate"] >= full["success_rate"]
    # a bar the policy meets: no early stop
    late = evaluate_batched(act, _ScriptedDistances(), give_up_below=0.6)  # type: ignore[arg-type]
    assert late["gave_up_at_s"] is None and late["success_rate"] == pytest.approx(0.7)
