"""Every arm backend honours the SimBackend contract for every registered arm (mujoco_playground
style: a robot folder or an engine's arm backend added to the registry adds its cases here).
Mobile bases and multirotors have their own contract tests (test_mobile_base.py,
test_quad_contract.py)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from arm_cases import (
    ARM_ENGINES,
    ARMS,
    ENGINE_MARKS,
    ENGINE_PACKAGES,
    arm,
    build_arm_sim,
    engine_arm_params,
)

from tether.core import registry
from tether.core.errors import ConfigError
from tether.core.protocols import SimBackend, Snapshotting
from tether.core.spec import CameraSpec
from tether.core.types import Observation, StepResult

CASES = engine_arm_params()


def _build(engine: str, robot: str, **cfg: object) -> SimBackend:
    task = registry.build("task", registry.config_class("task", "lift")())
    return build_arm_sim(engine, robot, task, **cfg)


@pytest.fixture(params=engine_arm_params(as_tuple=True))
def sim(request: pytest.FixtureRequest) -> Iterator[SimBackend]:
    backend = _build(*request.param)
    yield backend
    backend.close()


def test_every_arm_runs_on_every_engine() -> None:
    """The parametrization is not empty: the Panda and both engines at least."""
    assert "panda" in ARMS
    assert {"mujoco", "pybullet"} <= set(ARM_ENGINES)
    assert len(CASES) == len(ARMS) * len(ARM_ENGINES)


def _check_obs(obs: Observation, sim: SimBackend) -> None:
    n_state = len(sim.spec.state_names)
    assert isinstance(obs, Observation)
    assert obs["state"].shape == (n_state,) and obs["state"].dtype == np.float32
    assert obs["env_state"].shape == (7,) and obs["env_state"].dtype == np.float32
    assert obs["velocity"].shape == (n_state,) and obs["velocity"].dtype == np.float32
    assert obs["ee_pose"].shape == (7,) and obs["ee_pose"].dtype == np.float32
    for key, value in obs.items():
        assert np.all(np.isfinite(value)), key
    assert obs.stamp_ns == round(sim.sim_time * 1e9)


def test_is_a_sim_backend_of_its_robot(sim: SimBackend) -> None:
    assert isinstance(sim, SimBackend)
    desc = arm(sim.spec.name)
    # action: one target per arm joint + the gripper opening; state: arm + every finger
    assert sim.spec.kind == "arm"
    assert sim.spec.action.dim == desc.dof + 1
    assert sim.spec.state_names == (*desc.arm_joints, *desc.gripper.joints)


def test_reset_step_observe(sim: SimBackend) -> None:
    obs = sim.reset(seed=3)
    _check_obs(obs, sim)
    assert sim.sim_time == pytest.approx(0.0)
    action = obs["state"][: sim.spec.action.dim].copy()
    for k in range(1, 4):
        result = sim.step(action)
        assert isinstance(result, StepResult)
        assert isinstance(result.reward, float)
        assert isinstance(result.terminated, bool) and isinstance(result.truncated, bool)
        assert sim.sim_time == pytest.approx(k / sim.spec.control_hz, abs=1e-9)
        _check_obs(result.observation, sim)
    _check_obs(sim.observe(), sim)
    np.testing.assert_array_equal(sim.observe()["state"], result.observation["state"])
    with pytest.raises(ValueError, match="shape"):
        sim.step(np.zeros(sim.spec.action.dim + 1))


def test_reset_is_home_plus_bounded_noise(sim: SimBackend) -> None:
    """Arm joints within reset_noise of the description's home pose (and within limits),
    every finger at the gripper's home opening."""
    desc = arm(sim.spec.name)
    noise = sim.cfg.reset_noise  # type: ignore[attr-defined]
    for seed in range(5):
        state = sim.reset(seed=seed)["state"].astype(np.float64)
        q, fingers = state[: desc.dof], state[desc.dof :]
        assert np.all(np.abs(q - desc.home) <= noise + 1e-5), (seed, q - desc.home)
        assert np.all(q >= np.asarray(desc.lower) - 1e-5)
        assert np.all(q <= np.asarray(desc.upper) + 1e-5)
        np.testing.assert_allclose(fingers, desc.gripper.home, atol=1e-5)


