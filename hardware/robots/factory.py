"""Build the experiment's hardware: the Robot named by ``hardware.type`` (and, for the mock
autopilot, where it listens). Device settings come from ``hardware.device`` and are
validated by the device's own config class; a bad one is one ConfigError line."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError

from tether.core import registry
from tether.core.config import HardwareConfig
from tether.core.errors import ConfigError
from tether.core.spec import RobotSpec

# where the mock autopilot listens, and so where a mock experiment's client sends
MOCK_MAVLINK_URL = "udpout:127.0.0.1:14560"


def device_config(cls: type[BaseModel], hw: HardwareConfig, section: str = "device") -> Any:
    """``hw.device`` (or ``hw.mock_options``) validated by ``cls``; ConfigError on a bad key."""
    data = dict(getattr(hw, section))
    if section == "device" and cls.__name__ == "MavlinkConfig":
        if hw.mock:
            data.setdefault("url", MOCK_MAVLINK_URL)
        data.setdefault("connect_timeout_s", hw.connect_timeout_s)
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise ConfigError(f"hardware.{section}.{loc}: {err['msg']}") from None


def mock_autopilot_url(client_url: str) -> str:
    """The address the mock autopilot listens on for a client sending to ``client_url``
    (``udpout:HOST:PORT`` -> ``udpin:HOST:PORT``)."""
    kind, _, addr = client_url.partition(":")
    if kind != "udpout" or not addr:
        raise ConfigError(
            f"hardware.device.url: the mock autopilot needs a 'udpout:HOST:PORT' client URL, "
            f"got '{client_url}'"
        )
    return f"udpin:{addr}"


def build_robot(hw: HardwareConfig, spec: RobotSpec | None, node: Any = None) -> Any:
    """The Robot for ``hw.type`` (a registered hardware type); ROS-side ones (jtc_arm,
    twist_base) create their topics on ``node``. Not yet connected."""
    return registry.load("hardware", hw.type)(hw, spec, node)


def build_mavlink(hw: HardwareConfig, spec: RobotSpec | None, node: Any = None) -> Any:
    """A PX4 / ArduPilot vehicle over pymavlink (``hardware.device``: MavlinkConfig)."""
    from tether.hardware.mavlink.config_mavlink import MavlinkConfig
    from tether.hardware.robots.drones import MavlinkDrone

    return MavlinkDrone(device_config(MavlinkConfig, hw), hw.control_hz)


def build_crazyflie(hw: HardwareConfig, spec: RobotSpec | None, node: Any = None) -> Any:
    """A Crazyflie over a Crazyradio (``hardware.device``: CrazyflieConfig)."""
    from tether.hardware.crazyflie import CrazyflieConfig
    from tether.hardware.robots.drones import CrazyflieDrone

    if hw.mock:
        raise ConfigError(
            "hardware.mock: there is no mock Crazyflie (fly the simulator: sim.type=pybullet)"
        )
    return CrazyflieDrone(device_config(CrazyflieConfig, hw), hw.control_hz)
