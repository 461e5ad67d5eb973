"""The engine-independent half of a quadrotor backend: N drones of one
``MultirotorDescription`` (its params, spec and assets) in one world.

:class:`QuadrotorWorld` implements the SimBackend contract once (action checks, the three
action modes through :class:`CascadedPID`, the motor model, the aerodynamic loads of
``dynamics.rotor_wrench`` (in floats: ``loads.py``), task hooks, observations); an engine subclass (PyBullet,
MuJoCo) only reads and writes rigid-body states, applies loads and steps.

Per control step (1 / control_hz s) the action is checked and held (``velocity_setpoint``:
the velocity and attitude loops turn it into a thrust + body-rate command); per physics step
(``physics_dt``, <= 2 ms) the rate loop runs on the fresh state (``thrust_rates`` and
``velocity_setpoint``, as the Crazyflie firmware runs it at 500 Hz), the rotor speeds follow
the commands through the first-order lag, and the rotor thrusts, moments, drag and ground
effect are applied for that step.

Observation keys (float32, world ENU / body FLU, SI units):
    state      (13 N,) per drone [pos (3), quat wxyz (4), lin vel world (3), ang vel body (3)]
    env_state  (7 N,)  per drone its task reference (body ``target`` / ``cf<i>/target``)
    rotor_rpm  (4 N,)  actual rotor speeds, rpm
Drone i's slice is [13 i : 13 i + 13] / [7 i : 7 i + 7] / [4 i : 4 i + 4]; its action
the (4,) block [4 i : 4 i + 4]. :func:`split_drones` cuts an observation per drone.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tether.core.errors import ConfigError, InvalidCommand
from tether.core.robot import RobotDescription
from tether.core.robot_kinds import MultirotorDescription
from tether.core.types import IMAGE_PREFIX, Observation, StepResult
from tether.sim.quadrotor.config_quadrotor import QuadrotorSimConfig
from tether.sim.quadrotor.control import CascadedPID
from tether.sim.quadrotor.downwash import downwash_forces
from tether.sim.quadrotor.dynamics import MAX_DT, QuadrotorDynamics, hover_state
from tether.sim.quadrotor.features import (
    hover_features,
    linear_from_normalized,
    rpm_from_normalized,
)
from tether.sim.quadrotor.loads import DroneLoads

IDENTITY = np.array([1.0, 0.0, 0.0, 0.0])
# default hover height (m) of every drone and its target when no task places them
HOME_Z = 1.0
# world cameras: eye and look-at point (m); both engines render the same views
CAMERAS = {
    "front": ((2.6, -2.6, 2.0), (0.0, 0.0, 0.9)),
    "top": ((0.0, -0.01, 4.5), (0.0, 0.0, 0.0)),
}
NEAR, FAR = 0.02, 20.0


def split_drones(obs: Observation, n: int) -> list[Observation]:
    """Cut a world observation of n drones into n single-drone observations (same keys and
    stamp; images stay with every drone)."""
    out = []
    for i in range(n):
        data: dict[str, np.ndarray] = {}
        for key, value in obs.items():
            if key.startswith(IMAGE_PREFIX):
                data[key] = value
            else:
                k = value.shape[0] // n
                data[key] = value[k * i : k * (i + 1)]
        out.append(Observation(data, obs.stamp_ns, obs.instruction))
    return out


def formation_offsets(n: int, spacing: float = 1.0) -> np.ndarray:
    """World offsets (m) of n drones' tasks: a line along y centred on 0. Shape: (n, 3)."""
    out = np.zeros((n, 3))
    out[:, 1] = spacing * (np.arange(n) - (n - 1) / 2.0)
    return out


def multirotor(robot: RobotDescription, engine: str) -> MultirotorDescription:
    """``robot`` as a multirotor description, or a one-line ConfigError."""
    if robot.kind != "quadcopter":
        raise ConfigError(
            f"the {engine} quadrotor backend simulates quadcopters; robot '{robot.name}' is "
            f"a {robot.kind}"
        )
    if not isinstance(robot, MultirotorDescription):
        raise ConfigError(
            f"robot '{robot.name}' has no MultirotorDescription (params, assets): the {engine} "
            "quadrotor backend needs one"
        )
    return robot


