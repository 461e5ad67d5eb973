"""The Universal Robots UR5e, added as one robot folder (robots/ur5e/) + its experiment YAMLs:
its kinematic chain (UR's DH table) is the TCP both engines simulate, its two asset files
state the robot its description states, and the generic scripted expert solves reach and lift
on MuJoCo and PyBullet through the in-process loop (SimRunner + safety filter) from the YAMLs.
The registry-wide tests (tests/sim/test_backend_contract.py, test_kinematics.py,
test_scene.py) run their every-arm cases on it too.

Measured (seeds 0-29, 100 Hz): reach 30/30 and lift 30/30 on both engines, the slowest
episode 1.2 s of reach's 5 s and 2.5 s of lift's 8 s; DH vs MuJoCo TCP < 1e-15 m, DH vs
PyBullet < 1e-7 m over random joint positions.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tether.core import registry
from tether.core.config import load_config
from tether.core.kinematics import down_rotation, rotation_error
from tether.core.robot import ArmDescription
from tether.robots.ur5e import robot as ur5e
from tether.sim.tasks.config_tasks import LiftConfig, ReachConfig

REPO = Path(__file__).resolve().parents[2]
EXPERIMENTS = REPO / "configs" / "experiments"
DESC = ur5e.ROBOT
SEEDS = 30
# the bar for the expert on a new arm (measured: every seed)
MIN_SUCCESS = 0.9


def _mujoco_model() -> tuple[Any, Any]:
    mujoco = pytest.importorskip("mujoco")
    return mujoco, mujoco.MjModel.from_xml_path(str(DESC.asset(DESC.mujoco.scene)))


def _random_q(rng: np.random.Generator) -> np.ndarray:
    return rng.uniform(DESC.lower, DESC.upper)


# ---- the folder is the robot --------------------------------------------------------------


def test_the_folder_registers_the_robot() -> None:
    """Discovered from robots/ur5e/robot.py; the action is UR's driver joints + the gripper."""
    assert "ur5e" in registry.available("robot")
    desc = registry.load("robot", "ur5e")
    assert isinstance(desc, ArmDescription) and desc is DESC
    spec = desc.spec()
    assert spec.action.names == (
        "shoulder_pan_joint",
        "shoulder_lift_joint",
        "elbow_joint",
        "wrist_1_joint",
        "wrist_2_joint",
        "wrist_3_joint",
        "ur5e_finger_joint1",
    )
    assert spec.state_names == (*spec.action.names, "ur5e_finger_joint2")
    assert desc.hardware.controller == "scaled_joint_trajectory_controller"


def test_zero_pose_is_urs() -> None:
    """At all joints 0 the UR5e stretches out horizontally: UR's DH table puts tool0 at
    (-0.8172, -0.2329, 0.0628) m in the controller's base frame, i.e. (0.8172, 0.2329, 0.0628)
    in base_link (turned 180 deg), the tool pointing along base_link's +y."""
    p, R = DESC.kinematics.fk(np.zeros(6))
    flange = p - ur5e.TCP_D * R[:, 2]
    np.testing.assert_allclose(flange, (0.8172, 0.2329, 0.0628), atol=1e-9)
    np.testing.assert_allclose(R[:, 2], (0.0, 1.0, 0.0), atol=1e-9)
    # shoulder-to-wrist lengths: upper arm 0.425 m, forearm 0.3922 m (UR5e reach 0.85 m)
    origins, _, _, _ = DESC.kinematics.frames(np.zeros(6))
    assert np.linalg.norm(origins[2] - origins[1]) == pytest.approx(0.425)
    assert np.linalg.norm(origins[3] - origins[2]) == pytest.approx(0.3922)


def test_home_pose_is_a_ready_pose() -> None:
    """TCP 0.45 m in front of the base, 0.35 m up, pointing down with tool x along world x;
    elbow up (the elbow above the shoulder), every joint far from its limits."""
    q = np.asarray(DESC.home)
    p, R = DESC.kinematics.fk(q)
    np.testing.assert_allclose(p, (0.45, 0.0, 0.35), atol=0.005)
    assert np.linalg.norm(rotation_error(down_rotation(0.0), R)) < 1e-3
    origins, _, _, _ = DESC.kinematics.frames(q)
    assert origins[2][2] > origins[1][2] + 0.3  # elbow axis well above the shoulder axis
    assert np.all(q - DESC.lower > 1.0) and np.all(DESC.upper - q > 1.0)


