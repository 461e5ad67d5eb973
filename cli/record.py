"""`tether record`: record demonstrations over ROS 2 into a LeRobotDataset v3.0.

The graph is the experiment's (sim_bridge + policy_server) plus a recorder node, for any
robot kind (the recorder takes the kind's streams: tether_ros.kinds.streams); with
``--teleop scripted`` the policy server runs the scripted expert the task registers
(tether.hardware.teleop.scripted: reach/lift -> scripted_expert, go_to_goal -> base_expert,
hover -> quad_pid, ...). Only successful episodes are kept; the command runs episodes until
``--episodes`` are saved.

With the scripted expert the sim steps in sim time (``ros.rate_mode: lockstep``): each step
waits for the expert's answer to the current observation and for the recorder to take that
observation in (``ros.wait_for_recorder``), so a slow or busy machine records the same
episodes, frame for frame, as a fast one. ``--realtime`` steps on the wall clock instead.

With a human device (``--teleop keyboard|gamepad|spacemouse``) there is no policy server:
this process hosts the teleop node (the keyboard reads this terminal) and an episode
manager whose services the teleop's episode keys call (n: start, y: stop and keep, f: stop
and drop, Backspace: discard); an episode the task ends by itself is kept if it succeeded.
"""

from __future__ import annotations

import functools
import json
import time
from pathlib import Path
from typing import Any

from tether.core.config import load_config
from tether.core.errors import TetherError

SCRIPTED = "scripted"  # the task's scripted expert drives
HUMAN_DEVICES = ("keyboard", "gamepad", "spacemouse")
# sim-time recording: lockstep with the recorder in the loop; the expert is never stepped
# past (the lockstep timeout only catches a policy server that hangs). Put before the user's
# overrides, so an explicit ros.* override still wins.
SIM_TIME = ["ros.rate_mode=lockstep", "ros.wait_for_recorder=true", "ros.lockstep_timeout_s=30"]
REALTIME = ["ros.rate_mode=realtime"]


def run_record(
    config: str,
    overrides: list[str],
    out: str | None,
    episodes: int,
    teleop: str,
    fps: int,
    mcap: bool = False,
    task_text: str | None = None,
    realtime: bool = False,
) -> int:
    from tether_ros.graph import GraphProcesses, graph_env, plan_graph
    from tether_ros.supervisor import EpisodeSupervisor

    if teleop != SCRIPTED and teleop not in HUMAN_DEVICES:
        raise TetherError(
            f"--teleop {teleop}: unknown data source "
            f"(available: {', '.join([SCRIPTED, *HUMAN_DEVICES])})"
        )
    # a human drives on the wall clock; the expert in sim time unless asked otherwise
    timing = REALTIME if realtime or teleop in HUMAN_DEVICES else SIM_TIME
    overrides = [*timing, *overrides, "episodes.autostart=false", "episodes.auto_reset=false"]
    if teleop == SCRIPTED:
        overrides += expert_overrides(config, overrides)
    cfg = load_config(config, overrides)
    root = Path(out) if out else Path("datasets") / time.strftime(f"{cfg.name}-%Y%m%d-%H%M%S")
    if root.exists() and any(root.iterdir()) and not (root / "meta/info.json").exists():
        raise TetherError(f"{root} exists and is not a dataset: choose a new --out directory")
    _check_writable(root)
    recorder: dict[str, object] = {"output": str(root.resolve()), "fps": fps, "mcap": mcap}
    if task_text:
        recorder["task_text"] = task_text
    if teleop in HUMAN_DEVICES:
        return _record_human(config, overrides, root, episodes, teleop, recorder)
    env = graph_env(cfg)
    nodes = plan_graph(config, overrides, recorder=recorder)
    print(
        f"tether record: {episodes} {cfg.task.type} episodes ({teleop}) in {cfg.sim.type} "
        f"over ROS 2 at {fps} fps -> {root}\n  {_timing(cfg)}",
        flush=True,
    )
    log_dir = root.parent / f".{root.name}-logs"
    saved = 0
    attempts = 0
    t_start = time.monotonic()
    with GraphProcesses(nodes, env, log_dir) as graph, EpisodeSupervisor(cfg, graph, env) as sup:
        status, ready = _watch_recorder(sup.node)
        sup.wait_ready()
        # the first episode starts once the recorder hears the robot and the expert (its
        # subscriptions match after theirs: the episode's first frame would be lost)
        sup.spin_until(lambda: any(ready), 60.0, "the recorder to hear the robot and the expert")
        while saved < episodes:
            if attempts >= 2 * episodes + 5:
                raise TetherError(
                    f"only {saved} of {episodes} episodes succeeded in {attempts} tries"
                )
            attempts += 1
            seen = len(status)
            result = sup.run_episode()
            sup.spin_until(functools.partial(_grew, status, seen), 120.0, "the recorder to save")
            st = status[seen]
            if st["event"] == "saved":
                saved += 1
            rate = saved / max(time.monotonic() - t_start, 1e-9) * 60
            bar = "#" * int(30 * saved / episodes)
            print(
                f"  [{bar:<30}] {saved}/{episodes} saved  episode seed {result['seed']}: "
                f"{st['event']} ({st.get('frames', 0)} frames, {st.get('dropped', 0)} dropped)"
                f" in {float(result.get('sim_time_s', 0.0)):.2f} s of sim time"
                f"  {rate:.1f} episodes/min",
                flush=True,
            )
    print(
        f"saved {saved} episodes to {root} ({attempts} tries, "
        f"{time.monotonic() - t_start:.0f} s); `tether dataset info {root}` describes it"
    )
    return 0


