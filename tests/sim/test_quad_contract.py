"""Both quadrotor backends (PyBullet, MuJoCo) honour the SimBackend contract for every
registered multirotor, read the robot's description (never its name), apply the three action
modes, reject bad actions and agree with the numpy dynamics."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from tether.core import registry
from tether.core.config import load_config
from tether.core.errors import ConfigError, InvalidCommand
from tether.core.protocols import SimBackend
from tether.core.robot import RobotDescription
from tether.core.robot_kinds import MultirotorDescription
from tether.core.types import Observation, StepResult
from tether.robots.crazyflie import robot as cf
from tether.robots.crazyflie.robot import CRAZYFLIE
from tether.sim.quadrotor.batched_env import BatchedHoverEnv
from tether.sim.quadrotor.dynamics import QuadrotorDynamics, hover_state, quat_from_euler
from tether.sim.quadrotor.world import split_drones

ENGINES = [
    pytest.param("pybullet", marks=pytest.mark.pybullet),
    pytest.param("mujoco", marks=pytest.mark.mujoco),
]
HOVER = CRAZYFLIE.hover_rpm
# open-loop agreement of the engines with the numpy model after 0.5 s of a random rpm
# sequence from a tilted, moving, spinning start: the engines integrate with semi-implicit
# Euler, numpy with RK4, both at 2 ms (measured: ~0.7 mm, ~2 mm/s, ~1e-3 rad/s)
AGREE_POS_M = 3e-3
AGREE_VEL = 6e-3
# every registered multirotor (a robot folder of kind quadcopter adds its cases here)
DRONES = [r for r in registry.available("robot") if registry.load("robot", r).kind == "quadcopter"]


def build(
    engine: str,
    task: str | None = None,
    robot: str | RobotDescription = "crazyflie",
    **quad: Any,
) -> Any:
    pytest.importorskip(engine)
    # the engine's quadcopter config: its own fields plus quadrotor:
    cfg = registry.config_class("backend", f"{engine}/quadcopter")(cameras=[], quadrotor=quad)
    task_obj = registry.build("task", registry.config_class("task", task)()) if task else None
    return registry.build("sim", cfg, robot=robot, task=task_obj)


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(
    params=[
        pytest.param((e.values[0], d), marks=e.marks, id=f"{d}-{e.values[0]}")
        for d in DRONES
        for e in ENGINES
    ]
)
def sim(request: pytest.FixtureRequest) -> Iterator[Any]:
    engine, robot = request.param
    backend = build(engine, "hover", robot)
    yield backend
    backend.close()


def test_every_multirotor_runs_on_every_engine() -> None:
    assert "crazyflie" in DRONES
    assert all(isinstance(registry.load("robot", d), MultirotorDescription) for d in DRONES)


def _check_obs(obs: Observation, sim: Any, n: int = 1) -> None:
    assert isinstance(obs, Observation)
    for key, dim in (("state", 13), ("env_state", 7), ("rotor_rpm", 4)):
        assert obs[key].shape == (dim * n,) and obs[key].dtype == np.float32, key
        assert np.all(np.isfinite(obs[key])), key
    assert obs.stamp_ns == round(sim.sim_time * 1e9)


def test_is_a_sim_backend(sim: Any) -> None:
    assert isinstance(sim, SimBackend)
    desc = registry.load("robot", sim.spec.name)
    assert sim.spec == desc.spec(sim.cfg.control_hz)
    assert sim.spec.kind == "quadcopter" and sim.params == desc.params
    assert sim.spec.action.shape == (4,) and len(sim.spec.state_names) == 13


def test_backends_read_the_description_not_the_name(engine: str) -> None:
    """A heavier Crazyflie under another name flies with its own mass (hover rpm); a scene
    without the drone body it names is one config-error line."""
    heavy = CRAZYFLIE.model_copy(update={"mass": 0.035})
    twin = cf.ROBOT.model_copy(update={"name": "cf_heavy", "params": heavy})
    sim = build(engine, "hover", twin)
    try:
        assert sim.params.mass == 0.035 and sim.robot.name == "cf_heavy"
        sim.reset(seed=0)
        assert sim.motor_rpm[0, 0] == pytest.approx(heavy.hover_rpm)
        assert heavy.hover_rpm > HOVER
    finally:
        sim.close()
    if engine == "mujoco":
        assets = cf.ROBOT.mujoco.model_copy(update={"body": "no_such_body"})
        broken = cf.ROBOT.model_copy(update={"name": "cf_broken", "mujoco": assets})
    else:
        assets = cf.ROBOT.pybullet.model_copy(update={"urdf": "assets/missing.urdf"})
        broken = cf.ROBOT.model_copy(update={"name": "cf_broken", "pybullet": assets})
    with pytest.raises(ConfigError) as err:
        build(engine, "hover", broken)
    msg = str(err.value)
    missing = "'no_such_body'" if engine == "mujoco" else "missing.urdf"
    assert "\n" not in msg and "'cf_broken'" in msg and missing in msg, msg
    backend = registry.load("backend", f"{engine}/quadcopter")
    cfg = registry.config_class("backend", f"{engine}/quadcopter")()
    with pytest.raises(ConfigError, match="simulates quadcopters; robot 'husky' is a mobile_base"):
        backend(cfg, robot=registry.load("robot", "husky"))


def test_quadrotor_settings_belong_to_drone_experiments(repo) -> None:  # type: ignore[no-untyped-def]
    """``sim.quadrotor`` validates only where the robot is a multirotor: on an arm or a base
    experiment it is a one-line unknown-field error."""
    cfg = load_config(
        repo / "configs/experiments/quad_pid_hover.yaml", ["sim.quadrotor.num_drones=3"]
    )
    assert cfg.sim.quadrotor.num_drones == 3  # type: ignore[union-attr]
    for name in ("panda_lift_expert", "husky_go_to_goal"):
        with pytest.raises(ConfigError, match=r"sim\.quadrotor: unknown field") as err:
            load_config(repo / f"configs/experiments/{name}.yaml", ["sim.quadrotor.num_drones=2"])
        assert "\n" not in str(err.value)


def test_reset_step_observe(sim: Any) -> None:
    obs = sim.reset(seed=3)
    _check_obs(obs, sim)
    assert sim.sim_time == 0.0
    for k in range(1, 4):
        result = sim.step(np.full(4, HOVER))
        assert isinstance(result, StepResult) and isinstance(result.reward, float)
        assert isinstance(result.terminated, bool) and isinstance(result.truncated, bool)
        assert sim.sim_time == pytest.approx(k / sim.spec.control_hz, abs=1e-12)
        _check_obs(result.observation, sim)
    np.testing.assert_array_equal(sim.observe()["state"], result.observation["state"])


def test_hover_reset_matches_batched_env(sim: Any) -> None:
    """The hover task draws BatchedHoverEnv's initial state for the same seed."""
    for seed in (0, 11):
        obs = sim.reset(seed=seed)
        env = BatchedHoverEnv(1, seed=seed)
        env.reset()
        np.testing.assert_allclose(obs["state"], env.state[0], atol=1e-6)
        np.testing.assert_allclose(obs["env_state"][:3], env.target, atol=1e-7)
    assert not np.allclose(sim.reset(seed=1)["state"], sim.reset(seed=2)["state"])