def test_ik_covers_the_tasks_workspaces_from_home() -> None:
    """A grid over lift's cube range (grasp, pre-grasp and lifted heights, cube yaw) and
    reach's target box: every pose is reached from home without a joint swinging past 2 rad
    (no wrist flip or elbow-down solution)."""
    kin, home = DESC.kinematics, np.asarray(DESC.home)
    lift, reach = LiftConfig(), ReachConfig()
    goals = [
        (np.array([x, y, lift.rest_z + dz]), down_rotation(yaw))
        for x in np.linspace(*lift.x_range, 4)
        for y in np.linspace(*lift.y_range, 4)
        for dz in (DESC.grasp_offset, 0.10, 0.15 + DESC.grasp_offset)
        for yaw in np.linspace(*lift.yaw_range, 3)
    ]
    goals += [
        (np.array([x, y, z]), down_rotation(0.0))
        for x in np.linspace(*reach.x_range, 4)
        for y in np.linspace(*reach.y_range, 4)
        for z in np.linspace(*reach.z_range, 4)
    ]
    for pos, rot in goals:
        q, ok = kin.ik(home, pos, rot)
        assert ok, pos
        assert np.abs(q - home).max() < 2.0, (pos, q)


# ---- the asset files state the description --------------------------------------------


def _urdf() -> ET.Element:
    assert DESC.pybullet.urdf is not None
    return ET.parse(DESC.asset(DESC.pybullet.urdf)).getroot()


def test_urdf_states_the_description() -> None:
    """Joint names, limits, efforts and velocities; link masses (UR's, plus a 0.925 kg
    gripper as Robotiq's 2F-85); the TCP and grip links the description names exist."""
    root = _urdf()
    joints = {j.get("name"): j for j in root.iter("joint")}
    for spec, effort in zip(DESC.joints, DESC.effort, strict=True):
        j = joints[spec.name]
        assert j.get("type") == "revolute"
        lim = j.find("limit")
        assert lim is not None
        assert float(lim.get("lower")) == pytest.approx(spec.lower)
        assert float(lim.get("upper")) == pytest.approx(spec.upper)
        assert float(lim.get("velocity")) == pytest.approx(spec.max_velocity)
        assert float(lim.get("effort")) == pytest.approx(effort)
    g = DESC.gripper
    for name in g.joints:
        j = joints[name]
        lim = j.find("limit")
        assert j.get("type") == "prismatic" and lim is not None
        assert (float(lim.get("lower")), float(lim.get("upper"))) == (g.lower, g.upper)
        assert float(lim.get("effort")) == g.effort
        assert float(lim.get("velocity")) == g.max_velocity
    mass = {
        link.get("name"): float(link.find("inertial/mass").get("value"))  # type: ignore[union-attr]
        for link in root.iter("link")
    }
    arm_links = ("shoulder_link", "upper_arm_link", "forearm_link")
    arm_links += ("wrist_1_link", "wrist_2_link", "wrist_3_link")
    assert tuple(mass[n] for n in arm_links) == ur5e.LINK_MASS
    gripper = (DESC.pybullet.tcp_link, *DESC.pybullet.grip_links)
    assert sum(mass[n] for n in gripper) == pytest.approx(0.925)


