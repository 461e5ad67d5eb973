"""MuJoCo arm backend: any arm on the table-top scene (tether.sim.scene), from the robot's
description: its MuJoCo scene file (``robots/<name>/assets/...``), joints, actuators, TCP
site and home pose. Task bodies the task does not use are removed before compiling.

Every instance owns its model, data and renderers, so several coexist in one process.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tether.core.errors import ConfigError, MissingDependency
from tether.core.protocols import Task, TaskBody, restore_task_attributes, task_attributes
from tether.core.robot import ArmDescription, RobotDescription
from tether.core.types import Observation, StepResult
from tether.sim.mujoco.config_mujoco import MujocoConfig
from tether.sim.scene import TASK_BODIES, shape_volume, task_bodies
from tether.sim.scoring import assemble_arm_observation, score_step

# Headless machines have no X display: render through EGL unless the user chose a backend.
if "MUJOCO_GL" not in os.environ and not os.environ.get("DISPLAY"):
    os.environ["MUJOCO_GL"] = "egl"

try:
    import mujoco
except ImportError as exc:  # pragma: no cover - depends on the install
    raise MissingDependency("mujoco", "mujoco", "The MuJoCo backend") from exc


# what a snapshot keeps (MujocoBackend.snapshot)
STATE = mujoco.mjtState.mjSTATE_INTEGRATION


def _index(ids: np.ndarray) -> slice | np.ndarray:
    """``ids`` as a slice where they are consecutive (a slice reads and writes MjData without
    the copy and the checks of a fancy index), else as they are."""
    if len(ids) and np.array_equal(ids, np.arange(ids[0], ids[0] + len(ids))):
        return slice(int(ids[0]), int(ids[0]) + len(ids))
    return ids


def _add_task_body(spec: Any, body: TaskBody) -> None:
    """Add a task's declared body to the world of an MjSpec: mass > 0 a free body (mass
    spread over its geoms by volume), mass 0 a mocap body (fixed, moved by set_body_pose).
    Its geom is named after the body (one shape) or ``<body>_<i>``; condim 4 (torsional
    friction) as the scene's cube."""
    b = spec.worldbody.add_body(name=body.name, pos=list(body.pos))
    if body.mass > 0:
        b.add_freejoint(name=body.name)
    else:
        b.mocap = True
    volumes = [shape_volume(s.shape, s.size) for s in body.shapes]
    types = {
        "box": mujoco.mjtGeom.mjGEOM_BOX,
        "cylinder": mujoco.mjtGeom.mjGEOM_CYLINDER,
        "sphere": mujoco.mjtGeom.mjGEOM_SPHERE,
    }
    for i, (shape, volume) in enumerate(zip(body.shapes, volumes, strict=True)):
        g = b.add_geom(
            name=body.name if len(body.shapes) == 1 else f"{body.name}_{i}",
            type=types[shape.shape],
            size=[*shape.size, *[0.0] * (3 - len(shape.size))],
            pos=list(shape.pos),
            rgba=list(body.rgba),
            friction=list(body.friction),
            condim=4,
        )
        if body.mass > 0:
            g.mass = body.mass * volume / sum(volumes)
        if not body.collide:
            g.contype = 0
            g.conaffinity = 0


@dataclass(frozen=True)
class MujocoSnapshot:
    """MujocoBackend.snapshot(): MuJoCo's integration state and what the backend counts."""

    # the backend's model: a snapshot restores only into the MjData of the model it came from
    owner: Any
    # mj_getState(mjSTATE_INTEGRATION): time, joints, actuators, controls, applied forces,
    # mocap bodies and the solver's warm start (a few hundred numbers; a whole MjData copy
    # holds its arena, 15 MB on peg-in-hole)
    state: np.ndarray
    # the body and site poses as they were (what observe() and body_pose() read): after a
    # step MuJoCo holds them as computed before the step's last integration, a physics
    # substep behind the joints
    poses: tuple[np.ndarray, ...]
    steps: int
    task: dict[str, Any]


