"""The episode manager judges the operator's keys against the state its queue leads to: "n"
pressed as soon as a kept episode is saved (before the sim bridge's "end" event arrives)
is queued behind the stop, not refused; a second "y" on its way is refused. Fake sim
bridge and recorder services record the calls; the test publishes the events itself, late.
"""

from __future__ import annotations

import json
import time

import pytest

pytest.importorskip("rclpy")
pytestmark = pytest.mark.ros

from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from ros_helpers import ros_context  # noqa: E402
from std_msgs.msg import String  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

from tether_ros import interface as itf  # noqa: E402
from tether_ros.episode_manager import EpisodeManager  # noqa: E402


class Fakes:
    """sim_bridge/{reset,start_episode,stop_episode} and recorder/{stop,discard}_episode
    that only note that they were called."""

    def __init__(self, node: Node) -> None:
        self.calls: list[str] = []
        for srv in (
            "sim_bridge/reset",
            "sim_bridge/start_episode",
            "sim_bridge/stop_episode",
            "recorder/stop_episode",
            "recorder/discard_episode",
        ):
            node.create_service(Trigger, srv, self._handler(srv))

    def _handler(self, srv: str):
        def handle(_req: Trigger.Request, resp: Trigger.Response) -> Trigger.Response:
            self.calls.append(srv)
            resp.success = True
            return resp

        return handle


def test_start_right_after_a_save_is_queued_and_a_second_stop_refused():
    with ros_context() as ctx:
        node = Node("operator", context=ctx)
        sim = Node("fakes", context=ctx)
        fakes = Fakes(sim)
        manager = EpisodeManager(node)
        status = sim.create_publisher(String, itf.EPISODE_STATUS, itf.EVENT_QOS)
        clients = {
            n: sim.create_client(Trigger, f"operator/{n}")
            for n in ("start_episode", "stop_episode", "discard_episode")
        }
        ex = SingleThreadedExecutor(context=ctx)
        ex.add_node(node)
        ex.add_node(sim)

        def spin(until, timeout_s: float = 10.0) -> None:
            deadline = time.monotonic() + timeout_s
            while not until():
                assert time.monotonic() < deadline, "timed out"
                ex.spin_once(timeout_sec=0.01)
                manager.poll()

        def press(name: str) -> Trigger.Response:
            fut = clients[name].call_async(Trigger.Request())
            spin(fut.done)
            return fut.result()

        def event(name: str) -> None:
            status.publish(String(data=json.dumps({"event": name})))
            spin(lambda: manager.running == (name == "start"))

        spin(lambda: manager.ready() and all(c.service_is_ready() for c in clients.values()))
        spin(lambda: status.get_subscription_count() > 0)

        assert press("stop_episode").success is False  # nothing runs yet
        assert press("start_episode").message == "queued"
        refused = press("start_episode")  # the first start is on its way, no event yet
        assert not refused.success and "an episode is running" in refused.message
        spin(lambda: len(fakes.calls) == 2)
        assert fakes.calls == ["sim_bridge/reset", "sim_bridge/start_episode"]
        event("start")

        # "y": the recorder saves, the sim bridge is told to stop; its "end" event is late
        assert press("stop_episode").message == "queued"
        again = press("discard_episode")
        assert not again.success and "no episode is running" in again.message
        spin(lambda: len(fakes.calls) == 4)
        assert fakes.calls[2:] == ["recorder/stop_episode", "sim_bridge/stop_episode"]
        assert manager.running  # the events say the episode still runs
        # "n" as soon as the save is printed: queued behind the stop, not refused
        assert press("start_episode").message == "queued"
        spin(lambda: len(fakes.calls) == 6)
        assert fakes.calls[4:] == ["sim_bridge/reset", "sim_bridge/start_episode"]
        event("end")
        event("start")
        # once the events have caught up, they decide again: the task ends the episode
        for _ in range(20):
            ex.spin_once(timeout_sec=0.01)
            manager.poll()
        event("end")
        assert press("start_episode").message == "queued"
        node.destroy_node()
        sim.destroy_node()
