"""Crazyflie 2.x parameters and its RobotSpec for the three quadrotor action modes.

Pure python + numpy: importing this never loads a simulator.

Body frame: FLU (x forward, y left, z up, REP-103), the Crazyflie 2.x's own body axes:
x points forward between the two front rotors (M1 and M4). World frame: ENU, z up.

Rotor layout (X configuration): Tether's rotor index i is Bitcraze's motor M(i+1), at the
same place and spinning the same way as on the real vehicle, seen from above with +x
(front) up the page and +y to the left; arm length 0.0397 m, so each rotor sits at
(+-a, +-a) m with a = 0.0397 / sqrt(2) ~ 0.0281 m::

                        +x (front)
                            ^
          M4 = rotor 3      |      M1 = rotor 0      rotor 0 = M1: (+a, -a) front-right, CCW
              (CW)  \\       |       /  (CCW)         rotor 1 = M2: (-a, -a) back-right,  CW
                      \\     |     /                  rotor 2 = M3: (-a, +a) back-left,   CCW
                        \\   |   /                    rotor 3 = M4: (+a, +a) front-left,  CW
         +y  <-------------- o
                        /       \\
                      /           \\
             (CCW)  /               \\  (CW)
          M3 = rotor 2              M2 = rotor 1

Sources: Bitcraze's Crazyflie 2.x coordinate-system page
(https://www.bitcraze.io/documentation/system/platform/cf2-coordinate-system/) for the
axes; Bitcraze's own simulation model (bitcraze/crazyflie-simulation,
simulator_files/gazebo/crazyflie/model.sdf: m1..m4 at (+,-), (-,-), (-,+), (+,+) with
turning directions ccw, cw, ccw, cw) and the firmware's force/torque power distribution
(crazyflie-firmware power_distribution_quadrotor.c: M1 and M3 take -yaw, M2 and M4 +yaw)
for numbering and spin. gym-pybullet-drones' ``cf2x.urdf`` (where the mass, inertia, kf
and km below come from) numbers its props differently: prop0..prop3 at (+,+), (-,+), (-,-),
(+,-), i.e. the Crazyflie turned 90 deg about z, so its rotor indices do NOT map to M1..M4.

Yaw sign convention (the test tests/sim/test_crazyflie_convention.py pins it): a rotor
spinning CCW seen from above has angular velocity +z; air drag brakes it, so its motor
pushes back on the body: reaction torque -km*rpm^2 about +z. A CW rotor gives +km*rpm^2.
Speeding up the CW pair M2 + M4 (indices 1 and 3) therefore yaws the drone CCW (positive
yaw rate), speeding up the CCW pair M1 + M3 yaws it CW.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, NamedTuple

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from tether.core.spec import ActionSpec, CameraSpec, RobotSpec

GRAVITY = 9.81  # m/s^2, the value gym-pybullet-drones uses

QuadActionMode = Literal["rotor_rpm", "thrust_rates", "velocity_setpoint"]


class Rotor(NamedTuple):
    """One rotor of the X layout: where it sits and which way it turns."""

    motor: str  # Bitcraze's motor name, M1..M4
    x: float  # sign of its body x (FLU); position = (x, y, 0) * arm_length / sqrt(2)
    y: float  # sign of its body y
    spin: float  # seen from above: +1 = CCW (angular velocity +z), -1 = CW


# The one source of truth for the rotor layout (module docstring), by rotor index 0..3.
# QuadrotorParams.rotor_positions / spin / mixer read it; the numpy model, the torch model,
# both engines and the PID mixer read those.
ROTOR_LAYOUT: tuple[Rotor, Rotor, Rotor, Rotor] = (
    Rotor("M1", +1.0, -1.0, +1.0),  # front-right, CCW
    Rotor("M2", -1.0, -1.0, -1.0),  # back-right, CW
    Rotor("M3", -1.0, +1.0, +1.0),  # back-left, CCW
    Rotor("M4", +1.0, +1.0, -1.0),  # front-left, CW
)


class QuadrotorParams(BaseModel):
    """Physical parameters of an X-configuration quadrotor. SI units, RPM for rotor speed.

    Rotor positions and spins follow the real Crazyflie (``ROTOR_LAYOUT``, M1..M4).
    Defaults are the Crazyflie 2.x of gym-pybullet-drones ``assets/cf2x.urdf`` (mass,
    inertia, arm, kf, km, thrust-to-weight; drag and ground-effect coefficients from its later
    revision), which cites Luis & Le Ny, arXiv:1608.05786 (2016), Hamer's "Crazyflie
    Modelling" notes and Landry, MIT 2015; kf/km go back to Foerster, "System
    Identification of the Crazyflie 2.0 Nano Quadrocopter" (ETH Zurich, 2015).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    mass: float = Field(0.027, gt=0)  # kg, cf2x.urdf <mass>
    # kg m^2, diagonal body inertia (cf2x.urdf <inertia>)
    inertia: tuple[float, float, float] = (1.4e-5, 1.4e-5, 2.17e-5)
    arm_length: float = Field(0.0397, gt=0)  # m, centre to rotor axis (cf2x.urdf "arm")
    # N / rpm^2: thrust of one rotor = kf * rpm^2 (cf2x.urdf "kf")
    kf: float = Field(3.16e-10, gt=0)
    # N m / rpm^2: reaction torque of one rotor = km * rpm^2 (cf2x.urdf "km")
    km: float = Field(7.94e-12, gt=0)
    # max total thrust / weight; sets max rpm = sqrt(t2w * m g / (4 kf)) ~ 21714 rpm (g = 9.81)
    thrust_to_weight: float = Field(2.25, gt=1)
    # s, first-order rotor speed lag. gym-pybullet-drones has none; published Crazyflie
    # identifications range ~0.015-0.05 s, we take the middle. 0 = ideal motors.
    motor_tau: float = Field(0.03, ge=0)
    # rotor spin directions (+1 = CCW seen from above), from ROTOR_LAYOUT (M1..M4)
    spin: tuple[float, float, float, float] = (
        ROTOR_LAYOUT[0].spin,
        ROTOR_LAYOUT[1].spin,
        ROTOR_LAYOUT[2].spin,
        ROTOR_LAYOUT[3].spin,
    )
    # linear drag (gym-pybullet-drones newer cf2x.urdf drag_coeff_xy / _z), in N per
    # (m/s body velocity) per (rad/s summed rotor speed): F_b = -c * sum(omega_i) * v_b
    drag_xy: float = Field(9.1785e-7, ge=0)
    drag_z: float = Field(10.311e-7, ge=0)
    # ground effect (same source): extra thrust per rotor
    # kf rpm^2 * gnd_eff_coeff * (prop_radius / (4 h))^2, h = rotor height, clipped below
    gnd_eff_coeff: float = Field(11.36859, ge=0)
    prop_radius: float = Field(2.31348e-2, gt=0)  # m

    @property
    def weight(self) -> float:
        """N."""
        return self.mass * GRAVITY

    @property
    def hover_rpm(self) -> float:
        """RPM per rotor whose four thrusts balance gravity (~14476 rpm)."""
        return float(np.sqrt(self.weight / (4.0 * self.kf)))

    @property
    def max_rpm(self) -> float:
        """RPM limit per rotor (~21714 rpm for the Crazyflie)."""
        return float(np.sqrt(self.thrust_to_weight * self.weight / (4.0 * self.kf)))

    @property
    def max_thrust(self) -> float:
        """Collective thrust at max rpm, N."""
        return 4.0 * self.kf * self.max_rpm**2

    def rotor_positions(self) -> np.ndarray:
        """Rotor centres in the body frame (FLU), m, rows M1..M4 of ``ROTOR_LAYOUT``.

        Shape: (4, 3).
        """
        a = self.arm_length / np.sqrt(2.0)
        return np.array([[r.x * a, r.y * a, 0.0] for r in ROTOR_LAYOUT])

    def mixer(self) -> np.ndarray:
        """Map rpm^2 of the 4 rotors to [thrust N, torque_x, torque_y, torque_z N m].

        Shape: (4, 4); wrench = mixer @ rpm**2.
        """
        pos = self.rotor_positions()
        kf, km = self.kf, self.km
        spin = np.asarray(self.spin)
        return np.stack(
            [
                np.full(4, kf),
                kf * pos[:, 1],  # thrust up at +y rolls positive (right-hand about +x)
                -kf * pos[:, 0],  # thrust up at +x pitches nose up = negative about +y
                -km * spin,  # reaction torque opposes the rotor's spin
            ]
        )