class MujocoBackend:
    """SimBackend on MuJoCo for an arm with a parallel gripper (``robot``: its description).

    With dof = the arm's joints and f = its finger joints: action (dof + 1,) = one target per
    arm joint (rad) + the opening of each finger (m; every gripper actuator gets it).
    Observation keys: ``state`` (dof + f,) arm then finger joint positions, ``velocity``
    (dof + f,) their velocities, ``env_state`` (7 * len(task.objects),) position + wxyz
    quaternion of each task object, ``ee_pose`` (7,) TCP position + wxyz quaternion, and
    ``images/<cam>`` (H, W, 3) uint8 when ``cfg.render_in_obs``. All float32, world frame,
    SI units.
    """

    def __init__(
        self, cfg: MujocoConfig, robot: RobotDescription, task: Task | None = None
    ) -> None:
        if not isinstance(robot, ArmDescription):
            raise ConfigError(
                f"the MuJoCo arm backend simulates arms; robot '{robot.name}' is a {robot.kind}"
            )
        self.cfg = cfg
        self.robot = robot
        self.task = task
        self.spec = robot.spec(cfg.control_hz, cfg.cameras)
        objects = tuple(task.objects) if task is not None else ()
        declared = task_bodies(task)
        self._scene = robot.asset(robot.mujoco.scene)
        if not self._scene.is_file():
            raise ConfigError(f"robot '{robot.name}': its MuJoCo scene {self._scene} is missing")
        self.model = self._compile(self._scene, objects, declared)
        self.data = mujoco.MjData(self.model)
        # the largest physics step <= physics_dt that divides the control period evenly
        control_dt = 1.0 / cfg.control_hz
        self.substeps = max(1, math.ceil(control_dt / cfg.physics_dt - 1e-9))
        self.model.opt.timestep = control_dt / self.substeps
        self._objects = objects
        self._max_duration = getattr(task, "max_duration_s", None)
        self._renderers: dict[tuple[int, int], mujoco.Renderer] = {}
        self._steps = 0
        self._viewer: Any = None

        m = self.model
        g = robot.gripper
        self._dof = robot.dof
        self._lower = np.asarray(robot.lower, dtype=np.float64)
        self._upper = np.asarray(robot.upper, dtype=np.float64)
        self._home = np.asarray(robot.home, dtype=np.float64)
        jids = [self._id("joint", n) for n in (*robot.arm_joints, *g.joints)]
        self._qadr = np.array([m.jnt_qposadr[j] for j in jids])
        self._dadr = np.array([m.jnt_dofadr[j] for j in jids])
        arm_act = robot.mujoco.arm_actuators or robot.arm_joints
        grip_act = robot.mujoco.gripper_actuators or g.joints
        if len(arm_act) != self._dof:
            raise ConfigError(
                f"robot '{robot.name}': mujoco.arm_actuators names {len(arm_act)} actuators "
                f"for {self._dof} arm joints"
            )
        self._act_arm = np.array([self._id("actuator", n) for n in arm_act])
        self._act_fingers = np.array([self._id("actuator", n) for n in grip_act])
        self._tcp = self._id("site", robot.mujoco.tcp_site)
        self._body_ids: dict[str, int] = {}
        self._hot_paths()
        for cam in cfg.cameras:
            m.cam_fovy[self._id("camera", cam.name)] = cam.fovy_deg
        self.reset(0)
        if not cfg.headless:
            self._viewer = self._open_viewer()

    def _hot_paths(self) -> None:
        """What step() and observe() use, resolved once: indices as slices where they can be,
        and views into MjData (its arrays are allocated once and never move; reading an
        MjData attribute builds a new numpy wrapper each time)."""
        d = self.data
        self._action_shape = self.spec.action.shape
        self._ctrl = d.ctrl
        self._ctrl_arm = _index(self._act_arm)
        self._ctrl_fingers = _index(self._act_fingers)
        self._qpos, self._qvel = d.qpos, d.qvel
        self._xpos, self._xquat = d.xpos, d.xquat
        self._q = _index(self._qadr)
        self._v = _index(self._dadr)
        ids = [self._body(n) for n in self._objects]
        # position (3,) then wxyz quaternion (4,) of each task object: env_state's layout
        self._object_rows = [row for i in ids for row in (d.xpos[i], d.xquat[i])]
        self._tcp_pos, self._tcp_mat = d.site_xpos[self._tcp], d.site_xmat[self._tcp]
        # the TCP's wxyz quaternion, filled in place by observe()
        self._ee_quat = np.empty(4)

    def _open_viewer(self) -> Any:
        """MuJoCo's passive viewer window, synced after every step."""
        if not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"):
            raise ConfigError(
                "sim.headless=false needs a display (DISPLAY is not set); "
                "run headless or under a desktop session"
            )
        import mujoco.viewer

        return mujoco.viewer.launch_passive(self.model, self.data)

    def _compile(self, path: Path, objects: tuple[str, ...], declared: dict[str, TaskBody]) -> Any:
        """The scene without the task bodies the task does not use, plus the bodies the task
        declares that the scene lacks."""
        try:
            spec = mujoco.MjSpec.from_file(str(path))
        except ValueError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else "invalid MJCF"
            raise ConfigError(f"robot '{self.robot.name}': {path.name}: {first}") from None
        for name in TASK_BODIES:
            body = spec.body(name)
            if body is None and name in objects:
                raise ConfigError(
                    f"robot '{self.robot.name}': its MuJoCo scene {path.name} has no body "
                    f"'{name}' (the task uses it)"
                )
            if body is not None and name not in objects and name not in declared:
                spec.delete(body)
        for body in declared.values():
            if spec.body(body.name) is None:
                _add_task_body(spec, body)
        if self.cfg.coupled_fingers:
            # every finger follows the first (the same opening, as the real mechanisms)
            first, *others = self.robot.gripper.joints
            for finger in others:
                spec.add_equality(
                    type=mujoco.mjtEq.mjEQ_JOINT,
                    name1=finger,
                    name2=first,
                    data=[0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
                )
        return spec.compile()

    def _id(self, kind: str, name: str) -> int:
        """The id of a named joint / actuator / site / camera; ConfigError if missing."""
        obj = getattr(mujoco.mjtObj, f"mjOBJ_{kind.upper()}")
        i = mujoco.mj_name2id(self.model, obj, name)
        if i < 0:
            where = "sim.cameras: " if kind == "camera" else ""
            raise ConfigError(
                f"{where}robot '{self.robot.name}': its MuJoCo scene {self._scene.name} has "
                f"no {kind} '{name}'"
            )
        return int(i)

    # ---- SimBackend -------------------------------------------------------------------

    def reset(self, seed: int | None = None) -> Observation:
        """The robot's home pose plus uniform noise (``cfg.reset_noise`` rad, clipped to the
        limits), fingers at the gripper's home opening, then the task's reset distribution,
        all drawn from ``seed``; sim time restarts at 0."""
        rng = np.random.default_rng(seed)
        m, d = self.model, self.data
        mujoco.mj_resetData(m, d)
        noise = self.cfg.reset_noise
        q = self._home + rng.uniform(-noise, noise, self._dof)
        q = np.clip(q, self._lower, self._upper)
        finger = self.robot.gripper.home
        d.qpos[self._qadr[: self._dof]] = q
        d.qpos[self._qadr[self._dof :]] = finger
        d.ctrl[self._act_arm] = q
        d.ctrl[self._act_fingers] = finger
        mujoco.mj_forward(m, d)
        if self.task is not None:
            self.task.reset(self, rng)
        d.time = 0.0
        self._steps = 0
        mujoco.mj_forward(m, d)
        return self.observe()

    def step(self, action: np.ndarray) -> StepResult:
        """Hold ``action`` (dof + 1,) for one control period (``self.substeps`` physics
        steps)."""
        a = np.asarray(action, dtype=np.float64)
        if a.shape != self._action_shape:
            raise ValueError(f"action must have shape {self._action_shape}, got {a.shape}")
        ctrl = self._ctrl
        ctrl[self._ctrl_arm] = a[: self._dof]
        ctrl[self._ctrl_fingers] = a[self._dof]  # every finger gets the same opening
        mujoco.mj_step(self.model, self.data, nstep=self.substeps)
        self._steps += 1
        if self._viewer is not None:
            self._viewer.sync()
        return score_step(self, self.observe(), self._max_duration)

    def render(self, camera: str) -> np.ndarray:
        """Image (H, W, 3) uint8 from ``camera`` at the size its CameraSpec gives."""
        cam = self.spec.camera(camera)
        key = (cam.height, cam.width)
        renderer = self._renderers.get(key)
        if renderer is None:
            vis = self.model.vis.global_
            vis.offwidth = max(vis.offwidth, cam.width)
            vis.offheight = max(vis.offheight, cam.height)
            renderer = self._renderers[key] = mujoco.Renderer(self.model, cam.height, cam.width)
        renderer.update_scene(self.data, camera=camera)
        return renderer.render()

    @property
    def sim_time(self) -> float:
        """Seconds since the last reset (counted in control steps, so it is exact)."""
        return self._steps / self.cfg.control_hz

    def observe(self) -> Observation:
        """What ``arm_observation`` gives from ``body_pose`` / ``ee_pose``, read through the
        views of ``_hot_paths`` (every array a fresh float32 copy)."""
        mujoco.mju_mat2Quat(self._ee_quat, self._tcp_mat)
        rows = self._object_rows
        return assemble_arm_observation(
            self,
            {
                "state": self._qpos[self._q].astype(np.float32),
                "velocity": self._qvel[self._v].astype(np.float32),
                "env_state": (
                    np.concatenate(rows, dtype=np.float32) if rows else np.zeros(0, np.float32)
                ),
                "ee_pose": np.concatenate((self._tcp_pos, self._ee_quat), dtype=np.float32),
            },
        )

    def body_pose(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """World pose of body ``name``: position (3,) m, quaternion (4,) wxyz (float64)."""
        bid = self._body(name)
        return self._xpos[bid].copy(), self._xquat[bid].copy()

    def set_body_pose(self, name: str, pos: np.ndarray, quat: np.ndarray) -> None:
        """Teleport a free or mocap body and zero its velocity."""
        m, d = self.model, self.data
        bid = self._body(name)
        q = np.asarray(quat, dtype=np.float64)
        q = q / np.linalg.norm(q)
        mocap = m.body_mocapid[bid]
        if mocap >= 0:
            d.mocap_pos[mocap] = pos
            d.mocap_quat[mocap] = q
        else:
            jnt = m.body_jntadr[bid]
            if jnt < 0 or m.jnt_type[jnt] != mujoco.mjtJoint.mjJNT_FREE:
                raise ValueError(f"body '{name}' is neither a free nor a mocap body")
            qa, da = m.jnt_qposadr[jnt], m.jnt_dofadr[jnt]
            d.qpos[qa : qa + 3] = pos
            d.qpos[qa + 3 : qa + 7] = q
            d.qvel[da : da + 6] = 0.0
        mujoco.mj_forward(m, d)  # so body_pose / contacts see the new pose at once

    def set_joint_positions(self, q: np.ndarray, finger: float) -> None:
        """Teleport the arm to ``q`` (dof,) and each finger to ``finger`` at rest, the servos
        holding there: an episode start given from outside (the Isaac stand-in,
        tether_ros.isaac.standin)."""
        m, d = self.model, self.data
        q = np.clip(np.asarray(q, np.float64), self._lower, self._upper)
        d.qpos[self._qadr[: self._dof]] = q
        d.qpos[self._qadr[self._dof :]] = finger
        d.qvel[self._dadr] = 0.0
        d.ctrl[self._act_arm] = q
        d.ctrl[self._act_fingers] = finger
        mujoco.mj_forward(m, d)

    def ee_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """TCP world pose (the description's ``mujoco.tcp_site``): position (3,) m,
        quaternion (4,) wxyz."""
        quat = np.empty(4)
        mujoco.mju_mat2Quat(quat, self._tcp_mat)
        return self._tcp_pos.copy(), quat

    def snapshot(self) -> MujocoSnapshot:
        """The integration state (everything mj_step reads), the control step count and the
        task's episode attributes (Snapshotting)."""
        d = self.data
        state = np.empty(mujoco.mj_stateSize(self.model, STATE))
        mujoco.mj_getState(self.model, d, state, STATE)
        poses = tuple(a.copy() for a in (d.xpos, d.xquat, d.site_xpos, d.site_xmat))
        return MujocoSnapshot(self.model, state, poses, self._steps, task_attributes(self.task))

    def restore(self, snapshot: MujocoSnapshot) -> Observation:
        """Back to ``snapshot`` (taken by this backend); the observation there. Every step
        from here on is the one that followed the snapshot, bit for bit (mj_step computes
        everything else from the integration state); a camera image before the next step
        shows the restored joints, one physics substep ahead of the poses observed."""
        if not isinstance(snapshot, MujocoSnapshot) or snapshot.owner is not self.model:
            raise ValueError("restore: the snapshot was not taken by this backend")
        d = self.data
        mujoco.mj_setState(self.model, d, snapshot.state, STATE)
        mujoco.mj_forward(self.model, d)
        for now, then in zip(
            (d.xpos, d.xquat, d.site_xpos, d.site_xmat), snapshot.poses, strict=True
        ):
            now[:] = then
        self._steps = snapshot.steps
        restore_task_attributes(self.task, snapshot.task)
        return self.observe()

    def close(self) -> None:
        if self._viewer is not None:
            self._viewer.close()
            self._viewer = None
        for renderer in self._renderers.values():
            renderer.close()
        self._renderers.clear()

    # ---- helpers ----------------------------------------------------------------------

    def _body(self, name: str) -> int:
        bid = self._body_ids.get(name)
        if bid is None:
            bid = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_BODY, name)
            if bid < 0:
                raise KeyError(f"the scene has no body '{name}'")
            self._body_ids[name] = bid
        return bid

    def __enter__(self) -> MujocoBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
