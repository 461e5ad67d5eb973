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
from pathlib import Path
from typing import Literal

from tether.core.robot_kinds import GRAVITY as GRAVITY  # re-exported: the drone models' g
from tether.core.robot_kinds import (
    MultirotorDescription,
    MultirotorMujocoAssets,
    MultirotorPybulletAssets,
    QuadrotorParams,
    Rotor,
)
from tether.core.spec import ActionSpec, CameraSpec, RobotSpec

QuadActionMode = Literal["rotor_rpm", "thrust_rates", "velocity_setpoint"]

# The one source of truth for the rotor layout (module docstring), by rotor index 0..3.
# QuadrotorParams.rotor_positions / spin / mixer read it; the numpy model, the torch model,
# both engines and the PID mixer read those.
ROTOR_LAYOUT: tuple[Rotor, Rotor, Rotor, Rotor] = (
    Rotor("M1", +1.0, -1.0, +1.0),  # front-right, CCW
    Rotor("M2", -1.0, -1.0, -1.0),  # back-right, CW
    Rotor("M3", -1.0, +1.0, +1.0),  # back-left, CCW
    Rotor("M4", +1.0, +1.0, -1.0),  # front-left, CW
)

# The Crazyflie 2.x of gym-pybullet-drones ``assets/cf2x.urdf`` (mass, inertia, arm, kf, km,
# thrust-to-weight; drag and ground-effect coefficients from its later revision), which cites
# Luis & Le Ny, arXiv:1608.05786 (2016), Hamer's "Crazyflie Modelling" notes and Landry, MIT
# 2015; kf/km go back to Foerster, "System Identification of the Crazyflie 2.0 Nano
# Quadrocopter" (ETH Zurich, 2015). Rotor positions and spins: the real vehicle's
# (ROTOR_LAYOUT, M1..M4).
CRAZYFLIE = QuadrotorParams(
    mass=0.027,  # kg, cf2x.urdf <mass>
    inertia=(1.4e-5, 1.4e-5, 2.17e-5),  # kg m^2, cf2x.urdf <inertia>
    arm_length=0.0397,  # m, cf2x.urdf "arm"
    kf=3.16e-10,  # N / rpm^2, cf2x.urdf "kf"
    km=7.94e-12,  # N m / rpm^2, cf2x.urdf "km"
    # max rpm = sqrt(t2w * m g / (4 kf)) ~ 21714 rpm (g = 9.81), hover ~14476 rpm
    thrust_to_weight=2.25,
    rotors=ROTOR_LAYOUT,
    # gym-pybullet-drones has no motor lag; published Crazyflie identifications range
    # ~0.015-0.05 s, we take the middle
    motor_tau=0.03,
    drag_xy=9.1785e-7,  # cf2x.urdf drag_coeff_xy
    drag_z=10.311e-7,  # cf2x.urdf drag_coeff_z
    gnd_eff_coeff=11.36859,  # cf2x.urdf gnd_eff_coeff
    prop_radius=2.31348e-2,  # m, cf2x.urdf prop_radius
)


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


# ---- registration -------------------------------------------------------------------------

ASSETS = Path(__file__).resolve().parent / "assets"

ROBOT = MultirotorDescription(
    name="crazyflie",
    summary="Bitcraze Crazyflie 2.x (mass, inertia, kf, km of gym-pybullet-drones' cf2x)",
    folder=ASSETS.parent,
    control_hz=100.0,
    factory="tether.robots.crazyflie.robot:crazyflie_robot",
    module="tether.robots.crazyflie.robot",
    params=CRAZYFLIE,
    # scene.xml: body "cf" and marker "target" (the defaults); crazyflie.urdf: the same body
    mujoco=MultirotorMujocoAssets(scene="assets/scene.xml"),
    pybullet=MultirotorPybulletAssets(urdf="assets/crazyflie.urdf"),
)