def expert_overrides(config: str, overrides: list[str]) -> list[str]:
    """Overrides that make the experiment's policy its task's scripted expert: none when it
    already is (its settings apply), else the expert's section with its defaults."""
    from tether.hardware.teleop.scripted import task_expert

    cfg = load_config(config, overrides)
    expert = task_expert(cfg.task.type)
    return [] if cfg.policy.type == expert else [f"policy={{type: {expert}}}"]


def _check_writable(root: Path) -> None:
    """Fail before starting any node when the dataset directory cannot be written."""
    try:
        root.mkdir(parents=True, exist_ok=True)
        probe = root / ".tether-write-probe"
        probe.write_bytes(b"ok")
        probe.unlink()
    except OSError as exc:
        raise TetherError(
            f"cannot write the dataset to {root}: {exc.strerror or exc} — choose another --out"
        ) from None


def _record_human(
    config: str,
    overrides: list[str],
    root: Path,
    episodes: int,
    device: str,
    recorder: dict[str, object],
) -> int:
    """Record from a human device until ``episodes`` are saved (Ctrl-C stops early; what
    is saved stays saved)."""
    from tether.hardware.teleop.config_teleop import TeleopConfig
    from tether_ros.episode_manager import EpisodeManager
    from tether_ros.graph import GraphProcesses, graph_env, plan_graph
    from tether_ros.supervisor import EpisodeSupervisor
    from tether_ros.teleop import Teleop

    cfg = load_config(config, overrides)
    env = graph_env(cfg)
    nodes = plan_graph(config, overrides, recorder=recorder, policy=False)
    print(
        f"tether record: {episodes} {cfg.task.type} episodes by {device} in {cfg.sim.type} "
        f"over ROS 2 at {recorder['fps']} fps -> {root}\n  {_timing(cfg)}",
        flush=True,
    )
    log_dir = root.parent / f".{root.name}-logs"
    saved = tries = 0
    t_start = time.monotonic()
    with GraphProcesses(nodes, env, log_dir) as graph, EpisodeSupervisor(cfg, graph, env) as sup:
        manager = EpisodeManager(sup.node)
        status, ready = _watch_recorder(sup.node)
        sup.spin_until(manager.ready, 90.0, "the sim bridge and the recorder")
        # "ready" only once the recorder hears the robot: an episode the operator starts
        # before its subscriptions match would hold nothing (a busy machine: seconds)
        sup.spin_until(lambda: any(ready), 60.0, "the recorder to hear the robot")
        teleop = Teleop(
            cfg,
            teleop=TeleopConfig(device=device, episode_node=sup.node.get_name()),
            namespace=cfg.ros.namespace or None,
            context=sup.ctx,
        )
        sup.ex.add_node(teleop)
        try:
            print(
                "ready: arm with the dead-man (keyboard: m), n starts an episode, "
                "y keeps it, f or Backspace drops it; Ctrl-C quits",
                flush=True,
            )
            seen = 0
            while saved < episodes:
                sup.spin_once("the operator")
                manager.poll()
                for st in status[seen:]:
                    if st.get("event") not in ("saved", "discarded"):
                        continue
                    tries += 1
                    saved += st["event"] == "saved"
                    bar = "#" * int(30 * saved / episodes)
                    print(
                        f"  [{bar:<30}] {saved}/{episodes} saved  episode {tries}: "
                        f"{st['event']} ({st.get('frames', 0)} frames"
                        + (f", {st['reason']}" if st.get("reason") else "")
                        + ")",
                        flush=True,
                    )
                seen = len(status)
        finally:
            teleop.close()
            sup.ex.remove_node(teleop)
            teleop.destroy_node()
    print(
        f"saved {saved} episodes to {root} ({tries} tries, {time.monotonic() - t_start:.0f} s); "
        f"`tether dataset info {root}` describes it"
    )
    return 0


