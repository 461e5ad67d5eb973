"""MuJoCo quadrotor backend: N drones of one multirotor description (its folder's MJCF
scene, ``MultirotorDescription.mujoco``) over a floor, behind the SimBackend contract
(``tether.sim.quadrotor.world`` holds the engine-independent part and documents actions and
observations).

The rotor thrusts, their moments, the reaction yaw torque and the drag are summed into one
wrench per drone (rotor moments about the centre of mass included, so it equals the per-rotor
forces) and applied at the centre of mass through ``xfrc_applied`` (world frame) every
physics step. The scene's drone body (``cf`` for the Crazyflie) and marker (``target``) are
copied once per drone, as cf<i> and cf<i>/target, before compiling. Every instance owns its
model, data and renderers.
"""

from __future__ import annotations

import copy
import math
import os
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import numpy as np

from tether.core.errors import ConfigError, MissingDependency
from tether.core.robot import RobotDescription
from tether.core.robot_kinds import MultirotorMujocoAssets
from tether.sim.mujoco.config_mujoco import MujocoQuadrotorConfig
from tether.sim.quadrotor.loads import rotate
from tether.sim.quadrotor.world import CAMERAS, QuadrotorWorld

# Headless machines have no X display: render through EGL unless the user chose a backend.
if "MUJOCO_GL" not in os.environ and not os.environ.get("DISPLAY"):
    os.environ["MUJOCO_GL"] = "egl"

try:
    import mujoco
except ImportError as exc:  # pragma: no cover - depends on the install
    raise MissingDependency("mujoco", "mujoco", "The MuJoCo backend") from exc


def scene_xml(
    scene: Path,
    num_drones: int,
    physics_dt: float,
    assets: MultirotorMujocoAssets | None = None,
) -> str:
    """The scene file with ``num_drones`` copies of its drone body (as cf<i>) and of its
    target marker (``target`` for one drone, else cf<i>/target), as MJCF text; body names
    from ``assets`` (default: "cf" and "target")."""
    body = assets.body if assets is not None else "cf"
    marker = assets.target if assets is not None else "target"
    root = ET.parse(scene).getroot()
    world = root.find("worldbody")
    drone = world.find(f"body[@name='{body}']") if world is not None else None
    target = world.find(f"body[@name='{marker}']") if world is not None else None
    if world is None or drone is None or target is None:
        missing = body if drone is None else marker
        raise ConfigError(f"MuJoCo scene {scene} has no body '{missing}' in its worldbody")
    world.remove(drone)
    world.remove(target)
    for i in range(num_drones):
        d = copy.deepcopy(drone)
        d.set("name", f"cf{i}")
        for site in d.iter("site"):
            site.set("name", f"cf{i}/{site.get('name')}")
        world.append(d)
    for i in range(num_drones):
        t = copy.deepcopy(target)
        t.set("name", "target" if num_drones == 1 else f"cf{i}/target")
        world.append(t)
    option = root.find("option")
    assert option is not None
    option.set("timestep", repr(physics_dt))
    return ET.tostring(root, encoding="unicode")