CRAZYFLIE = QuadrotorParams()


def crazyflie_spec(
    control_hz: float = 100.0,
    mode: QuadActionMode = "rotor_rpm",
    params: QuadrotorParams = CRAZYFLIE,
) -> RobotSpec:
    """RobotSpec of a Crazyflie 2.x in one of the three quadrotor action modes.

    Action shapes (4,): ``rotor_rpm`` rotor speeds 0..max_rpm (rpm), ``rotor<i>`` is
    Bitcraze's motor M(i+1) (``ROTOR_LAYOUT``); ``thrust_rates``
    collective thrust (N, body z) and body rates p, q, r (rad/s, FLU); ``velocity_setpoint``
    world ENU velocity vx, vy, vz (m/s) and yaw rate (rad/s). State (13,): position (m,
    world), quaternion wxyz (world from body), linear velocity (m/s, world), angular
    velocity (rad/s, body).
    """
    if mode == "rotor_rpm":
        action = ActionSpec(
            mode=mode,
            names=("rotor0", "rotor1", "rotor2", "rotor3"),
            low=(0.0,) * 4,
            high=(params.max_rpm,) * 4,
            units=("rpm",) * 4,
        )
    elif mode == "thrust_rates":
        # 10 rad/s ~ 570 deg/s: a little above the firmware's default rate limits
        action = ActionSpec(
            mode=mode,
            names=("thrust", "roll_rate", "pitch_rate", "yaw_rate"),
            low=(0.0, -10.0, -10.0, -10.0),
            high=(params.max_thrust, 10.0, 10.0, 10.0),
            units=("N", "rad/s", "rad/s", "rad/s"),
        )
    else:
        action = ActionSpec(
            mode=mode,
            names=("vx", "vy", "vz", "yaw_rate"),
            low=(-1.0, -1.0, -1.0, -2.0),
            high=(1.0, 1.0, 1.0, 2.0),
            units=("m/s", "m/s", "m/s", "rad/s"),
        )
    return RobotSpec(
        name="crazyflie",
        kind="quadcopter",
        control_hz=control_hz,
        action=action,
        state_names=STATE_NAMES,
    )


