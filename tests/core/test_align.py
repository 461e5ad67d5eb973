"""EpisodeAligner and assemble: the recorder's stream alignment, without ROS."""

from __future__ import annotations

import numpy as np
import pytest

from tether.core.data.align import EpisodeAligner, Feature, assemble, value_at
from tether.core.types import ActionChunk

MS = 1_000_000
S = 1000 * MS


def _aligner(**kw) -> EpisodeAligner:
    # state at 100 Hz is the clock; action whenever sent; 10 fps frames (every 100 ms)
    return EpisodeAligner(("state", "action"), fps=10, clock_key="state", **kw)


def _run(al: EpisodeAligner, t0_ms: int, t1_ms: int, action_every_ms: int = 10) -> list[dict]:
    """Publish state every 10 ms and an action every ``action_every_ms`` in [t0, t1] ms."""
    out = []
    for t in range(t0_ms, t1_ms + 1, 10):
        if t % action_every_ms == 0:
            out += al.push("action", t * MS, f"a{t}")
        out += al.push("state", t * MS, f"s{t}")
    return out


def test_nothing_is_framed_between_episodes():
    al = _aligner()
    assert _run(al, 0, 500) == []
    assert not al.recording and al.frames == 0
    assert al.clock_ns == 500 * MS  # the robot's time is known between episodes too


