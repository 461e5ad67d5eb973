"""Observations from topics, for any kind: the kind's state topics (its StateInputs), the
task's object poses (``objects/<name>/pose`` -> ``env_state`` (7 per object: position m,
quaternion wxyz)) and camera images (``camera/<name>/image_raw`` -> ``images/<name>``),
matched by header stamp, and the latest ``instruction`` (std_msgs/String ->
``Observation.instruction``). The policy server and teleop (an observing device) share it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np
from geometry_msgs.msg import PoseStamped
from sensor_msgs.msg import Image
from std_msgs.msg import String

from tether.core.errors import InvalidCommand
from tether.core.timing import StampSync
from tether.core.types import IMAGE_PREFIX, Observation
from tether_ros import conversions as conv
from tether_ros import interface as itf

if TYPE_CHECKING:
    from rclpy.node import Node

    from tether.core.spec import RobotSpec
    from tether_ros.kinds import KindIO, Offer


def object_key(name: str) -> str:
    """The stream key of an object's pose."""
    return f"obj/{name}"


class ObservationInputs:
    """Subscribes on ``node`` what observation ``keys`` need: the kind's state topics, the
    ``objects`` poses (when ``keys`` has env_state; pass the task's objects) and the
    cameras ``images/<cam>`` names. Every stamped value goes to ``offer`` (the node may
    look at it first, e.g. for a clock that went back); the node hands it on to :meth:`add`,
    which returns the Observation once a stamp is complete."""

    def __init__(
        self,
        node: Node,
        io: KindIO,
        spec: RobotSpec,
        keys: Sequence[str],
        objects: Sequence[str],
        offer: Offer,
        on_instruction: Callable[[str], None] | None = None,
        latch_objects: bool = False,
    ) -> None:
        self.node = node
        # object poses: matched by stamp with the state (a simulator publishes them together)
        # or, latched, the latest of each (a goal a mission node publishes on hardware)
        self.latched: dict[str, np.ndarray] | None = {} if latch_objects else None
        # the latest non-empty instruction heard (None: none yet); ``on_instruction`` hears
        # each new one
        self.instruction: str | None = None
        self._on_new_instruction = on_instruction
        node.create_subscription(
            String,
            itf.INSTRUCTION,
            self._on_instruction,
            itf.INSTRUCTION_QOS,
            event_callbacks=itf.FAST_SUB,
        )
        self.cameras = [k[len(IMAGE_PREFIX) :] for k in keys if k.startswith(IMAGE_PREFIX)]
        self.state = io.state_inputs(node, spec, keys, offer)
        # (state inputs that bring env_state themselves: a drone world's batched server)
        own = "env_state" in getattr(self.state, "provides", ())
        self.objects = tuple(objects) if "env_state" in keys and not own else ()
        synced = () if self.latched is not None else tuple(object_key(o) for o in self.objects)
        self.sync = StampSync((*self.state.keys, *synced))
        self.images: dict[str, np.ndarray] = {}
        for name in self.objects:
            node.create_subscription(
                PoseStamped,
                itf.object_pose_topic(name),
                lambda msg, n=name: self._on_pose(n, msg, offer),
                itf.SENSOR_QOS,
                event_callbacks=itf.FAST_SUB,
            )
        for cam in self.cameras:
            node.create_subscription(
                Image,
                itf.image_topic(cam),
                lambda msg, c=cam: self._on_image(c, msg),
                itf.SENSOR_QOS,
                event_callbacks=itf.FAST_SUB,
            )

    def _on_pose(self, name: str, msg: PoseStamped, offer: Offer) -> None:
        if self.latched is not None:
            self.latched[name] = conv.pose_to_array(msg)
        else:
            offer(object_key(name), conv.from_time(msg.header.stamp), conv.pose_to_array(msg))

    def _on_instruction(self, msg: String) -> None:
        text = msg.data.strip()
        if text and text != self.instruction:
            self.instruction = text
            if self._on_new_instruction is not None:
                self._on_new_instruction(text)

    def _on_image(self, cam: str, msg: Image) -> None:
        try:
            self.images[cam] = conv.image_to_array(msg)
        except InvalidCommand as exc:
            self.node.get_logger().warning(f"ignored image: {exc}", throttle_duration_sec=1.0)

    def add(self, key: str, stamp: int, value: np.ndarray) -> Observation | None:
        """Take one stamped value; the Observation of ``stamp`` once every stream has one
        (and every camera a first image), else None."""
        ready = self.sync.add(key, stamp, value)
        if ready is None or any(cam not in self.images for cam in self.cameras):
            return None  # (wait for the first image of every camera)
        if self.latched is not None and any(o not in self.latched for o in self.objects):
            return None  # (wait for a first pose of every latched object)
        data = self.state.observation(ready)
        if self.objects:
            poses = (
                self.latched
                if self.latched is not None
                else {o: ready[object_key(o)] for o in self.objects}
            )
            data["env_state"] = np.concatenate([poses[o] for o in self.objects])
        for cam in self.cameras:
            data[IMAGE_PREFIX + cam] = self.images[cam]
        return Observation(data, stamp_ns=stamp, instruction=self.instruction)

    def clear(self) -> None:
        """Forget incomplete stamps (a reset)."""
        self.sync.clear()

    def describe(self) -> str:
        """What it reads, for a log line."""
        out = "inputs " + ", ".join(self.state.keys)
        if self.objects:
            out += f", env_state {list(self.objects)}"
        if self.cameras:
            out += f", cameras {self.cameras}"
        return out
