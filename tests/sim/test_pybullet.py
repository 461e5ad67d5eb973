"""The PyBullet arm backend: isolated instances, robot cameras, and the scripted expert solving
reach and lift unchanged for every registered arm (the generic SimBackend checks live in
test_backend_contract.py, the TCP against the chain in test_kinematics.py)."""

from __future__ import annotations

import numpy as np
import pytest
from arm_cases import arm, arm_params, build_arm_sim
from sim_helpers import expert_episode

from tether.sim.experts.config_expert import ScriptedExpertConfig
from tether.sim.tasks.config_tasks import LiftConfig, ReachConfig

pytestmark = pytest.mark.pybullet
pb = pytest.importorskip("pybullet")

# issue #15's bar for an arm other than the Panda: 90 % of the seeds
ALLOWED_FAILURE_RATE = {"panda": 0.0}
DEFAULT_ALLOWED_FAILURE_RATE = 0.1


def _make(task_type: str, robot: str = "panda", control_hz: float = 100.0):  # noqa: ANN202
    from tether.sim.experts.expert import ScriptedExpert
    from tether.sim.tasks.lift import LiftTask
    from tether.sim.tasks.reach import ReachTask

    task_cfg = LiftConfig() if task_type == "lift" else ReachConfig()
    task = LiftTask(task_cfg) if task_type == "lift" else ReachTask(task_cfg)
    sim = build_arm_sim("pybullet", robot, task, control_hz=control_hz)
    expert = ScriptedExpert(ScriptedExpertConfig(), sim.spec, task_cfg)
    return sim, expert


def test_two_instances_step_independently() -> None:
    """Each backend owns its physics client: stepping one leaves the other untouched."""
    a, _ = _make("lift")
    b, _ = _make("lift")
    try:
        assert a._cid != b._cid
        oa, ob = a.reset(seed=1), b.reset(seed=1)
        np.testing.assert_array_equal(oa["state"], ob["state"])
        # drive a's elbow and close its fingers; b holds still
        target = oa["state"][:8].copy()
        target[3] += 0.3
        target[7] = 0.0
        for _ in range(30):
            a.step(target)
        for _ in range(5):
            b.step(ob["state"][:8])
        sa, sb = a.observe(), b.observe()
        assert abs(sa["state"][3] - oa["state"][3]) > 0.2
        assert sa["state"][7] < 0.01
        np.testing.assert_allclose(sb["state"], ob["state"], atol=1e-3)
        np.testing.assert_allclose(sb["env_state"], ob["env_state"], atol=1e-3)
        assert a.sim_time == pytest.approx(0.3) and b.sim_time == pytest.approx(0.05)
        a.close()
        # closing one client leaves the other running
        assert b.step(ob["state"][:8]).observation["state"].shape == (9,)
    finally:
        a.close()
        b.close()


def _red(img: np.ndarray) -> int:
    """Pixels of the cube's colour: red well above green and blue."""
    i = img.astype(np.int32)
    return int(((i[..., 0] > 80) & (i[..., 0] > 2 * i[..., 1]) & (i[..., 0] > 2 * i[..., 2])).sum())


@pytest.mark.parametrize("robot", arm_params())
def test_render_world_and_robot_cameras(robot: str) -> None:
    """The world's front camera and every camera on the robot (its description's), in
    observations; a wrist camera sees the cube under the tool (measured at 64x64: 25 red
    pixels for the Panda, 30 for the UR5e), and loses it when the cube goes."""
    from tether.core.spec import CameraSpec
    from tether.sim.tasks.lift import LiftTask

    desc = arm(robot)
    cams = [CameraSpec(name="front", width=64, height=48)]
    cams += [CameraSpec(name=n, width=64, height=64, fovy_deg=70.0) for n in desc.pybullet.cameras]
    sim = build_arm_sim("pybullet", robot, LiftTask(), cameras=cams, render_in_obs=True)
    try:
        obs = sim.reset(0)
        assert obs["images/front"].shape == (48, 64, 3)
        assert obs["images/front"].dtype == np.uint8
        assert obs["images/front"].std() > 5  # not a blank frame
        tcp = sim.ee_pose()[0]
        quat = np.array([1.0, 0.0, 0.0, 0.0])
        for name, mount in desc.pybullet.cameras.items():
            assert obs[f"images/{name}"].shape == (64, 64, 3)
            if mount.link is None:
                continue
            sim.set_body_pose("cube", np.array([tcp[0], tcp[1], 0.025]), quat)
            assert _red(sim.render(name)) >= 5, name
            sim.set_body_pose("cube", np.array([0.5, 0.0, -2.0]), quat)  # below the floor
            assert _red(sim.render(name)) == 0, name
    finally:
        sim.close()


def _failed_seeds(task_type: str, robot: str, control_hz: float, seeds: range) -> list[int]:
    sim, expert = _make(task_type, robot, control_hz)
    try:
        if control_hz == 500.0:  # a 2 ms control period is one physics step
            assert sim.substeps == 1
        return [s for s in seeds if not expert_episode(sim, expert, s)]
    finally:
        sim.close()


