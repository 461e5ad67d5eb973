"""Episodes of frames from asynchronous, timestamped streams: what a recorder does between
hearing a message and writing a dataset row. Pure logic (numpy), no ROS.

A recorder hears the robot's streams (joint states, odometry, scans, images, object poses)
and the commands sent to it, each message stamped in sim (or robot) time. The
:class:`FrameSampler` turns them into frames at the dataset's fps; :class:`EpisodeAligner`
wraps it with what episodes need, because topics are not ordered with each other:

- messages heard between episodes are kept, and the ones at or after an episode's start
  stamp are replayed into it (the first observation can overtake the start event);
- within an episode a stream joins only once it shows the new episode's clock (a late
  message of the previous episode is not the first value of this one): near the start, or
  near the episode's clock for a stream that speaks later (commands once an operator arms
  the dead-man); a stamp far ahead of the episode's clock is such a late message too;
- an unstamped command (a Twist; a drone's cmd_low_level stamped 0) is in force from the
  robot's latest time (the clock stream's latest stamp), except in lockstep for the first
  command of an episode: the world waits for each answer, so it answers the episode's first
  observation (its start), even when the recorder hears it after later observations;
- an episode's end event can overtake its last observations: the episode is saved once the
  streams that speak at every step (the *clock stream*, the one the robot publishes last in
  each observation, and whichever else the caller names: the other sensors; in lockstep
  the commands, which answer every observation, the last one included) reach the end
  stamp, or when a grace period runs out.

:func:`assemble` turns a frame into a dataset row: stream values concatenated into features
(float32), an action chunk replaced by the row in force at the frame's time.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from tether.core.data.sampler import NS, FrameSampler, SamplerStats
from tether.core.types import ActionChunk

# within an episode a stream never jumps ahead by more than this (ns): beyond it, a message
# is a late one of the previous episode
MAX_JUMP_NS = NS
# with a known start stamp, a stream joins the episode at its first message within this
# window after the start (ns)
JOIN_WINDOW_NS = NS // 2
# messages kept between episodes (for the replay at the next start)
IDLE_CAPACITY = 256
# an episode's end time comes rounded to 0.1 ms (the sim bridge's episode summary)
END_TOLERANCE_NS = 100_000


@dataclass(frozen=True)
class Feature:
    """One dataset feature made of stream values: ``keys`` concatenated in order (a vector
    feature, float32), or the value of a single key as it is (``video``: an image)."""

    name: str
    keys: tuple[str, ...]
    video: bool = False


def value_at(value: Any, t_ns: int) -> Any:
    """The value a stream holds at time ``t_ns``: for an action chunk the row in force then
    (its last row once it has run out), anything else as it is."""
    if isinstance(value, ActionChunk):
        row = value.action_at(t_ns)
        return value.actions[-1] if row is None else row
    return value


def assemble(frame: dict[str, Any], features: tuple[Feature, ...]) -> dict[str, Any]:
    """The dataset row of one frame (``FrameSampler`` output): feature name -> value."""
    t = frame["stamp_ns"]
    row: dict[str, Any] = {}
    for f in features:
        if f.video:
            row[f.name] = frame[f.keys[0]]
            continue
        parts = [np.asarray(value_at(frame[k], t), np.float32).ravel() for k in f.keys]
        row[f.name] = parts[0] if len(parts) == 1 else np.concatenate(parts)
    return row


class EpisodeAligner:
    """Per-episode frames of streams ``keys`` at ``fps`` (see the module docstring).

    ``clock_key``: the stream that says how far the robot's time has got (published last in
    each observation); unstamped commands take its latest stamp (:attr:`clock_ns`).
    ``end_keys``: the streams an ended episode waits for (default: the clock stream).
    ``max_age_s``: per-key limit on a value's age in a frame (FrameSampler; default 2
    frames).
    ``lockstep``: the robot steps only once each observation is answered (a sim in
    lockstep), so an episode's first unstamped command is in force from its start.
    """

    def __init__(
        self,
        keys: tuple[str, ...],
        fps: float,
        clock_key: str,
        max_age_s: dict[str, float] | None = None,
        end_keys: tuple[str, ...] | None = None,
        lockstep: bool = False,
    ) -> None:
        for k in (clock_key, *(end_keys or ())):
            if k not in keys:
                raise ValueError(f"stream '{k}' is not one of {keys}")
        self.sampler = FrameSampler(tuple(keys), fps, max_age_s)
        self.clock_key = clock_key
        self.end_keys = tuple(end_keys or (clock_key,))
        self.lockstep = lockstep
        self.recording = False
        self.frames = 0  # frames emitted in the current episode
        # latest stamp of the clock stream (in the episode: accepted into it)
        self.clock_ns: int | None = None
        self._idle: deque[tuple[str, int, Any]] = deque(maxlen=IDLE_CAPACITY)
        self._armed: set[str] = set()
        self._start_ns: int | None = None  # the episode's start stamp (None: started by hand)
        self._arm_until: int | None = None
        self._last_clock: int | None = None  # the episode's latest clock stamp
        self._last_stamp: dict[str, int] = {}  # latest accepted stamp per stream
        self._end: tuple[int, float] | None = None  # (end stamp ns, deadline in caller's s)

    @property
    def keys(self) -> tuple[str, ...]:
        return self.sampler.keys

    @property
    def stats(self) -> SamplerStats:
        """Frames emitted and dropped since this aligner was made (all episodes)."""
        return self.sampler.stats

    @property
    def ending(self) -> bool:
        """An end was requested and the episode waits for its last observations."""
        return self._end is not None

    # --- streams ---------------------------------------------------------------------
    def push(self, key: str, stamp_ns: int | None, value: Any) -> list[dict[str, Any]]:
        """Add one message (``stamp_ns`` None: unstamped, see the module docstring); return
        the frames it completed, oldest first (none between episodes: the message is kept
        for the next start)."""
        if stamp_ns is None:
            stamp_ns = self._unstamped(key)
            if stamp_ns is None:
                return []  # no robot time yet
        if self.recording and key not in self._armed:
            # a message of the previous episode can still arrive after this one started;
            # a stream joins once it shows the new episode's clock
            if self._arm_until is not None and stamp_ns > self._join_limit(key):
                return []
            self._armed.add(key)
        if not self.recording:
            if key == self.clock_key:
                self.clock_ns = stamp_ns  # between episodes the clock may go back (a reset)
            self._keep_idle(key, stamp_ns, value)
            return []
        last = self._last_stamp.get(key)
        if last is not None and stamp_ns - self._reference(key, last) > MAX_JUMP_NS:
            return []  # far ahead of the episode's clock: a late message of the last episode
        self._last_stamp[key] = stamp_ns
        if key == self.clock_key:
            self._last_clock = self.clock_ns = stamp_ns
        frames = self.sampler.push(key, stamp_ns, value)
        self.frames += len(frames)
        return frames

    def _episode_clock(self, key: str) -> int | None:
        """The episode's clock (the clock stream's latest stamp) as the reference of any
        other stream; None for the clock stream itself or before its first message."""
        return None if key == self.clock_key else self._last_clock

    def _join_limit(self, key: str) -> int:
        """The latest stamp at which a stream not yet in the episode joins it: within the
        join window of the start, or (any stream but the clock) within the window of the
        episode's clock. A stream that first speaks later (commands once the operator arms
        the dead-man a second after the start; a camera whose first images were lost)
        joins when it does, instead of holding back every frame of the episode."""
        assert self._arm_until is not None
        clock = self._episode_clock(key)
        return self._arm_until if clock is None else max(self._arm_until, clock + JOIN_WINDOW_NS)

    def _reference(self, key: str, last: int) -> int:
        """What a stream's new stamp is compared with to tell a late message of the last
        episode (far ahead): the stream's own latest stamp, or for any stream but the clock
        the episode's clock if that is later (a command stream silent for seconds, the
        dead-man released, speaks again in step with the robot)."""
        clock = self._episode_clock(key)
        return last if clock is None else max(last, clock)

    def _unstamped(self, key: str) -> int | None:
        """The stamp of an unstamped message of ``key``: the robot's latest time, or in
        lockstep the episode's start for the stream's first message in the episode, heard
        within the join window (it answers the first observation, which the recorder may
        have heard after later ones)."""
        start, clock = self._start_ns, self._last_clock
        first = self.lockstep and self.recording and key not in self._last_stamp
        # (clock None: no observation of this episode yet, the latest is the last episode's)
        if first and start is not None and (clock is None or clock <= start + JOIN_WINDOW_NS):
            return start
        return self.clock_ns

    def _keep_idle(self, key: str, stamp_ns: int, value: Any) -> None:
        if any(k == key and t > stamp_ns for k, t, _ in self._idle):
            # this stream's clock went back: its newer messages are the last episode's. Only
            # this stream's: the new episode's messages already heard on other streams (an
            # image of t=0 before the late action of the last episode's end) stay for replay
            kept = [m for m in self._idle if m[0] != key or m[1] <= stamp_ns]
            self._idle = deque(kept, maxlen=self._idle.maxlen)
        self._idle.append((key, stamp_ns, value))

    # --- episodes --------------------------------------------------------------------
    def start(self, start_ns: int | None = None) -> list[dict[str, Any]]:
        """Start an episode (ending any in progress without its last frames); messages
        heard at or after ``start_ns`` are part of it (None: only those from now on).
        Returns the frames the replayed messages completed."""
        self.sampler.reset()
        self.recording, self.frames = True, 0
        self._end = None
        self._last_clock = None
        self._last_stamp = {}
        self._start_ns = start_ns
        # with a known start time, streams join at their first message within a window of it
        self._arm_until = None if start_ns is None else start_ns + JOIN_WINDOW_NS
        self._armed = set(self.keys) if start_ns is None else set()
        early = [m for m in self._idle if start_ns is not None and m[1] >= start_ns]
        self._idle.clear()
        out: list[dict[str, Any]] = []
        for key, stamp, value in early:
            out += self.push(key, stamp, value)
        return out

    def end(self, end_ns: int, deadline: float) -> None:
        """The episode ended at robot time ``end_ns``: it is complete once every end stream
        reaches it, or at ``deadline`` (the caller's clock, e.g. time.monotonic())."""
        if self.recording:
            self._end = (end_ns, deadline)

    def end_due(self, now: float) -> bool:
        """An ended episode has its last observations (or waited long enough): save it."""
        if self._end is None:
            return False
        end_ns, deadline = self._end
        last = [self._last_stamp.get(k) for k in self.end_keys]
        caught_up = all(t is not None and t >= end_ns - END_TOLERANCE_NS for t in last)
        return caught_up or now > deadline

    def unheard(self) -> list[str]:
        """The streams that have not joined the episode in progress, or the one just
        finished (until the next start): what holds back every frame of an episode with
        none."""
        return [k for k in self.keys if k not in self._last_stamp]

    def finish(self) -> list[dict[str, Any]]:
        """Stop recording; return the episode's last frames (up to the clock stream's
        latest stamp; streams that will not speak again are taken as they are, age-checked)."""
        if not self.recording:
            return []
        out = [] if self._last_clock is None else self.sampler.flush(self._last_clock)
        self.frames += len(out)
        self.recording = False
        self._end = None
        return out

    def discard(self) -> None:
        """Stop recording without the last frames (the caller drops the episode)."""
        self.recording = False
        self._end = None
