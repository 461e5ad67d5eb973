"""Drive episodes of a running graph from outside: ~/start_episode, then wait for the
episode's end on episode_status. Used by `tether demo` and the ROS loop benchmark."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from sensor_msgs.msg import Image
from std_msgs.msg import String
from std_srvs.srv import Trigger

from tether.core.config import ExperimentConfig
from tether.core.errors import TetherError
from tether_ros import conversions as conv
from tether_ros import interface as itf
from tether_ros.graph import DDS_ENV, GraphProcesses
from tether_ros.kinds import experiment_io


class EpisodeSupervisor:
    """A node in this process (own rclpy context) that starts episodes and collects results.

    ``camera``: record that camera's images during episodes started with ``record=True``.
    """

    def __init__(
        self,
        cfg: ExperimentConfig,
        graph: GraphProcesses | None,
        env: dict[str, str],
        camera: str | None = None,
    ) -> None:
        self.cfg = cfg
        self.graph = graph
        for key in DDS_ENV:  # talk to the graph with the nodes' DDS settings
            if key in env:
                os.environ[key] = env[key]
        self.ctx = rclpy.Context()
        rclpy.init(context=self.ctx)
        self.node = Node(
            "episode_supervisor", namespace=cfg.ros.namespace or None, context=self.ctx
        )
        self.ex = SingleThreadedExecutor(context=self.ctx)
        self.ex.add_node(self.node)
        self.events: list[dict[str, Any]] = []
        self.frames: list[np.ndarray] = []
        self._recording = False
        self.node.create_subscription(
            String,
            itf.EPISODE_STATUS,
            lambda m: self.events.append(json.loads(m.data)),
            itf.EVENT_QOS,
        )
        if camera:
            self.node.create_subscription(
                Image, itf.image_topic(camera), self._on_image, itf.SENSOR_QOS
            )
        self.start: Any = self.node.create_client(Trigger, "sim_bridge/start_episode")
        # ros.chunked: the chunk executor's latest cadence report (achieved rate, underruns)
        self.cadence: dict[str, Any] | None = None
        if cfg.ros.chunked:
            self.node.create_subscription(
                String, "chunk_executor/cadence", self._on_cadence, itf.COMMAND_QOS
            )

    def _on_cadence(self, msg: String) -> None:
        self.cadence = json.loads(msg.data)

    def _on_image(self, msg: Image) -> None:
        if self._recording:
            self.frames.append(conv.image_to_array(msg).copy())

    def spin_until(self, pred: Callable[[], bool], timeout_s: float, what: str) -> None:
        """Spin until ``pred()``; a node dying or the deadline passing raises TetherError."""
        deadline = time.monotonic() + timeout_s
        while not pred():
            if time.monotonic() > deadline:
                raise TetherError(f"timed out after {timeout_s:.0f} s waiting for {what}")
            self.spin_once(what)

    def spin_once(self, what: str = "the graph", timeout_s: float = 0.02) -> None:
        """Handle one callback (or wait ``timeout_s``); raise TetherError if a node died."""
        dead = self.graph.dead() if self.graph else []
        if dead:
            name, rc = dead[0]
            tail = self.graph.log_tail(name) if self.graph else ""
            raise TetherError(
                f"node {name} exited with code {rc} while waiting for {what}"
                + (f"; its last output:\n{tail}" if tail else "")
            )
        self.ex.spin_once(timeout_sec=timeout_s)

    def wait_ready(self, timeout_s: float = 90.0) -> None:
        """Until the sim bridge serves start_episode and a policy server is connected."""
        self.spin_until(self.start.service_is_ready, timeout_s, "the sim bridge to come up")
        # the kind's adapter says which topics show a policy server connected (an arm's
        # joint_states / joint_trajectory, each drone's odom / cmd_low_level)
        links = experiment_io(self.cfg).policy_topics(self.cfg)
        self.spin_until(
            lambda: all(
                self.node.count_subscribers(state) >= 1 and self.node.count_publishers(cmd) >= 1
                for state, cmd in links
            ),
            timeout_s,
            "the policy server" + ("s" if len(links) > 1 else ""),
        )
        if self.cfg.ros.chunked:
            self.spin_until(
                lambda: self.node.count_subscribers("chunk_request") >= 1,
                timeout_s,
                "the policy server (chunk mode)",
            )
            # and this node hears the executor's cadence reports from the first episode on
            # (a report sent before discovery matched the two is lost: volatile QoS)
            self.spin_until(
                lambda: self.node.count_publishers("chunk_executor/cadence") >= 1,
                timeout_s,
                "the chunk executor",
            )

    def run_episode(self, record: bool = False) -> dict[str, Any]:
        """Start one episode and return its end status (success, steps, latency_ms, ...)."""
        starts, ends = self._of("start"), self._ends()
        self.frames = [] if record else self.frames
        self._recording = record
        self.cadence = None
        future = self.start.call_async(Trigger.Request())
        # the bridge's start event (reliable, latched) says the episode started as well as the
        # response does, and the response can be lost: Fast DDS drops it ("failed to send
        # response (timeout)") when the server has not yet matched this client's response
        # reader, which service_is_ready does not wait for (a fresh graph's first call)
        self.spin_until(
            lambda: future.done() or len(self._of("start")) > len(starts), 30.0, "start_episode"
        )
        if not future.done():
            self.start.remove_pending_request(future)
        limit = 60.0 + 20.0 * float(getattr(self.cfg.task, "max_duration_s", 10.0))
        self.spin_until(lambda: len(self._ends()) > len(ends), limit, "the episode to end")
        self._recording = False
        result = dict(self._ends()[len(ends)])
        if self.cfg.ros.chunked and self.cadence is not None:
            result["chunk_executor"] = self.cadence  # its last report of this episode
        return result

    def _ends(self) -> list[dict[str, Any]]:
        return self._of("end")

    def _of(self, event: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("event") == event]

    def close(self) -> None:
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.ctx)

    def __enter__(self) -> EpisodeSupervisor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