class QuadrotorWorld:
    """SimBackend of ``cfg.quadrotor.num_drones`` drones of one multirotor description;
    engine subclasses fill in the ``_engine_*`` methods, ``render`` and ``close``. Layout in
    the module docstring. Also a ``LearningView`` (tether.core.protocols): the features and
    normalized actions of tether.sim.quadrotor.batched_env."""

    engine = "none"

    def __init__(self, cfg: QuadrotorSimConfig, robot: RobotDescription, task: Any = None) -> None:
        desc = self.robot = multirotor(robot, self.engine)
        unknown = [o for o in getattr(task, "objects", ()) if o != "target"]
        if unknown:
            raise ConfigError(
                f"the quadrotor world has no task object(s) {unknown} (available: target)"
            )
        for cam in cfg.cameras:
            if cam.name not in CAMERAS:
                raise ConfigError(
                    f"sim.cameras: the drone world has no camera '{cam.name}' "
                    f"(available: {', '.join(CAMERAS)})"
                )
        q = cfg.quadrotor
        self.cfg = cfg
        self.task = task
        self.num_drones = n = q.num_drones
        params = desc.params
        self.params = params if q.motor_lag else params.model_copy(update={"motor_tau": 0.0})
        self.dynamics = QuadrotorDynamics(self.params, drag=q.drag, ground_effect=q.ground_effect)
        self.pid = CascadedPID(n, self.params)
        # the per-physics-step work in floats (loads.py); the numpy model is its reference
        self._loads = DroneLoads(self.dynamics, self.pid.gains)
        # drones pushing down the drones below them (per physics step, from their positions)
        self.downwash = q.downwash
        self.spec = desc.spec(cfg.control_hz, cfg.cameras, **q.robot_options())
        self.mode = q.action_mode
        self._low = self.spec.action.low_array().astype(np.float64)
        self._high = self.spec.action.high_array().astype(np.float64)
        # world offset (m) of each drone's task: a line along y
        self.offsets = formation_offsets(n, q.spacing)
        self.drone_names = tuple(f"cf{i}" for i in range(n))
        self.target_names = ("target",) if n == 1 else tuple(f"cf{i}/target" for i in range(n))
        # the largest physics step <= min(physics_dt, 2 ms) dividing the control period
        self.control_dt = 1.0 / cfg.control_hz
        self.substeps = max(1, math.ceil(self.control_dt / min(cfg.physics_dt, MAX_DT) - 1e-9))
        self.physics_dt = self.control_dt / self.substeps
        self.motor_rpm = np.zeros((n, 4))
        self._max_duration = getattr(task, "max_duration_s", None)
        self._steps = 0
        # drone_states() read once per step: tasks and observe() ask several times
        self._states: np.ndarray | None = None

    # ---- engine interface ---------------------------------------------------------------

    def _engine_state_lists(self) -> list[list[float]]:
        """Rigid-body states read from the engine: N lists of 13 floats (layout above)."""
        raise NotImplementedError

    def _engine_states(self) -> np.ndarray:
        """Rigid-body states (N, 13) float64."""
        return np.array(self._engine_state_lists(), dtype=np.float64)

    def _engine_set_states(self, states: np.ndarray) -> None:
        """Teleport every drone to states (N, 13) (pose and velocities)."""
        raise NotImplementedError

    def _engine_apply(
        self,
        i: int,
        rot: tuple[float, ...],
        thrust: list[float],
        torque: tuple[float, float, float],
        drag: tuple[float, float, float],
    ) -> None:
        """Apply to drone i, for the next physics step only, rotor thrusts (4,) N along body
        z at the rotor positions, the body torque (3,) N m (rotor moments + yaw reaction)
        and drag (3,) N at the centre of mass (body frame); rot (9,) is its world-from-body
        rotation, row-major."""
        raise NotImplementedError

    def _engine_step(self) -> None:
        """One physics step of ``physics_dt``."""
        raise NotImplementedError

    def _engine_target(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def _engine_set_target(self, i: int, pos: np.ndarray, quat: np.ndarray) -> None:
        raise NotImplementedError

    def render(self, camera: str) -> np.ndarray:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    # ---- drone access (what drone tasks use) --------------------------------------------

    def drone_states(self) -> np.ndarray:
        """States of every drone (N, 13) float64, layout of ``dynamics.py`` (a copy)."""
        if self._states is None:
            self._states = self._engine_states()
        return self._states.copy()

    def set_drone_states(self, states: np.ndarray, rotor_rpm: np.ndarray | None = None) -> None:
        """Teleport every drone to states (N, 13), rotors to ``rotor_rpm`` (N, 4) (default:
        hover speed); resets the controllers' integrators."""
        s = np.array(states, dtype=np.float64).reshape(self.num_drones, 13)
        s[:, 3:7] /= np.linalg.norm(s[:, 3:7], axis=1, keepdims=True)
        self._engine_set_states(s)
        self._states = None
        rpm = np.full((self.num_drones, 4), self.params.hover_rpm)
        self.motor_rpm = rpm if rotor_rpm is None else np.array(rotor_rpm, dtype=np.float64)
        self.pid.reset()

    def set_task(self, task: Any) -> None:
        """Attach (or replace) the task; takes effect at the next reset."""
        self.task = task
        self._max_duration = getattr(task, "max_duration_s", None)

    # ---- SimBackend ---------------------------------------------------------------------

    def reset(self, seed: int | None = None) -> Observation:
        """Every drone level at rest at (0, 0, 1) m + its offset, rotors at hover speed,
        targets there; then the task's reset distribution drawn from ``seed``."""
        rng = np.random.default_rng(seed)
        states = hover_state(self.num_drones, (0.0, 0.0, HOME_Z))
        states[:, 0:3] += self.offsets
        self.set_drone_states(states)
        for i in range(self.num_drones):
            self._engine_set_target(i, states[i, 0:3], IDENTITY)
        self._steps = 0
        if self.task is not None:
            self.task.reset(self, rng)
        return self.observe()

    def check_action(self, action: np.ndarray) -> np.ndarray:
        """The action as (N, 4) float64 clamped to the spec's limits; a wrong shape or a
        NaN/inf raises InvalidCommand (nothing reaches the engine)."""
        try:
            a = np.asarray(action, dtype=np.float64)
        except (TypeError, ValueError):
            raise InvalidCommand("action rejected: not numeric") from None
        if a.shape != self.spec.action.shape:
            raise InvalidCommand(f"action rejected: shape {a.shape} != {self.spec.action.shape}")
        if not np.all(np.isfinite(a)):
            raise InvalidCommand("action rejected: NaN or inf")
        a = np.clip(a, self.spec.action.low, self.spec.action.high)
        return a.reshape(self.num_drones, 4)

    def step(self, action: np.ndarray) -> StepResult:
        """Hold ``action`` (4 N,) for one control period (``substeps`` physics steps)."""
        cmd = self.check_action(action)
        if self.mode == "velocity_setpoint":
            # velocity and attitude loops at the control rate, the rate loop per physics step
            cmd = self.pid.velocity_rates(self.drone_states(), cmd, self.control_dt)
        cmds = cmd.tolist()
        rpm = self.motor_rpm.tolist()
        loads, dt = self._loads, self.physics_dt
        rate_loop = self.mode != "rotor_rpm"
        wash = self.downwash.enabled and self.num_drones > 1
        mass = self.params.mass
        for _ in range(self.substeps):
            lists = self._engine_state_lists()
            if wash:
                pos = np.array([s[0:3] for s in lists])
                down = downwash_forces(pos, mass, self.downwash)[:, 2].tolist()
            for i, s in enumerate(lists):
                c = loads.rate_loop(s, cmds[i]) if rate_loop else cmds[i]
                rpm[i] = loads.motor(rpm[i], c, dt)
                thrust, torque, drag, rot = loads.loads(s, rpm[i])
                if wash and down[i] != 0.0:
                    # world (0, 0, f) in the body frame: f times the rotation's third row
                    f = down[i]
                    drag = (drag[0] + rot[6] * f, drag[1] + rot[7] * f, drag[2] + rot[8] * f)
                self._engine_apply(i, rot, thrust, torque, drag)
            self._engine_step()
        self._states = None
        self.motor_rpm = np.array(rpm, dtype=np.float64)
        self._steps += 1
        return self._score(self.observe())

    def _score(self, obs: Observation) -> StepResult:
        """Reward and flags from the task: terminated = success (as every backend, so
        SimRunner counts it), truncated = time limit or a crash (``task.failed``)."""
        reward, success, failed = 0.0, False, False
        task = self.task
        if task is not None:
            task.update(self)
            reward = float(task.reward(self))
            success = bool(task.success(self))
            failed = bool(task.failed(self))
        limit = self._max_duration is not None and self.sim_time >= self._max_duration - 1e-9
        info: dict[str, Any] = {"is_success": success, "failed": failed}
        failure = getattr(task, "failure", None)
        reason = failure(self) if failure is not None and not success else None
        if reason:
            # a named failure that ends the episode (a swarm's "collision"; SimRunner's outcome)
            info["failure"] = reason
        truncated = limit or reason or (failed and not success)
        return StepResult(obs, reward, success, bool(truncated), info)

    @property
    def sim_time(self) -> float:
        """Seconds since the last reset (counted in control steps, so it is exact)."""
        return self._steps / self.cfg.control_hz

    def observe(self) -> Observation:
        env = [np.concatenate(self._engine_target(i)) for i in range(self.num_drones)]
        data = {
            "state": self.drone_states().reshape(-1).astype(np.float32),
            "env_state": np.concatenate(env).astype(np.float32),
            "rotor_rpm": self.motor_rpm.reshape(-1).astype(np.float32),
        }
        if self.cfg.render_in_obs:
            for cam in self.spec.cameras:
                data[IMAGE_PREFIX + cam.name] = self.render(cam.name)
        return Observation(data, stamp_ns=round(self.sim_time * 1e9))

    def body_pose(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """World pose of a drone (``cf<i>``) or target body: position (3,) m, quaternion
        (4,) wxyz (float64)."""
        if name in self.target_names:
            return self._engine_target(self.target_names.index(name))
        if name in self.drone_names:
            s = self.drone_states()[self.drone_names.index(name)]
            return s[0:3].copy(), s[3:7].copy()
        raise KeyError(f"the drone world has no body '{name}'")

    def set_body_pose(self, name: str, pos: np.ndarray, quat: np.ndarray) -> None:
        """Move a target marker, or teleport a drone and zero its velocity."""
        q = np.asarray(quat, dtype=np.float64)
        q = q / np.linalg.norm(q)
        if name in self.target_names:
            self._engine_set_target(self.target_names.index(name), np.asarray(pos, float), q)
            return
        if name not in self.drone_names:
            raise ValueError(f"body '{name}' is neither a drone nor a target")
        states = self.drone_states()
        i = self.drone_names.index(name)
        states[i] = 0.0
        states[i, 0:3] = pos
        states[i, 3:7] = q
        self._engine_set_states(states)
        self._states = None

    # ---- LearningView -------------------------------------------------------------------

    def features(self, obs: Observation) -> np.ndarray:
        """Per drone its state relative to its task reference (features.hover_features):
        shape (18 N,) float32, BatchedHoverEnv's observation drone by drone."""
        return hover_features(obs["state"], obs["env_state"], self.num_drones)

    def from_normalized(self, action: np.ndarray) -> np.ndarray:
        """Normalized action (4 N,) in [-1, 1] -> this world's action (4 N,) float64:
        ``rotor_rpm`` around hover as BatchedHoverEnv (hover_rpm (1 + 0.5 a)); other modes
        linear onto the spec's [low, high]. NaN -> 0."""
        if self.mode == "rotor_rpm":
            return rpm_from_normalized(action, self.params.hover_rpm)
        return linear_from_normalized(action, self._low, self._high)

    def ee_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """Drone 0's pose (the protocol's end effector): position (3,), quaternion (4,)."""
        return self.body_pose(self.drone_names[0])

    def __enter__(self) -> QuadrotorWorld:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
