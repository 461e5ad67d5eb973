"""Fault injection against a bridge running in this process: kill the policy server mid-run,
fuzz the command topics, and record every action that reaches the simulator.

Shared by tests/ros/test_faults_*.py and benchmarks/safety.py. Everything is measured in sim
time through spies on the bridge (what the safety filter registered, what it decided, what
the backend received), so the measurements do not depend on how loaded the machine is.
Whether a recorded action was safe is not decided here: the tests' oracle
(tests/ros/safety_oracle.py) judges it against limits read from the robot's description,
independently of the safety filter under test.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from geometry_msgs.msg import Twist
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from tether_ros import conversions as conv

NS = 1_000_000_000


def spin_until(ex: SingleThreadedExecutor, predicate: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not predicate():
        ex.spin_once(timeout_sec=0.005)
    return predicate()


@dataclass
class Step:
    """One control step as the backend saw it."""

    t_ns: int  # sim time of the step (the observation the action answers)
    action: np.ndarray
    stale: bool  # the watchdog chose it (hold / zero)
    measured: np.ndarray  # the measured position in action space before the step


@dataclass
class BridgeSpy:
    """Wraps a SimBridge's runner: records each registered command time, each step's action
    and whether the safety filter's watchdog chose it. ``bridge.io.runner`` must exist (arms,
    bases)."""

    bridge: Any
    steps: list[Step] = field(default_factory=list)
    registered_ns: list[int] = field(default_factory=list)
    accepted: int = 0  # commands (chunks, twists) the runner accepted

    def __post_init__(self) -> None:
        runner = self.bridge.io.runner
        safety, backend = runner.safety, runner.backend
        real_command, real_output, real_step = safety.command, safety.output, backend.step
        real_submit, real_submit_cmd = runner.submit, runner.submit_command
        decided: dict[str, Any] = {}

        def command(action: Any, now_s: float, valid_s: float | None = None) -> None:
            real_command(action, now_s, valid_s)
            if not safety.estopped:
                self.registered_ns.append(round(now_s * NS))

        def output(now_s: float, measured: np.ndarray, pose: Any = None) -> Any:
            out, stale = real_output(now_s, measured, pose)
            decided.update(t=round(now_s * NS), stale=stale, measured=np.array(measured))
            return out, stale

        def step(action: np.ndarray) -> Any:
            self.steps.append(
                Step(
                    decided["t"], np.array(action, copy=True), decided["stale"], decided["measured"]
                )
            )
            return real_step(action)

        def submit(chunk: Any) -> Any:
            out = real_submit(chunk)
            self.accepted += 1
            return out

        def submit_command(action: Any) -> None:
            real_submit_cmd(action)  # counted by submit

        safety.command, safety.output, backend.step = command, output, step
        runner.submit, runner.submit_command = submit, submit_command

    def fresh_since(self, i: int) -> int:
        return sum(not s.stale for s in self.steps[i:])

    def first_stale_from(self, i: int) -> int | None:
        return next((k for k in range(i, len(self.steps)) if self.steps[k].stale), None)

    def reaction(self, i_kill: int) -> tuple[Step, int] | None:
        """(first safe step, time of the last command before it) for a kill at step index
        ``i_kill``: the last command the filter registered before the first stale step after
        the kill, and the first stale step after that command (earlier than ``i_kill`` when
        the policy had already gone quiet, e.g. late, before it was killed)."""
        k = self.first_stale_from(i_kill)
        if k is None:
            return None
        last = max(t for t in self.registered_ns if t <= self.steps[k].t_ns)
        j = next(i for i in range(k + 1) if self.steps[i].stale and self.steps[i].t_ns > last)
        return self.steps[j], last


# --- kills ---------------------------------------------------------------------------------
@dataclass
class KillResult:
    """One kill: periods from the last command the filter registered to the first action
    the watchdog chose, and from the kill itself (sim time when the server died) to it;
    ``safe`` is that step (its action and the measured position it answered)."""

    reaction_periods: float
    from_kill_periods: float
    safe: Step


def kill_once(
    ex: SingleThreadedExecutor,
    spy: BridgeSpy,
    server: Node,
    dt_ns: int,
    fresh_before: int,
    extra_spins: int,
    timeout_s: float = 30.0,
) -> KillResult | None:
    """Let ``server`` drive for ``fresh_before`` fresh steps, destroy it (after
    ``extra_spins`` executor turns, to vary the phase), and measure the watchdog's reaction.
    None if the server never drove or no safe action came within the timeout."""
    ex.add_node(server)
    start = len(spy.steps)
    if not spin_until(ex, lambda: spy.fresh_since(start) >= fresh_before, timeout_s):
        ex.remove_node(server)
        server.destroy_node()
        return None
    for _ in range(extra_spins):
        ex.spin_once(timeout_sec=0.001)
    t_kill = spy.bridge.io.runner.obs.stamp_ns
    i_kill = len(spy.steps)
    ex.remove_node(server)
    server.destroy_node()
    if not spin_until(ex, lambda: spy.first_stale_from(i_kill) is not None, timeout_s):
        return None
    found = spy.reaction(i_kill)
    assert found is not None
    safe, last = found
    return KillResult((safe.t_ns - last) / dt_ns, (safe.t_ns - t_kill) / dt_ns, safe)


# --- fuzzing -------------------------------------------------------------------------------
def fuzz_topic(
    ex: SingleThreadedExecutor,
    pub: Any,
    make: Callable[[], Any],
    processed: Callable[[], int],
    n: int,
    batch: int = 5,
) -> int:
    """Publish ``n`` messages from ``make()`` in batches within the command QoS depth (none
    is dropped before the bridge sees it); returns how many the bridge processed."""
    start = processed()
    for k in range(0, n, batch):
        before = processed()
        b = min(batch, n - k)
        for _ in range(b):
            pub.publish(make())
        target = before + b
        spin_until(ex, lambda: processed() >= target, 10.0)  # noqa: B023 (used right here)
    return processed() - start


HUGE = (1e3, 1e6, 1e30, 1e39, -1e39, 1e300, -1e300)
SPECIAL = (math.nan, math.inf, -math.inf, *HUGE)


def _value(rng: np.random.Generator, scale: float) -> float:
    r = rng.random()
    if r < 0.15:
        return float(rng.choice(SPECIAL))
    if r < 0.3:
        return float(rng.normal(0, 1e4))
    return float(rng.uniform(-2 * scale, 2 * scale))


def fuzz_trajectory(
    rng: np.random.Generator, names: tuple[str, ...], now_ns: int, dt: float, scale: float
) -> JointTrajectory:
    """A random JointTrajectory: random point counts and lengths, NaN / inf / huge values,
    wrong, missing, duplicate or shuffled joint names, zero / uneven / decreasing times,
    stamps in the past, the future or far off, and now and then a well-formed one."""
    msg = JointTrajectory()
    n = len(names)
    r = rng.random()
    if r < 0.1:
        got = list(names[:-1]) + ["elbow_of_doom"]
    elif r < 0.15:
        got = list(names) + [names[0]]
    elif r < 0.25:
        got = list(rng.permutation(names))
    elif r < 0.3:
        got = list(names[: int(rng.integers(0, n))])
    else:
        got = list(names)
    msg.joint_names = got
    k = int(rng.choice([0, 1, 1, 2, 5, 50]))
    times_ns = [round((i + 1) * dt * NS) for i in range(k)]
    if rng.random() < 0.1 and k > 1:
        times_ns = list(rng.integers(0, NS, k))
    for i in range(k):
        p = JointTrajectoryPoint()
        width = len(got) if rng.random() < 0.85 else int(rng.integers(0, 2 * n + 2))
        p.positions = [_value(rng, scale) for _ in range(width)]
        p.time_from_start = conv.to_duration(int(times_ns[i]))
        msg.points.append(p)
    s = rng.random()
    if s < 0.6:
        stamp = now_ns
    elif s < 0.75:
        stamp = now_ns - int(rng.integers(1, 10 * NS))  # out of order
    elif s < 0.9:
        stamp = now_ns + int(rng.integers(NS // 10, 1000 * NS))  # the future
    else:
        stamp = int(rng.integers(0, 2**40))
    msg.header.stamp = conv.to_time(max(stamp, 0))
    return msg


def fuzz_twist(rng: np.random.Generator, scale: float = 2.0) -> Twist:
    """A random Twist: NaN / inf / huge components anywhere, or plain random values."""
    t = Twist()
    for v in (t.linear, t.angular):
        v.x, v.y, v.z = (_value(rng, scale) if rng.random() < 0.5 else 0.0 for _ in range(3))
    return t


def fuzz_low_level(rng: np.random.Generator, channels: dict[str, tuple[str, ...]]) -> JointState:
    """A random low-level drone command: channel names of any mode, mixed or misspelled,
    random lengths, NaN / inf / huge or random values."""
    msg = JointState()
    mode = str(rng.choice(list(channels)))
    names = list(channels[mode])
    r = rng.random()
    if r < 0.1:
        names[int(rng.integers(0, 4))] = "rotor9"
    elif r < 0.2:
        names = names[: int(rng.integers(0, 4))]
    elif r < 0.3:
        names = list(rng.permutation(names))
    msg.name = names
    width = len(names) if rng.random() < 0.85 else int(rng.integers(0, 9))
    scale = 30000.0 if mode == "rotor_rpm" else 3.0
    msg.position = [_value(rng, scale) for _ in range(width)]
    return msg
