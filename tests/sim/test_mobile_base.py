"""Mobile bases on both engines: the SimBackend contract for every registered base on every
engine, backends built from the robot description (never its name), and for the Husky
twist tracking, wheel odometry, the lidar, and the same path on PyBullet and MuJoCo for the
same twists."""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import pytest

from tether.core import registry
from tether.core.errors import ConfigError
from tether.core.protocols import SimBackend
from tether.core.robot import RobotDescription
from tether.core.robot_kinds import MobileBaseDescription
from tether.core.types import StepResult
from tether.robots.husky import robot as husky
from tether.sim import base_scene
from tether.sim.robots.diff_drive import wrap_angle, yaw_of

ENGINES = [
    pytest.param("pybullet", marks=pytest.mark.pybullet),
    pytest.param("mujoco", marks=pytest.mark.mujoco),
]
HZ = 20.0
# every registered mobile base (a robot folder of kind mobile_base adds its cases here)
BASES = [r for r in registry.available("robot") if registry.load("robot", r).kind == "mobile_base"]


def build(
    engine: str,
    task_type: str | None = "go_to_goal",
    robot: str | RobotDescription = "husky",
    **sim: object,
) -> SimBackend:
    pytest.importorskip(engine)
    fields: dict[str, object] = {"control_hz": HZ, "cameras": [], "reset_noise": 0.0}
    fields.update(sim)
    # the engine's mobile-base config: its own fields plus mobile_base:
    cfg = registry.config_class("backend", f"{engine}/mobile_base")(**fields)
    task = None
    if task_type is not None:
        task = registry.build("task", registry.config_class("task", task_type)())
    return registry.build("sim", cfg, robot=robot, task=task)


@pytest.fixture(params=ENGINES)
def sim(request: pytest.FixtureRequest) -> Iterator[SimBackend]:
    backend = build(request.param)
    yield backend
    backend.close()


@pytest.fixture(
    params=[
        pytest.param((e.values[0], b), marks=e.marks, id=f"{b}-{e.values[0]}")
        for b in BASES
        for e in ENGINES
    ]
)
def base_sim(request: pytest.FixtureRequest) -> Iterator[SimBackend]:
    engine, robot = request.param
    backend = build(engine, "obstacle_course", robot)
    yield backend
    backend.close()


def drive(sim: SimBackend, twist: tuple[float, float], seconds: float) -> StepResult:
    result = None
    for _ in range(round(seconds * HZ)):
        result = sim.step(np.array(twist, dtype=np.float32))
    assert result is not None
    return result


def true_pose(sim: SimBackend) -> tuple[float, float, float]:
    pos, quat = sim.body_pose("base_footprint")
    return float(pos[0]), float(pos[1]), yaw_of(quat)


def test_every_base_runs_on_every_engine() -> None:
    assert "husky" in BASES
    assert all(isinstance(registry.load("robot", b), MobileBaseDescription) for b in BASES)


def test_contract(base_sim: SimBackend) -> None:
    sim = base_sim
    desc = registry.load("robot", sim.spec.name)
    assert isinstance(sim, SimBackend)
    assert sim.spec == desc.spec(HZ)
    assert sim.spec.kind == "mobile_base" and sim.spec.action.mode == "twist"
    obs = sim.reset(seed=3)
    n_beams = sim.cfg.mobile_base.lidar.n_beams  # type: ignore[attr-defined]
    n_state = 5 + 2 * len(desc.wheel_joints)
    n_env = 7 * (1 + base_scene_obstacles(sim))
    shapes = {"state": (n_state,), "scan": (n_beams,), "base_pose": (7,), "env_state": (n_env,)}
    for _ in range(2):
        for key, shape in shapes.items():
            assert obs[key].shape == shape and obs[key].dtype == np.float32, key
            assert np.all(np.isfinite(obs[key])), key
        assert len(sim.spec.state_names) == n_state
        assert obs.stamp_ns == round(sim.sim_time * 1e9)
        obs = sim.step(np.array([0.5, 0.2])).observation
    assert sim.sim_time == pytest.approx(2 / HZ)
    # the goal marker is env_state's first object, on the floor
    np.testing.assert_allclose(obs["env_state"][:3], sim.body_pose("goal")[0], atol=1e-5)
    with pytest.raises(ValueError, match="shape"):
        sim.step(np.zeros(3))


