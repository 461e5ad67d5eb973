"""Universal Robots UR5e with a Robotiq 2F-85-like parallel gripper: joints, limits,
kinematics, home pose and assets.

Pure python: importing this never loads a simulator. Sources (see assets/README.md):
- Universal Robots, "DH parameters for calculations of kinematics and dynamics" (UR5e row):
  the standard DH table, link masses and centres of mass.
- Universal Robots, UR5e technical specifications: +-360 deg and 180 deg/s on every joint,
  850 mm reach, 5 kg payload; joint torques 150 N m (base, shoulder, elbow) and 28 N m
  (wrists) as Universal Robots' ur_description lists them. The elbow is limited to
  +-180 deg, as ur_description's joint_limits.yaml does (beyond it the arm hits itself).
- Universal Robots' ur_robot_driver / ur_description: the joint names and the controller
  (``scaled_joint_trajectory_controller``).
- Robotiq, "2F-85 & 2F-140 Instruction Manual", section 6.1 (specifications): 85 mm stroke,
  20-235 N grip force, 20-150 mm/s closing speed, 0.925 kg. The gripper here is a plain
  two-finger prismatic model with those numbers, not Robotiq's linkage.

Frames: the world (and the chain's base) is ur_description's ``base_link``, x toward the
table. The DH table is written in UR's controller ``base`` frame, which is ``base_link``
turned 180 deg about z: hence the pi offset of the first joint (joint values are the real
robot's). The TCP frame is UR's ``tool0`` (z out of the flange) moved TCP_D along z; the
fingers close along its y axis.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tether.core.kinematics import DHChain
from tether.core.robot import (
    ArmDescription,
    ArmHardware,
    GripperDescription,
    MujocoArmAssets,
    PybulletArmAssets,
    PybulletCamera,
)
from tether.core.spec import JointSpec

FOLDER = Path(__file__).resolve().parent

# ur_robot_driver's names (the same in ur_description's URDF)
ARM_JOINTS = (
    "shoulder_pan_joint",
    "shoulder_lift_joint",
    "elbow_joint",
    "wrist_1_joint",
    "wrist_2_joint",
    "wrist_3_joint",
)
FINGER_JOINTS = ("ur5e_finger_joint1", "ur5e_finger_joint2")

# limits (rad, rad/s) and joint torques (N m)
TWO_PI = 2.0 * np.pi
ARM_LOWER = (-TWO_PI, -TWO_PI, -np.pi, -TWO_PI, -TWO_PI, -TWO_PI)
ARM_UPPER = (TWO_PI, TWO_PI, np.pi, TWO_PI, TWO_PI, TWO_PI)
ARM_MAX_VELOCITY = (np.pi,) * 6
ARM_FORCE = (150.0, 150.0, 150.0, 28.0, 28.0, 28.0)
# link masses (kg), shoulder to wrist 3 (UR's dynamics table)
LINK_MASS = (3.761, 8.058, 2.846, 1.37, 1.3, 0.365)

# Standard DH per joint i: T = Rz(q + offset) Tz(d) Tx(a) Rx(alpha) (m, rad)
DH_D = (0.1625, 0.0, 0.0, 0.1333, 0.0997, 0.0996)
DH_A = (0.0, -0.425, -0.3922, 0.0, 0.0, 0.0)
DH_ALPHA = (np.pi / 2, 0.0, 0.0, np.pi / 2, -np.pi / 2, 0.0)
# base_link -> UR's DH base frame is a 180 deg turn about z
DH_OFFSET = (np.pi, 0.0, 0.0, 0.0, 0.0, 0.0)

# gripper: 85 mm stroke = 0..0.0425 m per finger; 150 mm/s is Robotiq's fastest closing
# speed; 20 N per finger is the bottom of its 20-235 N grip force (plenty for the 0.1 kg
# cube, as the Panda's 20 N)
FINGER_RANGE = (0.0, 0.0425)
FINGER_MAX_VELOCITY = 0.15
FINGER_FORCE = 20.0
HOME_FINGER = 0.0425
# TCP: between the fingertip pads, this far from the flange along tool0's z (m); the
# simplified gripper's length (coupling + housing + fingers), close to the 2F-85's
TCP_D = 0.15

# Ready pose (rad): TCP 0.45 m in front of the base, 0.35 m up, pointing down with the
# fingers closing along world y (tool x = world x), elbow up. The pitch joints sum to -pi/2
# (tool vertical) and wrist 3 cancels the base turn (tool yaw 0).
HOME_ARM = (-0.30, -1.72, 1.67, -1.5208, -1.5708, -1.8708)

ROBOT = ArmDescription(
    name="ur5e",
    summary=(
        "Universal Robots UR5e + a Robotiq 2F-85-like parallel gripper (UR's published DH, "
        "limits, torques and masses; Robotiq's stroke, force and speed)"
    ),
    folder=FOLDER,
    control_hz=100.0,
    joints=tuple(
        JointSpec(name=n, lower=lo, upper=hi, max_velocity=v)
        for n, lo, hi, v in zip(ARM_JOINTS, ARM_LOWER, ARM_UPPER, ARM_MAX_VELOCITY, strict=True)
    ),
    effort=ARM_FORCE,
    home=HOME_ARM,
    gripper=GripperDescription(
        joints=FINGER_JOINTS,
        lower=FINGER_RANGE[0],
        upper=FINGER_RANGE[1],
        max_velocity=FINGER_MAX_VELOCITY,
        effort=FINGER_FORCE,
        home=HOME_FINGER,
    ),
    chain=DHChain(
        convention="standard",
        a=DH_A,
        d=DH_D,
        alpha=DH_ALPHA,
        offset=DH_OFFSET,
        lower=ARM_LOWER,
        upper=ARM_UPPER,
        tool_z=TCP_D,
    ),
    mujoco=MujocoArmAssets(scene="assets/scene.xml", tcp_site="tcp"),
    pybullet=PybulletArmAssets(
        urdf="assets/ur5e.urdf",
        tcp_link="ur5e_gripper",
        tcp_offset=TCP_D,
        grip_links=("ur5e_left_finger", "ur5e_right_finger"),
        # slower than the Panda's 0.01 s, which overshoots a 0.2 rad step of the big joints
        # by 35-80 %; 0.03 s overshoots it by <= 10 % and lags the expert's commands as
        # much as the MuJoCo servos (kp, kv) do: 0.05 rad at most
        servo_tau=0.03,
        cameras={
            "wrist": PybulletCamera(
                pos=(0.045, 0.0, 0.1),
                x_axis=(0.0, 1.0, 0.0),
                y_axis=(1.0, 0.0, 0.0),
                link="ur5e_gripper",
            )
        },
    ),
    hardware=ArmHardware(controller="scaled_joint_trajectory_controller"),
    grasp_offset=0.0,
)