def test_reset_is_deterministic(sim: SimBackend) -> None:
    a = sim.reset(seed=7)
    sim.step(a["state"][: sim.spec.action.dim])
    b = sim.reset(seed=7)
    np.testing.assert_allclose(a["env_state"], b["env_state"], atol=1e-6)
    np.testing.assert_allclose(a["state"], b["state"], atol=1e-6)
    c = sim.reset(seed=8)
    assert not np.allclose(a["env_state"], c["env_state"])


def test_each_joint_follows_its_own_target(sim: SimBackend) -> None:
    """The actuators are wired to the right joints in action order: every arm joint moves
    toward its own target, and the gripper element closes every finger."""
    desc = arm(sim.spec.name)
    obs = sim.reset(seed=0)
    start = obs["state"].astype(np.float64)
    target = start[: desc.dof + 1].copy()
    # 0.15 rad away from home, toward the side with more room
    room_up = np.asarray(desc.upper) - start[: desc.dof]
    room_down = start[: desc.dof] - np.asarray(desc.lower)
    target[: desc.dof] += np.where(room_up > room_down, 0.15, -0.15)
    target[desc.dof] = desc.gripper.lower
    for _ in range(round(1.0 * sim.spec.control_hz)):
        obs = sim.step(target).observation
    state = obs["state"].astype(np.float64)
    moved = (state[: desc.dof] - start[: desc.dof]) / (target[: desc.dof] - start[: desc.dof])
    # each joint covered most of its 0.15 rad step, and no joint moved the wrong way
    assert np.all(moved > 0.8), moved
    # every finger closed (it started at the gripper's home opening)
    fingers = state[desc.dof :]
    closed = desc.gripper.lower + 0.2 * (desc.gripper.home - desc.gripper.lower)
    assert np.all(fingers < closed), fingers


def test_render(sim: SimBackend) -> None:
    sim.reset(seed=0)
    assert sim.spec.cameras, "default config should expose at least one camera"
    for cam in sim.spec.cameras:
        img = sim.render(cam.name)
        assert img.shape == (cam.height, cam.width, 3)
        assert img.dtype == np.uint8
        assert img.std() > 5  # not a blank frame


def test_body_pose_round_trip(sim: SimBackend) -> None:
    sim.reset(seed=0)
    pos = np.array([0.45, -0.1, 0.025])
    yaw = 0.3
    quat = np.array([np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2)])
    sim.set_body_pose("cube", pos, quat)
    got_pos, got_quat = sim.body_pose("cube")
    np.testing.assert_allclose(got_pos, pos, atol=1e-6)
    # q and -q are the same rotation
    assert abs(abs(float(np.dot(got_quat, quat))) - 1.0) < 1e-6
    env = sim.observe()["env_state"]
    np.testing.assert_allclose(env[:3], pos, atol=1e-5)


def test_ee_pose_is_the_chains_tcp(sim: SimBackend) -> None:
    """At reset the TCP is where the description's chain puts it, pointing down-ish."""
    desc = arm(sim.spec.name)
    obs = sim.reset(seed=0)
    pos, quat = sim.ee_pose()
    assert pos.shape == (3,) and quat.shape == (4,)
    assert abs(np.linalg.norm(quat) - 1.0) < 1e-5
    assert 0.05 < pos[2] < 1.0  # above the table, within reach
    p_fk, _ = desc.kinematics.fk(obs["state"][: desc.dof].astype(np.float64))
    np.testing.assert_allclose(pos, p_fk, atol=5e-3)
    np.testing.assert_allclose(obs["ee_pose"][:3], pos, atol=1e-6)