def base_scene_obstacles(sim: SimBackend) -> int:
    return sum(1 for o in sim.task.objects if o.startswith("obstacle_"))  # type: ignore[attr-defined]


def test_husky_spec_is_its_description_spec() -> None:
    """The Husky's RobotSpec, pinned: the description builds what husky_spec always gave."""
    spec = husky.ROBOT.spec(20.0)
    assert spec == husky.husky_spec(20.0)
    assert spec.name == "husky" and spec.kind == "mobile_base" and spec.control_hz == 20.0
    assert spec.action.names == ("linear_x", "angular_z")
    assert spec.action.low == (-1.0, -2.0) and spec.action.high == (1.0, 2.0)
    assert spec.state_names[:5] == ("odom_x", "odom_y", "odom_yaw", "odom_vx", "odom_wz")
    assert spec.state_names[5] == "front_left_wheel_position"
    assert spec.state_names[-1] == "rear_right_wheel_velocity" and len(spec.state_names) == 13


@pytest.mark.parametrize("engine", ENGINES)
def test_backends_read_the_description_not_the_name(engine: str) -> None:
    """A base under another name, with its own lidar mount and camera, runs: nothing looks
    up 'husky'. A description without a wheel the model has is one config-error line."""
    from tether.core.robot_kinds import BaseCamera
    from tether.core.spec import CameraSpec

    twin = husky.ROBOT.model_copy(
        update={
            "name": "husky_twin",
            "lidar_xyz": (0.0, 0.0, 0.3),
            "cameras": {"nose": BaseCamera(eye=(0.6, 0.0, 0.3), target=(2.0, 0.0, 0.3))},
        }
    )
    sim = build(engine, robot=twin, cameras=[CameraSpec(name="nose", width=16, height=16)])
    try:
        assert sim.spec.name == "husky_twin"
        assert sim.render("nose").shape == (16, 16, 3)
        assert sim.step(np.array([0.5, 0.0])).observation["state"].shape == (13,)
    finally:
        sim.close()
    joints = ("front_left_wheel", "middle_wheel", "rear_left_wheel", "rear_right_wheel")
    broken = husky.ROBOT.model_copy(update={"name": "three_wheels", "wheel_joints": joints})
    with pytest.raises(ConfigError) as err:
        build(engine, robot=broken)
    msg = str(err.value)
    assert "\n" not in msg and "'three_wheels'" in msg and "'middle_wheel'" in msg, msg
    backend = registry.load("backend", f"{engine}/mobile_base")
    cfg = registry.config_class("backend", f"{engine}/mobile_base")()
    with pytest.raises(ConfigError, match="simulates mobile bases; robot 'panda' is a arm"):
        backend(cfg, robot=registry.load("robot", "panda"))


def test_reset_is_deterministic(sim: SimBackend) -> None:
    a = sim.reset(seed=7)
    drive(sim, (1.0, 0.5), 1.0)
    b = sim.reset(seed=7)
    np.testing.assert_allclose(a["env_state"], b["env_state"], atol=1e-6)
    np.testing.assert_allclose(a["state"], b["state"], atol=1e-4)
    np.testing.assert_allclose(a["base_pose"], b["base_pose"], atol=1e-4)
    assert sim.sim_time == 0.0
    assert not np.allclose(a["env_state"], sim.reset(seed=8)["env_state"])


