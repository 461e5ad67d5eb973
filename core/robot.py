"""A robot is data: one description per robot folder (``robots/<name>/robot.py``), holding the
facts every layer reads (joints, limits, home pose, kinematics, assets per engine, mock and
driver settings). Engines, ROS adapters, experts and teleop take a description and never a
robot's name, so a new robot touches no node.

Light: pydantic and numpy only. Asset paths are relative to the robot's folder.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tether.core.kinematics import Chain, DHChain
from tether.core.spec import ActionSpec, CameraSpec, JointSpec, RobotKind, RobotSpec

Vec3 = tuple[float, float, float]


class RobotDescription(BaseModel):
    """What every robot has. ``folder`` is set by discovery (tether.robots.plugins)."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    name: str
    kind: RobotKind
    # one line for `tether robots` and docs: maker, model, where its numbers come from
    summary: str = ""
    # the robot's folder (assets resolve against it)
    folder: Path | None = None
    # default control rate of the robot's spec (Hz)
    control_hz: float = Field(100.0, gt=0)

    def spec(
        self, control_hz: float | None = None, cameras: Sequence[CameraSpec] = (), **options: Any
    ) -> RobotSpec:  # pragma: no cover - every kind overrides it
        raise NotImplementedError

    def asset(self, relative: str | Path) -> Path:
        """Absolute path of a file in the robot's folder."""
        if self.folder is None:
            raise ValueError(f"robot '{self.name}' has no folder (built outside discovery)")
        return self.folder / relative


class GripperDescription(BaseModel):
    """A parallel gripper driven by one action element: the opening of EACH finger (m)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # the finger joints (prismatic), all driven to the same opening; the first one is the
    # action element's name
    joints: tuple[str, ...]
    # per-finger travel (m): 0 = closed
    lower: float = 0.0
    upper: float
    max_velocity: float = Field(gt=0)
    # force per finger (N) of the simulated actuator
    effort: float = Field(gt=0)
    # opening at reset (m)
    home: float


class MujocoArmAssets(BaseModel):
    """The robot on the table in MuJoCo: a complete scene whose table, task bodies (``cube``,
    ``target``) and ``front`` camera match tether.sim.scene (a test checks every arm)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    scene: str
    # site at the TCP, oriented as DHChain's tool frame
    tcp_site: str = "tcp"
    # position actuators, one per arm joint then one per finger joint (default: the joint
    # names)
    arm_actuators: tuple[str, ...] | None = None
    gripper_actuators: tuple[str, ...] | None = None


class PybulletCamera(BaseModel):
    """A camera as MuJoCo defines one: position and the camera's x and y axes (it looks along
    -x cross y), in the world frame, or in the frame of ``link`` when set."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pos: Vec3
    x_axis: Vec3
    y_axis: Vec3
    link: str | None = None


class PybulletArmAssets(BaseModel):
    """The robot in PyBullet; the engine builds the table, task bodies and front camera."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # URDF in the robot's folder, or "module:function" taking (pybullet, client_id) and
    # returning the body id (e.g. to load and patch a pybullet_data model)
    urdf: str | None = None
    loader: str | None = None
    # the link the TCP is fixed to and the TCP in that link's frame (m along its z)
    tcp_link: str
    tcp_offset: float = 0.0
    # diagonal inertias (kg m^2) replacing the URDF's, per link
    inertia: dict[str, Vec3] = Field(default_factory=dict)
    # links with grip friction (fingers)
    grip_links: tuple[str, ...] = ()
    # time constant (s) of the position servo (positionGain = dt / servo_tau)
    servo_tau: float = Field(0.01, gt=0)
    # cameras on the robot (world-fixed ones come from the engine's scene)
    cameras: dict[str, PybulletCamera] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_source(self) -> PybulletArmAssets:
        if (self.urdf is None) == (self.loader is None):
            raise ValueError("set exactly one of urdf and loader")
        return self


