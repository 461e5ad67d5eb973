"""policy_server: runs a Policy built from the experiment config over ROS 2.

Subscribes what the policy reads, through the robot kind's adapter (tether_ros.kinds): the
kind's state topics (an arm's joint_states; a base's odom + wheel joint_states, plus scan
and base_pose when the policy reads them; a drone's odom), the task's
``objects/<name>/pose`` when it reads env_state, and camera images when it reads
images/<cam>. Answers each observation, matched by stamp, on the kind's command topic with
the observation's stamp (arms and bases: the chunk on joint_trajectory, so the bridge's
deadline watchdog applies; a drone: the first row on cmd_low_level, one server per drone
namespace). A re-sent observation gets the same answer again. A stamp that goes back in
time (a simulator reset) resets the policy; ~/reset (std_srvs/Trigger) does too. The latest
``instruction`` (std_msgs/String) goes to the policy in ``Observation.instruction``; a new one
drops the chunk in progress, so the next chunk follows it.

Parameter ``chunk_mode`` (kinds whose chunks a chunk_executor executes): answer
``chunk_request`` (std_msgs/Header, from the executor) on ``action_chunk`` with a fresh chunk
for the latest observation, instead of answering every observation.
"""

from __future__ import annotations

import json
import sys
from collections import deque
from typing import Any

from rclpy.node import Node
from std_msgs.msg import Header, String
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from tether.core import registry
from tether.core.config import ExperimentConfig
from tether.core.errors import ConfigError
from tether.core.experiment import build_policy, build_task, robot_spec
from tether.core.timing import now_ns
from tether.core.types import ActionChunk, Observation
from tether_ros import conversions as conv
from tether_ros import interface as itf
from tether_ros.chunk_executor import ACTION_CHUNK, CHUNK_REQUEST
from tether_ros.graph import chunked_refusal
from tether_ros.kinds import kind_io
from tether_ros.kinds.inputs import ObservationInputs
from tether_ros.runtime import experiment_from_params, run_node


