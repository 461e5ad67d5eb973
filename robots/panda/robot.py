"""The Franka Emika Panda with its hand: joints, limits, kinematics, home pose and assets.

Pure python: importing this never loads a simulator. Sources: Franka's "Robot and interface
specifications" (FR3/Panda) for the limits and torques; Franka's published (modified,
Craig) DH parameters for the chain, the same as assets/scene.xml (a test checks both agree).
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

ARM_JOINTS = tuple(f"panda_joint{i}" for i in range(1, 8))
FINGER_JOINTS = ("panda_finger_joint1", "panda_finger_joint2")

# Franka's published limits (rad, rad/s) and joint torques (N m)
ARM_LOWER = (-2.8973, -1.7628, -2.8973, -3.0718, -2.8973, -0.0175, -2.8973)
ARM_UPPER = (2.8973, 1.7628, 2.8973, -0.0698, 2.8973, 3.7525, 2.8973)
ARM_MAX_VELOCITY = (2.1750, 2.1750, 2.1750, 2.1750, 2.6100, 2.6100, 2.6100)
ARM_FORCE = (87.0, 87.0, 87.0, 87.0, 12.0, 12.0, 12.0)
# each finger travels 0..0.04 m (0.08 m total opening); 0.2 m/s and 20 N are the URDF's
FINGER_RANGE = (0.0, 0.04)
FINGER_MAX_VELOCITY = 0.2
FINGER_FORCE = 20.0

# Ready pose (rad): TCP about 0.31 m in front of the base, 0.49 m up, fingers pointing down.
HOME_ARM = (0.0, -0.785398, 0.0, -2.356194, 0.0, 1.570796, 0.785398)
HOME_FINGER = 0.04

# Modified DH per joint i: T = Rx(alpha) Tx(a) Rz(q) Tz(d)
DH_A = (0.0, 0.0, 0.0, 0.0825, -0.0825, 0.0, 0.088)
DH_D = (0.333, 0.0, 0.316, 0.0, 0.384, 0.0, 0.0)
DH_ALPHA = (0.0, -np.pi / 2, np.pi / 2, np.pi / 2, -np.pi / 2, np.pi / 2, np.pi / 2)
FLANGE_D = 0.107  # flange (panda_link8) along z7
HAND_YAW = -np.pi / 4  # the hand is mounted turned -45 deg about the flange z
TCP_D = 0.1034  # TCP along the hand z (Franka's default TCP: between the fingertips)

# the URDF's 0.1 kg m^2 inertia placeholders make the wrist sluggish in PyBullet; use the
# MuJoCo scene's diagonal inertias (kg m^2) instead
LINK_INERTIA = {
    "panda_link1": (0.02, 0.02, 0.008),
    "panda_link2": (0.02, 0.008, 0.02),
    "panda_link3": (0.01, 0.01, 0.005),
    "panda_link4": (0.01, 0.01, 0.005),
    "panda_link5": (0.02, 0.02, 0.005),
    "panda_link6": (0.004, 0.004, 0.004),
    "panda_link7": (0.002, 0.002, 0.002),
    "panda_hand": (0.003, 0.001, 0.003),
    "panda_leftfinger": (1e-5, 1e-5, 1e-5),
    "panda_rightfinger": (1e-5, 1e-5, 1e-5),
}

ROBOT = ArmDescription(
    name="panda",
    summary="Franka Emika Panda + Franka Hand (Franka's published DH, limits and torques)",
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
        convention="modified",
        a=DH_A,
        d=DH_D,
        alpha=DH_ALPHA,
        lower=ARM_LOWER,
        upper=ARM_UPPER,
        tool_xyz=(0.0, 0.0, FLANGE_D),
        tool_yaw=HAND_YAW,
        tool_z=TCP_D,
    ),
    mujoco=MujocoArmAssets(scene="assets/scene.xml", tcp_site="tcp"),
    pybullet=PybulletArmAssets(
        loader="tether.robots.panda.pybullet:load_panda",
        tcp_link="panda_hand",
        tcp_offset=TCP_D,
        inertia=LINK_INERTIA,
        grip_links=("panda_leftfinger", "panda_rightfinger"),
        servo_tau=0.01,
        cameras={
            "wrist": PybulletCamera(
                pos=(0.055, 0.0, 0.02),
                x_axis=(0.0, 1.0, 0.0),
                y_axis=(1.0, 0.0, 0.0),
                link="panda_hand",
            )
        },
    ),
    hardware=ArmHardware(controller="joint_trajectory_controller"),
    grasp_offset=0.0,
)
