"""rclpy integration: the sim bridge flies drones over ROS 2 (takeoff, cmd_vel, watchdog,
bad low-level commands, two namespaced drones). Nodes run in this process on their own
context; every wait spins until a condition holds or a deadline passes (sim time)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

pytest.importorskip("rclpy")
pytest.importorskip("pybullet")
pytestmark = [pytest.mark.ros, pytest.mark.pybullet]

from drone_helpers import drone_cfg, spy_on_step  # noqa: E402
from geometry_msgs.msg import Twist  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from ros_helpers import ros_context, spin_until  # noqa: E402
from sensor_msgs.msg import Image, Imu, JointState  # noqa: E402
from std_msgs.msg import Bool, String  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

from tether.core.config import load_config  # noqa: E402
from tether_ros import conversions as conv  # noqa: E402
from tether_ros import interface as itf  # noqa: E402
from tether_ros.sim_bridge import SimBridge  # noqa: E402


class Probe:
    """A test node that watches one drone's odom / imu and calls its services."""

    def __init__(self, ctx, ex, ns: str = "") -> None:
        self.node = Node(f"probe_{ns or 'x'}", context=ctx)
        self.ex = ex
        self.ns = ns
        self.odom: list[np.ndarray] = []
        self.imu: list[Imu] = []
        t = lambda name: f"{ns}/{name}" if ns else name  # noqa: E731
        self.node.create_subscription(
            Odometry,
            t(itf.ODOM),
            lambda m: self.odom.append(conv.odometry_to_state(m)),
            itf.SENSOR_QOS,
        )
        self.node.create_subscription(Imu, t(itf.IMU), self.imu.append, itf.SENSOR_QOS)
        self.cmd_vel = self.node.create_publisher(Twist, t(itf.CMD_VEL), itf.COMMAND_QOS)
        self.low = self.node.create_publisher(JointState, t(itf.CMD_LOW_LEVEL), itf.COMMAND_QOS)
        self.clients: dict[str, Any] = {
            s: self.node.create_client(Trigger, t(s))
            for s in (itf.TAKEOFF, itf.LAND, itf.EMERGENCY)
        }
        ex.add_node(self.node)

    @property
    def z(self) -> float:
        return float(self.odom[-1][2]) if self.odom else float("nan")

    def call(self, srv: str) -> Trigger.Response:
        cli = self.clients[srv]
        assert spin_until(self.ex, cli.service_is_ready, 20)
        fut = cli.call_async(Trigger.Request())
        assert spin_until(self.ex, fut.done, 20)
        return fut.result()

    def twist(self, x: float = 0.0, y: float = 0.0, z: float = 0.0) -> Twist:
        msg = Twist()
        msg.linear.x, msg.linear.y, msg.linear.z = x, y, z
        return msg


def _graph(ctx, cfg):
    ex = SingleThreadedExecutor(context=ctx)
    bridge = SimBridge(cfg, context=ctx)
    ex.add_node(bridge)
    return ex, bridge


@pytest.mark.slow
@pytest.mark.parametrize("sim", ["pybullet", "mujoco"])
def test_takeoff_hover_land_over_ros(sim):
    pytest.importorskip(sim)
    cfg = drone_cfg(sim=sim, on_stale="land")
    with ros_context() as ctx:
        ex, bridge = _graph(ctx, cfg)
        probe = Probe(ctx, ex)
        fleet = bridge.io.fleet
        assert spin_until(ex, lambda: len(probe.odom) > 0, 20)
        assert probe.z < cfg.drones.touchdown_height  # on the floor
        # on the ground, at rest, the IMU reads the gravity reaction along body +z
        # (averaged: floor contacts jitter a resting body by a few mm/s from step to step)
        assert spin_until(ex, lambda: len(probe.imu) > 30, 20)
        acc = [
            (m.linear_acceleration.x, m.linear_acceleration.y, m.linear_acceleration.z)
            for m in probe.imu[-30:]
        ]
        np.testing.assert_allclose(np.mean(acc, axis=0), [0.0, 0.0, 9.81], atol=0.3)

        assert probe.call(itf.TAKEOFF).success
        assert spin_until(ex, lambda: fleet.drones[0].phase == "hover", 120), probe.z
        assert fleet.drones[0].state[2] == pytest.approx(cfg.drones.takeoff_height, abs=0.06)
        t_hover = fleet.now_s
        assert spin_until(ex, lambda: fleet.now_s > t_hover + 1.0, 60)
        # hovering: held within a few cm of the takeoff height, no drift
        recent = np.array(probe.odom[-50:])
        assert np.abs(recent[:, 2] - cfg.drones.takeoff_height).max() < 0.05
        assert np.abs(recent[:, 7:10]).max() < 0.1

        assert probe.call(itf.LAND).success
        assert spin_until(ex, lambda: fleet.drones[0].phase == "off", 120), probe.z
        # odom over ROS trails the fleet by a step or two
        assert spin_until(ex, lambda: probe.z < cfg.drones.touchdown_height, 20), probe.z
        np.testing.assert_array_equal(fleet.drones[0].last_rpm, 0.0)  # motors off
        bridge.destroy_node()
        probe.node.destroy_node()


