"""Fly N simulated drones from velocity setpoints, low-level commands and takeoff / land /
emergency requests, through the drone safety gate and the cascaded PID. Transport-free: the
ROS 2 sim bridge is a shell around :class:`DroneFleet`.

All drones fly in one world: one SimBackend of the experiment's quadcopter with
``sim.quadrotor.num_drones`` drones, built here in ``rotor_rpm`` mode (action (4N,) rpm, state
(13N,), drone after drone; docs/quadrotor.md). A drone's state is the 13-vector of
``tether.sim.quadrotor`` (position m and quaternion wxyz world-from-body, linear velocity m/s
world, angular velocity rad/s body FLU). Whatever a drone is asked, only rotor speeds within
0..max_rpm that the PID, the gate (:class:`tether.core.safety.DroneSafety`) or a phase
produced reach ``backend.step``.

Phases of one drone::

    off --takeoff--> takeoff --(at height)--> hover
    hover / takeoff / landing --fresh command--> command --(stale: watchdog)--> hover | landing
    any --land--> landing --(touchdown)--> off        any --emergency--> emergency (latched)

A fresh low-level command (rotor_rpm, thrust_rates) is obeyed in any phase but emergency (an
RL policy may take off by itself); a velocity setpoint needs the drone in the air (takeoff
first); after the land service no command is obeyed until takeoff. Before the first command
a drone holds its reset pose: hover if airborne, off if not.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from tether.core import registry
from tether.core.config import ExperimentConfig
from tether.core.errors import ConfigError, InvalidCommand
from tether.core.experiment import build_task
from tether.core.protocols import SimBackend
from tether.core.robot_kinds import GRAVITY, MultirotorDescription, QuadrotorParams
from tether.core.safety import DroneSafety
from tether.core.spec import ActionSpec
from tether.core.types import Observation
from tether.robots.crazyflie.robot import CRAZYFLIE, crazyflie_spec
from tether.sim.quadrotor.control import CascadedPID
from tether.sim.quadrotor.dynamics import quat_rotate_inverse, quat_yaw

Phase = Literal["off", "takeoff", "hover", "command", "landing", "emergency"]
COMMAND_MODES = ("rotor_rpm", "thrust_rates", "velocity_setpoint")
# a takeoff is done within this distance of its height (m)
TAKEOFF_TOLERANCE = 0.05


def command_limits(params: QuadrotorParams = CRAZYFLIE) -> dict[str, ActionSpec]:
    """The ActionSpec (limits) of each command mode a drone accepts."""
    return {m: crazyflie_spec(mode=m, params=params).action for m in COMMAND_MODES}  # type: ignore[arg-type]


def specific_force(state: np.ndarray, prev_velocity: np.ndarray, dt: float) -> np.ndarray:
    """What an accelerometer at the centre of mass reads: (a - g) in the body frame, m/s^2.

    state (13,), prev_velocity (3,) m/s world one step of dt (s) earlier. At rest: (0, 0, +g).
    """
    acc = (np.asarray(state[7:10], np.float64) - prev_velocity) / dt
    acc[2] += GRAVITY
    q = np.asarray(state[3:7], np.float64)[None]
    return quat_rotate_inverse(q / np.linalg.norm(q), acc[None])[0]


@dataclass
class Drone:
    """One drone of the fleet: its safety gate, controller, phase and latest state."""

    name: str
    index: int
    safety: DroneSafety
    pid: CascadedPID
    state: np.ndarray = field(default_factory=lambda: np.zeros(13))  # (13,) float64
    # the task reference pose (7,): position m + quaternion wxyz; None when the task has none
    target: np.ndarray | None = None
    phase: Phase = "off"
    # hover / landing reference: position (3,) m and yaw rad
    hold: np.ndarray = field(default_factory=lambda: np.zeros(3))
    hold_yaw: float = 0.0
    prev_velocity: np.ndarray = field(default_factory=lambda: np.zeros(3))
    accel: np.ndarray = field(default_factory=lambda: np.array([0.0, 0.0, GRAVITY]))
    last_rpm: np.ndarray = field(default_factory=lambda: np.zeros(4))
    # the land service was called: commands are refused until takeoff (or a reset)
    grounded: bool = False


def drone_names(n: int) -> list[str]:
    """ROS namespace of each of n drones: "" for a single drone, else cf0, cf1, ..."""
    return [""] if n == 1 else [f"cf{i}" for i in range(n)]


def rotor_rpm_sim(cfg: ExperimentConfig) -> Any:
    """The experiment's sim section with the drones' action mode set to rotor_rpm."""
    quad = getattr(cfg.sim, "quadrotor", None)
    if quad is None or quad.action_mode == "rotor_rpm":
        return cfg.sim
    return cfg.sim.model_copy(
        update={"quadrotor": quad.model_copy(update={"action_mode": "rotor_rpm"})}
    )


class DroneFleet:
    """N drones in one world on one sim clock. ``step()`` advances all by one control period."""

    def __init__(
        self,
        cfg: ExperimentConfig,
        backend: SimBackend | None = None,
        task: Any = None,
        params: QuadrotorParams | None = None,
    ) -> None:
        self.cfg = cfg
        self.dcfg = cfg.drones
        if params is None:
            desc = registry.load("robot", cfg.robot)
            if not isinstance(desc, MultirotorDescription):
                raise ConfigError(
                    f"the drone bridge flies multirotors; robot '{cfg.robot}' is a {desc.kind}"
                )
            params = desc.params
        self.params = params
        if backend is None:
            task = task if task is not None else build_task(cfg)
            backend = registry.build("sim", rotor_rpm_sim(cfg), robot=cfg.robot, task=task)
        self.backend = backend
        self.task = task if task is not None else getattr(backend, "task", None)
        spec = backend.spec
        if spec.kind != "quadcopter" or spec.action.mode != "rotor_rpm":
            raise ConfigError(
                f"the drone bridge drives the rotor speeds of quadcopters: the {cfg.sim.type} "
                f"backend of '{spec.name}' takes '{spec.action.mode}'"
            )
        n = spec.action.dim // 4
        names = drone_names(n)
        limits = command_limits(params)
        self.drones = [
            Drone(name, i, DroneSafety(limits, cfg.safety), CascadedPID(1, params))
            for i, name in enumerate(names)
        ]
        self.dt = spec.dt
        self.obs: Observation | None = None
        self.resets = 0
        self.steps = 0

    @property
    def stamp_ns(self) -> int:
        assert self.obs is not None, "reset the fleet first"
        return self.obs.stamp_ns

    @property
    def now_s(self) -> float:
        return self.stamp_ns * 1e-9

    def drone(self, name: str) -> Drone:
        for d in self.drones:
            if d.name == name:
                return d
        raise KeyError(f"no drone '{name}' (drones: {', '.join(x.name for x in self.drones)})")

    def _observe(self, obs: Observation) -> None:
        """Split an observation of all drones into each drone's state and target."""
        self.obs = obs
        state = np.asarray(obs["state"], np.float64)
        env = obs.get("env_state")
        for d in self.drones:
            i = d.index
            d.state = state[13 * i : 13 * i + 13].copy()
            # env_state: each drone's task reference pose, drone after drone (docs/quadrotor.md)
            if env is not None and len(env) >= 7 * len(self.drones):
                d.target = np.asarray(env[7 * i : 7 * i + 7], np.float64)

    # --- episode -------------------------------------------------------------------------
    def reset(self) -> None:
        """Reset the world with seed ``episodes.seed + k`` for the k-th reset."""
        self._observe(self.backend.reset(self.cfg.episodes.seed + self.resets))
        for d in self.drones:
            d.safety.reset()
            d.pid.reset()
            d.grounded = False
            d.prev_velocity = d.state[7:10].copy()
            d.accel = specific_force(d.state, d.prev_velocity, self.dt)
            d.last_rpm = np.zeros(4)
            d.phase = "hover" if d.state[2] > 2 * self.dcfg.touchdown_height else "off"
            self._set_hold(d)
        self.resets += 1
        self.steps = 0

    def _set_hold(self, d: Drone, position: np.ndarray | None = None) -> None:
        """Hover / landing reference: ``position`` (3,) m (default: where the drone is) and
        the current heading."""
        d.hold = d.state[0:3].copy() if position is None else np.asarray(position, np.float64)
        d.hold_yaw = float(quat_yaw(d.state[None, 3:7])[0])

    # --- requests ------------------------------------------------------------------------
    def command(self, name: str, mode: str, values: Any) -> np.ndarray:
        """Submit a command for drone ``name`` now (raises InvalidCommand when rejected).

        Also rejected: a velocity setpoint to a drone on the ground, and any command after the
        land service until the next takeoff (a landing asked for is not overridden by a
        commander still streaming).
        """
        d = self.drone(name)
        why = ""
        if d.grounded:
            why = f"{name or 'the drone'} was told to land: call takeoff before commanding"
        elif mode == "velocity_setpoint" and d.phase in ("off", "emergency"):
            why = f"{name or 'the drone'} is on the ground: call takeoff before cmd_vel"
        if why:
            d.safety.validate(mode, values)  # a malformed one is counted as such
            d.safety.stats.rejected += 1
            raise InvalidCommand(why)
        return d.safety.command(mode, values, self.now_s)

    def takeoff(self, name: str) -> tuple[bool, str]:
        """Climb to ``drones.takeoff_height`` above the current x, y and hover there."""
        d = self.drone(name)
        if d.phase == "emergency":
            return False, "emergency stop latched: reset first"
        d.safety.clear()
        d.grounded = False
        s = d.state
        self._set_hold(d, np.array([s[0], s[1], self.dcfg.takeoff_height]))
        d.phase = "takeoff"
        return True, f"taking off to {self.dcfg.takeoff_height:g} m"

    def land(self, name: str) -> tuple[bool, str]:
        """Descend at ``safety.land_speed`` above the current x, y; motors off on touchdown."""
        d = self.drone(name)
        if d.phase == "emergency":
            return False, "emergency stop latched: reset first"
        d.safety.clear()
        d.grounded = True
        if d.phase == "off":
            return True, "already landed"
        self._set_hold(d)
        d.phase = "landing"
        return True, f"landing at {self.cfg.safety.land_speed:g} m/s"

    def emergency(self, name: str) -> tuple[bool, str]:
        """Motors off now, latched until the next reset."""
        d = self.drone(name)
        d.safety.trip_emergency()
        d.phase = "emergency"
        return True, "motors off (latched until reset)"

    # --- stepping ------------------------------------------------------------------------
    def step(self) -> None:
        """One control period for every drone: phase -> rotor speeds -> backend.step."""
        now = self.now_s
        rpm = np.zeros((len(self.drones), 4))
        for d in self.drones:
            r = self._rotor_speeds(d, now)
            d.last_rpm = rpm[d.index] = np.clip(np.nan_to_num(r, nan=0.0), 0.0, self.params.max_rpm)
            d.prev_velocity = d.state[7:10].copy()
        self._observe(self.backend.step(rpm.reshape(-1).astype(np.float32)).observation)
        for d in self.drones:
            d.accel = specific_force(d.state, d.prev_velocity, self.dt)
        self.steps += 1

    def _rotor_speeds(self, d: Drone, now: float) -> np.ndarray:
        verdict, values = d.safety.verdict(now)
        if verdict == "off":
            d.phase = "emergency"
        elif verdict == "command":
            if d.phase != "command":
                d.pid.reset()
            d.phase = "command"
        elif verdict in ("hold", "land") and d.phase == "command":
            self._set_hold(d)
            d.phase = "hover" if verdict == "hold" else "landing"
        s = d.state
        if d.phase in ("off", "emergency"):
            d.pid.reset()
            return np.zeros(4)
        if d.phase == "command":
            assert values is not None and d.safety.mode is not None
            return self._follow(d, d.safety.mode, values)
        if d.phase == "takeoff":
            if abs(s[2] - d.hold[2]) < TAKEOFF_TOLERANCE:
                d.phase = "hover"
            return self._goto(d, self.dcfg.takeoff_speed)
        if d.phase == "hover":
            return self._goto(d, self.dcfg.takeoff_speed)
        # landing: keep x, y, sink at land_speed, motors off once down
        if s[2] < self.dcfg.touchdown_height:
            d.phase = "off"
            d.pid.reset()
            return np.zeros(4)
        vel = self._toward(d, max_speed=self.cfg.safety.land_speed)
        vel[2] = -self.cfg.safety.land_speed
        return self._velocity(d, vel)

    def _follow(self, d: Drone, mode: str, values: np.ndarray) -> np.ndarray:
        s = d.state[None]
        if mode == "rotor_rpm":
            return values
        if mode == "thrust_rates":
            return d.pid.thrust_rates(s, values[None])[0]
        values = d.safety.fence(d.state[0:3], values)  # safety.geofence, if any
        return d.pid.velocity(s, values[None], self.dt)[0]

    def _toward(self, d: Drone, max_speed: float) -> np.ndarray:
        """World velocity (3,) m/s toward the hold point, at most ``max_speed``."""
        vel = np.asarray(d.pid.gains.pos_p) * (d.hold - d.state[0:3])
        speed = float(np.linalg.norm(vel))
        return vel * min(1.0, max_speed / max(speed, 1e-9))

    def _goto(self, d: Drone, max_speed: float) -> np.ndarray:
        return self._velocity(d, self._toward(d, max_speed))

    def _velocity(self, d: Drone, vel: np.ndarray) -> np.ndarray:
        cmd = np.concatenate([vel, [0.0]])[None]
        return d.pid.velocity(d.state[None], cmd, self.dt, yaw_ref=np.array([d.hold_yaw]))[0]

    def close(self) -> None:
        self.backend.close()
