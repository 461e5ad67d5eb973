"""Panda kinematics in pure numpy: forward kinematics, Jacobian and damped-least-squares IK
of the tool centre point (TCP, midway between the fingertip pads).

Frames: the robot base frame (panda_link0), x forward, z up; metres, radians. Rotations are
(3, 3) matrices; quaternions are (w, x, y, z). The chain uses Franka's published (modified,
Craig) DH parameters, the same as sim/assets/panda/scene.xml; a test checks both agree.
"""

from __future__ import annotations

import math

import numpy as np

# Modified DH per joint i: T = Rx(alpha) Tx(a) Rz(q) Tz(d)
DH_A = (0.0, 0.0, 0.0, 0.0825, -0.0825, 0.0, 0.088)
DH_D = (0.333, 0.0, 0.316, 0.0, 0.384, 0.0, 0.0)
DH_ALPHA = (0.0, -np.pi / 2, np.pi / 2, np.pi / 2, -np.pi / 2, np.pi / 2, np.pi / 2)
FLANGE_D = 0.107  # flange (panda_link8) along z7
HAND_YAW = -np.pi / 4  # the hand is mounted turned -45 deg about the flange z
TCP_D = 0.1034  # TCP along the hand z (Franka's default TCP: between the fingertips)

LOWER = np.array([-2.8973, -1.7628, -2.8973, -3.0718, -2.8973, -0.0175, -2.8973])
UPPER = np.array([2.8973, 1.7628, 2.8973, -0.0698, 2.8973, 3.7525, 2.8973])


# cos/sin of each alpha, rounded so that the +-90 deg twists are exact
_CA = tuple(round(math.cos(al), 12) for al in DH_ALPHA)
_SA = tuple(round(math.sin(al), 12) for al in DH_ALPHA)
_HC, _HS = math.cos(HAND_YAW), math.sin(HAND_YAW)


def _frames(
    q: np.ndarray,
) -> tuple[
    list[tuple[float, float, float]], list[tuple[float, float, float]], np.ndarray, np.ndarray
]:
    """Joint origins (7 x 3), joint axes (7 x 3), TCP position (3,) and rotation (3, 3).

    Plain float arithmetic: for 3x3 products numpy's per-call overhead dominates, and the
    expert calls this every control step (budget well under 0.3 ms).
    """
    # columns of the rotation (x, y, z axes) and the origin, base frame
    x0, x1, x2 = 1.0, 0.0, 0.0
    y0, y1, y2 = 0.0, 1.0, 0.0
    z0, z1, z2 = 0.0, 0.0, 1.0
    p0, p1, p2 = 0.0, 0.0, 0.0
    origins = []
    axes = []
    for i, qi in enumerate(q.tolist()[:7]):
        a, d, ca, sa = DH_A[i], DH_D[i], _CA[i], _SA[i]
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
        c, s = math.cos(qi), math.sin(qi)
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
    # flange -> TCP: Tz(FLANGE_D) Rz(HAND_YAW) Tz(TCP_D)
    t = FLANGE_D + TCP_D
    p = np.array((p0 + t * z0, p1 + t * z1, p2 + t * z2))
    c, s = _HC, _HS
    R = np.array(
        [
            [c * x0 + s * y0, c * y0 - s * x0, z0],
            [c * x1 + s * y1, c * y1 - s * x1, z1],
            [c * x2 + s * y2, c * y2 - s * x2, z2],
        ]
    )
    return origins, axes, p, R


def fk(q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """TCP pose for arm joints ``q`` (7,): position (3,) m and rotation (3, 3)."""
    _, _, p, R = _frames(np.asarray(q, dtype=np.float64))
    return p, R


def jacobian(q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Geometric TCP Jacobian (6, 7) (rows: linear m/rad, then angular), plus the TCP
    position (3,) and rotation (3, 3) computed on the way."""
    origins, axes, p, R = _frames(np.asarray(q, dtype=np.float64))
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


def dls_step(
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
    """One damped-least-squares step: joint change (7,) that moves the TCP toward ``pos``
    (3,) and, if given, rotation ``rot`` (3, 3). The task-space error is clipped to
    ``max_lin`` (m) and ``max_ang`` (rad); ``rest_gain`` pulls toward ``q_rest`` in the
    null space (keeps the redundant elbow away from limits). ``jac``: ``jacobian(q)`` if the
    caller already has it."""
    q = np.asarray(q, dtype=np.float64)[:7]
    J, p, R = jac if jac is not None else jacobian(q)
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
    # null-space pull: (I - J+ J) v = v - J+ (J v), J+ the damped pseudo-inverse;
    # one solve with two right-hand sides
    v = rest_gain * (np.asarray(q_rest, dtype=np.float64)[:7] - q)
    sol = np.linalg.solve(JJt, np.stack([e, Jt @ v], axis=1))
    return Jt.T @ (sol[:, 0] - sol[:, 1]) + v


def ik(
    q0: np.ndarray,
    pos: np.ndarray,
    rot: np.ndarray | None = None,
    iters: int = 200,
    tol_pos: float = 1e-4,
    tol_rot: float = 1e-3,
    damping: float = 0.02,
) -> tuple[np.ndarray, bool]:
    """Iterate ``dls_step`` from ``q0`` (7,) until the TCP reaches ``pos`` (and ``rot``).

    Returns the joints (7,), clipped to the limits, and whether both tolerances were met.
    """
    q = np.clip(np.asarray(q0, dtype=np.float64)[:7], LOWER, UPPER)
    for _ in range(iters):
        p, R = fk(q)
        ok = np.linalg.norm(pos - p) < tol_pos
        if rot is not None:
            ok = ok and np.linalg.norm(rotation_error(rot, R)) < tol_rot
        if ok:
            return q, True
        q = np.clip(q + dls_step(q, pos, rot, damping, max_lin=0.1, max_ang=0.5), LOWER, UPPER)
    return q, False


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
    """TCP rotation (3, 3) pointing the fingers straight down (hand z = -world z), with the
    hand x axis at angle ``yaw`` (rad) about world z. The fingers close along hand y."""
    c, s = np.cos(yaw), np.sin(yaw)
    return np.array([[c, s, 0.0], [s, -c, 0.0], [0.0, 0.0, -1.0]])