class MujocoQuadrotorBackend(QuadrotorWorld):
    """SimBackend on MuJoCo for a quadcopter robot; see QuadrotorWorld for the layout."""

    engine = "MuJoCo"

    def __init__(
        self, cfg: MujocoQuadrotorConfig, robot: RobotDescription, task: Any = None
    ) -> None:
        super().__init__(cfg, robot, task)
        assets = self.robot.mujoco
        scene = self.robot.asset(assets.scene)
        if not scene.is_file():
            raise ConfigError(f"robot '{self.robot.name}': MuJoCo scene {scene} not found")
        try:
            xml = scene_xml(scene, self.num_drones, self.physics_dt, assets)
        except ConfigError as exc:
            raise ConfigError(f"robot '{self.robot.name}': {exc}") from None
        self.model = mujoco.MjModel.from_xml_string(xml)
        self.data = mujoco.MjData(self.model)
        m = self.model
        bodies = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, n) for n in self.drone_names]
        self._bodies = np.array(bodies)
        jnts = [m.body_jntadr[b] for b in bodies]
        self._qadr = np.array([m.jnt_qposadr[j] for j in jnts])
        self._dadr = np.array([m.jnt_dofadr[j] for j in jnts])
        self._adr = [(int(a), int(b)) for a, b in zip(self._qadr, self._dadr, strict=True)]
        self._qidx = (self._qadr[:, None] + np.arange(7)).reshape(-1)
        self._didx = (self._dadr[:, None] + np.arange(6)).reshape(-1)
        self._mocap = np.array(
            [
                m.body_mocapid[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, n)]
                for n in self.target_names
            ]
        )
        self._renderers: dict[tuple[int, int], Any] = {}
        self._viewer: Any = None
        self.reset(0)
        if not cfg.headless:
            from mujoco import viewer

            self._viewer = viewer.launch_passive(self.model, self.data)

    # ---- engine interface ---------------------------------------------------------------

    def _engine_state_lists(self) -> list[list[float]]:
        # a free joint's qvel: linear velocity in the world, angular velocity in the body
        qpos, qvel = self.data.qpos, self.data.qvel
        return [[*qpos[qa : qa + 7].tolist(), *qvel[da : da + 6].tolist()] for qa, da in self._adr]

    def _engine_set_states(self, states: np.ndarray) -> None:
        d = self.data
        d.qpos[self._qidx] = states[:, 0:7].reshape(-1)
        d.qvel[self._didx] = states[:, 7:13].reshape(-1)
        d.qacc_warmstart[:] = 0.0
        mujoco.mj_forward(self.model, d)

    def _engine_apply(
        self,
        i: int,
        rot: tuple[float, ...],
        thrust: list[float],
        torque: tuple[float, float, float],
        drag: tuple[float, float, float],
    ) -> None:
        force = (drag[0], drag[1], drag[2] + thrust[0] + thrust[1] + thrust[2] + thrust[3])
        self.data.xfrc_applied[self._bodies[i]] = (*rotate(rot, force), *rotate(rot, torque))

    def _engine_step(self) -> None:
        mujoco.mj_step(self.model, self.data)

    def step(self, action: np.ndarray) -> Any:
        result = super().step(action)
        if self._viewer is not None:
            self._viewer.sync()
        return result

    def _engine_target(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        k = self._mocap[i]
        return self.data.mocap_pos[k].copy(), self.data.mocap_quat[k].copy()

    def _engine_set_target(self, i: int, pos: np.ndarray, quat: np.ndarray) -> None:
        k = self._mocap[i]
        self.data.mocap_pos[k] = pos
        self.data.mocap_quat[k] = quat

    # ---- rendering and lifetime ---------------------------------------------------------

    def render(self, camera: str) -> np.ndarray:
        """Image (H, W, 3) uint8 from a world camera (the same views as PyBullet's)."""
        cam = self.spec.camera(camera)
        key = (cam.height, cam.width)
        renderer = self._renderers.get(key)
        if renderer is None:
            vis = self.model.vis.global_
            vis.offwidth = max(vis.offwidth, cam.width)
            vis.offheight = max(vis.offheight, cam.height)
            renderer = self._renderers[key] = mujoco.Renderer(self.model, cam.height, cam.width)
        eye, look = (np.asarray(v, dtype=np.float64) for v in CAMERAS[camera])
        fwd = look - eye
        view = mujoco.MjvCamera()
        view.type = mujoco.mjtCamera.mjCAMERA_FREE
        view.lookat[:] = look
        view.distance = float(np.linalg.norm(fwd))
        view.azimuth = math.degrees(math.atan2(fwd[1], fwd[0]))
        view.elevation = math.degrees(math.asin(fwd[2] / view.distance))
        self.model.vis.global_.fovy = cam.fovy_deg
        mujoco.mj_forward(self.model, self.data)
        renderer.update_scene(self.data, camera=view)
        return np.asarray(renderer.render())

    def close(self) -> None:
        if getattr(self, "_viewer", None) is not None:
            self._viewer.close()
            self._viewer = None
        for renderer in getattr(self, "_renderers", {}).values():
            renderer.close()
        self._renderers = {}
