"""Config of the scripted expert. Light: pydantic only."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tether.core.config import ComponentConfig


class ScriptedExpertConfig(ComponentConfig):
    """A Cartesian waypoint follower with numpy IK for the reach and lift tasks, for any arm
    (robot facts come from its description)."""

    type: Literal["scripted_expert"] = "scripted_expert"
    # TCP speed and acceleration limits of the commanded motion (m/s, m/s^2)
    max_speed: float = Field(0.35, gt=0)
    max_accel: float = Field(2.0, gt=0)
    # TCP rotation speed limit (rad/s)
    max_ang_speed: float = Field(1.5, gt=0)
    # fraction of each joint's velocity limit the commands may use (the safety filter clips
    # at 1.0; staying below keeps the commands exactly as planned)
    joint_speed_scale: float = Field(0.8, gt=0, le=1.0)
    # lift: pre-grasp TCP height above the cube centre (m)
    approach_height: float = Field(0.10, gt=0)
    # lift: TCP height relative to the cube centre when closing the fingers (m); None: the
    # robot's own (its description's grasp_offset)
    grasp_offset: float | None = Field(None, ge=-0.01, le=0.02)
    # lift: time the fingers get to close before lifting (s)
    close_time_s: float = Field(0.3, gt=0)
    # lift: how high to carry the cube above where it was grasped (m)
    lift_height: float = Field(0.15, gt=0)
    # position tolerance to call a waypoint reached (m)
    tolerance: float = Field(0.008, gt=0)


class InsertExpertConfig(ScriptedExpertConfig):
    """The scripted expert's motion limits plus the insert plan (grasp the peg from the top,
    lift, carry over the hole, align, push in with a bounded force, release) and optional
    realistic noise (docs/insert.md). Noise 0 (the default) is a perfect, deterministic
    expert."""

    type: Literal["insert_expert"] = "insert_expert"  # type: ignore[assignment]
    # TCP depth below the peg's top face when the fingers close (m)
    grasp_depth: float = Field(0.02, ge=0.0, le=0.05)
    # the fingers close to this far (m, each) inside the peg's faces
    grip_squeeze: float = Field(0.002, gt=0)
    # the peg's bottom this high above the fixture's top while carried over (m)
    carry_clearance: float = Field(0.005, gt=0)
    # descend into the hole once the peg's centre is within this distance (m) of the hole's
    # axis (as perceived) and its yaw within align_yaw (rad), for settle_time_s (s)
    align_tolerance: float = Field(0.0005, gt=0)
    align_yaw: float = Field(0.02, gt=0)
    settle_time_s: float = Field(0.15, ge=0)
    # TCP speed (m/s) while aligning: slow, so the closed loop on the peg's pose does not
    # overshoot behind the servos' lag
    align_speed: float = Field(0.01, gt=0)
    # insertion speed (m/s) and how far (m) the commanded peg may run ahead of the measured
    # one downwards: bounds the push force when the peg jams (position servo x this gap)
    insert_speed: float = Field(0.03, gt=0)
    max_push: float = Field(0.004, gt=0)
    # realistic noise, all Gaussian (0 = off), drawn from noise_seed: perceived peg and hole
    # position error (m, std per horizontal axis) and yaw error (rad), drawn once per
    # episode per object and held (a calibration-like bias); per-step noise (m, std per
    # axis) on the commanded TCP goal (hand tremor)
    pose_noise_std: float = Field(0.0, ge=0, le=0.02)
    yaw_noise_std: float = Field(0.0, ge=0, le=0.2)
    action_noise_std: float = Field(0.0, ge=0, le=0.01)
    noise_seed: int = 0


class MultitaskExpertConfig(ScriptedExpertConfig):
    """The scripted expert's motion limits plus the place and push plans of the multitask
    scene (docs/multitask.md); lift uses the lift plan's settings."""

    type: Literal["multitask_expert"] = "multitask_expert"  # type: ignore[assignment]
    # place: carry the cube this high above where it was grasped (m), and open the fingers
    # this high above the grasp height (m)
    carry_height: float = Field(0.10, gt=0)
    # carry speed (m/s): slower than max_speed, so the cube does not slip out of the grip
    carry_speed: float = Field(0.15, gt=0)
    place_clearance: float = Field(0.005, ge=0, le=0.03)
    # push: the TCP's height (m; below the cube's centre, so the cube does not ride up the
    # fingers), how far behind the cube's face it comes down (m), the
    # pushing speed (m/s); done once the cube's centre is within push_done (m) of the
    # square's; the TCP stops push_contact (m) behind where the cube's back face is then;
    # when the cube's centre is push_off_line (m) off the push line, rise and come in again
    push_height: float = Field(0.012, gt=0)
    push_standoff: float = Field(0.03, gt=0)
    push_speed: float = Field(0.1, gt=0)
    push_done: float = Field(0.02, gt=0)
    push_contact: float = Field(0.005, ge=0)
    push_off_line: float = Field(0.02, gt=0)