def test_reset_is_deterministic(sim: Any) -> None:
    a = sim.reset(seed=7)
    for _ in range(10):
        last = sim.step(np.full(4, HOVER * 1.1)).observation
    b = sim.reset(seed=7)
    np.testing.assert_array_equal(a["state"], b["state"])
    for _ in range(10):
        again = sim.step(np.full(4, HOVER * 1.1)).observation
    np.testing.assert_allclose(again["state"], last["state"], atol=1e-9)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_action_rejected(sim: Any, bad: float) -> None:
    sim.reset(seed=0)
    before = sim.observe()["state"].copy()
    with pytest.raises(InvalidCommand):
        sim.step(np.array([HOVER, bad, HOVER, HOVER]))
    with pytest.raises(InvalidCommand):
        sim.step(np.full(5, HOVER))
    np.testing.assert_array_equal(sim.observe()["state"], before)
    assert sim.sim_time == 0.0


def test_out_of_range_action_clamped(engine: str) -> None:
    """A 10x max-rpm command flies exactly like the max: clamped before the engine."""
    a, b = build(engine, motor_lag=False), build(engine, motor_lag=False)
    try:
        a.reset(0)
        b.reset(0)
        for _ in range(5):
            sa = a.step(np.full(4, 10 * CRAZYFLIE.max_rpm)).observation
            sb = b.step(np.full(4, CRAZYFLIE.max_rpm)).observation
        np.testing.assert_array_equal(sa["state"], sb["state"])
        np.testing.assert_allclose(sa["rotor_rpm"], CRAZYFLIE.max_rpm, rtol=1e-6)
        sneg = a.step(np.full(4, -5000.0)).observation
        np.testing.assert_array_equal(sneg["rotor_rpm"], 0.0)
    finally:
        a.close()
        b.close()


