"""``sim.type: isaacsim``: Isaac Sim in process, an arm backend parameterised by the robot like
the MuJoCo and PyBullet ones (docs/isaac_sim.md).

UNVERIFIED: Isaac Sim needs an NVIDIA RTX GPU and NVIDIA's package index; the machines Tether
is developed and tested on have neither, so the two adapters below have never run. They are
written against the Isaac Sim documentation:

- ``CoreApi``, Isaac Sim 4.5 / 5.x: ``isaacsim.core.api.World``,
  ``isaacsim.core.prims.SingleArticulation``, ``isaacsim.core.utils.types.ArticulationAction``,
  ``isaacsim.core.api.objects.DynamicCuboid``, ``isaacsim.sensors.camera.Camera``;
- ``ExperimentalApi``, Isaac Sim 5.x / 6.x (where 6.x deprecates the core API):
  ``isaacsim.core.experimental.prims.Articulation`` / ``RigidPrim``,
  ``isaacsim.core.simulation_manager.SimulationManager``.

``SimulationApp`` is created before any other isaacsim import (:func:`simulation_app`), as
Isaac requires. What Tether does around the adapter (joint names to the articulation's DOF
order, the control period in physics steps, the observation, the camera images' shape) is
tested with a fake adapter (tests/sim/test_isaacsim_side.py); the backend conformance suite
lists ``isaacsim`` and skips it here with :func:`isaac_missing`'s sentence.
"""

from __future__ import annotations

import importlib.util
import math
from typing import Any, Protocol

import numpy as np

from tether.core.errors import ConfigError, TetherError
from tether.core.kinematics import mat_to_quat
from tether.core.robot import ArmDescription, RobotDescription
from tether.core.types import Observation, StepResult
from tether.sim.isaac.config_isaac import IsaacSimConfig
from tether.sim.scoring import arm_observation, score_step

# each robot's asset under Isaac's asset root (Isaac Sim 4.5 / 5.x)
ISAAC_ROBOTS = {"panda": "/Isaac/Robots/FrankaRobotics/FrankaPanda/franka.usd"}
ROBOT_PRIM = "/World/robot"
# the task objects the backend builds: name -> (side of a cube in m, mass in kg)
CUBES = {"cube": (0.05, 0.1)}
# camera poses in the robot's base frame: position (m), orientation w x y z (USD cameras look
# down -z); "wrist" rides on the hand
CAMERA_POSES = {
    "front": ((1.3, 0.0, 0.6), (0.5963, 0.3799, 0.3799, 0.5963)),
    "wrist": ((0.05, 0.0, 0.04), (0.0, 0.7071, 0.7071, 0.0)),
}

NOT_INSTALLED = (
    "Isaac Sim is not installed here: sim.type isaacsim runs inside Isaac Sim 4.5 / 5.x's "
    "Python on a machine with an NVIDIA RTX GPU (Isaac Sim's python.sh, or `pip install "
    "isaacsim[all] --extra-index-url https://pypi.nvidia.com`); sim.type isaac_ros drives a "
    "running Isaac Sim over ROS 2 instead (docs/isaac_sim.md)"
)


def isaac_missing() -> str | None:
    """Why Isaac Sim cannot run here (one sentence), or None when ``isaacsim`` is importable."""
    if importlib.util.find_spec("isaacsim") is None:
        return NOT_INSTALLED
    return None


_APP: Any = None


def simulation_app(headless: bool) -> Any:
    """Isaac's SimulationApp, created once per process, before any other isaacsim import."""
    global _APP
    if _APP is None:
        try:
            from isaacsim import SimulationApp
        except Exception as exc:  # the PyPI stub, a missing GPU driver, ...
            raise ConfigError(f"{NOT_INSTALLED} (importing isaacsim failed: {exc})") from None
        _APP = SimulationApp({"headless": headless})
    return _APP


class Adapter(Protocol):
    """What the backend needs from one of Isaac's Python APIs."""

    dof_names: list[str]

    def load(self, usd: str, physics_dt: float, rendering_dt: float) -> None: ...
    def add_cube(self, name: str, side: float, mass: float) -> None: ...
    def add_camera(self, name: str, width: int, height: int, fovy_deg: float) -> None: ...
    def start(self) -> None: ...
    def set_joint_positions(self, q: np.ndarray) -> None: ...
    def command(self, q: np.ndarray) -> None: ...
    def step(self, substeps: int, render: bool) -> None: ...
    def joint_positions(self) -> np.ndarray: ...
    def joint_velocities(self) -> np.ndarray: ...
    def body_pose(self, name: str) -> tuple[np.ndarray, np.ndarray]: ...
    def set_body_pose(self, name: str, pos: np.ndarray, quat: np.ndarray) -> None: ...
    def render(self, camera: str) -> np.ndarray: ...
    def close(self) -> None: ...