@pytest.mark.mujoco
def test_mujoco_scene_states_the_description() -> None:
    """Joints in action order with the description's ranges; one position actuator per joint
    whose force limit is the joint's effort and whose control range is its limits; link masses
    as the URDF's."""
    mujoco, m = _mujoco_model()

    def idx(kind: str, name: str) -> int:
        i = mujoco.mj_name2id(m, getattr(mujoco.mjtObj, f"mjOBJ_{kind.upper()}"), name)
        assert i >= 0, f"no {kind} '{name}'"
        return int(i)

    g = DESC.gripper
    limits = [(j.lower, j.upper) for j in DESC.joints] + [(g.lower, g.upper)] * len(g.joints)
    efforts = [*DESC.effort, *[g.effort] * len(g.joints)]
    for name, (lo, hi), effort in zip((*DESC.arm_joints, *g.joints), limits, efforts, strict=True):
        np.testing.assert_allclose(m.jnt_range[idx("joint", name)], (lo, hi))
        a = idx("actuator", name)
        assert m.actuator_trnid[a, 0] == idx("joint", name)
        np.testing.assert_allclose(m.actuator_forcerange[a], (-effort, effort))
        np.testing.assert_allclose(m.actuator_ctrlrange[a], (lo, hi))
    urdf_mass = {
        link.get("name"): float(link.find("inertial/mass").get("value"))  # type: ignore[union-attr]
        for link in _urdf().iter("link")
    }
    for name, mass in urdf_mass.items():
        assert m.body_mass[idx("body", name)] == pytest.approx(mass), name
    assert {"front", "wrist"} <= {m.camera(i).name for i in range(m.ncam)}


# ---- one chain, three models ----------------------------------------------------------------


@pytest.mark.mujoco
def test_chain_is_the_mujoco_tcp_site() -> None:
    """UR's DH chain vs the scene's ``tcp`` site over 200 random joint positions (measured:
    < 1e-15 m and rad: the scene's bodies are the DH frames)."""
    mujoco, m = _mujoco_model()
    d = mujoco.MjData(m)
    jnt = [
        m.jnt_qposadr[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, n)] for n in DESC.arm_joints
    ]
    site = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SITE, DESC.mujoco.tcp_site)
    rng = np.random.default_rng(0)
    for _ in range(200):
        q = _random_q(rng)
        d.qpos[jnt] = q
        mujoco.mj_kinematics(m, d)
        p, R = DESC.kinematics.fk(q)
        assert np.linalg.norm(d.site_xpos[site] - p) < 1e-6, q
        assert np.linalg.norm(rotation_error(d.site_xmat[site].reshape(3, 3), R)) < 1e-6, q


@pytest.mark.pybullet
@pytest.mark.mujoco
def test_urdf_links_are_the_mujoco_bodies_and_the_chain() -> None:
    """Every link frame of the URDF (in PyBullet) is the MuJoCo body of the same name, and the
    TCP (tcp_link + tcp_offset) is the chain's, over 100 random joint positions (measured:
    < 1e-7 m, < 1e-6 rad; the URDF writes angles with 9 digits)."""
    pb = pytest.importorskip("pybullet")
    mujoco, m = _mujoco_model()
    d = mujoco.MjData(m)
    jnt = [
        m.jnt_qposadr[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, n)] for n in DESC.arm_joints
    ]
    cid = pb.connect(pb.DIRECT)
    try:
        body = pb.loadURDF(
            str(DESC.asset(DESC.pybullet.urdf or "")), useFixedBase=True, physicsClientId=cid
        )
        infos = [
            pb.getJointInfo(body, j, physicsClientId=cid)
            for j in range(pb.getNumJoints(body, physicsClientId=cid))
        ]
        joint = {i[1].decode(): i[0] for i in infos}
        link = {i[12].decode(): i[0] for i in infos}
        rng = np.random.default_rng(1)
        for _ in range(100):
            q = _random_q(rng)
            for name, qi in zip(DESC.arm_joints, q, strict=True):
                pb.resetJointState(body, joint[name], qi, physicsClientId=cid)
            d.qpos[jnt] = q
            mujoco.mj_kinematics(m, d)
            for name, j in link.items():
                s = pb.getLinkState(body, j, computeForwardKinematics=True, physicsClientId=cid)
                b = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, name)
                assert b >= 0, f"the MuJoCo scene has no body '{name}'"
                R_pb = np.asarray(pb.getMatrixFromQuaternion(s[5])).reshape(3, 3)
                assert np.linalg.norm(np.asarray(s[4]) - d.xpos[b]) < 1e-6, (name, q)
                assert np.linalg.norm(rotation_error(R_pb, d.xmat[b].reshape(3, 3))) < 1e-5
            s = pb.getLinkState(
                body,
                link[DESC.pybullet.tcp_link],
                computeForwardKinematics=True,
                physicsClientId=cid,
            )
            R_tcp = np.asarray(pb.getMatrixFromQuaternion(s[5])).reshape(3, 3)
            tcp = np.asarray(s[4]) + DESC.pybullet.tcp_offset * R_tcp[:, 2]
            p, R = DESC.kinematics.fk(q)
            assert np.linalg.norm(tcp - p) < 1e-6, q
            assert np.linalg.norm(rotation_error(R_tcp, R)) < 1e-5, q
    finally:
        pb.disconnect(physicsClientId=cid)


