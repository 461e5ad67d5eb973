"""Experiment configs: YAML files under configs/, validated by pydantic, with dotted
command-line overrides (``policy.steps=10``). Every error is one line naming the field.

An experiment may extend another (``extends: panda_lift_expert.yaml``, found next to the
file first, see tether.core.paths.find_extended): the parent is read (itself extending, in a
chain), then the file is merged over it: mappings merge key by key, any other value (a
scalar, a list) replaces, and ``key: null`` removes the key (``sim: null`` drops the parent's
simulator so a ``hardware:`` section can take its place; a field goes back to its default).
Overrides apply to the merged result; an error names the file given and, when the field was
written elsewhere in the chain, that file too.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from tether.core import registry
from tether.core.errors import ConfigError
from tether.core.paths import experiment_root, find_extended, find_given, resolve_path
from tether.core.safety import SafetyConfig
from tether.core.spec import CameraSpec


class ComponentConfig(BaseModel):
    """Base of every registry-typed section: ``type`` picks the implementation."""

    model_config = ConfigDict(extra="forbid")
    type: str


class RosConfig(BaseModel):
    """How the ROS 2 graph runs."""

    model_config = ConfigDict(extra="forbid")
    namespace: str = ""
    # lockstep: the sim steps as soon as the action for the last observation arrives
    # (fastest, deterministic); realtime: the sim steps on a wall-clock timer at control_hz
    rate_mode: Literal["lockstep", "realtime"] = "realtime"
    # Fast DDS XML profile (shared-memory transport for images); a relative path resolves
    # like every path of an experiment (tether.core.paths), so the shipped one is found
    dds_profile: Path | None = Path("configs/dds/fastdds_shm.xml")
    # in lockstep, how long the sim waits for an action before stepping with the watchdog
    lockstep_timeout_s: float = Field(0.5, gt=0)
    # in lockstep, the sim also waits until the recorder has taken in every message of the
    # current observation (it acknowledges them on recorder_ack), so a slow recorder never
    # loses frames, and ends an episode only once its final observation is answered (the
    # last frame's action); `tether record` sets it
    wait_for_recorder: bool = False
    domain_id: int | None = Field(None, ge=0, le=232)
    # serve in chunks: the policy server answers chunk_request with timestamped action chunks
    # and a chunk_executor node executes them at the control rate (blending, late-row drops,
    # safety filter, cadence report); arms only, with rate_mode realtime
    chunked: bool = False
    # what every node of the graph spins on: rclpy's SingleThreadedExecutor (``default``) or
    # its EventsExecutor (``events``; README "Experiments and overrides", measured by
    # benchmarks/ros_loop.py)
    executor: Literal["default", "events"] = "events"

    @model_validator(mode="after")
    def _chunked_realtime(self) -> RosConfig:
        if self.chunked and self.rate_mode != "realtime":
            raise ValueError(
                "ros.chunked needs ros.rate_mode: realtime (the chunk executor runs on its "
                "own control-rate timer; lockstep steps the sim on each answered observation)"
            )
        return self


class EpisodesConfig(BaseModel):
    """Episode control: seeds are ``seed + k`` for the k-th reset since start."""

    model_config = ConfigDict(extra="forbid")
    count: int = Field(10, ge=1)
    seed: int = 0
    # start stepping as soon as the sim bridge is up (tether up); the demo starts episodes itself
    autostart: bool = True
    # after an episode ends, reset and start the next one
    auto_reset: bool = True


class DronesConfig(BaseModel):
    """How the drone sim bridge flies its drones (how many: ``sim.quadrotor.num_drones``)."""

    model_config = ConfigDict(extra="forbid")
    # the takeoff service climbs to this height (m, odom z) at takeoff_speed (m/s), then hovers
    takeoff_height: float = Field(1.0, gt=0, le=10)
    takeoff_speed: float = Field(0.5, gt=0, le=2)
    # below this height (m, odom z) a landing drone has touched down: its motors stop
    touchdown_height: float = Field(0.05, gt=0, le=0.5)
    # several simulated drones: a policy server per drone in its namespace, each seeing its
    # own odom (and its neighbours' for a swarm policy), or one batched server for the whole
    # world in the robot's namespace (docs/swarm.md)
    policy_servers: Literal["per_drone", "batched"] = "per_drone"


class FleetMember(BaseModel):
    """One drone of a hardware swarm (``hardware.fleet``): its namespace, where its local
    frame sits in the swarm's shared world frame, and what differs in its device and mock
    settings from ``hardware.device`` / ``hardware.mock_options``."""

    model_config = ConfigDict(extra="forbid")
    namespace: str = Field(min_length=1)
    # ENU offset (m) of the drone's local origin (a MAVLink autopilot's EKF origin, its
    # take-off point) in the shared frame its odom is published in
    origin: tuple[float, float, float] = (0.0, 0.0, 0.0)
    device: dict[str, Any] = Field(default_factory=dict)
    mock_options: dict[str, Any] = Field(default_factory=dict)


class HardwareConfig(BaseModel):
    """Real (or mock) hardware instead of a simulator: the hardware bridge drives it through
    the interfaces its driver already exposes (see tether.hardware.robots)."""

    model_config = ConfigDict(extra="forbid")
    # a registered hardware type (`tether plugins`): jtc_arm, a ros2_control
    # JointTrajectoryController (UR, Franka, xArm, Kinova drivers); twist_base: cmd_vel / odom
    # of a base driver; mavlink: PX4 / ArduPilot over pymavlink; crazyflie: Bitcraze cflib
    type: str
    # true: start mock hardware with the driver's interface (mock arm / base node, mock
    # autopilot on UDP loopback) instead of talking to a device
    mock: bool = False
    control_hz: float = Field(50.0, gt=0)
    cameras: list[CameraSpec] = Field(default_factory=list)
    # ROS namespace of the robot driver's topics (its joint_states, <controller>/joint_trajectory,
    # cmd_vel, odom); it must differ from ros.namespace, where the bridge publishes Tether's own
    driver_namespace: str = "/driver"
    # the JointTrajectoryController the arm driver runs (default: the robot's, e.g. UR:
    # scaled_joint_trajectory_controller)
    controller: str | None = None
    # the driver's joint names in the robot's action order (default: the robot's)
    joints: list[str] | None = None
    # how long the bridge waits for the device's first state before giving up (s)
    connect_timeout_s: float = Field(5.0, gt=0, le=60)
    # settings of the device's own config class (MavlinkConfig, CrazyflieConfig), and of the
    # mock (MockArmConfig, MockBaseConfig, MockAutopilotConfig); validated when built
    device: dict[str, Any] = Field(default_factory=dict)
    mock_options: dict[str, Any] = Field(default_factory=dict)
    # a drone's local origin in the shared world frame (ENU m): odom = local + origin
    origin: tuple[float, float, float] = (0.0, 0.0, 0.0)
    # several drones (a swarm): one hardware bridge (and mock, and policy server) per member,
    # each in its namespace under ros.namespace (docs/swarm.md); empty: one drone
    fleet: list[FleetMember] = Field(default_factory=list)

    @field_validator("fleet")
    @classmethod
    def _distinct(cls, value: list[FleetMember]) -> list[FleetMember]:
        names = [m.namespace.strip("/") for m in value]
        if len(set(names)) != len(names):
            raise ValueError(f"fleet namespaces must differ, got {names}")
        return value

    def member_overrides(self, i: int) -> list[str]:
        """Dotted overrides that turn the experiment into fleet member i's one-drone
        experiment (its bridge, mock and policy server load it so)."""
        m = self.fleet[i]
        device = {**self.device, **m.device}
        mock = {**self.mock_options, **m.mock_options}
        return [
            "hardware.fleet=[]",
            f"hardware.device={json.dumps(device)}",
            f"hardware.mock_options={json.dumps(mock)}",
            f"hardware.origin={json.dumps(list(m.origin))}",
        ]

    @field_validator("type")
    @classmethod
    def _registered(cls, value: str) -> str:
        known = registry.available("hardware")
        if value not in known:
            raise ValueError(f"unknown hardware type '{value}' (available: {', '.join(known)})")
        return value


Provider = Literal["cpu", "cuda", "tensorrt"]


class RuntimeConfig(BaseModel):
    """Where exported (ONNX) policies run: onnxruntime's execution provider, and its
    TensorRT options. `tether eval/up/demo --provider X` sets ``provider``."""

    model_config = ConfigDict(extra="forbid")
    # tensorrt: ORT's TensorRT execution provider (CUDA next for the nodes it cannot take,
    # CPU last); cuda: ORT's CUDA provider (CPU last); cpu: the CPU only
    provider: Provider = "cpu"
    # the provider is missing here (no GPU, an onnxruntime without it): false refuses with
    # one line saying what is missing; true runs on the next one (tensorrt -> cuda -> cpu)
    # and says so in the log and in episode_status
    fallback: bool = False
    # where the TensorRT provider keeps the engines it builds (the first session on a GPU
    # takes seconds to minutes; later ones load the cache); None: <model folder>/trt_cache
    trt_cache: Path | None = None
    # let TensorRT pick fp16 kernels (faster on GPUs with tensor cores; the parity check of
    # `tether export --tensorrt` says how far fp16 moves the actions)
    trt_fp16: bool = True


class ExperimentConfig(BaseModel):
    """One experiment: which robot, simulator (or hardware), task and policy, and how they
    run. Exactly one of ``sim`` and ``hardware`` is set."""

    model_config = ConfigDict(extra="forbid")
    name: str
    robot: str = "panda"
    sim: ComponentConfig | None = None
    # real or mock hardware instead of ``sim`` (tether_ros.hardware_bridge drives it)
    hardware: HardwareConfig | None = None
    task: ComponentConfig
    policy: ComponentConfig
    safety: SafetyConfig = Field(default_factory=SafetyConfig)
    ros: RosConfig = Field(default_factory=RosConfig)
    episodes: EpisodesConfig = Field(default_factory=EpisodesConfig)
    # drone experiments only (robot kind quadcopter): takeoff and landing over ROS 2
    drones: DronesConfig = Field(default_factory=DronesConfig)
    # how `tether train` trains this experiment's policy (type: a registered trainer)
    train: ComponentConfig | None = None
    # how `tether finetune` fine-tunes the policy with RL (type: a registered trainer, e.g.
    # residual: a per-step residual on the frozen policy, docs/residual_rl.md)
    finetune: ComponentConfig | None = None
    # where exported policies run (onnxruntime's execution provider; docs/isaac_sim.md)
    runtime: RuntimeConfig = Field(default_factory=RuntimeConfig)

    @model_validator(mode="after")
    def _one_world(self) -> ExperimentConfig:
        if (self.sim is None) == (self.hardware is None):
            raise ValueError("set exactly one of 'sim' and 'hardware'")
        return self

    @property
    def world(self) -> Any:
        """The section that sets the control rate and cameras: ``sim`` or ``hardware``."""
        return self.sim if self.sim is not None else self.hardware


TYPED_SECTIONS = ("sim", "task", "policy", "train", "finetune")
# registry kind of each typed section
SECTION_KIND = {
    "sim": "sim",
    "task": "task",
    "policy": "policy",
    "train": "trainer",
    "finetune": "trainer",
}


# where a field of a composed experiment was written: its key path -> a file of the chain or
# "the command line"; None when it is the file given
Origin = Callable[[Sequence[str | int]], str | None]
EXTENDS = "extends"
COMMAND_LINE = "the command line"


def _located(source: str, path: Sequence[str | int], msg: str, origin: Origin | None = None) -> str:
    """``source: a.b.c: msg``, ending with the file (or the command line) that wrote the
    field when it is not ``source`` itself."""
    where = f"{source}: " if source else ""
    loc = ".".join(str(p) for p in path) or "<root>"
    written = origin(path) if origin is not None else None
    if written:
        msg += f" (set {'on' if written == COMMAND_LINE else 'in'} {written})"
    return f"{where}{loc}: {msg}"


def _format_error(
    source: str, exc: ValidationError, prefix: str = "", origin: Origin | None = None
) -> str:
    errors = exc.errors()
    first = errors[0]
    path = [p for p in (prefix, *first["loc"]) if p != ""]
    msg = first["msg"]
    if first["type"] == "extra_forbidden":
        msg = "unknown field (misspelled?)"
    elif first["type"] == "missing":
        msg = "required field is missing"
    elif "input" in first and not isinstance(first["input"], dict | list):
        msg = f"{msg} (got {first['input']!r})"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return _located(source, path, msg + more, origin)


def parse_value(text: str) -> Any:
    """A command-line value as YAML: ``10`` -> int, ``true`` -> bool, ``[1, 2]`` -> list."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Return a copy of ``data`` with ``a.b.c=value`` overrides applied."""
    out = copy.deepcopy(data)
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"override '{item}' must look like section.field=value")
        node = out
        parts = key.split(".")
        for part in parts[:-1]:
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                raise ConfigError(f"override '{item}': '{part}' is not a section")
            node = child
        node[parts[-1]] = parse_value(raw)
    return out