def test_agrees_with_numpy_dynamics(engine: str) -> None:
    """Open-loop rpm sequence: engine and numpy model agree (tolerances above)."""
    sim = build(engine)
    try:
        sim.reset(0)
        rng = np.random.default_rng(0)
        s = hover_state(1)
        s[0, 3:7] = quat_from_euler(np.array([0.2]), np.array([-0.1]), np.array([0.5]))[0]
        s[0, 7:10] = (0.3, -0.2, 0.1)
        s[0, 10:13] = (0.5, -0.3, 0.8)
        sim.set_drone_states(s)
        dyn = QuadrotorDynamics(drag=True, ground_effect=True)
        ref, rpm = s.copy(), np.full((1, 4), HOVER)
        seq = HOVER * (1.0 + 0.05 * rng.uniform(-1.0, 1.0, (50, 4)))
        for cmd in seq:
            sim.step(cmd)
            for _ in range(sim.substeps):
                ref, rpm = dyn.step(ref, rpm, cmd[None], sim.physics_dt)
        got = sim.drone_states()[0]
        assert np.linalg.norm(got[0:3] - ref[0, 0:3]) < AGREE_POS_M
        assert np.linalg.norm(got[7:10] - ref[0, 7:10]) < AGREE_VEL
        assert np.linalg.norm(got[10:13] - ref[0, 10:13]) < AGREE_VEL
        assert abs(abs(float(got[3:7] @ ref[0, 3:7])) - 1.0) < 1e-5
        # and the drone did move: the test is not comparing two resting drones
        assert np.linalg.norm(got[0:3] - s[0, 0:3]) > 0.1
    finally:
        sim.close()


def test_thrust_rates_mode(engine: str) -> None:
    """Hover thrust + a 1 rad/s roll rate: the backend's rate loop follows it."""
    sim = build(engine, action_mode="thrust_rates")
    try:
        assert sim.spec.action.mode == "thrust_rates"
        sim.reset(0)
        for _ in range(30):
            obs = sim.step(np.array([CRAZYFLIE.weight, 1.0, 0.0, 0.0])).observation
        np.testing.assert_allclose(obs["state"][10:13], [1.0, 0.0, 0.0], atol=0.05)
    finally:
        sim.close()


def test_velocity_setpoint_mode(engine: str) -> None:
    sim = build(engine, action_mode="velocity_setpoint")
    try:
        sim.reset(0)
        for _ in range(250):  # 2.5 s
            obs = sim.step(np.array([0.5, 0.0, 0.2, 0.5])).observation
        np.testing.assert_allclose(obs["state"][7:10], [0.5, 0.0, 0.2], atol=0.03)
        assert obs["state"][12] == pytest.approx(0.5, abs=0.05)
    finally:
        sim.close()


