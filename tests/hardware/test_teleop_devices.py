"""Teleop devices without hardware: key/button state machines, clear errors when a package
or device is missing, the scripted device."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from tether.core.config import load_config
from tether.core.errors import ConfigError, MissingDependency, TetherError
from tether.core.types import Observation
from tether.hardware.teleop.command import EpisodeEvent, ObservingDevice, TeleopDevice
from tether.hardware.teleop.devices import build_device
from tether.hardware.teleop.gamepad import GamepadDevice, GamepadLayout, GamepadState
from tether.hardware.teleop.keyboard import KeyboardDevice, KeyboardState
from tether.hardware.teleop.scripted import ScriptedDevice
from tether.hardware.teleop.spacemouse import SpaceMouseDevice, SpaceMouseState


def test_keyboard_motion_needs_the_armed_deadman_and_lasts_key_hold():
    k = KeyboardState(key_hold_s=0.2)
    k.feed("w", 0.0)
    c = k.command(0.01)
    assert not c.deadman and not c.linear.any()  # not armed: nothing
    k.feed("mw", 0.1)
    c = k.command(0.11)
    assert c.deadman and c.linear[0] == pytest.approx(k.speed) and not c.angular.any()
    assert not k.command(0.31).linear.any()  # key_hold_s after the press: stops
    k.feed("au", 0.4)
    c = k.command(0.41)
    assert c.linear[1] > 0 and c.angular[2] > 0
    k.feed("m", 0.5)
    assert not k.command(0.5).deadman  # disarmed


def test_keyboard_estop_latches_and_arrow_keys_are_not_estop():
    k = KeyboardState()
    k.feed("m\x1b[A", 0.0)  # arrow up: an escape sequence, ignored
    c = k.command(0.0)
    assert c.deadman and not c.estop
    k.feed("\x1b", 0.1)
    c = k.command(0.1)
    assert c.estop and not c.deadman
    k.feed("mw", 0.2)  # arming is refused while e-stopped
    assert not k.command(0.2).deadman
    k.feed("R", 0.3)
    c = k.command(0.3)
    assert not c.estop and not c.deadman  # released, still disarmed
    k.feed("mx", 0.4)
    assert k.command(0.4).estop


def test_keyboard_events_gripper_speed_and_idle_disarm():
    k = KeyboardState(idle_disarm_s=1.0)
    k.feed("m nyf\x7f", 0.0)
    c = k.command(0.0)
    assert c.gripper_toggle
    assert c.events == (
        EpisodeEvent.START,
        EpisodeEvent.STOP_SUCCESS,
        EpisodeEvent.STOP_FAIL,
        EpisodeEvent.DISCARD,
    )
    c = k.command(0.01)
    assert not c.gripper_toggle and c.events == ()  # edges, reported once
    s0 = k.speed
    k.feed("++", 0.5)
    assert k.speed == pytest.approx(min(1.0, s0 * 2.25))
    assert k.command(0.6).deadman
    assert not k.command(1.6).deadman  # no key for idle_disarm_s


def test_keyboard_without_a_terminal_is_one_clear_error(tmp_path):
    with pytest.raises(TetherError, match="keyboard teleop needs a terminal"):
        KeyboardDevice(tty_path=str(tmp_path / "no-such-tty"))


def test_gamepad_state_deadman_edges_and_estop():
    L = GamepadLayout()
    g = GamepadState(L)
    axes = [0.0] * 6
    axes[L.axis_left_y] = -1.0  # stick up
    buttons = [0] * 11
    c = g.update(axes, buttons, [(0, 0)])
    assert not c.deadman and not c.linear.any()
    buttons[L.deadman] = 1
    buttons[L.gripper] = 1
    buttons[L.start] = 1
    c = g.update(axes, buttons, [(0, 1)])
    assert c.deadman and c.linear[0] == pytest.approx(1.0) and c.angular[1] == 1.0
    assert c.gripper_toggle and c.events == (EpisodeEvent.START,)
    c = g.update(axes, buttons, [(0, 0)])
    assert not c.gripper_toggle and c.events == ()  # held, not pressed again
    axes[L.axis_left_y] = -0.05  # inside the dead zone
    assert not g.update(axes, buttons, [(0, 0)]).linear.any()
    buttons[L.estop] = 1
    c = g.update(axes, buttons, [(0, 0)])
    assert c.estop and not c.deadman
    buttons[L.estop] = 0
    assert g.update(axes, buttons, [(0, 0)]).estop  # latched
    buttons[L.estop_release] = 1
    assert not g.update(axes, buttons, [(0, 0)]).estop


def test_spacemouse_state_cap_is_the_deadman():
    s = SpaceMouseState(deadzone=0.05)
    c = s.update(0.0, 0.01, 0.0, 0.0, 0.0, 0.0, [0, 0])
    assert not c.deadman
    c = s.update(0.0, 0.5, 0.2, 0.0, 0.0, 0.0, [0, 0])
    assert c.deadman and c.linear[0] == pytest.approx(0.5) and c.linear[2] == pytest.approx(0.2)
    c = s.update(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, [1, 0])
    assert c.gripper_toggle
    c = s.update(0.0, 0.5, 0.0, 0.0, 0.0, 0.0, [1, 1])
    assert c.estop and not c.deadman


@pytest.mark.parametrize(
    ("module", "cls"), [("pygame", GamepadDevice), ("pyspacemouse", SpaceMouseDevice)]
)
def test_missing_device_package_is_one_sentence(monkeypatch, module, cls):
    monkeypatch.setitem(sys.modules, module, None)  # import fails as if not installed
    with pytest.raises(MissingDependency, match=f"needs the '{module}' package: pip install"):
        cls()


def test_unknown_device_name(repo):
    cfg = load_config(repo / "configs/experiments/panda_lift_expert.yaml")
    with pytest.raises(ConfigError, match="unknown teleop device 'joystick'"):
        build_device("joystick", cfg, None)  # type: ignore[arg-type]


def test_scripted_device_emits_expert_actions(repo, panda):
    cfg = load_config(repo / "configs/experiments/panda_lift_expert.yaml")
    dev = build_device("scripted", cfg, panda)
    assert isinstance(dev, ScriptedDevice) and isinstance(dev, ObservingDevice)
    assert isinstance(dev, TeleopDevice)
    assert not dev.read().deadman  # nothing observed yet
    state = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785, 0.04, 0.04], np.float32)
    env = np.array([0.5, 0.0, 0.025, 1.0, 0.0, 0.0, 0.0], np.float32)
    dev.observe(Observation({"state": state, "env_state": env}, stamp_ns=10_000_000))
    c = dev.read()
    assert c.deadman and c.action is not None and c.action.shape == (8,)
    assert np.abs(c.action[:7] - state[:7]).max() < 0.05  # a small first step