def test_straight_line_and_odometry(sim: SimBackend) -> None:
    """1 m/s for 3 s, with the 3 m/s^2 ramp: 3 - 1/6 m = 2.83 m; odometry agrees."""
    sim.reset(seed=0)
    obs = drive(sim, (1.0, 0.0), 3.0).observation
    x, y, yaw = true_pose(sim)
    assert x == pytest.approx(3.0 - 1.0 / 6.0, abs=0.1)
    assert abs(y) < 0.1 and abs(yaw) < 0.05
    odom = obs["state"]
    assert odom[3] == pytest.approx(1.0, abs=0.02)  # odom forward velocity
    assert np.hypot(odom[0] - x, odom[1] - y) < 0.05
    # wheel speeds match the twist: v / r for every wheel
    np.testing.assert_allclose(odom[9:13], 1.0 / husky.WHEEL_RADIUS, rtol=0.03)


def test_turn_in_place_tracks_the_commanded_rate(sim: SimBackend) -> None:
    """The engine's calibrated wheel_separation_multiplier gives the commanded yaw rate on
    average (within 20 %), and the odometry yaw integrates the command."""
    sim.reset(seed=0)
    total, prev = 0.0, 0.0
    for _ in range(round(4.0 * HZ)):
        obs = sim.step(np.array([0.0, 1.0])).observation
        yaw = true_pose(sim)[2]
        total += wrap_angle(yaw - prev)
        prev = yaw
    commanded = 4.0 - 1.0 / 12.0  # 1 rad/s after the 6 rad/s^2 ramp
    assert total == pytest.approx(commanded, rel=0.2)
    assert obs["state"][4] == pytest.approx(1.0, abs=0.05)


def test_odometry_drifts_from_ground_truth(sim: SimBackend) -> None:
    """Encoders cannot see skid-steer slip: after turns the odometry is off the true pose
    (a real base's behaviour), by centimetres to decimetres, not metres."""
    sim.reset(seed=0)
    drive(sim, (0.8, 0.0), 1.0)
    drive(sim, (0.0, 1.5), 1.5)
    obs = drive(sim, (0.6, -0.8), 2.0).observation
    x, y, yaw = true_pose(sim)
    err = math.hypot(float(obs["state"][0]) - x, float(obs["state"][1]) - y)
    yaw_err = abs(wrap_angle(float(obs["state"][2]) - yaw))
    assert err + yaw_err > 0.01
    assert err < 1.0 and yaw_err < 0.6


@pytest.mark.parametrize("engine", ENGINES)
def test_imu_heading_keeps_the_odometry_on_the_true_pose(engine: str) -> None:
    """``odometry_heading: imu``: the same turns as above leave the odometry's heading within
    the gyro's bias and noise of the truth (0.002 rad/s, 0.01 rad/s per period over 4.5 s:
    about 0.01 rad), and its position nearer the truth than wheel odometry's."""
    errors = {}
    for heading in ("wheels", "imu"):
        sim = build(engine, mobile_base={"odometry_heading": heading})
        try:
            sim.reset(seed=0)
            drive(sim, (0.8, 0.0), 1.0)
            drive(sim, (0.0, 1.5), 1.5)
            obs = drive(sim, (0.6, -0.8), 2.0).observation
            x, y, yaw = true_pose(sim)
            errors[heading] = (
                math.hypot(float(obs["state"][0]) - x, float(obs["state"][1]) - y),
                abs(wrap_angle(float(obs["state"][2]) - yaw)),
            )
        finally:
            sim.close()
    assert errors["imu"][1] < 0.03
    assert errors["imu"][1] < errors["wheels"][1]
    assert errors["imu"][0] <= errors["wheels"][0] + 0.01


