"""`tether record --teleop keyboard` driven in a real terminal: tmux runs the command,
``tmux send-keys`` is the operator. Keeps, drops and keeps an episode; the dataset holds
the two kept ones, and the hand moved the way the keys said. The first episode is armed a
second after its start (the commands begin late: still recorded)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rclpy")
pytest.importorskip("mujoco")
pytestmark = [
    pytest.mark.ros,
    pytest.mark.mujoco,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]

import rclpy  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from ros_helpers import ros_context, spin_until  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import String  # noqa: E402

from tether.core.config import load_config  # noqa: E402
from tether.core.data.lerobot import LeRobotReader  # noqa: E402
from tether.core.experiment import robot_description, robot_spec  # noqa: E402
from tether_ros import conversions as conv  # noqa: E402
from tether_ros import interface as itf  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
CONFIG = "configs/experiments/panda_lift_expert.yaml"
ENV_KEYS = ("ROS_DOMAIN_ID", "RMW_IMPLEMENTATION", "FASTDDS_DEFAULT_PROFILES_FILE", "MUJOCO_GL")
MOVE_M = 0.06  # the operator holds a key until the hand has moved this far
MAX_PRESSES = 100  # at the key-repeat pace below: 12 s, far more than MOVE_M takes
REPEAT_S = 0.12  # a held key repeats this often (< the keyboard's 0.25 s key hold)
ARM_AFTER_S = 1.0  # the first episode's commands begin this long after its start
DOMINANCE = 1.5  # ... and further along the key's axis than this times along any other
ARM = robot_description(load_config(REPO / CONFIG))
N_JOINTS = len(ARM.joints)  # the arm's joints lead the state (the gripper's follow)


class Watch:
    """The operator's eyes: the sim bridge's episode events and the hand's position (m, base
    frame) from joint_states."""

    def __init__(self, ctx: rclpy.Context) -> None:
        self.node = rclpy.create_node("tmux_operator_watch", context=ctx)
        self.ex = SingleThreadedExecutor(context=ctx)
        self.ex.add_node(self.node)
        self.names = robot_spec(load_config(REPO / CONFIG)).state_names
        self.starts = 0
        self.states = 0  # joint states heard
        self.hand_pos: np.ndarray | None = None
        self.node.create_subscription(String, itf.EPISODE_STATUS, self._on_event, itf.EVENT_QOS)
        self.node.create_subscription(JointState, itf.JOINT_STATES, self._on_state, itf.SENSOR_QOS)

    def _on_event(self, msg: String) -> None:
        self.starts += '"event": "start"' in msg.data

    def _on_state(self, msg: JointState) -> None:
        q = conv.joint_state_to_array(msg, self.names)[:N_JOINTS].astype(np.float64)
        self.hand_pos, _ = ARM.kinematics.fk(q)
        self.states += 1

    def spin_until(self, predicate, timeout_s: float) -> bool:
        return spin_until(self.ex, predicate, timeout_s)

    def started(self, n: int) -> np.ndarray:
        """Wait for the n-th episode start and a joint state after it; the hand's position."""
        assert self.spin_until(lambda: self.starts >= n, 60.0), f"episode {n} never started"
        seen = self.states
        assert self.spin_until(lambda: self.states > seen, 10.0), "no joint states"
        assert self.hand_pos is not None
        return self.hand_pos.copy()

    def hold(self, keys, axis: int, start: np.ndarray, metres: float = MOVE_M) -> np.ndarray:
        """Press ``keys`` at the key-repeat pace until the hand moved ``metres`` along
        ``axis``, and DOMINANCE times as far as along any other axis; the displacement (3,).

        The second condition is there because after a reset the armed teleop drives the hand
        back toward the last episode's end pose (it keeps its commanded joints; measured
        8-9 cm in +x with no key pressed), so the keys must outrun that pull."""

        def moved() -> np.ndarray:
            assert self.hand_pos is not None
            return self.hand_pos - start

        def far_enough() -> bool:
            d = moved()
            across = np.delete(np.abs(d), axis).max()
            return bool(d[axis] >= metres and d[axis] >= DOMINANCE * across)

        for _ in range(MAX_PRESSES):
            keys()
            if self.spin_until(far_enough, REPEAT_S):
                return moved()
        raise AssertionError(f"the hand moved {moved()} m in {MAX_PRESSES} presses")


