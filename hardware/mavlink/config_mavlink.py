"""Config of the MAVLink client. Light: pydantic only."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class MavlinkConfig(BaseModel):
    """How to reach the autopilot and what to do when the link or the commands stop."""

    model_config = ConfigDict(extra="forbid")
    # pymavlink connection string: PX4 SITL's offboard API sends to udp 14540
    # ("udpin:0.0.0.0:14540"); a telemetry radio is "/dev/ttyUSB0,57600"; the mock autopilot
    # gives its own (``MockAutopilot.client_url``)
    url: str = "udpin:0.0.0.0:14540"
    autopilot: Literal["px4", "ardupilot"] = "px4"
    # our MAVLink ids: a companion computer (MAV_COMP_ID_ONBOARD_COMPUTER = 191)
    system_id: int = Field(255, ge=1, le=255)
    component_id: int = Field(191, ge=1, le=255)
    # how long connect() waits for the autopilot's first heartbeat (s)
    connect_timeout_s: float = Field(5.0, gt=0)
    # how long a command (arm, mode, takeoff, land) waits for its COMMAND_ACK (s)
    command_timeout_s: float = Field(3.0, gt=0)
    # our heartbeat rate (Hz); MAVLink's convention is 1 Hz
    heartbeat_hz: float = Field(1.0, gt=0)
    # rate at which the last setpoint is re-sent (Hz); PX4 leaves offboard below 2 Hz
    stream_hz: float = Field(20.0, gt=2)
    # the link counts as lost after this long without an autopilot heartbeat (s)
    link_timeout_s: float = Field(3.0, gt=0)
    # a velocity setpoint older than this (no send_action) is stale (s): the client then
    # applies ``failsafe_action``
    setpoint_timeout_s: float = Field(0.5, gt=0)
    # what the client commands when setpoints go stale or the link comes back after a loss:
    # land, hold (zero velocity) or nothing (the autopilot's own failsafe still acts)
    failsafe_action: Literal["land", "hold", "none"] = "land"
    # velocity limits applied to every setpoint (m/s horizontal, m/s vertical, rad/s yaw)
    max_horizontal_speed: float = Field(2.0, gt=0)
    max_vertical_speed: float = Field(1.0, gt=0)
    max_yaw_rate: float = Field(1.0, gt=0)
    # PX4's NAV_TAKEOFF altitude is AMSL: set the home altitude (m AMSL) to convert;
    # None sends the altitude relative to home (ArduPilot, and the mock autopilot)
    home_amsl_m: float | None = None