@pytest.mark.slow
def test_cmd_vel_moves_the_drone_the_commanded_way_in_its_heading_frame():
    cfg = drone_cfg(start_z=0.6, on_stale="hold")
    with ros_context() as ctx:
        ex, bridge = _graph(ctx, cfg)
        probe = Probe(ctx, ex)
        fleet = bridge.io.fleet
        assert spin_until(ex, lambda: len(probe.odom) > 0, 20)
        # cmd_vel before takeoff is refused for a drone on the ground; this one hovers
        assert fleet.drones[0].phase == "hover"
        start = fleet.drones[0].state.copy()
        t0 = fleet.now_s
        # +y in the heading frame (yaw 0): left = world +y; and up
        while fleet.now_s < t0 + 1.5:
            probe.cmd_vel.publish(probe.twist(y=0.4, z=0.2))
            spin_until(ex, lambda: False, 0.02)
        moved = fleet.drones[0].state[:3] - start[:3]
        assert moved[1] > 0.25, moved  # went left
        assert moved[2] > 0.1, moved  # and up
        assert abs(moved[0]) < 0.1, moved
        assert fleet.drones[0].phase == "command"
        # commands stop: the watchdog (hold) hovers in place within watchdog_s + a few steps
        t_last = fleet.now_s
        assert spin_until(ex, lambda: fleet.drones[0].phase == "hover", 30)
        assert fleet.now_s - t_last <= cfg.safety.watchdog_s + 0.1
        hold = fleet.drones[0].hold.copy()
        t1 = fleet.now_s
        assert spin_until(ex, lambda: fleet.now_s > t1 + 1.5, 60)
        np.testing.assert_allclose(fleet.drones[0].state[:3], hold, atol=0.08)
        bridge.destroy_node()
        probe.node.destroy_node()


@pytest.mark.slow
def test_stale_commands_land_the_drone_within_the_configured_time():
    cfg = drone_cfg(start_z=0.6, on_stale="land", land_speed=0.5)
    with ros_context() as ctx:
        ex, bridge = _graph(ctx, cfg)
        probe = Probe(ctx, ex)
        fleet = bridge.io.fleet
        d = fleet.drones[0]
        assert spin_until(ex, lambda: len(probe.odom) > 0, 20)
        t0 = fleet.now_s
        while fleet.now_s < t0 + 0.5:  # a commander (hover thrust) that then goes quiet
            probe.cmd_vel.publish(probe.twist())
            spin_until(ex, lambda: False, 0.02)
        assert d.phase == "command"
        t_last = fleet.now_s
        assert spin_until(ex, lambda: d.phase == "landing", 30)
        assert fleet.now_s - t_last <= cfg.safety.watchdog_s + 0.1
        assert spin_until(ex, lambda: d.phase == "off", 60)
        # 0.6 m at 0.5 m/s: ~1.2 s of descent, plus the watchdog delay and the stop
        assert fleet.now_s - t_last < cfg.safety.watchdog_s + 0.6 / 0.5 + 1.0
        assert d.state[2] < cfg.drones.touchdown_height
        bridge.destroy_node()
        probe.node.destroy_node()