def test_record_by_keyboard_in_tmux(tmp_path):
    with ros_context() as ctx:
        _record_by_keyboard(tmp_path, Watch(ctx))


def _record_by_keyboard(tmp_path: Path, watch: Watch) -> None:
    out = tmp_path / "ds"
    log = tmp_path / "record.log"
    env = " ".join(f"{k}={shlex.quote(os.environ[k])}" for k in ENV_KEYS if k in os.environ)
    cmd = (
        f"cd {REPO} && env {env} {sys.executable} -m tether.cli.main record "
        f"{CONFIG} --teleop keyboard --episodes 2 "
        f"--out {out} 2>&1 | tee {log}; echo EXIT=${{PIPESTATUS[0]}} >> {log}; sleep 60"
    )
    tmux = ["tmux", "-L", f"tether-rec-{os.getpid()}", "-f", "/dev/null"]
    subprocess.run(
        [*tmux, "new-session", "-d", "-s", "t", "-x", "160", "-y", "50", "bash", "-c", cmd],
        check=True,
    )

    def keys(*k: str) -> None:
        subprocess.run([*tmux, "send-keys", "-t", "t", *k], check=True)

    def wait_for(text: str, count: int = 1, timeout_s: float = 120.0) -> str:
        """Spin (the watch keeps listening) until the log shows ``text`` ``count`` times."""
        body = ""

        def shown() -> bool:
            nonlocal body
            body = log.read_text() if log.exists() else ""
            if "EXIT=" in body and body.count(text) < count:
                raise AssertionError(f"tether record exited early:\n{body[-3000:]}")
            return body.count(text) >= count

        if not watch.spin_until(shown, timeout_s):
            raise AssertionError(f"no {text!r} after {timeout_s} s:\n{body[-3000:]}")
        return body

    try:
        wait_for("ready: arm with the dead-man")
        # the operator is told to start only once the recorder hears the robot (an episode
        # started before its subscriptions matched held 0 frames on a loaded CI machine)
        logs = "".join(f.read_text() for f in (tmp_path / ".ds-logs").glob("*recorder*"))
        assert "ready: heard every stream" in logs, logs[-2000:]
        keys("n")
        wait_for("episode start: queued")
        start = watch.started(1)
        # the operator arms the dead-man a second into the episode: its commands start
        # long after the start, and the episode is still recorded (the recorder once shut
        # out a stream that first spoke past a 0.5 s window: 0 frames)
        watch.spin_until(lambda: False, ARM_AFTER_S)
        keys("m")
        watch.hold(lambda: keys("w"), 0, start)  # forward (+x)
        keys("y")  # keep
        wait_for("1/2 saved")
        keys("n")
        wait_for("episode start: queued", 2)
        # the recorder follows the same start event; it has been recording for as long as
        # the hand takes to move 2 cm when the verdict comes, so the dropped episode has frames
        start = watch.started(2)
        watch.hold(lambda: keys("w"), 0, start, metres=0.02)
        keys("f")  # the operator's verdict: failed, not kept
        wait_for("discarded")
        keys("n")
        wait_for("episode start: queued", 3)
        start = watch.started(3)
        watch.hold(lambda: keys("q"), 2, start)  # up (+z)
        keys("y")
        body = wait_for("EXIT=", timeout_s=60.0)
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)

    assert "EXIT=0" in body, body[-3000:]
    assert "2/2 saved" in body and "episode 3: saved" in body
    dropped = re.search(r"episode 2: discarded \((\d+) frames, asked\)", body)
    assert dropped and int(dropped[1]) > 0, body[-3000:]

    ds = LeRobotReader(out)
    assert ds.num_episodes == 2
    moved = []
    for i in range(2):
        state = ds.episode(i, decode_video=False)["observation.state"]
        p0, _ = ARM.kinematics.fk(state[0, :N_JOINTS].astype(np.float64))
        p1, _ = ARM.kinematics.fk(state[-1, :N_JOINTS].astype(np.float64))
        moved.append(p1 - p0)
    # the keys drove the hand: forward in the first kept episode, up in the second
    assert moved[0][0] > 0.03 and abs(moved[0][2]) < moved[0][0]
    assert moved[1][2] > 0.03 and abs(moved[1][0]) < moved[1][2]