STATE_NAMES = (
    "x",
    "y",
    "z",
    "qw",
    "qx",
    "qy",
    "qz",
    "vx",
    "vy",
    "vz",
    "wx",
    "wy",
    "wz",
)


def drone_prefix(i: int, n: int) -> str:
    """Name prefix of drone i of n in specs and ROS namespaces: "" alone, else "cf<i>/"."""
    return "" if n == 1 else f"cf{i}/"


def formation_offsets(n: int, spacing: float = 1.0) -> np.ndarray:
    """World offsets (m) of n drones' tasks: a line along y centred on 0. Shape: (n, 3)."""
    out = np.zeros((n, 3))
    out[:, 1] = spacing * (np.arange(n) - (n - 1) / 2.0)
    return out


def crazyflie_robot(
    control_hz: float = 100.0,
    cameras: Sequence[CameraSpec] = (),
    mode: QuadActionMode = "rotor_rpm",
    num_drones: int = 1,
) -> RobotSpec:
    """The registered robot ``crazyflie``: ``num_drones`` Crazyflies in one world.

    One drone: exactly :func:`crazyflie_spec`. N drones: action (4N,) and state (13N,) are
    the per-drone vectors concatenated drone by drone, names prefixed "cf<i>/".
    """
    one = crazyflie_spec(control_hz, mode)
    if num_drones == 1:
        return one.model_copy(update={"cameras": tuple(cameras)})
    a = one.action
    action = ActionSpec(
        mode=a.mode,
        names=tuple(f"cf{i}/{n}" for i in range(num_drones) for n in a.names),
        low=a.low * num_drones,
        high=a.high * num_drones,
        units=a.units * num_drones,
    )
    return RobotSpec(
        name="crazyflie",
        kind="quadcopter",
        cameras=tuple(cameras),
        control_hz=control_hz,
        action=action,
        state_names=tuple(f"cf{i}/{n}" for i in range(num_drones) for n in STATE_NAMES),
    )