class PolicyServer(Node):
    """ROS 2 shell around a Policy."""

    def __init__(self, cfg: ExperimentConfig | None = None, **kwargs: Any) -> None:
        super().__init__("policy_server", start_parameter_services=False, **kwargs)
        self.cfg = cfg or experiment_from_params(self)
        self.spec = robot_spec(self.cfg)
        self.policy = build_policy(self.cfg, self.spec)
        # one inference before the first observation: a cold first chunk (torch's or
        # onnxruntime's lazy start, slower on a loaded machine) would arrive after the
        # bridge's deadline and the watchdog would hold the robot at the start of a run
        self.warm_up_ms: float | None = None
        warm = getattr(self.policy, "warm_up", None)
        if warm is not None:
            t0 = now_ns()
            warm()
            self.warm_up_ms = (now_ns() - t0) * 1e-6
        keys = list(self.policy.contract.get("observation_keys", ["state"]))
        io = kind_io(self.spec.kind)
        self.output = io.policy_output(self, self.spec)
        objects = build_task(self.cfg).objects if "env_state" in keys else ()
        self.inputs = ObservationInputs(
            self,
            io,
            self.spec,
            keys,
            objects,
            self._offer,
            self._on_instruction,
            # on hardware no simulator stamps the object poses with the state: a goal
            # published by a mission node is the latest one
            latch_objects=self.cfg.hardware is not None,
        )
        self.last_stamp: int | None = None
        self.last_chunk: ActionChunk | None = None
        # the latest 10,000 inference times (a deque: trimming a full list at every
        # observation moves all of it)
        self.infer_ms: deque[float] = deque(maxlen=10000)

        self.create_service(Trigger, "~/reset", self._srv_reset)
        self.chunk_mode = bool(self.declare_parameter("chunk_mode", False).value)
        if self.chunk_mode and not io.chunked:
            raise ConfigError(f"chunk_mode: no chunk executor executes a {self.spec.kind}'s chunks")
        if self.chunk_mode and registry.served_per_observation(self.cfg.policy.type):
            raise ConfigError(chunked_refusal(self.cfg.policy.type))
        self.latest: Observation | None = None
        # a language-conditioned policy (docs/vla.md): what it makes of each instruction,
        # and that it waits for one, go out on episode_status (events "instruction",
        # "waiting") and in one log line each
        self.language = getattr(self.policy, "language", None)
        self._said_waiting = False
        self.pub_status = self.create_publisher(String, itf.EPISODE_STATUS, itf.EVENT_QOS)
        # an exported graph's execution provider (runtime.provider), and a fallback if the
        # user allowed one: once in the log, and on episode_status (event "runtime", latched
        # for late joiners; again at each reset, so every episode's status carries it)
        self.runtime_report: dict[str, Any] | None = getattr(self.policy, "runtime_report", None)
        if self.runtime_report is not None:
            self._report("runtime", self.runtime_report)
        if self.chunk_mode:
            self.chunk_pub = self.create_publisher(JointTrajectory, ACTION_CHUNK, itf.COMMAND_QOS)
            self.create_subscription(Header, CHUNK_REQUEST, self._on_request, itf.COMMAND_QOS)
        ns = self.get_namespace()
        runs_on = ""
        if self.warm_up_ms is not None:
            runs_on = f" (warmed up in {self.warm_up_ms:.0f} ms)"
        if self.runtime_report is not None:
            runs_on += f" (onnxruntime on {self.runtime_report['provider']})"
        self.get_logger().info(
            f"policy {self.cfg.policy.type} for {self.spec.name}"
            f"{' in ' + ns if ns != '/' else ''}{runs_on}: {self.inputs.describe()}"
        )

    def close(self) -> None:
        """At shutdown: a policy with a process of its own (lerobot) stops it."""
        close = getattr(self.policy, "close", None)
        if close is not None:
            close()

    def _srv_reset(self, _req: Trigger.Request, resp: Trigger.Response) -> Trigger.Response:
        self._reset()
        resp.success, resp.message = True, "policy reset"
        return resp

    def _reset(self) -> None:
        self.policy.reset()
        self.inputs.clear()
        self.last_stamp = None
        self.last_chunk = None
        if self.runtime_report is not None:
            self._report("runtime", self.runtime_report)

    def _on_instruction(self, text: str) -> None:
        """A new instruction: the next chunk is planned for it (the one in progress is
        dropped)."""
        if self.language is not None:
            status = self.language.status(text)
            self._report("instruction", status)
            near = ""
            if "similarity" in status:
                near = (
                    f" (nearest training instruction: '{status['nearest_training_instruction']}',"
                    f" cosine similarity {status['similarity']:.2f})"
                )
            if "truncated_to_tokens" in status:
                self.get_logger().warning(
                    f"instruction longer than the text encoder's {status['truncated_to_tokens']}"
                    " tokens: truncated"
                )
            self.get_logger().info(f"instruction: '{text}'{near}")
        else:
            self.get_logger().info(f"instruction: '{text}'")
        replan = getattr(self.policy, "replan", None)
        if replan is not None:
            replan()
        self.last_chunk = None

    def _offer(self, key: str, stamp: int, value: Any) -> None:
        if self.last_stamp is not None and stamp < self.last_stamp:
            self.get_logger().info("time went back (simulator reset): resetting the policy")
            self._reset()
        if stamp == self.last_stamp and self.last_chunk is not None:
            if key == "state":
                self.output.publish(self.last_chunk)  # a re-sent observation: same answer
            return
        obs = self.inputs.add(key, stamp, value)
        if obs is not None:
            self._act(obs)

    def _act(self, obs: Observation) -> None:
        if self.chunk_mode:
            self.latest = obs
            observe = getattr(self.policy, "observe", None)
            if observe is not None:  # the observation history advances at the control rate
                observe(obs)
            return
        chunk = self._infer(obs)
        self.last_stamp, self.last_chunk = obs.stamp_ns, chunk
        self.output.publish(chunk)

    def _infer(self, obs: Observation) -> ActionChunk:
        t0 = now_ns()
        chunk = self.policy.act(obs)
        self.infer_ms.append((now_ns() - t0) * 1e-6)
        if (
            self.language is not None
            and self.language.instruction is None
            and not self._said_waiting
        ):
            self._said_waiting = True
            self.get_logger().warning(
                "no instruction yet: holding the robot until one arrives on 'instruction'"
            )
            self._report("waiting", {"reason": "no instruction", "holding": True})
        chunk.t0_ns = obs.stamp_ns
        return chunk

    def _report(self, event: str, data: dict[str, Any]) -> None:
        self.pub_status.publish(
            String(data=json.dumps({"event": event, "node": "policy_server", **data}))
        )

    def _on_request(self, _msg: Header) -> None:
        """A chunk_executor's queue runs low: a fresh chunk for the latest observation."""
        if self.latest is None:
            return
        replan = getattr(self.policy, "replan", None)
        if replan is not None:
            replan()
        chunk = self._infer(self.latest)
        self.chunk_pub.publish(conv.chunk_to_trajectory(chunk, self.spec.action.names))


def main(args: list[str] | None = None) -> None:
    sys.exit(run_node(PolicyServer, args))


if __name__ == "__main__":
    main()