def test_an_episode_frames_every_stream_on_the_grid():
    al = _aligner()
    al.start(0)
    frames = _run(al, 0, 300)
    assert [f["stamp_ns"] // MS for f in frames] == [0, 100, 200, 300]
    assert [(f["state"], f["action"]) for f in frames] == [
        ("s0", "a0"),
        ("s100", "a100"),
        ("s200", "a200"),
        ("s300", "a300"),
    ]
    assert al.frames == 4
    assert al.clock_ns == 300 * MS  # unstamped commands are stamped with the latest state


def test_messages_heard_before_the_start_event_are_replayed():
    al = _aligner()
    _run(al, 2000, 2500)  # the previous episode's tail (sim time 2.0-2.5 s)
    early = _run(al, 0, 100)  # the new episode's first messages overtake its start event
    assert early == []
    frames = al.start(0)  # only messages at or after the start stamp join the episode
    assert [(f["stamp_ns"] // MS, f["state"]) for f in frames] == [(0, "s0"), (100, "s100")]


def test_a_late_message_of_the_previous_episode_does_not_join_the_new_one():
    al = _aligner()
    al.start(0)
    # a command of the last episode (t = 2.9 s) arrives after this one started at t = 0
    assert al.push("action", 2900 * MS, "old") == []
    frames = _run(al, 0, 200)
    assert [f["action"] for f in frames] == ["a0", "a100", "a200"]


def test_a_stamp_far_ahead_of_a_streams_clock_is_dropped():
    al = _aligner()
    al.start(None)  # started by hand: every stream is in at once
    frames = _run(al, 0, 100)
    assert al.push("action", 5 * S, "late") == []  # > 1 s ahead: the last episode's
    frames += _run(al, 110, 200)
    assert [f["action"] for f in frames] == ["a0", "a100", "a200"]


def test_an_episode_waits_for_its_last_observations_before_it_ends():
    al = _aligner()
    al.start(0)
    _run(al, 0, 200)
    al.end(400 * MS, deadline=10.0)  # the end event overtook t = 210 .. 400 ms
    assert al.ending and not al.end_due(now=1.0)
    _run(al, 210, 390)
    assert not al.end_due(now=1.0)
    _run(al, 400, 400)
    assert al.end_due(now=1.0)
    last = al.finish()
    assert [f["stamp_ns"] // MS for f in last] == []  # t = 400 was framed by the push
    assert al.frames == 5 and not al.recording and not al.ending


def test_an_ended_episode_is_due_at_its_deadline_without_the_clock():
    al = _aligner()
    al.start(0)
    _run(al, 0, 100)
    al.end(5 * S, deadline=10.0)
    assert not al.end_due(now=9.9)
    assert al.end_due(now=10.1)


def test_finish_flushes_frames_that_wait_for_a_silent_stream():
    al = _aligner()
    al.start(0)
    frames = _run(al, 0, 200, action_every_ms=1000)  # one command, at t = 0
    assert [f["stamp_ns"] // MS for f in frames] == [0]  # frames wait for the action stream
    last = al.finish()  # the action will not speak again: its value in force is used
    assert [(f["stamp_ns"] // MS, f["action"]) for f in last] == [(100, "a0"), (200, "a0")]
    assert al.frames == 3


def test_discard_and_restart_after_a_reset():
    al = _aligner()
    al.start(0)
    _run(al, 0, 300)
    al.discard()
    assert not al.recording
    _run(al, 0, 50)  # the simulator was reset: the clock went back to 0
    assert al.clock_ns == 50 * MS
    frames = al.start(0)
    assert [f["stamp_ns"] for f in frames] == [0]
    assert al.frames == 1


def test_the_clock_stream_must_be_a_stream():
    with pytest.raises(ValueError, match="stream .b. is not one of"):
        EpisodeAligner(("a",), fps=10, clock_key="b")


def test_value_at_holds_the_chunk_row_in_force():
    chunk = ActionChunk(np.array([[1.0], [2.0], [3.0]]), dt=0.1, t0_ns=1 * S)
    assert value_at(chunk, 1 * S)[0] == 1.0
    assert value_at(chunk, 1 * S + 150 * MS)[0] == 2.0
    assert value_at(chunk, 5 * S)[0] == 3.0  # run out: its last row stays in force
    assert value_at("img", 0) == "img"


def test_assemble_concatenates_streams_into_features():
    feats = (
        Feature("observation.state", ("odom", "wheels")),
        Feature("action", ("action",)),
        Feature("observation.images.front", ("img",), video=True),
    )
    img = np.zeros((2, 2, 3), np.uint8)
    chunk = ActionChunk(np.array([[0.5, 0.1], [0.6, 0.2]]), dt=0.05, t0_ns=0)
    frame = {
        "stamp_ns": 60 * MS,
        "odom": np.arange(5, dtype=np.float64),
        "wheels": np.arange(8, dtype=np.float32),
        "action": chunk,
        "img": img,
    }
    row = assemble(frame, feats)
    assert row["observation.state"].dtype == np.float32
    np.testing.assert_array_equal(row["observation.state"], np.r_[np.arange(5), np.arange(8)])
    np.testing.assert_allclose(row["action"], [0.6, 0.2])  # the row in force at 60 ms
    assert row["observation.images.front"] is img


def test_stale_streams_drop_frames_and_count_them():
    al = EpisodeAligner(("state", "img"), fps=10, clock_key="state", max_age_s={"img": 0.15})
    al.start(None)
    out = al.push("img", 0, "i0")
    for t in range(0, 501, 100):
        out += al.push("state", t * MS, t)
    out += al.push("img", 500 * MS, "i500")  # the camera stalled from 0 to 500 ms
    assert [f["stamp_ns"] // MS for f in out] == [0, 100, 500]
    assert al.stats.dropped == 3 and al.frames == 3


def test_a_short_previous_episode_is_not_replayed_into_the_next():
    al = _aligner()
    _run(al, 200, 400)  # the last episode's tail, inside the new one's join window
    _run(al, 0, 100)  # the simulator was reset: every stream's clock went back
    frames = al.start(0)
    assert [(f["stamp_ns"] // MS, f["state"]) for f in frames] == [(0, "s0"), (100, "s100")]


def test_messages_before_the_start_stamp_stay_out_on_a_clock_that_never_resets():
    # hardware: robot time runs on; the last episode ended at 12 s, the next starts at 20 s
    al = _aligner()
    _run(al, 10_000, 12_000, action_every_ms=100)
    frames = al.start(20 * S)
    frames += _run(al, 20_000, 20_200)
    assert [f["stamp_ns"] // MS for f in frames] == [20_000, 20_100, 20_200]


def test_a_late_clock_message_does_not_end_the_episode_early():
    al = _aligner()
    al.start(0)
    assert al.push("state", 2900 * MS, "old") == []  # the last episode's, after the start
    al.end(300 * MS, deadline=10.0)
    assert not al.end_due(now=1.0)  # nothing of this episode has been framed yet
    _run(al, 0, 300)
    assert al.end_due(now=1.0)


def test_a_late_command_far_ahead_cannot_stand_in_for_the_next_one():
    al = _aligner()
    al.start(0)
    frames = _run(al, 0, 150, action_every_ms=100)
    al.push("action", 2900 * MS, "old")  # the last episode's, after this one's a100
    for t in range(160, 201, 10):  # the state passes 200 ms before the policy answers it
        frames += al.push("state", t * MS, f"s{t}")
    frames += al.push("action", 200 * MS, "a200")
    # frame 200 waits for a200: the late message does not say the action passed 200 ms
    assert [f["action"] for f in frames] == ["a0", "a100", "a200"]


def test_an_ended_episode_waits_for_every_end_stream():
    # lockstep: the answer to the last observation is that frame's action
    al = _aligner(end_keys=("state", "action"))
    al.start(0)
    for t in range(0, 201, 10):
        al.push("state", t * MS, f"s{t}")
        if t < 200:
            al.push("action", t * MS, f"a{t}")
    al.end(200 * MS, deadline=10.0)
    assert not al.end_due(now=1.0)  # the state is there, the answer to it is not
    frames = al.push("action", 200 * MS, "a200")
    assert al.end_due(now=1.0)
    frames += al.finish()
    assert frames[-1]["stamp_ns"] == 200 * MS and frames[-1]["action"] == "a200"


def test_the_end_stamp_is_matched_to_its_rounding():
    al = EpisodeAligner(("state",), fps=30, clock_key="state")
    al.start(0)
    last = round(2 * 1e9 / 30)  # 66_666_667 ns: the summary says 0.0667 s
    for k in range(3):
        al.push("state", round(k * 1e9 / 30), k)
    al.end(round(0.0667 * 1e9), deadline=10.0)
    assert al.end_due(now=1.0)
    assert [f["stamp_ns"] for f in al.finish()] == [] and al.frames == 3
    assert last < round(0.0667 * 1e9)


def test_end_streams_must_be_streams():
    with pytest.raises(ValueError, match="'b' is not one of"):
        EpisodeAligner(("a",), fps=10, clock_key="a", end_keys=("a", "b"))


def _answers(al: EpisodeAligner, t0_ms: int, t1_ms: int) -> list[dict]:
    """Lockstep at 100 Hz: state k, then (the recorder hearing it one step late) the answer
    to state k - 1, unstamped (a drone's cmd_low_level stamped 0, a Twist)."""
    out = []
    for t in range(t0_ms, t1_ms + 1, 10):
        out += al.push("state", t * MS, f"s{t}")
        if t > t0_ms:
            out += al.push("action", None, f"a{t - 10}")
    return out


def test_a_lockstep_episodes_first_unstamped_answer_is_in_force_from_its_start():
    """The answer to an episode's first observation can reach the recorder after the next
    observation (the sim stepped on it): it is the action of the first frame, not lost."""
    al = _aligner(lockstep=True)
    al.start(0)
    frames = _answers(al, 0, 210)
    assert [(f["stamp_ns"] // MS, f["action"]) for f in frames] == [
        (0, "a0"),
        (100, "a90"),  # later answers: in force from the robot's latest time, as before
        (200, "a190"),
    ]


def test_a_lockstep_answer_heard_before_the_new_episodes_clock_is_at_its_start():
    """An answer to the first observation heard before the recorder hears any observation
    of the episode (its clock is still the last episode's end) is in force from the start."""
    al = _aligner(lockstep=True)
    _run(al, 3900, 4000)  # the last episode's end
    al.start(0)
    assert al.push("action", None, "a0") == []
    frames = _answers(al, 0, 110)
    assert [(f["stamp_ns"] // MS, f["action"]) for f in frames] == [(0, "a0"), (100, "a90")]


def test_a_first_unstamped_command_past_the_join_window_is_not_taken_back_to_the_start():
    al = _aligner(lockstep=True)
    al.start(0)
    for t in range(0, 610, 10):  # no command for 0.6 s (a lockstep timeout)
        al.push("state", t * MS, f"s{t}")
    # not the answer to the first observation: in force from the robot's latest time (the
    # stream joins there), not from the start
    frames = al.push("action", None, "late")
    assert [(f["stamp_ns"] // MS, f["action"]) for f in frames] == [(600, "late")]
    assert al.finish() == [] and al.frames == 1


def test_without_lockstep_an_unstamped_command_is_in_force_from_the_robots_latest_time():
    al = _aligner()
    al.start(0)
    frames = _answers(al, 0, 210)  # the first command is heard at 10 ms: no frame at 0
    assert [(f["stamp_ns"] // MS, f["action"]) for f in frames] == [(100, "a90"), (200, "a190")]
    assert _aligner().push("action", None, "x") == []  # no robot time yet to give it


def test_a_stream_that_first_speaks_after_the_join_window_still_joins():
    # an operator starts the episode, then arms the dead-man a second later: the commands
    # begin at 1 s, long after the start's join window; they join once the robot's clock
    # (the state) shows they are of this episode
    al = _aligner()
    al.start(0)
    frames = []
    for t in range(0, 2001, 10):
        if t == 1000:
            assert al.unheard() == ["action"]  # (what a recorder names if none come)
        if t >= 1000:
            frames += al.push("action", t * MS, f"a{t}")
        frames += al.push("state", t * MS, f"s{t}")
    assert [f["stamp_ns"] // MS for f in frames] == list(range(1000, 2001, 100))
    assert [f["action"] for f in frames] == [f"a{t}" for t in range(1000, 2001, 100)]


def test_a_command_stream_that_pauses_for_seconds_rejoins():
    # the dead-man released for 2.5 s mid-episode: no commands, then commands again; the
    # frames of the pause are dropped as stale (counted), those after it are framed again
    al = _aligner()
    al.start(0)
    frames = _run(al, 0, 500)
    for t in range(510, 3001, 10):
        frames += al.push("state", t * MS, f"s{t}")
    frames += _run(al, 3010, 3500)
    stamps = [f["stamp_ns"] // MS for f in frames]
    assert stamps[:6] == [0, 100, 200, 300, 400, 500]
    assert stamps[-5:] == [3100, 3200, 3300, 3400, 3500]
    assert frames[-1]["action"] == "a3500"
    assert al.stats.stale.get("action", 0) > 0


def test_a_late_message_of_the_previous_episode_stays_out_once_the_clock_runs():
    # the relaxed join follows the episode's clock: a message far ahead of it is still the
    # last episode's
    al = _aligner()
    al.start(0)
    frames = _run(al, 0, 300, action_every_ms=100)
    assert al.push("action", 2900 * MS, "old") == []
    frames += _run(al, 310, 500, action_every_ms=100)
    assert [f["action"] for f in frames] == ["a0", "a100", "a200", "a300", "a400", "a500"]