def _assert_success(failed: list[int], robot: str, seeds: range) -> None:
    allowed = int(ALLOWED_FAILURE_RATE.get(robot, DEFAULT_ALLOWED_FAILURE_RATE) * len(seeds))
    assert len(failed) <= allowed, f"{robot}: failed seeds {failed} (allowed {allowed})"


# The README claims "expert 30/30 lift, 20/20 reach" on PyBullet and 100 % on 30 seeds at
# 50/100/500 Hz for the expert (Panda). Measured here: 30/30 for reach and lift at 50, 100
# and 500 Hz; the slowest episode succeeds after 1.44 s of reach's 5 s limit and 2.93 s of
# lift's 8 s.
@pytest.mark.parametrize("robot", arm_params())
def test_expert_reach_succeeds_on_every_seed(robot: str) -> None:
    _assert_success(_failed_seeds("reach", robot, 100.0, range(20)), robot, range(20))  # ~1.5 s


@pytest.mark.slow
@pytest.mark.parametrize("robot", arm_params())
def test_expert_lift_succeeds_on_every_seed(robot: str) -> None:
    _assert_success(_failed_seeds("lift", robot, 100.0, range(30)), robot, range(30))  # ~13 s


@pytest.mark.slow
@pytest.mark.parametrize("robot", arm_params())
def test_expert_lift_at_500hz_succeeds_on_every_seed(robot: str) -> None:
    """A 2 ms control period: one physics step per control step (~20 s for 30 episodes)."""
    _assert_success(_failed_seeds("lift", robot, 500.0, range(30)), robot, range(30))


def test_a_urdf_in_the_robot_folder_loads_like_the_loader(tmp_path) -> None:
    """``pybullet.urdf`` (a file in the robot's folder, fixed base at the origin) gives the
    same robot as the Panda's ``pybullet.loader``: same reset state and TCP."""
    from pathlib import Path

    import pybullet_data

    from tether.robots.panda.pybullet import URDF

    src = Path(pybullet_data.getDataPath()) / URDF
    meshes = (src.parent / "meshes").as_posix()
    text = src.read_text().replace("package://meshes/visual/", "package://meshes/collision/")
    (tmp_path / "panda.urdf").write_text(text.replace("package://meshes/", meshes + "/"))
    desc = arm("panda")
    pyb = desc.pybullet.model_copy(update={"urdf": "panda.urdf", "loader": None})
    from_urdf = desc.model_copy(update={"folder": tmp_path, "pybullet": pyb})
    a = build_arm_sim("pybullet", "panda", None, cameras=[])
    b = build_arm_sim("pybullet", from_urdf, None, cameras=[])
    try:
        oa, ob = a.reset(3), b.reset(3)
        np.testing.assert_array_equal(oa["state"], ob["state"])
        np.testing.assert_allclose(a.ee_pose()[0], b.ee_pose()[0], atol=1e-9)
    finally:
        a.close()
        b.close()


def _red_centre(img: np.ndarray) -> tuple[int, np.ndarray]:
    i = img.astype(np.int32)
    mask = (i[..., 0] > 80) & (i[..., 0] > 2 * i[..., 1]) & (i[..., 0] > 2 * i[..., 2])
    ys, xs = np.nonzero(mask)
    return int(mask.sum()), (np.array([xs.mean(), ys.mean()]) if len(xs) else np.full(2, np.nan))


def test_table_camera_frames_the_multitask_layout_in_both_engines() -> None:
    """The world camera ``table`` (docs/vla.md, 'The table camera'): a cube anywhere in the
    multi-task layout area is in view in both engines at the same place (within 3 px of 96),
    and at least twice the pixels of the ``front`` camera's picture of it (measured, Panda at
    the area's corners: 53-84 red pixels against 16-30 in both engines, centres within 1.1
    px)."""
    from tether.core.spec import CameraSpec
    from tether.sim.tasks.config_tasks import MultitaskConfig
    from tether.sim.tasks.lift import LiftTask

    cams = [CameraSpec(name=n, width=96, height=96) for n in ("table", "front")]
    layout = MultitaskConfig()
    corners = [(x, y) for x in layout.x_range for y in layout.y_range]
    centres: dict[str, list[np.ndarray]] = {}
    for engine in ("mujoco", "pybullet"):
        sim = build_arm_sim(engine, "panda", LiftTask(), cameras=cams)
        try:
            sim.reset(0)
            quat = np.array([1.0, 0.0, 0.0, 0.0])
            centres[engine] = []
            for x, y in corners:
                sim.set_body_pose("cube", np.array([x, y, 0.025]), quat)
                table, centre = _red_centre(sim.render("table"))
                front, _ = _red_centre(sim.render("front"))
                assert table >= 45 and table >= 2 * front, (engine, x, y, table, front)
                centres[engine].append(centre)
        finally:
            sim.close()
    err = np.abs(np.array(centres["mujoco"]) - np.array(centres["pybullet"])).max()
    assert err <= 3.0, (centres, err)