@pytest.mark.slow
def test_hundreds_of_bad_low_level_commands_never_reach_the_simulator():
    cfg = drone_cfg(start_z=0.6, on_stale="hold")
    with ros_context() as ctx:
        ex, bridge = _graph(ctx, cfg)
        received = spy_on_step(bridge.io.fleet.backend)
        probe = Probe(ctx, ex)
        max_rpm = bridge.io.fleet.params.max_rpm
        assert spin_until(ex, lambda: probe.low.get_subscription_count() > 0 and len(received) > 3)
        rng = np.random.default_rng(0)
        rotors = list(conv.LOW_LEVEL_CHANNELS["rotor_rpm"])
        bad: list[JointState] = []
        for k in range(300):
            kind = k % 6
            vals = list(rng.uniform(0, max_rpm, 4))
            names = rotors
            if kind == 0:
                vals[k % 4] = float("nan")
            elif kind == 1:
                vals[k % 4] = float("inf") if k % 2 else float("-inf")
            elif kind == 2:
                vals = vals[: k % 4]  # too short
            elif kind == 3:
                vals = vals + [1000.0] * (1 + k % 3)  # too long
            elif kind == 4:
                vals[k % 4] = 1e9 * (1 if k % 2 else -1)  # huge
            else:
                names = ["rotor0", "rotor1", "rotor2", "rotor_x"]  # unknown channel
            msg = JointState()
            msg.name, msg.position = list(names), [float(v) for v in vals]
            bad.append(msg)
        # in bursts of 5: command topics keep the last 10 messages (reliable, keep-last)
        for k in range(0, len(bad), 5):
            for msg in bad[k : k + 5]:
                probe.low.publish(msg)
            assert spin_until(ex, lambda k=k: bridge.io.rejected >= k + 5, 20), bridge.io.rejected
        assert bridge.io.rejected == len(bad)
        n_before = len(received)
        assert spin_until(ex, lambda: len(received) > n_before + 20, 30)  # still stepping
        got = np.array(received)
        assert np.isfinite(got).all()
        assert got.min() >= 0.0 and got.max() <= max_rpm + 1e-3
        assert bridge.io.fleet.drones[0].phase == "hover"  # nothing was obeyed
        # a good command after all that is obeyed: exactly these rotor speeds reach the sim
        good = conv.low_level_msg("rotor_rpm", np.array([15000.0, 15001.0, 15002.0, 15003.0]))
        probe.low.publish(good)
        assert spin_until(ex, lambda: any(r[1] == 15001.0 for r in received[-20:]), 20)
        bridge.destroy_node()
        probe.node.destroy_node()


@pytest.mark.slow
def test_two_drones_under_namespaces_are_commanded_independently():
    cfg = drone_cfg(num_drones=2, on_stale="hold")
    with ros_context() as ctx:
        ex, bridge = _graph(ctx, cfg)
        p0, p1 = Probe(ctx, ex, "cf0"), Probe(ctx, ex, "cf1")
        fleet = bridge.io.fleet
        assert [d.name for d in fleet.drones] == ["cf0", "cf1"]
        assert spin_until(ex, lambda: p0.odom and p1.odom, 20)
        assert p1.odom[-1][1] - p0.odom[-1][1] == pytest.approx(1.0, abs=0.01)  # 1 m apart
        assert p0.call(itf.TAKEOFF).success  # only cf0 takes off
        assert spin_until(ex, lambda: fleet.drone("cf0").phase == "hover", 120)
        assert fleet.drone("cf1").phase == "off" and p1.z < cfg.drones.touchdown_height
        t0 = fleet.now_s
        while fleet.now_s < t0 + 1.0:  # cf0 flies forward, cf1 stays on the ground
            p0.cmd_vel.publish(p0.twist(x=0.4))
            spin_until(ex, lambda: False, 0.02)
        assert fleet.drone("cf0").state[0] > 0.2
        assert fleet.drone("cf1").state[0] == pytest.approx(0.0, abs=1e-3)
        assert p1.call(itf.EMERGENCY).success  # an emergency on cf1 leaves cf0 flying
        assert spin_until(ex, lambda: fleet.now_s > t0 + 2.0, 60)
        assert fleet.drone("cf1").phase == "emergency"
        assert fleet.drone("cf0").phase == "hover" and p0.z > 0.4
        # the shared e-stop stops every motor; the bridge's ~/reset releases the latch
        estop = p0.node.create_publisher(Bool, itf.ESTOP, itf.COMMAND_QOS)
        assert spin_until(ex, lambda: estop.get_subscription_count() > 0, 20)
        estop.publish(Bool(data=True))
        assert spin_until(ex, lambda: fleet.drone("cf0").phase == "emergency", 20)
        reset = p0.node.create_client(Trigger, "/sim_bridge/reset")
        assert spin_until(ex, reset.service_is_ready, 20)
        fut = reset.call_async(Trigger.Request())
        assert spin_until(ex, fut.done, 20) and fut.result().success
        assert [d.phase for d in fleet.drones] == ["off", "off"]
        assert p1.call(itf.TAKEOFF).success
        bridge.destroy_node()
        for p in (p0, p1):
            p.node.destroy_node()


