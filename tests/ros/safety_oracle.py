"""An independent safety oracle for the fault and fuzz tests (and benchmarks/safety.py).

Each robot's limits are read from the robot's own description, never from the code under
test (``SafetyFilter``, ``SafetyConfig``, ``RobotSpec`` action bounds, ``command_limits``):

- Panda: joint position ranges parsed from the MuJoCo model the simulator runs
  (``robots/panda/assets/scene.xml``, joint ``range``, class defaults resolved), joint velocity
  limits parsed from the URDF (pybullet_data ``franka_panda/panda.urdf``, ``<limit
  velocity>``; the MJCF carries none).
- Husky: Clearpath's published base limits (its URDF has continuous wheel joints and no
  limits), quoted below with their source.
- Crazyflie: rotor speed 0..max rpm, max rpm = sqrt(thrust_to_weight * m g / (4 kf)) computed
  here from the mass in ``robots/crazyflie/assets/crazyflie.urdf`` and the raw constants of
  ``robots/crazyflie/robot.py`` (kf, thrust_to_weight, GRAVITY: gym-pybullet-drones cf2x),
  not from its ``max_rpm`` or the ActionSpec built from it.

A wrong limit in the filter, the spec or a config therefore shows up as an unsafe action
here. The verdict helpers (``unsafe_steps``, ``unsafe_actions``, ``holds_safe``) count
actions that reached a backend and break these limits.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]
PANDA_MJCF = REPO / "robots/panda/assets/scene.xml"
CRAZYFLIE_URDF = REPO / "robots/crazyflie/assets/crazyflie.urdf"

# Clearpath Husky A200, husky_control/config/control.yaml (husky/husky on GitHub, e.g. commit
# a087a3d), husky_velocity_controller: linear.x max_velocity 1.0 m/s, max_acceleration
# 3.0 m/s^2; angular.z max_velocity 2.0 rad/s, max_acceleration 6.0 rad/s^2; min_* default to
# -max_*. (1.0 m/s is also the A200 datasheet's top speed; some later revisions of that file
# raised linear max_velocity to 3.0 m/s, beyond the datasheet.)
HUSKY_CONTROL = {
    "linear_x": {"max_velocity": 1.0, "max_acceleration": 3.0},
    "angular_z": {"max_velocity": 2.0, "max_acceleration": 6.0},
}


@dataclass(frozen=True)
class Limits:
    """What a robot may be commanded, per action element (the order of ``names``).

    ``low`` / ``high``: bounds of each command value. ``max_rate``: how fast a command may
    change, per second (joint velocity for position commands, acceleration for velocity
    commands); None: not limited. ``holds_position``: the safe action is "stay where you
    are" (position commands) rather than zeros (velocity commands).
    """

    names: tuple[str, ...]
    low: np.ndarray
    high: np.ndarray
    max_rate: np.ndarray | None
    holds_position: bool
    source: str

    def select(self, names: Sequence[str]) -> Limits:
        """The limits of ``names``, in that order (KeyError for a name the robot lacks)."""
        idx = [self.names.index(n) for n in names]
        rate = None if self.max_rate is None else self.max_rate[idx]
        return Limits(
            tuple(names), self.low[idx], self.high[idx], rate, self.holds_position, self.source
        )


# --- reading descriptions --------------------------------------------------------------------
def mjcf_joint_ranges(path: Path) -> dict[str, tuple[float, float]]:
    """Joint name -> (lower, upper) of every limited joint of an MJCF file (rad or m).

    Resolves ``<default class>`` inheritance, ``class`` / ``childclass`` and the compiler's
    ``angle`` unit (MuJoCo's default is degrees for hinge and ball joints)."""
    root = ET.parse(path).getroot()
    compiler = root.find("compiler")
    degrees = compiler is None or compiler.get("angle", "degree") == "degree"
    defaults: dict[str, dict[str, str]] = {}

    def walk_defaults(node: ET.Element, inherited: dict[str, str]) -> None:
        own = dict(inherited)
        joint = node.find("joint")
        if joint is not None:
            own.update(joint.attrib)
        defaults[node.get("class", "main")] = own
        for child in node.findall("default"):
            walk_defaults(child, own)

    for top in root.findall("default"):
        walk_defaults(top, {})

    ranges: dict[str, tuple[float, float]] = {}

    def walk_bodies(node: ET.Element, childclass: str) -> None:
        for child in node:
            if child.tag == "joint" and child.get("name"):
                attrs = {**defaults.get(child.get("class", childclass), {}), **child.attrib}
                if "range" not in attrs or attrs.get("limited") == "false":
                    continue
                lo, hi = (float(v) for v in attrs["range"].split())
                if degrees and attrs.get("type", "hinge") in ("hinge", "ball"):
                    lo, hi = math.radians(lo), math.radians(hi)
                ranges[child.get("name", "")] = (lo, hi)
            elif child.tag == "body":
                walk_bodies(child, child.get("childclass", childclass))

    for world in root.findall("worldbody"):
        walk_bodies(world, "main")
    return ranges


def urdf_joint_limits(path: Path) -> dict[str, dict[str, float]]:
    """Joint name -> its URDF ``<limit>`` attributes (lower, upper, velocity, effort) as
    floats, for every joint that has one (rad, m, rad/s, m/s)."""
    out: dict[str, dict[str, float]] = {}
    for joint in ET.parse(path).getroot().iter("joint"):
        limit = joint.find("limit")
        if limit is not None and joint.get("name"):
            out[joint.get("name", "")] = {k: float(v) for k, v in limit.attrib.items()}
    return out


def urdf_mass(path: Path, link: str = "base_link") -> float:
    """The ``<inertial><mass value>`` of one URDF link, kg."""
    for node in ET.parse(path).getroot().iter("link"):
        if node.get("name") == link:
            mass = node.find("inertial/mass")
            if mass is not None:
                return float(mass.get("value", "nan"))
    raise KeyError(f"{path} has no link '{link}' with a mass")


def panda_urdf() -> Path:
    """pybullet_data's Franka Panda URDF (franka_ros' description; needs pybullet_data)."""
    import pybullet_data

    return Path(pybullet_data.getDataPath()) / "franka_panda/panda.urdf"


# --- each robot's limits ---------------------------------------------------------------------
def panda_limits() -> Limits:
    """Panda joints (7 arm joints, then both fingers): MJCF position ranges, URDF velocities."""
    ranges = mjcf_joint_ranges(PANDA_MJCF)
    urdf = urdf_joint_limits(panda_urdf())
    names = tuple(ranges)
    return Limits(
        names=names,
        low=np.array([ranges[n][0] for n in names]),
        high=np.array([ranges[n][1] for n in names]),
        max_rate=np.array([urdf[n]["velocity"] for n in names]),
        holds_position=True,
        source=f"{PANDA_MJCF.relative_to(REPO)} joint range; {panda_urdf().name} velocity",
    )


def husky_limits() -> Limits:
    """Husky twist (linear_x m/s, angular_z rad/s): Clearpath's velocity controller limits."""
    names = tuple(HUSKY_CONTROL)
    vmax = np.array([HUSKY_CONTROL[n]["max_velocity"] for n in names])
    return Limits(
        names=names,
        low=-vmax,
        high=vmax,
        max_rate=np.array([HUSKY_CONTROL[n]["max_acceleration"] for n in names]),
        holds_position=False,
        source="Clearpath husky_control/config/control.yaml",
    )


def crazyflie_max_rpm() -> float:
    """Rotor speed limit, rpm: the thrust of four rotors at it is thrust_to_weight x weight."""
    from tether.robots.crazyflie import robot as cf

    kf = float(cf.CRAZYFLIE.kf)  # N / rpm^2 (cf2x.urdf "kf")
    t2w = float(cf.CRAZYFLIE.thrust_to_weight)  # cf2x.urdf "thrust2weight"
    mass = urdf_mass(CRAZYFLIE_URDF)  # kg
    return math.sqrt(t2w * mass * cf.GRAVITY / (4.0 * kf))


def crazyflie_limits() -> Limits:
    """Crazyflie rotor speeds rotor0..rotor3 (Bitcraze M1..M4), 0..max rpm each."""
    names = tuple(f"rotor{i}" for i in range(4))
    return Limits(
        names=names,
        low=np.zeros(4),
        high=np.full(4, crazyflie_max_rpm()),
        max_rate=None,
        holds_position=False,
        source="crazyflie.urdf mass; robots/crazyflie/robot.py kf, thrust_to_weight, GRAVITY",
    )


ROBOTS = {"panda": panda_limits, "husky": husky_limits, "crazyflie": crazyflie_limits}


def limits_for(robot: str, names: Sequence[str] | None = None) -> Limits:
    """The oracle's limits of a robot by name, for the action elements ``names``."""
    lim = ROBOTS[robot]()
    return lim if names is None else lim.select(names)


# --- verdicts --------------------------------------------------------------------------------
def _tolerance(limits: Limits) -> np.ndarray:
    # float32 round-off of the command path, relative to each range
    return 1e-5 * np.maximum(1.0, np.abs(limits.high - limits.low))


def unsafe_actions(
    actions: np.ndarray,
    limits: Limits,
    dt: float | None = None,
    fresh: Sequence[bool] | None = None,
) -> dict[str, int]:
    """Count unsafe actions (N, dim) that reached a backend: ``not_finite``,
    ``out_of_limits`` and, when the control period ``dt`` (s) is given and the robot has a
    rate limit, ``too_fast``: a change into an action marked ``fresh`` (all when None) larger
    than ``max_rate`` x ``dt`` (a hold or a stop is exempt: it commands where the robot is,
    or zeros)."""
    a = np.asarray(actions, np.float64).reshape(len(actions), -1)
    rate = dt is not None and limits.max_rate is not None
    finite = np.isfinite(a).all(axis=1)
    tol = _tolerance(limits)
    out = ((a < limits.low - tol) | (a > limits.high + tol)).any(axis=1)
    bad = {"not_finite": int((~finite).sum()), "out_of_limits": int((out & finite).sum())}
    if rate:
        assert limits.max_rate is not None and dt is not None
        jump = (np.abs(np.diff(a, axis=0)) > limits.max_rate * dt + 1e-5).any(axis=1)
        if fresh is not None:
            jump &= np.asarray(fresh, bool)[1:]
        bad["too_fast"] = int(jump.sum())
    return bad


def unsafe_steps(steps: Sequence[Any], limits: Limits, dt: float | None = None) -> dict[str, int]:
    """``unsafe_actions`` of a BridgeSpy's steps (``.action``, ``.stale``); ``dt``: the
    control period (s) for the rate check, None to skip it."""
    actions = [s.action for s in steps]
    return unsafe_actions(
        np.stack(actions) if actions else np.zeros((0, len(limits.names))),
        limits,
        dt,
        [not s.stale for s in steps],
    )


def holds_safe(action: np.ndarray, measured: np.ndarray, limits: Limits) -> bool:
    """Whether a watchdog's action is the safe one: position commands hold where the robot
    is (within the limits: a finger at -1e-5 m reads 0), velocity commands are zeros."""
    if limits.holds_position:
        target = np.clip(measured, limits.low, limits.high)
        return bool(np.allclose(action, target, atol=1e-6 + _tolerance(limits)))
    return bool(np.all(np.asarray(action) == 0.0))