def test_floor_stops_a_falling_drone(engine: str) -> None:
    sim = build(engine, "hover")
    try:
        sim.reset(0)
        for _ in range(100):  # 1 s with the rotors off
            res = sim.step(np.zeros(4))
        z = res.observation["state"][2]
        assert 0.0 < z < 0.03  # resting on the floor, not through it
        assert res.info["failed"] and res.truncated and not res.terminated
    finally:
        sim.close()


def test_several_drones(engine: str) -> None:
    sim = build(engine, "hover", num_drones=3, spacing=0.8)
    try:
        spec = sim.spec
        assert spec.action.shape == (12,) and len(spec.state_names) == 39
        assert spec.action.names[4] == "cf1/rotor0" and spec.state_names[13] == "cf1/x"
        obs = sim.reset(seed=4)
        _check_obs(obs, sim, 3)
        targets = obs["env_state"].reshape(3, 7)[:, :3]
        np.testing.assert_allclose(targets[:, 1], [-0.8, 0.0, 0.8], atol=1e-6)
        # only drone 1 gets its rotors cut: only it falls
        action = np.full(12, HOVER)
        action[4:8] = 0.0
        sim.set_drone_states(
            np.tile(hover_state(1), (3, 1))
            + np.c_[np.zeros((3, 1)), targets[:, 1:2], np.zeros((3, 11))]
        )
        for _ in range(20):
            obs = sim.step(action).observation
        parts = split_drones(obs, 3)
        assert [p["state"].shape for p in parts] == [(13,)] * 3
        z = [float(p["state"][2]) for p in parts]
        assert z[1] < 0.9 and abs(z[0] - 1.0) < 0.01 and abs(z[2] - 1.0) < 0.01
        pos, _ = sim.body_pose("cf2")
        np.testing.assert_allclose(pos, parts[2]["state"][:3], atol=1e-6)
    finally:
        sim.close()


def test_body_pose_round_trip(sim: Any) -> None:
    sim.reset(seed=0)
    yaw = 0.3
    quat = np.array([np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2)])
    sim.set_body_pose("target", np.array([0.4, -0.2, 1.3]), quat)
    pos, q = sim.body_pose("target")
    np.testing.assert_allclose(pos, [0.4, -0.2, 1.3], atol=1e-6)
    assert abs(abs(float(q @ quat)) - 1.0) < 1e-6
    np.testing.assert_allclose(sim.observe()["env_state"][:3], [0.4, -0.2, 1.3], atol=1e-6)
    sim.set_body_pose("cf0", np.array([0.1, 0.2, 0.7]), quat)
    state = sim.observe()["state"]
    np.testing.assert_allclose(state[0:3], [0.1, 0.2, 0.7], atol=1e-6)
    np.testing.assert_allclose(state[7:13], 0.0, atol=1e-9)
    np.testing.assert_allclose(sim.ee_pose()[0], [0.1, 0.2, 0.7], atol=1e-6)


def test_render(engine: str) -> None:
    pytest.importorskip(engine)
    # default camera "front", 96x96
    cfg = registry.config_class("backend", f"{engine}/quadcopter")()
    sim = registry.build("sim", cfg, robot="crazyflie", task=None)
    try:
        sim.reset(0)
        img = sim.render("front")
        assert img.shape == (96, 96, 3) and img.dtype == np.uint8
        assert img.std() > 5  # a scene, not a blank frame
    finally:
        sim.close()


def test_instances_coexist(engine: str) -> None:
    a, b = build(engine, "hover"), build(engine, "hover")
    try:
        oa, ob = a.reset(seed=1), b.reset(seed=2)
        assert not np.allclose(oa["state"], ob["state"])
        a.step(np.full(4, HOVER))
        assert a.sim_time > 0 and b.sim_time == 0.0
        np.testing.assert_array_equal(b.observe()["state"], ob["state"])
    finally:
        a.close()
        b.close()
