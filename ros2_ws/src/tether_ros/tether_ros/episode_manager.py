"""Episode control for a human recording demonstrations: the operator's teleop keys call
this manager's ``~/start_episode``, ``~/stop_episode`` (keep: the operator says it
succeeded) and ``~/discard_episode`` (std_srvs/Trigger), and the manager drives the sim
bridge and the recorder.

    start    reset the scene (sim_bridge/reset), start the episode (sim_bridge/start_episode);
             the recorder follows the sim bridge's episode_status and starts recording
    stop     recorder/stop_episode (save now, whatever the task says), then end the episode
    discard  recorder/discard_episode, then end the episode
An episode the task ends by itself (success, or its time limit) is saved or discarded by
the recorder from the task's verdict, as for scripted data.

Service callbacks only queue the request: the calls they lead to run from ``poll()`` in the
caller's loop, because a single-threaded executor cannot wait for a service inside a
callback.

Requests are judged against the state the queue leads to, not only the last
``episode_status`` event: "start" right after "stop" is queued behind it (the operator
presses n as soon as the save is printed, before the sim bridge's "end" event arrives),
and a second "stop" while one is on its way is refused.
"""

from __future__ import annotations

import json
from collections import deque
from typing import Any

from rclpy.node import Node
from std_msgs.msg import String
from std_srvs.srv import Trigger

from tether_ros import interface as itf


class EpisodeManager:
    """Services on ``node`` (``<node>/start_episode`` ...) that a teleop node calls."""

    def __init__(self, node: Node, sim_bridge: str = "sim_bridge", recorder: str = "recorder"):
        self.node = node
        self.queue: deque[str] = deque()
        self.running = False  # from episode_status events
        # what the queued requests lead to (True: an episode running), until the events and
        # the service replies catch up; None: nothing on its way
        self._want: bool | None = None
        self._want_seen = False  # the event for ``_want`` arrived
        self._failed = False  # a call on the way failed: trust the events again
        self.log: list[str] = []
        self._steps: deque[Any] = deque()  # service clients still to call, in order
        self._pending: tuple[str, Any] | None = None
        self._sim: dict[str, Any] = {
            name: node.create_client(Trigger, f"{sim_bridge}/{name}")
            for name in ("reset", "start_episode", "stop_episode")
        }
        self._rec: dict[str, Any] = {
            name: node.create_client(Trigger, f"{recorder}/{name}")
            for name in ("stop_episode", "discard_episode")
        }
        for name in ("start_episode", "stop_episode", "discard_episode"):
            node.create_service(Trigger, f"~/{name}", self._queue(name))
        node.create_subscription(String, itf.EPISODE_STATUS, self._on_status, itf.EVENT_QOS)

    def _queue(self, name: str) -> Any:
        def handler(_req: Trigger.Request, resp: Trigger.Response) -> Trigger.Response:
            ok, why = self._accepts(name)
            if ok:
                self.queue.append(name)
                self._want, self._want_seen = name == "start_episode", False
                self._failed = False
            resp.success, resp.message = ok, why
            return resp

        return handler

    def episode_running(self) -> bool:
        """Whether an episode runs once the queued requests are done."""
        return self.running if self._want is None else self._want

    def _accepts(self, name: str) -> tuple[bool, str]:
        running = self.episode_running()
        if name == "start_episode" and running:
            return False, "an episode is running: stop (y / f) or discard it first"
        if name != "start_episode" and not running:
            return False, "no episode is running: start one (n)"
        return True, "queued"

    def _on_status(self, msg: String) -> None:
        event = json.loads(msg.data).get("event")
        if event in ("start", "end"):
            self.running = event == "start"
            if self._want is not None and self._want == self.running:
                self._want_seen = True

    def poll(self) -> None:
        """Run queued requests, one service call at a time (call from the spin loop)."""
        if self._pending is not None:
            if not self._reap(*self._pending):
                return
            self._pending = None
        drained = not self._steps and not self.queue
        if drained and self._want is not None and (self._want_seen or self._failed):
            self._want, self._failed = None, False  # the events caught up: trust them again
        if not self._steps and self.queue:
            name = self.queue.popleft()
            self.log.append(name)
            if name == "start_episode":
                self._steps.extend([self._sim["reset"], self._sim["start_episode"]])
            else:
                self._steps.extend([self._rec[name], self._sim["stop_episode"]])
        if self._steps:
            client = self._steps.popleft()
            self._pending = (client.srv_name, client.call_async(Trigger.Request()))

    def _reap(self, name: str, future: Any) -> bool:
        if not future.done():
            return False
        res = future.result()
        if res is None or not res.success:
            why = res.message if res is not None else "no reply"
            self.node.get_logger().warning(f"{name}: {why}")
            self._failed = True
        return True

    def ready(self) -> bool:
        return all(c.service_is_ready() for c in (*self._sim.values(), *self._rec.values()))
