"""Configs of the table-top tasks. Light: pydantic only.

Positions are in the world frame (robot base at the origin on the table top, x forward,
z up), metres; angles in radians.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from tether.core.config import ComponentConfig

Range = tuple[float, float]


class _TaskConfig(ComponentConfig):
    # episode time limit in simulated seconds: a backend reports truncated=True from then on
    max_duration_s: float = Field(8.0, gt=0)

    @model_validator(mode="after")
    def _ranges_ordered(self) -> _TaskConfig:
        for name, value in self:
            if name.endswith("_range") and value[0] > value[1]:
                raise ValueError(f"{name}: low must be <= high")
        return self


class ReachConfig(_TaskConfig):
    """Move the tool centre point to a target point drawn uniformly from a box."""

    type: Literal["reach"] = "reach"
    max_duration_s: float = Field(5.0, gt=0)
    # target position ranges (m), world frame
    x_range: Range = (0.35, 0.65)
    y_range: Range = (-0.25, 0.25)
    z_range: Range = (0.08, 0.40)
    # success when the TCP is within this distance of the target (m)
    success_radius: float = Field(0.02, gt=0)


class LiftConfig(_TaskConfig):
    """Grasp the 5 cm cube on the table and lift it."""

    type: Literal["lift"] = "lift"
    max_duration_s: float = Field(8.0, gt=0)
    # cube centre position ranges on the table (m), world frame
    x_range: Range = (0.40, 0.62)
    y_range: Range = (-0.18, 0.18)
    # cube yaw range about world z (rad); the cube is symmetric every 90 deg
    yaw_range: Range = (-0.785398, 0.785398)
    # height of the cube centre resting on the table (m): its half-size
    rest_z: float = Field(0.025, gt=0)
    # success when the cube centre is this far above rest_z (m)
    lift_height: float = Field(0.08, gt=0)


class InsertConfig(_TaskConfig):
    """Pick a square peg standing on the table and insert it into a square hole of a fixed
    fixture (docs/insert.md). The hole's side is ``peg_size + clearance``."""

    type: Literal["insert"] = "insert"
    max_duration_s: float = Field(12.0, gt=0)
    # peg: side of its square section and its length (m), mass (kg); it stands on the table
    peg_size: float = Field(0.02, gt=0.005, le=0.04)
    peg_length: float = Field(0.08, gt=0.02, le=0.15)
    peg_mass: float = Field(0.05, gt=0)
    # total clearance (m): hole side minus peg side, so peg_size + clearance is the hole's
    # side and each wall is clearance / 2 away from a centred peg. 2 mm by default; negative
    # makes a peg wider than the hole (it can never go in)
    clearance: float = Field(0.002, ge=-0.005, le=0.02)
    # fixture: wall thickness around the hole and height (m) (the hole goes down to the table)
    wall: float = Field(0.02, gt=0)
    fixture_height: float = Field(0.04, gt=0)
    # peg centre (x, y) and yaw ranges (m, rad), world frame; the peg is symmetric every 90 deg
    peg_x_range: Range = (0.40, 0.60)
    peg_y_range: Range = (-0.18, 0.18)
    peg_yaw_range: Range = (-0.785398, 0.785398)
    # hole centre (x, y) and yaw ranges (m, rad)
    hole_x_range: Range = (0.40, 0.60)
    hole_y_range: Range = (-0.18, 0.18)
    hole_yaw_range: Range = (-0.785398, 0.785398)
    # peg and hole centres at least this far apart (m); resampled until they are
    min_separation: float = Field(0.12, ge=0)
    # success: the peg's bottom this far below the fixture's top (m), inside the hole, and
    # tilted by at most max_tilt (rad) from upright
    depth: float = Field(0.02, gt=0)
    max_tilt: float = Field(0.2, gt=0, le=1.5)
    # dense reward only: weight of a millimetre-scale alignment term, 1 - tanh(100 * the peg
    # bottom's distance to the hole's entry), beside the centimetre-scale one (0: off)
    align_fine: float = Field(0.0, ge=0)

    @model_validator(mode="after")
    def _fits(self) -> InsertConfig:
        if self.depth > self.fixture_height:
            raise ValueError("depth: must be <= fixture_height (the hole ends at the table)")
        if self.min_separation > 0.5:
            raise ValueError("min_separation: must be <= 0.5 m (the ranges cannot satisfy it)")
        return self


# the sub-tasks of the multi-task table scene (sim/tasks/multitask.py, docs/multitask.md)
Subtask = Literal["lift_red", "lift_blue", "push_green", "place_blue"]
MULTITASK_SUBTASKS: tuple[Subtask, ...] = ("lift_red", "lift_blue", "push_green", "place_blue")


class MultitaskConfig(_TaskConfig):
    """One Panda table scene with three 5 cm cubes (red, blue, green), a yellow pad and a
    white square marked on the table; each episode asks for one sub-task in words (the
    episode's instruction): lift the red cube, lift the blue cube, push the green cube into
    the white square, place the blue cube on the yellow pad (docs/multitask.md)."""

    type: Literal["multitask"] = "multitask"
    max_duration_s: float = Field(10.0, gt=0)
    # the sub-tasks episodes draw from (uniformly, after the scene's layout)
    subtasks: tuple[Subtask, ...] = Field(MULTITASK_SUBTASKS, min_length=1)
    # which phrasings episodes draw: the training templates, the held-out paraphrases (for
    # evaluation) or both
    phrasing: Literal["train", "heldout", "all"] = "train"
    # a fixed instruction for every episode (e.g. `tether demo --instruction ...`): the
    # sub-task is the one whose phrasings contain it; any other text is still passed to
    # the policy, and then no episode can succeed
    instruction: str | None = Field(None, min_length=1)
    # the area (m) the cubes, the pad and the square are placed in, centres at least
    # min_separation apart (cube to cube, cube to marker, marker to marker)
    x_range: Range = (0.36, 0.64)
    y_range: Range = (-0.22, 0.22)
    yaw_range: Range = (-0.785398, 0.785398)
    min_separation: float = Field(0.1, gt=0.06, le=0.2)
    # half-sides (m) of the yellow pad and the white square (flat markers, no contacts)
    pad_half: float = Field(0.04, ge=0.03, le=0.08)
    square_half: float = Field(0.05, ge=0.03, le=0.1)
    # lift: success when the cube's centre is this far above its resting height (m)
    lift_height: float = Field(0.08, gt=0)
    # place: success once the cube rests within the pad and the gripper has risen this far
    # (m) above the cube's centre
    release_height: float = Field(0.05, gt=0)