def parse_experiment(
    data: Any, source: str = "", *, origin: Origin | None = None
) -> ExperimentConfig:
    """Validate a dict into an ExperimentConfig, each typed section by its registered class.

    ``source`` names the file in error messages; ``origin`` (from :func:`compose`) names the
    file of its ``extends:`` chain that wrote a field."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source or 'config'}: expected a mapping of sections at the top level")
    if EXTENDS in data:
        msg = "only an experiment file extends another (load it with load_config)"
        raise ConfigError(_located(source, [EXTENDS], msg, origin))
    data = dict(data)
    robot = str(data.get("robot", ExperimentConfig.model_fields["robot"].default))
    try:
        kind = registry.load("robot", robot).kind
    except ConfigError as exc:
        raise ConfigError(_located(source, ["robot"], str(exc), origin)) from None
    for section in TYPED_SECTIONS:
        raw = data.get(section)
        if raw is None:
            continue
        if not isinstance(raw, dict) or "type" not in raw:
            msg = "required field is missing"
            raise ConfigError(_located(source, [section, "type"], msg, origin))
        try:
            cls = registry.config_class(SECTION_KIND[section], str(raw["type"]))
        except ConfigError as exc:
            raise ConfigError(_located(source, [section, "type"], str(exc), origin)) from None
        if section == "sim":
            # an engine's backend for this robot kind may extend the engine's config with the
            # kind's own settings (a drone world's aerodynamics, a base's lidar)
            backend = f"{raw['type']}/{kind}"
            if backend in registry.available("backend"):
                cls = registry.config_class("backend", backend) or cls
        cls = cls or ComponentConfig
        try:
            data[section] = cls.model_validate(raw)
        except ValidationError as exc:
            raise ConfigError(_format_error(source, exc, section, origin)) from None
    try:
        cfg = ExperimentConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_format_error(source, exc, origin=origin)) from None
    return cfg


def read_yaml(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config file not found: {p}")
    try:
        data = yaml.safe_load(p.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}:" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise ConfigError(f"{p}:{line} could not parse YAML ({problem})") from None
    if data is None:
        raise ConfigError(f"{p}: the file is empty")
    return data


def merge(base: dict[str, Any], child: dict[str, Any]) -> dict[str, Any]:
    """``child`` over ``base``: mappings merge key by key, any other value replaces, and
    ``key: null`` removes the key. Neither input is mutated."""
    out = copy.deepcopy(base)
    for key, value in child.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict):
            base_value = out.get(key)
            out[key] = merge(base_value if isinstance(base_value, dict) else {}, value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _has(data: Any, path: Sequence[str | int]) -> bool:
    for part in path:
        if not isinstance(data, dict) or part not in data:
            return False
        data = data[part]
    return True


@dataclass(frozen=True)
class Composed:
    """An experiment file merged over its ``extends:`` chain. ``layers``: (file, its own
    data), nearest first (the command line's overrides, the file given, ..., the chain's
    root); ``given``: the file given."""

    data: dict[str, Any]
    layers: tuple[tuple[str, dict[str, Any]], ...]
    given: str

    def origin(self, path: Sequence[str | int]) -> str | None:
        """The file (or the command line) that wrote the value at ``path`` when it is not the
        file given: the nearest layer holding the longest part of the path."""
        for n in range(len(path), 0, -1):
            for name, data in self.layers:
                if _has(data, path[:n]):
                    return None if name == self.given else name
        return None

    def overridden(self, overrides: list[str]) -> Composed:
        """With dotted overrides applied to the merged data (and named as their origin)."""
        if not overrides:
            return self
        given = apply_overrides({}, overrides)
        layers = ((COMMAND_LINE, given), *self.layers)
        return Composed(apply_overrides(self.data, overrides), layers, self.given)


def compose(path: str | Path, _seen: tuple[Path, ...] = ()) -> Composed:
    """Read an experiment file and merge it over the chain its ``extends:`` names."""
    path = Path(path).resolve()
    if path in _seen:
        cycle = " -> ".join(p.name for p in (*_seen[_seen.index(path) :], path))
        raise ConfigError(f"{_seen[0]}: extends: a cycle ({cycle})")
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of sections at the top level")
    own = {k: v for k, v in data.items() if k != EXTENDS}
    if EXTENDS not in data:
        return Composed(own, ((str(path), own),), str(path))
    name = data[EXTENDS]
    if not isinstance(name, str) or not name:
        raise ConfigError(
            f"{path}: extends: expected the name of an experiment file (got {name!r})"
        )
    parent_path = find_extended(name, path)
    if parent_path is None:
        raise ConfigError(
            f"{path}: extends: experiment file not found: {name} (looked next to the file "
            "and under configs/experiments/ of Tether's data folders)"
        )
    parent = compose(parent_path, (*_seen, path))
    layers = ((str(path), own), *parent.layers)
    return Composed(merge(parent.data, own), layers, str(path))


def read_experiment(path: str | Path) -> dict[str, Any]:
    """An experiment file's data merged over its ``extends:`` chain (no ``extends:`` left),
    not yet validated. ``path`` as given, else under Tether's data folders."""
    return compose(find_given(path)).data