def test_lidar_sees_an_obstacle(engine_task_sim: SimBackend) -> None:
    sim = engine_task_sim
    sim.reset(seed=0)
    x, y, _ = true_pose(sim)
    sim.set_body_pose("obstacle_0", np.array([x + 3.0, y, 0.0]), np.array([1.0, 0, 0, 0]))
    for name in ("obstacle_1", "obstacle_2", "obstacle_3", "obstacle_4", "obstacle_5"):
        sim.set_body_pose(name, np.array([*base_scene.PARKING, 0.0]), np.array([1.0, 0, 0, 0]))
    sim.set_body_pose("goal", np.array([x, y + 2.0, 0.0]), np.array([1.0, 0, 0, 0]))
    scan = sim.observe()["scan"]
    lidar = sim.cfg.mobile_base.lidar  # type: ignore[attr-defined]
    angles = np.linspace(
        -math.radians(lidar.fov_deg) / 2, math.radians(lidar.fov_deg) / 2, lidar.n_beams
    )
    ahead = np.abs(angles) < 1e-6
    assert ahead.sum() == 1
    # the cylinder's surface is 3 - 0.25 m from the lidar (it sits over the base centre)
    assert scan[ahead][0] == pytest.approx(3.0 - base_scene.OBSTACLE_RADIUS, abs=0.03)
    near = np.abs(angles) < 0.15
    assert scan[near].min() < 2.9
    # sideways nothing is in range (the goal marker is visual only): range_max
    side = np.abs(np.abs(angles) - math.pi / 2) < 0.1
    np.testing.assert_allclose(scan[side], lidar.range_max)


@pytest.fixture(params=ENGINES)
def engine_task_sim(request: pytest.FixtureRequest) -> Iterator[SimBackend]:
    from tether.sim.config_mobile_base import LidarConfig, MobileBaseConfig

    # an odd beam count puts a beam straight ahead
    mb = MobileBaseConfig(lidar=LidarConfig(n_beams=65))
    backend = build(request.param, "obstacle_course", mobile_base=mb)
    yield backend
    backend.close()


@pytest.mark.parametrize("engine", ENGINES)
def test_lidar_noise_and_limits(engine: str) -> None:
    from tether.sim.config_mobile_base import LidarConfig, MobileBaseConfig

    lidar = LidarConfig(n_beams=181, fov_deg=180, range_max=4.0, noise_std=0.05)
    sim = build(engine, "obstacle_course", mobile_base=MobileBaseConfig(lidar=lidar))
    try:
        sim.reset(seed=0)
        sim.set_body_pose("obstacle_0", np.array([2.0, 0.0, 0.0]), np.array([1.0, 0, 0, 0]))
        a, b = sim.observe()["scan"], sim.observe()["scan"]
        assert a.shape == (181,)
        hit = a < lidar.range_max
        assert 0 < hit.sum() < 181
        assert np.abs(a[hit] - b[hit]).max() > 0  # fresh noise every scan
        assert 0.02 < np.std(a[hit] - b[hit]) / math.sqrt(2) < 0.1
        assert a.min() >= lidar.range_min and a.max() <= lidar.range_max
    finally:
        sim.close()


@pytest.mark.parametrize("engine", ENGINES)
def test_render_and_bad_configs(engine: str) -> None:
    from tether.core.spec import CameraSpec

    cam = CameraSpec(name="chase", width=48, height=32)
    sim = build(engine, cameras=[cam])
    try:
        img = sim.render("chase")
        assert img.shape == (32, 48, 3) and img.dtype == np.uint8
        assert img.std() > 0  # not a blank frame
    finally:
        sim.close()
    with pytest.raises(ConfigError, match="no camera 'wrist'"):
        build(engine, cameras=[CameraSpec(name="wrist", width=8, height=8)])
    with pytest.raises(ConfigError, match="cube"):
        build(engine, "lift")


@pytest.mark.parametrize("engine", ENGINES)
def test_instances_coexist(engine: str) -> None:
    a, b = build(engine), build(engine)
    try:
        a.reset(seed=1)
        b.reset(seed=1)
        drive(a, (1.0, 0.0), 1.0)
        assert true_pose(a)[0] > 0.5 and abs(true_pose(b)[0]) < 0.01
        assert b.sim_time == 0.0
    finally:
        a.close()
        b.close()


# the same twist sequence on both engines: (twist, seconds); arcs, no pivot turns (a pivot's
# sideways drift is the least repeatable part of skid steering)
SEQUENCE = [((0.8, 0.0), 2.0), ((0.6, 0.5), 2.0), ((0.4, 1.0), 1.5), ((0.7, -0.4), 2.5)]


