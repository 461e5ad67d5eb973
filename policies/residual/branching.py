"""Branch points: an env keeps a snapshot of one episode at each of its decisions, so a
learner can start more episodes from any of them (``grpo.branch``, grpo.py) instead of
replaying the steps before it. The snapshots stay in the env's own process (a rollout
worker's too): the learner names them by a key and a decision index, and they never
cross a process boundary."""

from __future__ import annotations

from typing import Any


class BranchPoints:
    """Mixed into an env with ``snapshot()`` / ``restore(snapshot) -> observation``.

    ``branch_record`` (set by the learner, like ``next_seed``): the key under which the
    next episode's decisions are kept; the reset takes it. ``restore_branch(key, t)``: back
    to decision ``t`` of that episode (the learner's observation there, as a list);
    ``drop_branch(key)`` frees them."""

    branch_record: int | None = None

    def branch_reset(self) -> None:
        """At a reset: start keeping this episode's decisions if ``branch_record`` says so."""
        key, self.branch_record = self.branch_record, None
        self._recording = key
        if key is not None:
            self._branch_store()[key] = []

    def branch_decision(self) -> None:
        """Before a decision: its snapshot, while an episode is being kept."""
        key = getattr(self, "_recording", None)
        if key is not None:
            self._branch_store()[key].append(self.snapshot())  # type: ignore[attr-defined]

    def restore_branch(self, key: int, t: int) -> list[float]:
        points = self._branch_store().get(key)
        if points is None or not 0 <= t < len(points):
            have = "none" if points is None else f"{len(points)} decisions"
            raise KeyError(f"no branch point {t} of episode {key} in this env ({have})")
        self._recording = None
        obs = self.restore(points[t])  # type: ignore[attr-defined]
        return [float(v) for v in obs]

    def drop_branch(self, key: int) -> None:
        self._branch_store().pop(key, None)

    def _branch_store(self) -> dict[int, list[Any]]:
        store = getattr(self, "_branches", None)
        if store is None:
            store = self._branches = {}
        return store