def _moves(sim: SimBackend, start: np.ndarray, n: int, phase: float) -> list[np.ndarray]:
    """n joint targets sweeping every joint by a few centimetres' worth, the gripper
    closing half-way through."""
    dof = sim.spec.action.dim - 1
    out = []
    for k in range(n):
        a = start.astype(np.float64).copy()
        a[:dof] += 0.15 * np.sin(0.2 * k + phase + np.arange(dof))
        a[dof] = start[dof] if k < n // 2 else 0.0
        out.append(a)
    return out


def _replay(sim: SimBackend, actions: list[np.ndarray]) -> list[dict[str, np.ndarray]]:
    return [dict(sim.step(a).observation) for a in actions]


def test_restore_replays_a_snapshot_exactly(sim: SimBackend) -> None:
    """Snapshotting: from a restored snapshot the same actions give the same observations
    as after the snapshot was taken (bit for bit: physics, controls, the solver's warm
    start), sim_time goes back, a snapshot restores any number of times and into another
    episode."""
    assert isinstance(sim, Snapshotting)
    obs = sim.reset(seed=3)
    start = obs["state"][: sim.spec.action.dim]
    _replay(sim, _moves(sim, start, 20, 0.0))
    at = dict(sim.observe())
    t = sim.sim_time
    snap = sim.snapshot()
    later = _moves(sim, start, 30, 1.0)
    first = _replay(sim, later)
    # the state moved on: the arm's targets changed and the gripper closed
    assert not np.allclose(first[-1]["state"], at["state"], atol=1e-3)
    for again in range(2):
        if again:
            sim.reset(seed=11)  # another episode first: the snapshot still takes it back
            sim.set_body_pose("cube", np.array([0.4, 0.2, 0.1]), np.array([1.0, 0, 0, 0]))
        back = sim.restore(snap)
        assert sim.sim_time == pytest.approx(t, abs=1e-12)
        assert back.stamp_ns == round(t * 1e9)
        for key in at:
            np.testing.assert_array_equal(back[key], at[key], err_msg=key)
        for k, (o, p) in enumerate(zip(first, _replay(sim, later), strict=True)):
            for key in o:
                np.testing.assert_array_equal(p[key], o[key], err_msg=f"step {k} {key}")


@pytest.mark.parametrize(("engine", "robot"), CASES)
def test_control_rate(engine: str, robot: str) -> None:
    sim = _build(engine, robot, control_hz=500.0)
    try:
        obs = sim.reset(seed=1)
        for _ in range(5):
            sim.step(obs["state"][: sim.spec.action.dim])
        assert sim.sim_time == pytest.approx(5 / 500.0, abs=1e-9)
    finally:
        sim.close()


@pytest.mark.parametrize(("engine", "robot"), CASES)
def test_instances_coexist(engine: str, robot: str) -> None:
    """Two instances in one process keep separate state and each renders."""
    a, b = _build(engine, robot), _build(engine, robot)
    try:
        oa, ob = a.reset(seed=1), b.reset(seed=2)
        assert not np.allclose(oa["env_state"], ob["env_state"])
        a.step(oa["state"][: a.spec.action.dim])
        assert a.sim_time > 0 and b.sim_time == pytest.approx(0.0)
        for sim in (a, b):
            cam = sim.spec.cameras[0]
            assert sim.render(cam.name).shape == (cam.height, cam.width, 3)
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("engine", ["mujoco", "pybullet"])
def test_a_snapshot_restores_the_tasks_episode(engine: str) -> None:
    """The multi-task scene's episode (its sub-task and instruction) goes back with the
    physics: the restored observation carries the snapshot's instruction."""
    task = registry.build("task", registry.config_class("task", "multitask")())
    sim = build_arm_sim(engine, "panda", task)
    try:
        obs = sim.reset(seed=0)
        subtask = task.subtask  # type: ignore[attr-defined]
        snap = sim.snapshot()  # type: ignore[attr-defined]
        later = next(
            o
            for o in (sim.reset(seed=s) for s in range(1, 30))
            if task.subtask != subtask  # type: ignore[attr-defined]
        )
        assert later.instruction != obs.instruction
        back = sim.restore(snap)  # type: ignore[attr-defined]
        assert back.instruction == obs.instruction
        assert task.subtask == subtask  # type: ignore[attr-defined]
        np.testing.assert_array_equal(back["env_state"], obs["env_state"])
    finally:
        sim.close()


