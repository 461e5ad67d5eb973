"""Where the residual acts (``finetune.space``). Torch-free: the exported policy runs it
onboard (serve.py), the training env runs the same code (env.py).

- ``joint``: the residual is a correction per action element (joint targets, fingers), at
  most ``finetune.scale`` x the element's half range.
- ``tcp``: the residual is a small motion of the tool centre point, in the robot's base
  frame: 3 linear (m) then 3 angular (rotation vector, rad) elements, at most
  ``finetune.tcp_scale`` each, followed by one element per action element beyond the arm's
  joints (fingers) in joint units as in ``joint``. Each control step it becomes a joint
  correction at the base's row for that step, by damped least squares on the arm's
  geometric Jacobian (tether.core.kinematics), then clipped to the ``joint`` bound, so the
  applied correction is never larger than a ``joint`` residual's. ResiP's residual acts in
  the end effector's frame; a peg that lands 3 mm off the hole's axis needs one direction
  in this space and a coordinated motion of five joints in joint space.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from tether.core import registry
from tether.core.errors import ConfigError
from tether.core.robot import ArmDescription
from tether.core.spec import RobotSpec

Space = Literal["joint", "tcp"]
TCP_DIMS = 6


class ResidualSpace:
    """``to_joint(base_row, residual)`` -> joint-space residual (A,), |.| <= joint_limit."""

    def __init__(
        self,
        spec: RobotSpec,
        space: Space,
        scale: float,
        tcp_scale: tuple[float, float] = (0.01, 0.05),
        damping: float = 0.05,
    ) -> None:
        low = spec.action.low_array().astype(np.float64)
        high = spec.action.high_array().astype(np.float64)
        self.space = space
        self.action_dim = int(low.shape[0])
        # the bound of the applied (joint-space) residual, either space
        self.joint_limit = scale * (high - low) / 2
        self.damping = float(damping)
        self.tcp_scale = (float(tcp_scale[0]), float(tcp_scale[1]))
        self.kinematics: Any = None
        self.n_arm = 0
        if space == "joint":
            self.limit = self.joint_limit.copy()
            return
        if spec.action.mode != "joint_position" or spec.name not in registry.available("robot"):
            raise ConfigError(
                f"finetune.space: tcp needs an arm commanded by joint positions; "
                f"{spec.name} ({spec.action.mode}) is not one"
            )
        desc = registry.load("robot", spec.name)
        if not isinstance(desc, ArmDescription):
            raise ConfigError(f"finetune.space: tcp needs an arm; {spec.name} is not one")
        self.kinematics = desc.kinematics
        self.n_arm = int(desc.dof)
        lin, ang = self.tcp_scale
        self.limit = np.concatenate([[lin] * 3, [ang] * 3, self.joint_limit[self.n_arm :]])

    @property
    def dim(self) -> int:
        """Elements of the residual the network outputs."""
        return int(self.limit.shape[0])

    def describe(self) -> dict[str, Any]:
        """What model.json and the checkpoint contract record (enough to rebuild it)."""
        return {
            "space": self.space,
            "tcp_scale": list(self.tcp_scale),
            "damping": self.damping,
            "n_arm": self.n_arm,
            "joint_limit": [float(x) for x in self.joint_limit],
        }

    def to_joint(self, base_row: np.ndarray, residual: np.ndarray) -> np.ndarray:
        """The residual (dim,) as a joint correction (A,) at the base's row for this step."""
        r = np.asarray(residual, np.float64)
        if self.space == "joint":
            return np.clip(r, -self.joint_limit, self.joint_limit)
        n = self.n_arm
        J, _, _ = self.kinematics.jacobian(np.asarray(base_row, np.float64)[:n])
        JJt = J @ J.T
        JJt.flat[:: TCP_DIMS + 1] += self.damping**2
        dq = J.T @ np.linalg.solve(JJt, r[:TCP_DIMS])
        out = np.concatenate([dq, r[TCP_DIMS:]])
        return np.clip(out, -self.joint_limit, self.joint_limit)


def space_from_meta(spec: RobotSpec, meta: dict[str, Any] | None) -> ResidualSpace:
    """The ResidualSpace a checkpoint contract / model.json describes (None: joint, the
    format before ``finetune.space``), bounded by the recorded joint limit."""
    meta = meta or {"space": "joint"}
    low = spec.action.low_array().astype(np.float64)
    high = spec.action.high_array().astype(np.float64)
    limit = np.asarray(meta.get("joint_limit", []), np.float64)
    # the recorded bound is scale * half range: recover scale (all elements share it)
    scale = float(limit[0] / ((high[0] - low[0]) / 2)) if limit.size else 1.0
    space = ResidualSpace(
        spec,
        meta.get("space", "joint"),
        scale,
        tuple(meta.get("tcp_scale", (0.01, 0.05))),  # type: ignore[arg-type]
        float(meta.get("damping", 0.05)),
    )
    if limit.size:
        space.joint_limit = limit
        if space.space == "joint":
            space.limit = limit.copy()
    return space