def _watch_recorder(node: Any) -> tuple[list[dict[str, Any]], list[bool]]:
    """Subscribe ``node`` to the recorder's status (saved / discarded events) and its
    latched recorder_ready; the lists their messages land in."""
    from std_msgs.msg import Bool, String

    from tether_ros import interface as itf
    from tether_ros.recorder import RECORDER_READY, RECORDER_STATUS

    status: list[dict[str, Any]] = []
    node.create_subscription(
        String, RECORDER_STATUS, lambda m: status.append(json.loads(m.data)), itf.EVENT_QOS
    )
    ready: list[bool] = []
    node.create_subscription(Bool, RECORDER_READY, lambda m: ready.append(m.data), itf.EVENT_QOS)
    return status, ready


def _timing(cfg: Any) -> str:
    """One line saying how the sim is stepped."""
    if cfg.ros.rate_mode == "realtime":
        return "stepping in real time (the control rate on the wall clock)"
    waits = "the policy and the recorder" if cfg.ros.wait_for_recorder else "the policy"
    return f"stepping in sim time (lockstep: each step waits for {waits}; --realtime: wall clock)"


def _grew(items: list[Any], n: int) -> bool:
    return len(items) > n


def run_dataset_info(root: str) -> int:
    """Print episodes, frames, fps, features and stats of a dataset."""
    import numpy as np

    from tether.core.data.lerobot import DatasetError, LeRobotReader

    try:
        r = LeRobotReader(root)
    except (DatasetError, FileNotFoundError) as exc:
        raise TetherError(f"{root}: {exc}") from None
    info = r.info
    print(f"{root}: LeRobotDataset {info['codebase_version']}, robot {info.get('robot_type')}")
    print(f"  episodes {r.num_episodes}, frames {r.num_frames}, fps {info['fps']}, tasks {r.tasks}")
    if r.needs_recovery:
        print("  note: an interrupted save left extra rows; run recovery (the reader ignores them)")
    print("  features:")
    np.set_printoptions(precision=3, suppress=True, linewidth=120)
    for key, ft in info["features"].items():
        st = r.stats.get(key)
        line = f"    {key:34s} {ft['dtype']:8s} {ft['shape']}"
        if st is not None and ft["dtype"] != "video":
            line += f"  min {np.ravel(st['min'])[:4]} max {np.ravel(st['max'])[:4]}"
            if np.size(st["min"]) > 4:
                line += " ..."
        print(line)
    return 0


def run_dataset_merge(inputs: list[str], out: str) -> int:
    """``tether dataset merge OUT IN [IN ...]``: the inputs' episodes, in order, in a new
    dataset (tether.core.data.lerobot_merge)."""
    from tether.core.data.lerobot import (
        DatasetError,
        DatasetWriteError,
        LeRobotReader,
        merge_datasets,
    )

    try:
        n = merge_datasets(inputs, out)
        r = LeRobotReader(out)
    except (DatasetError, DatasetWriteError) as exc:
        raise TetherError(f"tether dataset merge: {exc}") from None
    print(f"merged {len(inputs)} datasets into {out}: {n} episodes, {r.num_frames} frames")
    print(f"  tasks {r.tasks}")
    return 0