def load_config(path: str | Path, overrides: list[str] | None = None) -> ExperimentConfig:
    """Load an experiment YAML (merged over the chain its ``extends:`` names), apply dotted
    overrides, validate. Raises ConfigError.

    ``path`` as given, else under Tether's data folders; every relative path field of the
    result is made absolute against the experiment's root (tether.core.paths)."""
    path = find_given(path)
    composed = compose(path).overridden(list(overrides or []))
    cfg = parse_experiment(composed.data, str(path), origin=composed.origin)
    resolve_paths(cfg, experiment_root(path))
    return cfg


def resolve_paths(model: BaseModel, root: Path | None) -> None:
    """Make every relative ``Path`` field of ``model`` and its sub-models absolute, in place
    (see tether.core.paths for the rule)."""
    for name in type(model).model_fields:
        value = getattr(model, name)
        if isinstance(value, Path):
            # written past __setattr__: some sections are frozen, and this is their building
            model.__dict__[name] = resolve_path(value, root)
        elif isinstance(value, BaseModel):
            resolve_paths(value, root)


def dump_config(cfg: ExperimentConfig) -> dict[str, Any]:
    """Plain dict of a config, typed sections included (round-trips through parse)."""
    out = cfg.model_dump(mode="json", exclude=set(TYPED_SECTIONS))
    for section in TYPED_SECTIONS:
        value = getattr(cfg, section)
        if value is not None:
            out[section] = value.model_dump(mode="json")
    return out
