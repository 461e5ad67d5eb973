"""The Franka Emika Panda as every layer sees it: joints, limits, action and state layout.

Pure python: importing this never loads a simulator.
"""

from __future__ import annotations

from collections.abc import Sequence

from tether.core.spec import ActionSpec, CameraSpec, JointSpec, RobotSpec

ARM_JOINTS = tuple(f"panda_joint{i}" for i in range(1, 8))
FINGER_JOINTS = ("panda_finger_joint1", "panda_finger_joint2")

# Franka's published limits (rad, rad/s): "Robot and interface specifications", FR3/Panda.
ARM_LOWER = (-2.8973, -1.7628, -2.8973, -3.0718, -2.8973, -0.0175, -2.8973)
ARM_UPPER = (2.8973, 1.7628, 2.8973, -0.0698, 2.8973, 3.7525, 2.8973)
ARM_MAX_VELOCITY = (2.1750, 2.1750, 2.1750, 2.1750, 2.6100, 2.6100, 2.6100)
# each finger travels 0..0.04 m (0.08 m total opening); 0.2 m/s is the URDF's limit
FINGER_RANGE = (0.0, 0.04)
FINGER_MAX_VELOCITY = 0.2

# Ready pose (rad): TCP about 0.31 m in front of the base, 0.49 m up, fingers pointing down.
HOME_ARM = (0.0, -0.785398, 0.0, -2.356194, 0.0, 1.570796, 0.785398)
HOME_FINGER = 0.04


def panda_spec(control_hz: float = 100.0, cameras: Sequence[CameraSpec] = ()) -> RobotSpec:
    """RobotSpec of a Panda with its hand.

    Action (8,): joint position targets of panda_joint1..7 (rad) and the target opening of
    EACH finger (m, 0 = closed, 0.04 = fully open). State (9,): the 7 arm joint positions
    (rad) and both finger positions (m).
    """
    joints = [
        JointSpec(name=n, lower=lo, upper=hi, max_velocity=v)
        for n, lo, hi, v in zip(ARM_JOINTS, ARM_LOWER, ARM_UPPER, ARM_MAX_VELOCITY, strict=True)
    ]
    joints.append(
        JointSpec(
            name=FINGER_JOINTS[0],
            lower=FINGER_RANGE[0],
            upper=FINGER_RANGE[1],
            max_velocity=FINGER_MAX_VELOCITY,
        )
    )
    action = ActionSpec(
        mode="joint_position",
        names=(*ARM_JOINTS, FINGER_JOINTS[0]),
        low=(*ARM_LOWER, FINGER_RANGE[0]),
        high=(*ARM_UPPER, FINGER_RANGE[1]),
        units=("rad",) * 7 + ("m",),
    )
    return RobotSpec(
        name="panda",
        kind="arm",
        joints=tuple(joints),
        cameras=tuple(cameras),
        control_hz=control_hz,
        action=action,
        state_names=(*ARM_JOINTS, *FINGER_JOINTS),
    )