# ---- the generic expert, from the experiment YAMLs ---------------------------------------

# (task, engine): MuJoCo's reach runs in about a second, the others take 3-11 s
CASES = [
    pytest.param("reach", "mujoco", marks=pytest.mark.mujoco),
    pytest.param("reach", "pybullet", marks=[pytest.mark.pybullet, pytest.mark.slow]),
    pytest.param("lift", "mujoco", marks=[pytest.mark.mujoco, pytest.mark.slow]),
    pytest.param("lift", "pybullet", marks=[pytest.mark.pybullet, pytest.mark.slow]),
]


def _success_rate(experiment: str, engine: str) -> tuple[float, list[dict[str, Any]]]:
    from tether.sim.loop import run_local_episode
    from tether.sim.runner import SimRunner

    cfg = load_config(EXPERIMENTS / experiment, [f"sim.type={engine}", "sim.cameras=[]"])
    assert cfg.robot == "ur5e"
    runner = SimRunner(cfg)
    try:
        # each episode resets with the next seed: episodes.seed + 0 .. SEEDS - 1
        runs = [run_local_episode(cfg, runner) for _ in range(SEEDS)]
    finally:
        runner.backend.close()
    assert [r["seed"] for r in runs] == list(range(cfg.episodes.seed, cfg.episodes.seed + SEEDS))
    return sum(r["success"] for r in runs) / SEEDS, runs


@pytest.mark.parametrize(("task", "engine"), CASES)
def test_expert_solves_the_task(task: str, engine: str) -> None:
    """ur5e_<task>_expert.yaml on ``engine``: >= 90 % of 30 seeded episodes succeed with the
    generic scripted expert, the safety filter rejecting nothing."""
    pytest.importorskip(engine)
    rate, runs = _success_rate(f"ur5e_{task}_expert.yaml", engine)
    failed = [r["seed"] for r in runs if not r["success"]]
    assert rate >= MIN_SUCCESS, f"{task} on {engine}: failed seeds {failed}"
    assert all(r["rejected"] == 0 for r in runs)


@pytest.mark.mujoco
def test_lift_holds_the_cube_between_the_pads() -> None:
    """When lift succeeds the cube hangs between the finger pads, centred on the TCP, each
    finger open by the cube's half-width, and nothing but the pads touches it."""
    mujoco = pytest.importorskip("mujoco")
    from tether.sim.experts.config_expert import ScriptedExpertConfig
    from tether.sim.experts.expert import ScriptedExpert

    task_cfg = LiftConfig()
    task = registry.build("task", task_cfg)
    sim = registry.build(
        "sim", registry.config_class("sim", "mujoco")(cameras=[]), robot="ur5e", task=task
    )
    expert = ScriptedExpert(ScriptedExpertConfig(), sim.spec, task_cfg)
    try:
        obs = sim.reset(4)
        while True:
            result = sim.step(expert.act(obs).actions[0])
            obs = result.observation
            if result.terminated or result.truncated:
                break
        assert result.terminated
        cube, tcp = obs["env_state"][:3], obs["ee_pose"][:3]
        assert np.linalg.norm(cube - tcp) < 0.005, (cube, tcp)
        np.testing.assert_allclose(obs["state"][6:], 0.025, atol=0.002)
        m, d = sim.model, sim.data
        touching = set()
        for c in d.contact[: d.ncon]:
            names = {mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, g) for g in (c.geom1, c.geom2)}
            if "cube" in names:
                touching |= names - {"cube"}
        assert touching == {"left_pad", "right_pad"}, touching
    finally:
        sim.close()