def test_engines_drive_a_similar_path() -> None:
    """Tolerance: after each segment the two positions differ by at most 15 % of the
    distance driven so far (plus 0.1 m) and the headings by at most 0.3 rad."""
    pytest.importorskip("pybullet")
    pytest.importorskip("mujoco")
    paths = {}
    for engine in ("pybullet", "mujoco"):
        sim = build(engine, None)
        try:
            sim.reset(seed=0)
            points = []
            for twist, seconds in SEQUENCE:
                drive(sim, twist, seconds)
                points.append(true_pose(sim))
            paths[engine] = np.array(points)
        finally:
            sim.close()
    driven = np.cumsum([abs(t[0]) * s for t, s in SEQUENCE])
    gap = np.hypot(*(paths["pybullet"][:, :2] - paths["mujoco"][:, :2]).T)
    yaw_gap = np.abs([wrap_angle(a) for a in paths["pybullet"][:, 2] - paths["mujoco"][:, 2]])
    assert np.all(gap <= 0.15 * driven + 0.1), (gap, driven)
    assert np.all(yaw_gap <= 0.3), yaw_gap
    # and both followed the commanded arcs: ~5 m driven, ended up left of the start line
    for path in paths.values():
        assert path[-1, 1] > 1.0 and np.hypot(*path[-1, :2]) > 2.0


def _one_obstacle(sim: SimBackend, x: float, y: float) -> None:
    """The base at the origin facing +x, obstacle_0 at (x, y), the rest parked."""
    ident = np.array([1.0, 0, 0, 0])
    for i in range(1, 6):
        sim.set_body_pose(f"obstacle_{i}", np.array([*base_scene.PARKING, 0.0]), ident)
    sim.set_body_pose("obstacle_0", np.array([x, y, 0.0]), ident)
    sim.set_body_pose("goal", np.array([9.0, 0.0, 0.0]), ident)


def _tilt(sim: SimBackend) -> float:
    """The base's tilt from upright (rad)."""
    w, x, y, z = sim.body_pose("base_footprint")[1]
    return math.acos(min(1.0, abs(1 - 2 * (x * x + y * y))))


def test_obstacles_meet_the_outline_not_the_wheel_spheres(engine_task_sim: SimBackend) -> None:
    """The wheels collide as spheres of the wheel radius (one steady contact with the floor),
    whose equators reach 12 cm beyond the tyres' faces. Obstacles meet the base's outline
    (its footprint, 1.01 x 0.69 m) instead: driving past a post 5 cm beside the outline
    leaves the base flat on the floor and the post untouched (with sphere contacts the wheel
    climbed it, tilting the base 34 deg); driving into a post stops the base at it."""
    from tether.sim.tasks.obstacle_course import ObstacleCourseTask

    sim = engine_task_sim
    task = sim.task
    assert isinstance(task, ObstacleCourseTask)
    sim.reset(seed=0)
    half_width = husky.ROBOT.footprint[1]
    _one_obstacle(sim, 2.0, half_width + 0.05 + base_scene.OBSTACLE_RADIUS)
    clearances, tilts = [], []
    for _ in range(round(4.0 * HZ)):  # 0.5 m/s for 4 s: the whole base passes the post
        sim.step(np.array([0.5, 0.0], dtype=np.float32))
        clearances.append(task.clearance(sim))
        tilts.append(_tilt(sim))
    assert true_pose(sim)[0] > 1.5
    assert min(clearances) > 0.02, min(clearances)
    assert max(tilts) < 0.03, max(tilts)
    # head on: the chassis (the outline) stops at the post, without climbing it
    sim.reset(seed=0)
    front = husky.ROBOT.footprint[0]
    _one_obstacle(sim, front + 0.3 + base_scene.OBSTACLE_RADIUS, 0.0)
    drive(sim, (0.5, 0.0), 3.0)
    assert -0.02 < task.clearance(sim) < 0.02
    assert true_pose(sim)[0] == pytest.approx(0.3, abs=0.05)
    assert _tilt(sim) < 0.1
