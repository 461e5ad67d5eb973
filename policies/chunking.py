"""Observation history and chunk scheduling shared by the torch and onnxruntime policies.

Torch-free (the onboard runtime uses it). A chunk policy predicts ``horizon`` actions one
``action_dt`` apart from the last ``obs_horizon`` observations taken ``action_dt`` apart;
it executes ``execute_steps`` rows before predicting again. Between predictions ``act``
answers every control-rate observation with the rest of the current plan, resampled to the
control period (linear interpolation between rows), starting at the observation's stamp.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from tether.core.types import ActionChunk, Observation


class ObsHistory:
    """The last observations, read back as a stack of ``horizon`` frames ``period_s`` apart
    (oldest first). After a reset the first observation stands in for the missing ones."""

    def __init__(self, keys: list[str], horizon: int, period_s: float) -> None:
        self.keys = list(keys)
        self.horizon = int(horizon)
        self.period_ns = round(period_s * 1e9)
        self._buf: deque[tuple[int, dict[str, np.ndarray]]] = deque()

    def reset(self) -> None:
        self._buf.clear()

    def push(self, obs: Observation) -> None:
        """Store the observation's ``keys``; forget what is older than the stack needs."""
        missing = [k for k in self.keys if k not in obs]
        if missing:
            raise KeyError(f"observation lacks {missing} (has {sorted(obs)})")
        if self._buf and obs.stamp_ns < self._buf[-1][0]:
            self.reset()  # time went back: a new episode
        elif self._buf and obs.stamp_ns == self._buf[-1][0]:
            self._buf.pop()  # the same instant again (observed, then acted on)
        self._buf.append((obs.stamp_ns, {k: np.asarray(obs[k]) for k in self.keys}))
        keep_from = obs.stamp_ns - self.horizon * self.period_ns
        while len(self._buf) > 2 and self._buf[1][0] <= keep_from:
            self._buf.popleft()

    def stacked(self) -> dict[str, np.ndarray]:
        """Each key stacked over time: shape (horizon, *obs_shape), oldest first."""
        if not self._buf:
            raise RuntimeError("no observation pushed since reset")
        t_last = self._buf[-1][0]
        tol = self.period_ns // 100
        picks = []
        for j in range(self.horizon):
            target = t_last - (self.horizon - 1 - j) * self.period_ns
            frame = self._buf[0][1]
            for stamp, data in self._buf:
                if stamp <= target + tol:
                    frame = data
                else:
                    break
            picks.append(frame)
        return {k: np.stack([p[k] for p in picks]) for k in self.keys}


class ChunkPlan:
    """The chunk being executed and when to replace it.

    ``action_dt``: seconds between rows of a predicted chunk; ``control_dt``: period of the
    chunks handed to the robot; ``execute_steps``: rows executed before the next prediction.
    """

    def __init__(self, action_dt: float, control_dt: float, execute_steps: int) -> None:
        self.action_dt = float(action_dt)
        self.control_dt = float(control_dt)
        self.execute_steps = int(execute_steps)
        self.actions: np.ndarray | None = None
        self.t0_ns = 0

    def reset(self) -> None:
        self.actions = None

    def needs_plan(self, t_ns: int) -> bool:
        """True when there is no plan, time went back, or its executed part has passed."""
        if self.actions is None or t_ns < self.t0_ns:
            return True
        rows = min(self.execute_steps, len(self.actions))
        # half a control period early, so a row is never held past its time
        due = self.t0_ns + round((rows * self.action_dt - 0.5 * self.control_dt) * 1e9)
        return t_ns >= due

    def set(self, actions: np.ndarray, t0_ns: int) -> None:
        """A new plan: ``actions`` (horizon, dim), row i for time t0 + i * action_dt."""
        self.actions = np.asarray(actions, np.float32)
        self.t0_ns = int(t0_ns)

    def chunk_at(self, t_ns: int) -> ActionChunk:
        """The rest of the plan from ``t_ns`` on, one row per control_dt (at least one row)."""
        assert self.actions is not None, "set() a plan first"
        h = len(self.actions)
        if h == 1 or self.action_dt == self.control_dt and t_ns == self.t0_ns:
            return ActionChunk(self.actions.copy(), self.action_dt, t_ns)
        rel = (t_ns - self.t0_ns) * 1e-9 / self.action_dt  # position in rows
        end = h - 1
        n = max(1, int(np.floor((end - rel) * self.action_dt / self.control_dt + 1e-6)) + 1)
        pos = np.clip(rel + np.arange(n) * self.control_dt / self.action_dt, 0.0, end)
        lo = np.floor(pos).astype(int)
        hi = np.minimum(lo + 1, end)
        w = (pos - lo)[:, None].astype(np.float32)
        rows = (1.0 - w) * self.actions[lo] + w * self.actions[hi]
        return ActionChunk(rows, self.control_dt, t_ns)