# ---- mock hardware: ur_robot_driver's controller from the description -----------------


def test_mock_config_leaves_the_controller_to_the_robot() -> None:
    """ur5e_lift_mock.yaml names no controller and no joints: the description supplies UR's."""
    cfg = load_config(EXPERIMENTS / "ur5e_lift_mock.yaml")
    assert cfg.robot == "ur5e" and cfg.sim is None and cfg.hardware is not None
    assert cfg.hardware.type == "jtc_arm" and cfg.hardware.mock
    assert cfg.hardware.controller is None and cfg.hardware.joints is None
    assert DESC.hardware.controller == "scaled_joint_trajectory_controller"


@pytest.mark.ros
def test_the_jtc_driver_resolves_the_ur_controller() -> None:
    pytest.importorskip("rclpy")
    from tether.core.experiment import robot_spec
    from tether_ros.drivers.jtc_arm import driver_names

    cfg = load_config(EXPERIMENTS / "ur5e_lift_mock.yaml")
    controller, joints = driver_names(cfg.hardware, robot_spec(cfg))
    assert controller == "scaled_joint_trajectory_controller"
    assert joints == [*DESC.arm_joints, DESC.gripper.joints[0]]


@pytest.mark.ros
@pytest.mark.slow
def test_policy_server_drives_the_mock_ur5e_through_scaled_jtc() -> None:
    """hardware_bridge + policy_server on a mock UR5e driver: the expert's commands arrive on
    /driver/scaled_joint_trajectory_controller/joint_trajectory with UR's joint names, the
    mock arm moves, and the bridge's joint_states follow it."""
    pytest.importorskip("rclpy")
    sys.path.insert(0, str(REPO / "tests" / "ros"))
    from hardware_helpers import spinning
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from ros_helpers import ros_context, spin_until
    from sensor_msgs.msg import JointState
    from trajectory_msgs.msg import JointTrajectory

    from tether_ros import interface as itf
    from tether_ros.hardware_bridge import HardwareBridge
    from tether_ros.mock_nodes import MockArmNode
    from tether_ros.policy_server import PolicyServer

    cfg = load_config(
        EXPERIMENTS / "ur5e_lift_mock.yaml",
        ["episodes.auto_reset=false", "task.max_duration_s=60"],
    )
    with ros_context() as ctx:
        mock = MockArmNode(cfg, context=ctx, namespace="/driver")
        with spinning(mock):
            bridge = HardwareBridge(cfg, context=ctx)
            server = PolicyServer(cfg, context=ctx)
            probe = Node("probe", context=ctx)
            states: list[np.ndarray] = []
            driver: list[JointTrajectory] = []
            probe.create_subscription(
                JointState,
                itf.JOINT_STATES,
                lambda m: states.append(np.array(m.position)),
                itf.SENSOR_QOS,
            )
            probe.create_subscription(
                JointTrajectory,
                "/driver/scaled_joint_trajectory_controller/joint_trajectory",
                driver.append,
                itf.COMMAND_QOS,
            )
            ex = SingleThreadedExecutor(context=ctx)
            for n in (bridge, server, probe):
                ex.add_node(n)
            arm = mock.arm
            start = arm.q.copy()
            moved = spin_until(ex, lambda: np.abs(arm.q - start).max() > 0.1, timeout_s=60)
            assert moved, arm.q - start
            assert driver, "the policy's commands never reached the driver"
            assert list(driver[-1].joint_names) == [*DESC.arm_joints, DESC.gripper.joints[0]]
            assert np.all(arm.q >= arm.lower - 1e-9) and np.all(arm.q <= arm.upper + 1e-9)
            assert spin_until(
                ex, lambda: bool(states) and np.abs(states[-1][:7] - arm.q).max() < 0.05, 10
            )
            assert bridge.rejected == 0  # malformed or refused by the safety gate
            for n in (probe, server, bridge):
                n.destroy_node()
        mock.destroy_node()
