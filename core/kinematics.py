"""Serial-chain kinematics in pure numpy, for any arm described by a DH table: forward
kinematics, the geometric Jacobian and damped-least-squares IK of the tool centre point.

A robot folder gives its chain as data (:class:`DHChain`, from the maker's published DH
parameters); teleop, the scripted expert and the safety filter's workspace box use it, so
they work for every arm.

Frames: the robot base frame, x forward, z up; metres, radians. Rotations are (3, 3)
matrices; quaternions are (w, x, y, z).
"""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

Vec3 = tuple[float, float, float]


class DHChain(BaseModel):
    """A revolute chain by Denavit-Hartenberg parameters, one entry per joint.

    ``modified`` (Craig): joint i is ``Rx(alpha) Tx(a) Rz(q) Tz(d)``; ``standard``:
    ``Rz(q) Tz(d) Tx(a) Rx(alpha)``. ``offset`` is added to each joint angle (the maker's
    zero differs from the DH zero). ``tool``: the TCP in the last joint's frame, as a
    translation (m) then a rotation about that frame's z (``tool_yaw``, rad) and then a
    translation along the new z (``tool_z``, m; e.g. flange to fingertip centre).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    convention: Literal["standard", "modified"]
    a: tuple[float, ...]
    d: tuple[float, ...]
    alpha: tuple[float, ...]
    offset: tuple[float, ...] = ()
    lower: tuple[float, ...]
    upper: tuple[float, ...]
    tool_xyz: Vec3 = (0.0, 0.0, 0.0)
    tool_yaw: float = 0.0
    tool_z: float = Field(0.0, description="m along the tool z after tool_yaw")

    @model_validator(mode="after")
    def _lengths(self) -> DHChain:
        n = len(self.a)
        for name in ("d", "alpha", "lower", "upper"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"{name} needs {n} elements (one per joint, as a)")
        if self.offset and len(self.offset) != n:
            raise ValueError(f"offset needs {n} elements or none")
        return self

    @property
    def dof(self) -> int:
        return len(self.a)

    def model(self) -> Chain:
        """The numeric chain (precomputed constants)."""
        return Chain(self)


class Chain:
    """Forward kinematics, Jacobian and IK of one :class:`DHChain`. Stateless; cheap to
    call every control step (about 15 us for FK + Jacobian of 7 joints).

    Plain float arithmetic: for 3x3 products numpy's per-call overhead dominates, and the
    scripted expert and teleop call this every control step.
    """

    def __init__(self, dh: DHChain) -> None:
        self.dh = dh
        self.n = dh.dof
        self.lower = np.asarray(dh.lower, dtype=np.float64)
        self.upper = np.asarray(dh.upper, dtype=np.float64)
        self._offset = tuple(float(o) for o in dh.offset) if any(dh.offset) else None
        self._modified = dh.convention == "modified"
        self._a = tuple(float(a) for a in dh.a)
        self._d = tuple(float(d) for d in dh.d)
        # cos/sin of each twist, rounded so that the +-90 deg twists are exact
        self._ca = tuple(round(math.cos(al), 12) for al in dh.alpha)
        self._sa = tuple(round(math.sin(al), 12) for al in dh.alpha)
        # the tool: x, y in the last joint's frame, then z (that frame's z, unchanged by
        # the yaw) and tool_z in one step
        tx, ty, tz = dh.tool_xyz
        self._tool = (float(tx), float(ty), float(tz) + float(dh.tool_z))
        self._tc, self._ts = math.cos(dh.tool_yaw), math.sin(dh.tool_yaw)

    def _frames(
        self, q: np.ndarray
    ) -> tuple[list[tuple[float, float, float]], list[tuple[float, float, float]], Any, Any]:
        """Joint origins and axes (n tuples of 3 floats), TCP position (3,), rotation
        (3, 3). Origins are points on each joint axis."""
        qs = np.asarray(q, dtype=np.float64).tolist()[: self.n]
        if len(qs) < self.n:
            raise ValueError(f"need {self.n} joint positions, got {len(qs)}")
        if self._offset is not None:
            qs = [qi + o for qi, o in zip(qs, self._offset, strict=True)]
        # columns of the rotation (x, y, z axes) and the origin, base frame
        x0, x1, x2 = 1.0, 0.0, 0.0
        y0, y1, y2 = 0.0, 1.0, 0.0
        z0, z1, z2 = 0.0, 0.0, 1.0
        p0, p1, p2 = 0.0, 0.0, 0.0
        origins: list[tuple[float, float, float]] = []
        axes: list[tuple[float, float, float]] = []
        modified = self._modified
        for i, qi in enumerate(qs):
            a, d, ca, sa = self._a[i], self._d[i], self._ca[i], self._sa[i]
            c, s = math.cos(qi), math.sin(qi)
            if modified:
                # Tx(a) after Rx(alpha) (a translation along x is unchanged by Rx)
                p0, p1, p2 = p0 + a * x0, p1 + a * x1, p2 + a * x2
                # Rx(alpha): y' = ca y + sa z, z' = -sa y + ca z
                y0, y1, y2, z0, z1, z2 = (
                    ca * y0 + sa * z0,
                    ca * y1 + sa * z1,
                    ca * y2 + sa * z2,
                    ca * z0 - sa * y0,
                    ca * z1 - sa * y1,
                    ca * z2 - sa * y2,
                )
                # Rz(q): x' = c x + s y, y' = -s x + c y
                x0, x1, x2, y0, y1, y2 = (
                    c * x0 + s * y0,
                    c * x1 + s * y1,
                    c * x2 + s * y2,
                    c * y0 - s * x0,
                    c * y1 - s * x1,
                    c * y2 - s * x2,
                )
                # Tz(d)
                p0, p1, p2 = p0 + d * z0, p1 + d * z1, p2 + d * z2
                origins.append((p0, p1, p2))
                axes.append((z0, z1, z2))
            else:
                # joint i turns about the previous frame's z
                origins.append((p0, p1, p2))
                axes.append((z0, z1, z2))
                # Rz(q), then Tz(d) (z unchanged by Rz) and Tx(a) along the new x
                x0, x1, x2, y0, y1, y2 = (
                    c * x0 + s * y0,
                    c * x1 + s * y1,
                    c * x2 + s * y2,
                    c * y0 - s * x0,
                    c * y1 - s * x1,
                    c * y2 - s * x2,
                )
                p0, p1, p2 = p0 + d * z0 + a * x0, p1 + d * z1 + a * x1, p2 + d * z2 + a * x2
                # Rx(alpha)
                y0, y1, y2, z0, z1, z2 = (
                    ca * y0 + sa * z0,
                    ca * y1 + sa * z1,
                    ca * y2 + sa * z2,
                    ca * z0 - sa * y0,
                    ca * z1 - sa * y1,
                    ca * z2 - sa * y2,
                )
        # the tool: Txy, then Tz(tool_xyz z + tool_z) and Rz(tool_yaw)
        tx, ty, tz = self._tool
        if tx or ty:
            p0, p1, p2 = p0 + tx * x0 + ty * y0, p1 + tx * x1 + ty * y1, p2 + tx * x2 + ty * y2
        p = np.array((p0 + tz * z0, p1 + tz * z1, p2 + tz * z2))
        c, s = self._tc, self._ts
        R = np.array(
            [
                [c * x0 + s * y0, c * y0 - s * x0, z0],
                [c * x1 + s * y1, c * y1 - s * x1, z1],
                [c * x2 + s * y2, c * y2 - s * x2, z2],
            ]
        )
        return origins, axes, p, R

    def frames(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Points on each joint axis (n, 3), joint axes (n, 3), TCP position (3,) and
        rotation (3, 3), base frame."""
        origins, axes, p, R = self._frames(q)
        return np.array(origins), np.array(axes), p, R

    def fk(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """TCP pose for joints ``q`` (n,): position (3,) m and rotation (3, 3)."""
        _, _, p, R = self._frames(q)
        return p, R

    def jacobian(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Geometric TCP Jacobian (6, n) (rows: linear m/rad, then angular), plus the TCP
        position (3,) and rotation (3, 3) computed on the way."""
        origins, axes, p, R = self._frames(q)
        px, py, pz = p.tolist()
        # column i: [z_i x (p - o_i); z_i], written out (np.cross costs ~40 us here)
        cols = [
            (
                zy * (pz - oz) - zz * (py - oy),
                zz * (px - ox) - zx * (pz - oz),
                zx * (py - oy) - zy * (px - ox),
                zx,
                zy,
                zz,
            )
            for (ox, oy, oz), (zx, zy, zz) in zip(origins, axes, strict=True)
        ]
        J = np.array(cols).T
        return J, p, R

    def dls_step(
        self,
        q: np.ndarray,
        pos: np.ndarray,
        rot: np.ndarray | None = None,
        damping: float = 0.05,
        max_lin: float = np.inf,
        max_ang: float = np.inf,
        q_rest: np.ndarray | None = None,
        rest_gain: float = 0.0,
        jac: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    ) -> np.ndarray:
        """One damped-least-squares step: joint change (n,) that moves the TCP toward
        ``pos`` (3,) and, if given, rotation ``rot`` (3, 3). The task-space error is clipped
        to ``max_lin`` (m) and ``max_ang`` (rad); ``rest_gain`` pulls toward ``q_rest`` in
        the null space (keeps a redundant elbow away from limits). ``jac``:
        ``jacobian(q)`` if the caller already has it."""
        q = np.asarray(q, dtype=np.float64)[: self.n]
        J, p, R = jac if jac is not None else self.jacobian(q)
        e_lin = _clip_norm(np.asarray(pos, dtype=np.float64) - p, max_lin)
        if rot is None:
            Jt, e = J[:3], e_lin
        else:
            e_ang = _clip_norm(rotation_error(rot, R), max_ang)
            Jt, e = J, np.concatenate([e_lin, e_ang])
        JJt = Jt @ Jt.T
        JJt.flat[:: JJt.shape[0] + 1] += damping**2
        if q_rest is None or rest_gain <= 0:
            return Jt.T @ np.linalg.solve(JJt, e)
        # null-space pull: (I - J+ J) v = v - J+ (J v), J+ the damped pseudo-inverse
        v = rest_gain * (np.asarray(q_rest, dtype=np.float64)[: self.n] - q)
        sol = np.linalg.solve(JJt, np.stack([e, Jt @ v], axis=1))
        return Jt.T @ (sol[:, 0] - sol[:, 1]) + v

    def ik(
        self,
        q0: np.ndarray,
        pos: np.ndarray,
        rot: np.ndarray | None = None,
        iters: int = 200,
        tol_pos: float = 1e-4,
        tol_rot: float = 1e-3,
        damping: float = 0.02,
    ) -> tuple[np.ndarray, bool]:
        """Iterate ``dls_step`` from ``q0`` (n,) until the TCP reaches ``pos`` (and
        ``rot``). Returns the joints (n,), clipped to the limits, and whether both
        tolerances were met."""
        q = np.clip(np.asarray(q0, dtype=np.float64)[: self.n], self.lower, self.upper)
        for _ in range(iters):
            p, R = self.fk(q)
            ok = np.linalg.norm(pos - p) < tol_pos
            if rot is not None:
                ok = ok and np.linalg.norm(rotation_error(rot, R)) < tol_rot
            if ok:
                return q, True
            step = self.dls_step(q, pos, rot, damping, max_lin=0.1, max_ang=0.5)
            q = np.clip(q + step, self.lower, self.upper)
        return q, False


def rotation_error(R_target: np.ndarray, R: np.ndarray) -> np.ndarray:
    """Rotation vector (3,) rad, base frame, that turns R into R_target."""
    Re = R_target @ R.T
    (r00, r01, r02), (r10, r11, r12), (r20, r21, r22) = Re.tolist()
    v0, v1, v2 = 0.5 * (r21 - r12), 0.5 * (r02 - r20), 0.5 * (r10 - r01)
    s = math.sqrt(v0 * v0 + v1 * v1 + v2 * v2)
    c = 0.5 * (r00 + r11 + r22 - 1.0)
    if s < 1e-9:
        if c > 0:
            return np.array((v0, v1, v2))
        # 180 deg: the axis is the eigenvector of the symmetric part with eigenvalue 1
        w, V = np.linalg.eigh(Re)
        return np.pi * V[:, int(np.argmax(w))]
    k = math.atan2(s, c) / s
    return np.array((k * v0, k * v1, k * v2))


def _clip_norm(v: np.ndarray, limit: float) -> np.ndarray:
    n = math.sqrt(float(v @ v))
    return v * (limit / n) if n > limit else v


def mat_to_quat(R: np.ndarray) -> np.ndarray:
    """Rotation matrix (3, 3) -> unit quaternion (4,) wxyz with w >= 0."""
    t = np.trace(R)
    if t > 0:
        s = 2.0 * np.sqrt(t + 1.0)
        q = np.array(
            [0.25 * s, (R[2, 1] - R[1, 2]) / s, (R[0, 2] - R[2, 0]) / s, (R[1, 0] - R[0, 1]) / s]
        )
    else:
        i = int(np.argmax(np.diag(R)))
        j, k = (i + 1) % 3, (i + 2) % 3
        s = 2.0 * np.sqrt(1.0 + R[i, i] - R[j, j] - R[k, k])
        q = np.empty(4)
        q[0] = (R[k, j] - R[j, k]) / s
        q[1 + i] = 0.25 * s
        q[1 + j] = (R[j, i] + R[i, j]) / s
        q[1 + k] = (R[k, i] + R[i, k]) / s
    q /= np.linalg.norm(q)
    return q if q[0] >= 0 else -q


def quat_to_mat(q: np.ndarray) -> np.ndarray:
    """Quaternion (4,) wxyz -> rotation matrix (3, 3)."""
    w, x, y, z = np.asarray(q, dtype=np.float64) / np.linalg.norm(q)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


def down_rotation(yaw: float) -> np.ndarray:
    """TCP rotation (3, 3) pointing the tool straight down (tool z = -world z), with the
    tool x axis at angle ``yaw`` (rad) about world z. Every arm's TCP frame follows this
    convention: z out of the flange, a parallel gripper's fingers closing along y."""
    c, s = np.cos(yaw), np.sin(yaw)
    return np.array([[c, s, 0.0], [s, -c, 0.0], [0.0, 0.0, -1.0]])
