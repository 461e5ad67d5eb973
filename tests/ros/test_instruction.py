"""Instructions over ROS 2 (docs/multitask.md): the sim bridge publishes each episode's
instruction on ``instruction`` and in its start event; the policy server hands the latest to
the policy in ``Observation.instruction``; a new instruction mid-episode changes what the
policy does and what the episode is judged by; `tether record` stores each episode's
instruction as its LeRobot task.

Nodes run in this process on their own rclpy context (no sleeps: every wait spins until a
condition holds or a deadline passes); the record test runs the CLI.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

pytest.importorskip("rclpy")
pytest.importorskip("mujoco")
pytestmark = [pytest.mark.ros, pytest.mark.mujoco]

from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from ros_helpers import ros_context, spin_until  # noqa: E402
from std_msgs.msg import String  # noqa: E402

from tether.core.config import load_config  # noqa: E402
from tether.sim.scene import CUBE_HALF  # noqa: E402
from tether_ros import interface as itf  # noqa: E402
from tether_ros.policy_server import PolicyServer  # noqa: E402
from tether_ros.sim_bridge import SimBridge  # noqa: E402

EXPERIMENT = "configs/experiments/panda_multitask_expert.yaml"


def test_a_new_instruction_mid_episode_changes_the_outcome(repo):
    """Asked to lift the red cube, then (0.5 s in, still approaching; the sim paused while
    the instruction travels) the blue one: the policy server's expert turns to the blue cube, the bridge judges the episode by the new
    instruction, and the end event reports it."""
    cfg = load_config(
        repo / EXPERIMENT,
        [
            "sim.cameras=[]",
            "ros.rate_mode=lockstep",
            "episodes.autostart=true",
            "episodes.auto_reset=false",
            "episodes.seed=7",
            "task.instruction=lift the red cube",
        ],
    )
    with ros_context() as ctx:
        bridge = SimBridge(cfg, context=ctx)
        server = PolicyServer(cfg, context=ctx)
        probe = Node("probe", context=ctx)
        events: list[dict] = []
        heard: list[str] = []
        probe.create_subscription(
            String, itf.EPISODE_STATUS, lambda m: events.append(json.loads(m.data)), itf.EVENT_QOS
        )
        probe.create_subscription(
            String, itf.INSTRUCTION, lambda m: heard.append(m.data), itf.INSTRUCTION_QOS
        )
        pub = probe.create_publisher(String, itf.INSTRUCTION, itf.INSTRUCTION_QOS)
        ex = SingleThreadedExecutor(context=ctx)
        for n in (bridge, server, probe):
            ex.add_node(n)
        backend = bridge.io.runner.backend
        try:
            assert spin_until(ex, lambda: any(e["event"] == "start" for e in events), 20)
            start = next(e for e in events if e["event"] == "start")
            assert start["instruction"] == "lift the red cube"
            assert spin_until(ex, lambda: heard[-1:] == ["lift the red cube"], 10)
            assert spin_until(ex, lambda: bridge.io.runner.backend.sim_time >= 0.5, 30)
            assert backend.body_pose("red_cube")[0][2] < CUBE_HALF + 1e-3  # not grasped yet
            # the sim stands still while the new instruction travels (lockstep: the bridge
            # steps only from the executor): under load DDS delivery took long enough in
            # sim time for the expert to reach the red cube first
            ex.remove_node(bridge)
            pub.publish(String(data="Lift the blue cube."))
            assert spin_until(ex, lambda: server.inputs.instruction == "Lift the blue cube.", 10)
            ex.add_node(bridge)
            task = bridge.io.runner.task
            assert spin_until(ex, lambda: task.instruction == "Lift the blue cube.", 10)
            assert backend.sim_time < 0.6, backend.sim_time
            assert spin_until(ex, lambda: any(e["event"] == "end" for e in events), 120)
        finally:
            for n in (bridge, server, probe):
                n.destroy_node()
    end = next(e for e in events if e["event"] == "end")
    assert end["instruction"] == "Lift the blue cube." and end["success"], end
    assert backend.body_pose("blue_cube")[0][2] > CUBE_HALF + 0.08
    assert backend.body_pose("red_cube")[0][2] < CUBE_HALF + 5e-3


@pytest.mark.slow
def test_record_stores_each_episodes_instruction_as_its_task(repo, tmp_path):
    """3 episodes: each saved episode's task string is the instruction its seed drew
    (recomputed here from a backend reset with that seed), and tasks.parquet lists them."""
    pytest.importorskip("pyarrow")
    from tether.core import registry
    from tether.core.data.lerobot import LeRobotReader
    from tether.sim.tasks.multitask import MultitaskTask

    out = tmp_path / "ds"
    cmd = [sys.executable, "-m", "tether.cli.main", "record", str(repo / EXPERIMENT)]
    cmd += ["--episodes", "3", "--out", str(out), "sim.cameras=[]", "episodes.seed=20"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    seeds = [int(s) for s in re.findall(r"episode seed (\d+): saved", r.stdout)]
    assert len(seeds) == 3, r.stdout
    sim_cfg = registry.config_class("sim", "mujoco")()
    sim = registry.build("sim", sim_cfg, robot="panda", task=MultitaskTask())
    try:
        drawn = [sim.reset(seed).instruction for seed in seeds]
    finally:
        sim.close()
    reader = LeRobotReader(out)
    tasks = [reader.episode(i)["task"][0] for i in range(3)]
    assert tasks == drawn
    assert set(reader.tasks) == set(drawn)


def test_a_vla_policy_server_waits_for_an_instruction_then_reports_it(repo, tmp_path):
    """A language-conditioned policy (a tiny VLA: tests/policies/policy_helpers.tiny_vla)
    served by the policy server with no instruction in force: it holds the arm, says once
    (one log line, one "waiting" event on episode_status) that it waits; an instruction it
    was never trained on then drives it, and the "instruction" event names the nearest
    training instruction and its cosine similarity."""
    pytest.importorskip("torch")
    pytest.importorskip("tokenizers")
    sys.path.insert(0, str(repo / "tests" / "policies"))
    from policy_helpers import LEFT, RIGHT, tiny_vla

    model = tiny_vla(tmp_path, steps=50)
    cfg = load_config(
        repo / "configs/experiments/panda_lift_expert.yaml",
        [
            "sim.cameras=[]",
            "ros.rate_mode=lockstep",
            "episodes.autostart=true",
            "episodes.auto_reset=false",
            "policy.type=onnx",
            f"policy.model={model / 'model.onnx'}",
        ],
    )
    with ros_context() as ctx:
        bridge = SimBridge(cfg, context=ctx)
        server = PolicyServer(cfg, context=ctx)
        # the graph ran once on zeros before the first observation (a cold first chunk
        # would miss the bridge's deadline)
        assert server.warm_up_ms is not None and server.warm_up_ms > 0
        probe = Node("probe", context=ctx)
        events: list[dict] = []
        probe.create_subscription(
            String, itf.EPISODE_STATUS, lambda m: events.append(json.loads(m.data)), itf.EVENT_QOS
        )
        pub = probe.create_publisher(String, itf.INSTRUCTION, itf.INSTRUCTION_QOS)
        ex = SingleThreadedExecutor(context=ctx)
        for n in (bridge, server, probe):
            ex.add_node(n)
        backend = bridge.io.runner.backend
        q0 = backend.observe()["state"].copy()
        try:
            assert spin_until(ex, lambda: bridge.io.runner.backend.sim_time >= 0.3, 30)
            # the events are latched: on a loaded machine the probe may be matched late
            assert spin_until(ex, lambda: any(e["event"] == "waiting" for e in events), 10)
            waiting = [e for e in events if e["event"] == "waiting"]
            assert len(waiting) == 1 and waiting[0]["holding"], events
            # held: the arm has not moved (the servos hold the commanded start)
            assert abs(backend.observe()["state"] - q0)[:7].max() < 2e-3
            pub.publish(String(data="please move somewhere"))
            assert spin_until(ex, lambda: any(e["event"] == "instruction" for e in events), 10)
            # half a second of sim time from when the words arrived (the sim keeps stepping
            # while the probe waits: on a loaded machine that can be most of a fixed horizon)
            heard = bridge.io.runner.backend.sim_time
            assert spin_until(ex, lambda: bridge.io.runner.backend.sim_time >= heard + 0.5, 30)
        finally:
            for n in (bridge, server, probe):
                n.destroy_node()
    said = next(e for e in events if e["event"] == "instruction")
    assert said["instruction"] == "please move somewhere"
    assert said["nearest_training_instruction"] in (LEFT, RIGHT)
    assert 0.0 < said["similarity"] < 0.95
    assert len([e for e in events if e["event"] == "waiting"]) == 1
    # it acts on the words it was given: the arm moves
    assert abs(backend.observe()["state"] - q0)[:7].max() > 1e-2