@pytest.mark.slow
def test_drone_episodes_start_end_and_reset_like_every_sim_bridge(repo):
    """episodes.autostart off: the world stands still (its state goes out) until
    ~/start_episode; the end event at the time limit carries the task's verdict; the world
    then holds until the next start, which resets it with the next seed. The camera runs at
    its fps in sim time."""
    cfg = load_config(
        repo / "configs/experiments/quad_pid_hover.yaml",
        [
            "ros.rate_mode=lockstep",
            "task.max_duration_s=0.5",
            "episodes.autostart=false",
            "episodes.auto_reset=false",
        ],
    )
    with ros_context() as ctx:
        ex, bridge = _graph(ctx, cfg)
        probe = Probe(ctx, ex)
        events: list[dict] = []
        images: list[int] = []
        probe.node.create_subscription(
            String, itf.EPISODE_STATUS, lambda m: events.append(json.loads(m.data)), itf.EVENT_QOS
        )
        probe.node.create_subscription(
            Image,
            itf.image_topic("front"),
            lambda m: images.append(conv.from_time(m.header.stamp)),
            itf.SENSOR_QOS,
        )
        fleet = bridge.io.fleet
        assert spin_until(ex, lambda: len(probe.odom) >= 3, 20)  # ~10 Hz between episodes
        assert fleet.steps == 0 and not events
        start = probe.node.create_client(Trigger, "/sim_bridge/start_episode")
        assert spin_until(ex, start.service_is_ready, 20)

        def run_episode() -> dict:
            n = len(events)
            fut = start.call_async(Trigger.Request())
            assert spin_until(ex, fut.done, 20) and fut.result().success
            assert spin_until(ex, lambda: len(events) >= n + 2, 60), events
            return events[n]

        first_state = fleet.drones[0].state.copy()
        begin = run_episode()
        assert begin["event"] == "start" and (begin["episode"], begin["seed"]) == (0, 0)
        assert begin["stamp_ns"] == 0
        end = events[-1]
        assert end["event"] == "end" and not end["stopped"]
        assert end["steps"] == 50 and end["sim_time_s"] == pytest.approx(0.5)
        assert isinstance(end["success"], bool) and np.isfinite(end["return"])
        assert end["crashed"] is False
        # the camera's frames: 30 fps in sim time over the episode's 0.5 s (the one at 0 s
        # went out at the reset, before this probe was there)
        assert spin_until(ex, lambda: max(images, default=0) >= 500_000_000, 5), images
        stamps = sorted(set(images))
        assert len(stamps) == 15 and stamps[0] <= 40_000_000, stamps
        assert max(np.diff(stamps)) <= 40_000_000
        # after the end the world holds its final state
        steps = fleet.steps
        spin_until(ex, lambda: fleet.steps != steps, 0.5)
        assert fleet.steps == steps
        again = run_episode()
        assert (again["episode"], again["seed"]) == (1, 1)
        assert not np.allclose(fleet.drones[0].state[:3], first_state[:3])  # another throw
        bridge.destroy_node()
        probe.node.destroy_node()


@pytest.mark.slow
def test_a_drone_on_the_floor_takes_off_within_an_episode_that_says_it_crashed(repo):
    """The task counts the floor as a crash: the episode fails but is not cut short, so a
    drone can take off from the floor (and land on it) during an episode."""
    cfg = load_config(
        repo / "configs/experiments/quad_pid_hover.yaml",
        [
            "sim.cameras=[]",
            "task={type: waypoints, start: [0, 0, 0.015], waypoints: [[0, 0, 1]], "
            "max_duration_s: 3.0}",
            "drones.takeoff_height=0.6",
            "episodes.auto_reset=false",
        ],
    )
    with ros_context() as ctx:
        ex, bridge = _graph(ctx, cfg)
        probe = Probe(ctx, ex)
        events: list[dict] = []
        probe.node.create_subscription(
            String, itf.EPISODE_STATUS, lambda m: events.append(json.loads(m.data)), itf.EVENT_QOS
        )
        assert probe.call(itf.TAKEOFF).success
        assert spin_until(ex, lambda: any(e["event"] == "end" for e in events), 60), events
        end = events[-1]
        assert end["crashed"] is True and end["success"] is False
        assert end["steps"] == 300 and end["sim_time_s"] == pytest.approx(3.0)
        assert bridge.io.fleet.drones[0].state[2] > 0.4  # it flew
        bridge.destroy_node()
        probe.node.destroy_node()