@pytest.mark.parametrize(("engine", "robot"), CASES)
def test_a_snapshot_belongs_to_its_backend(engine: str, robot: str) -> None:
    a, b = _build(engine, robot), _build(engine, robot)
    try:
        a.reset(seed=1)
        b.reset(seed=2)
        snap = a.snapshot()  # type: ignore[attr-defined]
        with pytest.raises(ValueError, match="not taken by this backend"):
            b.restore(snap)  # type: ignore[attr-defined]
    finally:
        a.close()
        b.close()


# ---- a description that does not match its assets: one ConfigError line naming both ------


def _broken(engine: str, robot: str, what: str) -> tuple[object, str]:
    """``robot``'s description with one name its assets lack; ``what``: a finger joint, the
    TCP (site / link), or a drive part (MuJoCo: an actuator; PyBullet: a grip link)."""
    desc = arm(robot)
    if what == "joint":
        g = desc.gripper.model_copy(update={"joints": (desc.gripper.joints[0], "no_such_joint")})
        return desc.model_copy(update={"gripper": g}), "no_such_joint"
    if what == "tcp":
        mj = desc.mujoco.model_copy(update={"tcp_site": "no_such_tcp"})
        pb = desc.pybullet.model_copy(update={"tcp_link": "no_such_tcp"})
        return desc.model_copy(update={"mujoco": mj, "pybullet": pb}), "no_such_tcp"
    if engine == "pybullet":
        pb = desc.pybullet.model_copy(update={"grip_links": ("no_such_part",)})
        return desc.model_copy(update={"pybullet": pb}), "no_such_part"
    mj = desc.mujoco.model_copy(update={"arm_actuators": ("no_such_part",) * desc.dof})
    return desc.model_copy(update={"mujoco": mj}), "no_such_part"


@pytest.mark.parametrize(("engine", "robot"), CASES)
@pytest.mark.parametrize("what", ["joint", "tcp", "part"])
def test_a_missing_name_is_one_config_error_line(engine: str, robot: str, what: str) -> None:
    desc, missing = _broken(engine, robot, what)
    with pytest.raises(ConfigError) as err:
        _build(engine, desc)  # type: ignore[arg-type]
    msg = str(err.value)
    assert "\n" not in msg and f"'{robot}'" in msg and f"'{missing}'" in msg, msg


@pytest.mark.parametrize(("engine", "robot"), CASES)
def test_an_unknown_camera_is_one_config_error_line(engine: str, robot: str) -> None:
    with pytest.raises(ConfigError, match=f"robot '{robot}'.*camera 'no_such_cam'"):
        _build(engine, robot, cameras=[CameraSpec(name="no_such_cam", width=8, height=8)])


@pytest.mark.parametrize(
    "engine", [pytest.param(e, marks=ENGINE_MARKS.get(e, [])) for e in ARM_ENGINES]
)
def test_an_arm_backend_refuses_other_kinds(engine: str) -> None:
    """Before anything of the engine loads: an engine that cannot run here (Isaac Sim) still
    refuses a mobile base in the same sentence."""
    if engine in ENGINE_PACKAGES:
        pytest.importorskip(ENGINE_PACKAGES[engine])
    backend = registry.load("backend", f"{engine}/arm")
    with pytest.raises(ConfigError, match="simulates arms; robot 'husky' is a mobile_base"):
        backend(registry.config_class("sim", engine)(), robot=registry.load("robot", "husky"))