class ArmHardware(BaseModel):
    """How the robot's ROS 2 driver names things (defaults of a ``hardware:`` section)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # the JointTrajectoryController the driver runs
    controller: str = "joint_trajectory_controller"
    # the driver's joint names in action order (default: the description's)
    joints: tuple[str, ...] | None = None


class ArmDescription(RobotDescription):
    """A fixed-base arm with a parallel gripper.

    Action (dof + 1,), mode joint_position: one target per arm joint (rad), then the
    opening of each finger (m). State (dof + fingers,): arm joint positions (rad), then
    every finger joint's position (m).
    """

    kind: Literal["arm"] = "arm"
    joints: tuple[JointSpec, ...]
    # actuator effort per arm joint (N m): the simulated servos' force limit
    effort: tuple[float, ...]
    # ready pose (rad), TCP above the table pointing down
    home: tuple[float, ...]
    gripper: GripperDescription
    chain: DHChain
    mujoco: MujocoArmAssets
    pybullet: PybulletArmAssets
    hardware: ArmHardware = Field(default_factory=ArmHardware)
    # the scripted expert's grasp height above the cube centre (m): where the fingertips'
    # centre sits when the pads close on the cube
    grasp_offset: float = 0.0

    @model_validator(mode="after")
    def _consistent(self) -> ArmDescription:
        n = len(self.joints)
        for name in ("effort", "home"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"{name} needs {n} elements (one per arm joint)")
        if self.chain.dof != n:
            raise ValueError(f"chain has {self.chain.dof} joints, the arm {n}")
        for j, q in zip(self.joints, self.home, strict=True):
            if not j.lower <= q <= j.upper:
                raise ValueError(f"home pose of {j.name} ({q}) is outside its limits")
        return self

    @property
    def dof(self) -> int:
        return len(self.joints)

    @property
    def arm_joints(self) -> tuple[str, ...]:
        return tuple(j.name for j in self.joints)

    @property
    def lower(self) -> tuple[float, ...]:
        return tuple(j.lower for j in self.joints)

    @property
    def upper(self) -> tuple[float, ...]:
        return tuple(j.upper for j in self.joints)

    @cached_property
    def kinematics(self) -> Chain:
        """FK / Jacobian / IK of the TCP in the base frame."""
        return self.chain.model()

    def spec(
        self, control_hz: float | None = None, cameras: Sequence[CameraSpec] = (), **options: Any
    ) -> RobotSpec:
        if options:
            raise TypeError(f"arm '{self.name}' takes no options {sorted(options)}")
        g = self.gripper
        finger = JointSpec(
            name=g.joints[0], lower=g.lower, upper=g.upper, max_velocity=g.max_velocity
        )
        action = ActionSpec(
            mode="joint_position",
            names=(*self.arm_joints, g.joints[0]),
            low=(*self.lower, g.lower),
            high=(*self.upper, g.upper),
            units=("rad",) * self.dof + ("m",),
        )
        return RobotSpec(
            name=self.name,
            kind="arm",
            joints=(*self.joints, finger),
            cameras=tuple(cameras),
            control_hz=control_hz or self.control_hz,
            action=action,
            state_names=(*self.arm_joints, *g.joints),
        )


class SpecFactoryDescription(RobotDescription):
    """A robot whose spec comes from a factory in its folder (``module:function`` taking
    ``control_hz``, ``cameras`` and the kind's options) and whose other facts live in a module
    of its folder; the typed kinds of tether.core.robot_kinds (mobile bases, multirotors)
    build on it."""

    factory: str
    # the module holding the robot's constants (geometry, sensors, scene)
    module: str

    def spec(
        self, control_hz: float | None = None, cameras: Sequence[CameraSpec] = (), **options: Any
    ) -> RobotSpec:
        import importlib

        mod, _, attr = self.factory.partition(":")
        fn = getattr(importlib.import_module(mod), attr)
        return fn(control_hz=control_hz or self.control_hz, cameras=tuple(cameras), **options)

    def facts(self) -> Any:
        """The module with the robot's constants."""
        import importlib

        return importlib.import_module(self.module)
