"""chunk_executor: runs on the robot side; executes action chunks at the control rate.

Subscribes ``action_chunk`` (JointTrajectory chunks from a policy server in chunk mode),
``joint_states`` and ``estop``; every control period it takes the action for now from a
:class:`~tether.policies.chunk_queue.ChunkQueue` (late rows dropped, overlapping chunks
cross-faded), passes it through the SafetyFilter and publishes it as a one-point
``joint_trajectory`` (what sim_bridge / hardware bridges execute). When less than
``low_water_s`` of actions remain it publishes a ``chunk_request`` (std_msgs/Header, stamp =
now) once per outstanding request. Once a second it publishes its cadence on
``~/cadence`` (std_msgs/String, JSON): achieved rate, request -> chunk latency (wall
clock), underruns.
In a simulator graph it runs on the sim's /clock (``use_sim_time``); when that clock jumps
back (an episode reset) or an episode starts (``episode_status``: a simulator whose clock
runs on across episodes, Isaac Sim) the queue and the safety filter start over.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import numpy as np
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, Header, String
from trajectory_msgs.msg import JointTrajectory

from tether.core.config import ExperimentConfig
from tether.core.errors import InvalidCommand
from tether.core.experiment import robot_spec
from tether.core.safety import SafetyFilter
from tether.core.timing import percentiles_ms
from tether.core.types import ActionChunk
from tether.policies.chunk_queue import ChunkQueue
from tether_ros import conversions as conv
from tether_ros import interface as itf
from tether_ros.runtime import experiment_from_params, run_node

# rows sent each tick, the first one period before now (see _tick)
ROWS_PER_TICK = 3
# the cadence report covers the latest this many ticks (and chunk latencies); older ones go
CADENCE_TICKS = 200

ACTION_CHUNK = "action_chunk"
CHUNK_REQUEST = "chunk_request"


class ChunkExecutor(Node):
    """ROS 2 shell around ChunkQueue + SafetyFilter, ticking at sim.control_hz."""

    def __init__(self, cfg: ExperimentConfig | None = None, **kwargs: Any) -> None:
        super().__init__("chunk_executor", start_parameter_services=False, **kwargs)
        self.cfg = cfg or experiment_from_params(self)
        self.spec = robot_spec(self.cfg)
        low_water = float(self.declare_parameter("low_water_s", 0.15).value)
        blend = int(self.declare_parameter("blend_steps", 4).value)
        self.queue = ChunkQueue(low_water, blend)
        self.safety = SafetyFilter(self.spec, self.cfg.safety)
        self.measured: np.ndarray | None = None
        self.pending_since: int | None = None  # stamp of the unanswered request
        self.pending_wall_ns = 0  # steady clock at that request (latency in wall time)
        self.latency_ms: list[float] = []
        self.ticks: list[int] = []
        self.pub = self.create_publisher(JointTrajectory, itf.JOINT_TRAJECTORY, itf.COMMAND_QOS)
        self._rows = conv.TrajectoryWriter(self.spec.action.names)  # one message, rewritten
        self.req = self.create_publisher(Header, CHUNK_REQUEST, itf.COMMAND_QOS)
        self.cadence = self.create_publisher(String, "~/cadence", itf.COMMAND_QOS)
        self.create_subscription(JointTrajectory, ACTION_CHUNK, self._on_chunk, itf.COMMAND_QOS)
        self.create_subscription(JointState, itf.JOINT_STATES, self._on_state, itf.SENSOR_QOS)
        self.create_subscription(Bool, itf.ESTOP, self._on_estop, itf.COMMAND_QOS)
        self.create_subscription(String, itf.EPISODE_STATUS, self._on_status, itf.EVENT_QOS)
        self.create_timer(self.spec.dt, self._tick)
        self.create_timer(1.0, self._report)

    def now_ns(self) -> int:
        return self.get_clock().now().nanoseconds

    def _on_state(self, msg: JointState) -> None:
        try:
            state = conv.joint_state_to_array(msg, self.spec.state_names)
        except InvalidCommand:
            return
        first = self.measured is None
        self.measured = np.asarray(state[: self.spec.action.dim], np.float32)
        if first:
            self.safety.reset(self.measured)

    def _on_status(self, msg: String) -> None:
        try:
            event = json.loads(msg.data).get("event")
        except (ValueError, AttributeError):
            return
        if event == "start":  # the rows queued belong to the last episode
            self._time_jumped_back()

    def _on_estop(self, msg: Bool) -> None:
        self.safety.set_estop(bool(msg.data))

    def _on_chunk(self, msg: JointTrajectory) -> None:
        try:
            chunk: ActionChunk = conv.trajectory_to_chunk(msg, self.spec)
        except InvalidCommand as exc:
            self.get_logger().warning(f"ignored chunk: {exc}", throttle_duration_sec=1.0)
            return
        now = self.now_ns()
        if self.pending_since is not None:
            self.latency_ms.append((time.monotonic_ns() - self.pending_wall_ns) * 1e-6)
            if len(self.latency_ms) > 2 * CADENCE_TICKS:
                del self.latency_ms[:CADENCE_TICKS]
            self.pending_since = None
        self.queue.add(chunk, now)

    def _tick(self) -> None:
        now = self.now_ns()
        if self.ticks and now < self.ticks[-1]:
            self._time_jumped_back()
        self.ticks.append(now)
        if len(self.ticks) > 2 * CADENCE_TICKS:  # (the cadence report reads the latest ones)
            del self.ticks[:CADENCE_TICKS]
        if self.queue.needs_more(now) and self.pending_since is None:
            self.pending_since, self.pending_wall_ns = now, time.monotonic_ns()
            self.req.publish(Header(stamp=conv.to_time(now)))
        elif self.pending_since is not None and now - self.pending_since > 1e9:
            self.pending_since = None  # the request was lost: ask again next tick
        if self.measured is None:
            return
        action = self.queue.pop(now)
        t_s = now * 1e-9
        if action is not None:
            try:
                self.safety.command(action, t_s)
            except InvalidCommand as exc:
                self.get_logger().warning(f"rejected action: {exc}", throttle_duration_sec=1.0)
        out, _stale = self.safety.output(t_s, self.measured)
        # in force from one period before now to two after: a bridge whose observation is a
        # period older than this clock reading (a simulator with a clock of its own, Isaac
        # Sim, sampled by the bridge on its own timer), or already a period newer (this clock
        # is the sim's /clock, a hop behind the bridge: at 500 Hz the bridge has often stepped
        # again by the time the rows for now arrive; with rows ending one period after now,
        # 23 % of its steps found none, benchmarks/ros_loop.py chunked_500hz) still finds
        # the row for it
        dt_ns = round(self.spec.dt * 1e9)
        rows = ActionChunk(np.stack([out] * ROWS_PER_TICK), self.spec.dt, now - dt_ns)
        self.pub.publish(self._rows.write(rows))

    def _time_jumped_back(self) -> None:
        """The clock went back (a simulator reset starts a new episode at t = 0), or a new
        episode started: the queued rows belong to the old timeline; start over from the
        measured position."""
        self.queue.reset()
        self.pending_since = None
        self.ticks = []
        if self.measured is not None:
            self.safety.reset(self.measured)

    def cadence_report(self) -> dict[str, Any]:
        """Achieved control rate, request -> chunk latency, queue counters."""
        t = np.asarray(self.ticks[-CADENCE_TICKS:], np.float64)
        hz = (len(t) - 1) / ((t[-1] - t[0]) * 1e-9) if len(t) > 1 and t[-1] > t[0] else 0.0
        s = self.queue.stats
        return {
            "achieved_hz": round(hz, 2),
            "target_hz": self.spec.control_hz,
            "inference_latency_ms": percentiles_ms(self.latency_ms[-CADENCE_TICKS:]),
            "underruns": s.underruns,
            "executed": s.executed,
            "chunks": s.chunks,
            "dropped_rows": s.dropped_rows,
            "blended_rows": s.blended_rows,
            # what this executor's safety filter did with the rows (since it started)
            "safety": self.safety.stats.counts(),
        }

    def _report(self) -> None:
        self.cadence.publish(String(data=json.dumps(self.cadence_report())))


def main(args: list[str] | None = None) -> None:
    sys.exit(run_node(ChunkExecutor, args))


if __name__ == "__main__":
    main()