def _asset(usd: str) -> str:
    """A path under Isaac's asset root ("/Isaac/...") made whole; a file path as it is."""
    if not usd.startswith("/Isaac/"):
        return usd
    from isaacsim.storage.native import get_assets_root_path

    root = get_assets_root_path()
    if root is None:
        raise TetherError("Isaac Sim's asset root is not reachable (Nucleus or a local mirror)")
    return str(root) + usd


def _np(x: Any) -> np.ndarray:
    """numpy from what Isaac returns (numpy, torch or warp arrays)."""
    if hasattr(x, "numpy"):
        x = x.numpy()
    return np.asarray(x, np.float64)


class CoreApi:
    """Isaac Sim 4.5 / 5.x: World + SingleArticulation (UNVERIFIED, module docstring)."""

    def __init__(self) -> None:
        self.objects: dict[str, Any] = {}
        self.cameras: dict[str, Any] = {}
        self.dof_names: list[str] = []

    def load(self, usd: str, physics_dt: float, rendering_dt: float) -> None:
        from isaacsim.core.api import World
        from isaacsim.core.prims import SingleArticulation
        from isaacsim.core.utils.stage import add_reference_to_stage

        self.world = World(
            stage_units_in_meters=1.0, physics_dt=physics_dt, rendering_dt=rendering_dt
        )
        self.world.scene.add_default_ground_plane()
        add_reference_to_stage(usd_path=_asset(usd), prim_path=ROBOT_PRIM)
        self.robot = self.world.scene.add(SingleArticulation(prim_path=ROBOT_PRIM, name="robot"))

    def add_cube(self, name: str, side: float, mass: float) -> None:
        from isaacsim.core.api.objects import DynamicCuboid

        cube = DynamicCuboid(
            prim_path=f"/World/{name}",
            name=name,
            position=np.array([0.5, 0.0, side / 2]),
            scale=np.full(3, side),
            mass=mass,
        )
        self.objects[name] = self.world.scene.add(cube)

    def add_camera(self, name: str, width: int, height: int, fovy_deg: float) -> None:
        from isaacsim.sensors.camera import Camera

        pos, quat = CAMERA_POSES[name]
        parent = f"{ROBOT_PRIM}/panda_hand" if name == "wrist" else "/World"
        cam = Camera(
            prim_path=f"{parent}/{name}_camera",
            resolution=(width, height),
            translation=np.array(pos),
            orientation=np.array(quat),
        )
        self.cameras[name] = (cam, height / width, fovy_deg)

    def start(self) -> None:
        self.world.reset()  # initialises the articulation and the physics views
        self.dof_names = list(self.robot.dof_names)
        self._init_cameras()

    def _init_cameras(self) -> None:
        """Each camera's vertical field of view from its focal length and aperture."""
        for cam, aspect, fovy in self.cameras.values():
            cam.initialize()
            vertical = cam.get_horizontal_aperture() * aspect
            cam.set_focal_length(vertical / (2.0 * math.tan(math.radians(fovy) / 2.0)))

    def set_joint_positions(self, q: np.ndarray) -> None:
        self.robot.set_joint_positions(q)
        self.robot.set_joint_velocities(np.zeros_like(q))

    def command(self, q: np.ndarray) -> None:
        from isaacsim.core.utils.types import ArticulationAction

        self.robot.apply_action(ArticulationAction(joint_positions=q))

    def step(self, substeps: int, render: bool) -> None:
        for i in range(substeps):
            self.world.step(render=render and i == substeps - 1)

    def joint_positions(self) -> np.ndarray:
        return _np(self.robot.get_joint_positions())

    def joint_velocities(self) -> np.ndarray:
        return _np(self.robot.get_joint_velocities())

    def body_pose(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        pos, quat = self.objects[name].get_world_pose()
        return _np(pos), _np(quat)

    def set_body_pose(self, name: str, pos: np.ndarray, quat: np.ndarray) -> None:
        obj = self.objects[name]
        obj.set_world_pose(position=pos, orientation=quat)
        obj.set_linear_velocity(np.zeros(3))
        obj.set_angular_velocity(np.zeros(3))

    def render(self, camera: str) -> np.ndarray:
        return np.asarray(self.cameras[camera][0].get_rgba())

    def close(self) -> None:
        self.world.stop()
        self.world.clear_instance()


class ExperimentalApi(CoreApi):
    """Isaac Sim 5.x / 6.x: ``isaacsim.core.experimental`` prims on a SimulationManager
    (UNVERIFIED, module docstring). The batched prims take and return arrays of one."""

    def load(self, usd: str, physics_dt: float, rendering_dt: float) -> None:
        from isaacsim.core.experimental.prims import Articulation
        from isaacsim.core.simulation_manager import SimulationManager
        from isaacsim.core.utils.stage import add_reference_to_stage

        self.manager = SimulationManager
        SimulationManager.setup_simulation(dt=physics_dt)
        self.rendering_dt = rendering_dt
        add_reference_to_stage(usd_path=_asset(usd), prim_path=ROBOT_PRIM)
        self.robot = Articulation(ROBOT_PRIM)

    def add_cube(self, name: str, side: float, mass: float) -> None:
        from isaacsim.core.experimental.objects import Cube
        from isaacsim.core.experimental.prims import RigidPrim

        Cube(f"/World/{name}", sizes=side, positions=[0.5, 0.0, side / 2])
        self.objects[name] = RigidPrim(f"/World/{name}", masses=[mass])

    def start(self) -> None:
        import omni.timeline

        omni.timeline.get_timeline_interface().play()
        self.dof_names = list(self.robot.dof_names)
        self._init_cameras()

    def set_joint_positions(self, q: np.ndarray) -> None:
        self.robot.set_dof_positions(q[None])
        self.robot.set_dof_velocities(np.zeros((1, len(q))))

    def command(self, q: np.ndarray) -> None:
        self.robot.set_dof_position_targets(q[None])

    def step(self, substeps: int, render: bool) -> None:
        import omni.kit.app

        for _ in range(substeps):
            self.manager.step()
        if render:
            omni.kit.app.get_app().update()

    def joint_positions(self) -> np.ndarray:
        return _np(self.robot.get_dof_positions())[0]

    def joint_velocities(self) -> np.ndarray:
        return _np(self.robot.get_dof_velocities())[0]

    def body_pose(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        pos, quat = self.objects[name].get_world_poses()
        return _np(pos)[0], _np(quat)[0]

    def set_body_pose(self, name: str, pos: np.ndarray, quat: np.ndarray) -> None:
        obj = self.objects[name]
        obj.set_world_poses(positions=np.asarray(pos)[None], orientations=np.asarray(quat)[None])
        obj.set_velocities(linear_velocities=np.zeros((1, 3)), angular_velocities=np.zeros((1, 3)))

    def close(self) -> None:
        import omni.timeline

        omni.timeline.get_timeline_interface().stop()


def make_adapter(api: str) -> Adapter:
    """The adapter for ``sim.api`` (auto: the experimental API where it imports)."""
    if api == "experimental" or (
        api == "auto" and importlib.util.find_spec("isaacsim.core.experimental") is not None
    ):
        return ExperimentalApi()
    return CoreApi()


class IsaacSimBackend:
    """SimBackend of an arm in Isaac Sim, in process (module docstring). ``adapter``: drive
    this one instead of Isaac's (tests of Tether's side)."""

    def __init__(
        self,
        cfg: IsaacSimConfig,
        robot: RobotDescription,
        task: Any = None,
        adapter: Adapter | None = None,
    ) -> None:
        if not isinstance(robot, ArmDescription):
            raise ConfigError(
                f"the isaacsim backend simulates arms; robot '{robot.name}' is a {robot.kind}"
            )
        usd = cfg.usd or ISAAC_ROBOTS.get(robot.name)
        if usd is None:
            raise ConfigError(
                f"robot '{robot.name}' has no Isaac asset here: set sim.usd to its USD "
                f"(known: {', '.join(ISAAC_ROBOTS)})"
            )
        objects = tuple(task.objects) if task is not None else ()
        unknown = [o for o in objects if o not in CUBES]
        if unknown:
            raise ConfigError(
                f"the isaacsim backend builds the lift task's cube only so far; task objects "
                f"{unknown} have no Isaac prim yet"
            )
        if adapter is None:
            missing = isaac_missing()
            if missing is not None:
                raise ConfigError(missing)
            simulation_app(cfg.headless)
            adapter = make_adapter(cfg.api)
        self.cfg = cfg
        self.robot = robot
        self.task = task
        self.adapter = adapter
        self.spec = robot.spec(cfg.control_hz, cfg.cameras)
        self._objects = objects
        self._max_duration = getattr(task, "max_duration_s", None)
        control_dt = 1.0 / cfg.control_hz
        # the largest physics step <= physics_dt that divides the control period evenly
        self.substeps = max(1, math.ceil(control_dt / cfg.physics_dt - 1e-9))
        adapter.load(usd, control_dt / self.substeps, control_dt)
        for name in objects:
            adapter.add_cube(name, *CUBES[name])
        for cam in cfg.cameras:
            if cam.name not in CAMERA_POSES:
                raise ConfigError(
                    f"camera '{cam.name}': the isaacsim backend places {', '.join(CAMERA_POSES)}"
                )
            adapter.add_camera(cam.name, cam.width, cam.height, cam.fovy_deg)
        adapter.start()
        joints = (*robot.arm_joints, *robot.gripper.joints)
        missing_joints = [j for j in joints if j not in adapter.dof_names]
        if missing_joints:
            raise ConfigError(
                f"the Isaac articulation ({usd}) has no joint {missing_joints[0]!r} "
                f"(its joints: {adapter.dof_names})"
            )
        # the articulation's DOF index of each state joint (arm, then fingers)
        self._idx = np.array([adapter.dof_names.index(j) for j in joints])
        self._n = len(adapter.dof_names)
        self._dof = robot.dof
        self._home = np.asarray(robot.home, np.float64)
        self._lower = np.asarray(robot.lower, np.float64)
        self._upper = np.asarray(robot.upper, np.float64)
        self._steps = 0
        self.reset(0)

    def _full(self, action: np.ndarray) -> np.ndarray:
        """Position targets for every DOF of the articulation from an arm action (dof + 1):
        each finger gets the opening; DOFs Tether does not drive hold 0."""
        full = np.zeros(self._n)
        a = np.asarray(action, np.float64)
        full[self._idx] = np.r_[a[: self._dof], np.full(len(self._idx) - self._dof, a[self._dof])]
        return full

    def reset(self, seed: int | None = None) -> Observation:
        """The home pose plus ``reset_noise`` and the task's reset distribution, from
        ``seed`` (drawn as the MuJoCo and PyBullet backends draw them); time restarts at 0."""
        rng = np.random.default_rng(seed)
        noise = self.cfg.reset_noise
        q = np.clip(self._home + rng.uniform(-noise, noise, self._dof), self._lower, self._upper)
        full = self._full(np.r_[q, self.robot.gripper.home])
        self.adapter.set_joint_positions(full)
        self.adapter.command(full)
        if self.task is not None:
            self.task.reset(self, rng)
        self._steps = 0
        return self.observe()

    def step(self, action: np.ndarray) -> StepResult:
        a = np.asarray(action, np.float64)
        if a.shape != self.spec.action.shape:
            raise ValueError(f"action must have shape {self.spec.action.shape}, got {a.shape}")
        self.adapter.command(self._full(a))
        render = bool(self.cfg.cameras) and self.cfg.render_in_obs
        self.adapter.step(self.substeps, render)
        self._steps += 1
        return score_step(self, self.observe(), self._max_duration)

    @property
    def sim_time(self) -> float:
        return self._steps / self.cfg.control_hz

    def observe(self) -> Observation:
        q = self.adapter.joint_positions()[self._idx]
        v = self.adapter.joint_velocities()[self._idx]
        return arm_observation(self, q, v, self._objects)

    def render(self, camera: str) -> np.ndarray:
        """(H, W, 3) uint8 from Isaac's RGBA (or RGB) image of ``camera``."""
        cam = self.spec.camera(camera)
        img = np.asarray(self.adapter.render(camera))
        if img.dtype != np.uint8:  # float images in [0, 1]
            img = np.clip(np.asarray(img, np.float64) * 255.0 + 0.5, 0, 255).astype(np.uint8)
        if img.ndim != 3 or img.shape[:2] != (cam.height, cam.width) or img.shape[2] < 3:
            raise TetherError(
                f"Isaac's camera '{camera}' gave an image of shape {img.shape}, the camera is "
                f"{cam.width}x{cam.height}"
            )
        return np.ascontiguousarray(img[..., :3])

    def body_pose(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        return self.adapter.body_pose(name)

    def set_body_pose(self, name: str, pos: np.ndarray, quat: np.ndarray) -> None:
        q = np.asarray(quat, np.float64)
        self.adapter.set_body_pose(name, np.asarray(pos, np.float64), q / np.linalg.norm(q))

    def ee_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """The TCP from Tether's kinematics of the measured joints (the base at the origin)."""
        q = self.adapter.joint_positions()[self._idx][: self._dof]
        p, R = self.robot.kinematics.fk(q)
        return np.asarray(p, np.float64), mat_to_quat(R)

    def close(self) -> None:
        self.adapter.close()
