"""MuJoCo backend: a Panda on a table (sim/assets/panda/scene.xml) plus the task's objects.

Every instance owns its model, data and renderers, so several coexist in one process.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from tether.core.errors import ConfigError, MissingDependency
from tether.core.protocols import Task
from tether.core.types import IMAGE_PREFIX, Observation, StepResult
from tether.sim.mujoco.config_mujoco import MujocoConfig
from tether.sim.robots.panda import (
    ARM_JOINTS,
    ARM_LOWER,
    ARM_UPPER,
    FINGER_JOINTS,
    HOME_ARM,
    HOME_FINGER,
    panda_spec,
)
from tether.sim.scoring import score_step

# Headless machines have no X display: render through EGL unless the user chose a backend.
if "MUJOCO_GL" not in os.environ and not os.environ.get("DISPLAY"):
    os.environ["MUJOCO_GL"] = "egl"

try:
    import mujoco
except ImportError as exc:  # pragma: no cover - depends on the install
    raise MissingDependency("mujoco", "mujoco", "The MuJoCo backend") from exc

ASSETS = Path(__file__).resolve().parent.parent / "assets"
# bodies the scene defines for tasks; those a task does not list are removed before compiling
TASK_BODIES = ("cube", "target")
TCP_SITE = "tcp"


class MujocoBackend:
    """SimBackend on MuJoCo. Action (8,): 7 arm joint targets (rad) + per-finger opening (m).

    Observation keys: ``state`` (9,) joint positions, ``velocity`` (9,) joint velocities,
    ``env_state`` (7 * len(task.objects),) position + wxyz quaternion of each task object,
    ``ee_pose`` (7,) TCP position + wxyz quaternion, and ``images/<cam>`` (H, W, 3) uint8
    when ``cfg.render_in_obs``. All float32, world frame, SI units.
    """

    def __init__(self, cfg: MujocoConfig, robot: str = "panda", task: Task | None = None) -> None:
        if robot != "panda":
            raise ConfigError(f"the MuJoCo backend has no robot '{robot}' (available: panda)")
        self.cfg = cfg
        self.task = task
        self.spec = panda_spec(cfg.control_hz, cfg.cameras)
        objects = tuple(task.objects) if task is not None else ()
        unknown = [o for o in objects if o not in TASK_BODIES]
        if unknown:
            raise ConfigError(
                f"the MuJoCo scene has no task object(s) {unknown} "
                f"(available: {', '.join(TASK_BODIES)})"
            )
        self.model = self._compile(ASSETS / robot / "scene.xml", objects)
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
        names = (*ARM_JOINTS, *FINGER_JOINTS)
        jids = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, n) for n in names]
        self._qadr = np.array([m.jnt_qposadr[j] for j in jids])
        self._dadr = np.array([m.jnt_dofadr[j] for j in jids])
        aids = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_ACTUATOR, n) for n in names]
        self._act_arm = np.array(aids[:7])
        self._act_fingers = np.array(aids[7:])
        self._tcp = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SITE, TCP_SITE)
        for cam in cfg.cameras:
            cid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_CAMERA, cam.name)
            if cid < 0:
                raise ConfigError(f"sim.cameras: the scene has no camera '{cam.name}'")
            m.cam_fovy[cid] = cam.fovy_deg
        self.reset(0)
        if not cfg.headless:
            self._viewer = self._open_viewer()

    def _open_viewer(self) -> Any:
        """MuJoCo's passive viewer window, synced after every step."""
        if not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"):
            raise ConfigError(
                "sim.headless=false needs a display (DISPLAY is not set); "
                "run headless or under a desktop session"
            )
        import mujoco.viewer

        return mujoco.viewer.launch_passive(self.model, self.data)

    @staticmethod
    def _compile(path: Path, objects: tuple[str, ...]) -> Any:
        spec = mujoco.MjSpec.from_file(str(path))
        for name in TASK_BODIES:
            if name not in objects:
                spec.delete(spec.body(name))
        return spec.compile()

    # ---- SimBackend -------------------------------------------------------------------

    def reset(self, seed: int | None = None) -> Observation:
        """Home pose plus uniform noise (``cfg.reset_noise`` rad), fingers open, then the
        task's reset distribution, all drawn from ``seed``; sim time restarts at 0."""
        rng = np.random.default_rng(seed)
        m, d = self.model, self.data
        mujoco.mj_resetData(m, d)
        q = np.asarray(HOME_ARM) + rng.uniform(-self.cfg.reset_noise, self.cfg.reset_noise, 7)
        q = np.clip(q, ARM_LOWER, ARM_UPPER)
        d.qpos[self._qadr[:7]] = q
        d.qpos[self._qadr[7:]] = HOME_FINGER
        d.ctrl[self._act_arm] = q
        d.ctrl[self._act_fingers] = HOME_FINGER
        mujoco.mj_forward(m, d)
        if self.task is not None:
            self.task.reset(self, rng)
        d.time = 0.0
        self._steps = 0
        mujoco.mj_forward(m, d)
        return self.observe()

    def step(self, action: np.ndarray) -> StepResult:
        """Hold ``action`` (8,) for one control period (``self.substeps`` physics steps)."""
        a = np.asarray(action, dtype=np.float64)
        if a.shape != self.spec.action.shape:
            raise ValueError(f"action must have shape {self.spec.action.shape}, got {a.shape}")
        d = self.data
        d.ctrl[self._act_arm] = a[:7]
        d.ctrl[self._act_fingers] = a[7]  # both fingers get the same opening
        mujoco.mj_step(self.model, d, nstep=self.substeps)
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
        d = self.data
        env = [np.concatenate(self.body_pose(name)) for name in self._objects]
        pos, quat = self.ee_pose()
        data = {
            "state": d.qpos[self._qadr].astype(np.float32),
            "velocity": d.qvel[self._dadr].astype(np.float32),
            "env_state": (np.concatenate(env) if env else np.zeros(0)).astype(np.float32),
            "ee_pose": np.concatenate([pos, quat]).astype(np.float32),
        }
        if self.cfg.render_in_obs:
            for cam in self.spec.cameras:
                data[IMAGE_PREFIX + cam.name] = self.render(cam.name)
        return Observation(data, stamp_ns=round(self.sim_time * 1e9))

    def body_pose(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """World pose of body ``name``: position (3,) m, quaternion (4,) wxyz (float64)."""
        bid = self._body(name)
        return self.data.xpos[bid].copy(), self.data.xquat[bid].copy()

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

    def ee_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """TCP world pose: position (3,) m, quaternion (4,) wxyz."""
        quat = np.empty(4)
        mujoco.mju_mat2Quat(quat, self.data.site_xmat[self._tcp])
        return self.data.site_xpos[self._tcp].copy(), quat

    def close(self) -> None:
        if self._viewer is not None:
            self._viewer.close()
            self._viewer = None
        for renderer in self._renderers.values():
            renderer.close()
        self._renderers.clear()

    # ---- helpers ----------------------------------------------------------------------

    def _body(self, name: str) -> int:
        bid = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_BODY, name)
        if bid < 0:
            raise KeyError(f"the scene has no body '{name}'")
        return bid

    def __enter__(self) -> MujocoBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
