from __future__ import annotations

from tether.core.data.sampler import FrameSampler

MS = 1_000_000


def test_frames_hold_the_value_in_force_and_wait_for_every_stream():
    s = FrameSampler(("state", "image"), fps=10)  # a frame every 100 ms
    frames = []
    for t in range(0, 401, 10):  # state at 100 Hz: value = its time in ms
        frames += s.push("state", t * MS, t)
        if t % 50 == 0:  # image at 20 Hz
            frames += s.push("image", t * MS, f"img{t}")
    assert [f["stamp_ns"] // MS for f in frames] == [0, 100, 200, 300, 400]
    assert [f["state"] for f in frames] == [0, 100, 200, 300, 400]
    assert [f["image"] for f in frames] == ["img0", "img100", "img200", "img300", "img400"]
    assert s.stats.frames == 5 and s.stats.dropped == 0


def test_a_frame_is_not_final_until_every_stream_has_passed_it():
    s = FrameSampler(("state", "action"), fps=10)
    assert s.push("state", 0, "s0") == []
    assert s.push("action", 0, "a0") != []  # both at t=0
    assert s.push("state", 150 * MS, "s150") == []  # action has not reached 100 ms yet
    out = s.push("action", 120 * MS, "a120")
    assert [(f["state"], f["action"]) for f in out] == [("s0", "a0")]  # t=100: values in force


def test_stale_streams_drop_frames_and_count_them():
    s = FrameSampler(("state", "image"), fps=10, max_age_s={"image": 0.15})
    out = []
    out += s.push("image", 0, "i0")
    for t in range(0, 501, 100):
        out += s.push("state", t * MS, t)
    out += s.push("image", 500 * MS, "i500")  # the camera stalled from 0 to 500 ms
    assert [f["stamp_ns"] // MS for f in out] == [0, 100, 500]
    assert s.stats.dropped == 3 and s.stats.stale == {"image": 3}


def test_start_aligns_to_the_grid_and_reset_restarts():
    s = FrameSampler(("a",), fps=4)  # 250 ms grid
    assert s.push("a", 10 * MS, 1) == []  # first grid point at or after 10 ms is 250 ms
    assert [f["stamp_ns"] // MS for f in s.push("a", 260 * MS, 2)] == [250]
    s.reset()
    assert [f["stamp_ns"] for f in s.push("a", 0, 3)] == [0]


def test_a_clock_jump_back_restarts_the_stream():
    s = FrameSampler(("state", "action"), fps=10)
    s.push("state", 0, "s0")
    # a late command of the previous episode (t = 2.9 s) arrives after the new one started
    assert s.push("action", 2900 * MS, "old") == []
    assert s.push("action", 0, "a0") != []  # back in time: the stale value is forgotten
    out = s.push("state", 100 * MS, "s1") + s.push("action", 100 * MS, "a1")
    assert [(f["state"], f["action"]) for f in out] == [("s1", "a1")]


def test_flush_emits_the_last_frames_at_the_end_of_an_episode():
    s = FrameSampler(("state", "image"), fps=10)
    out = s.push("image", 0, "i0") + s.push("state", 0, "s0")
    out += s.push("state", 100 * MS, "s1")  # the camera says nothing more: frame 100 waits
    assert [f["stamp_ns"] // MS for f in out] == [0]
    last = s.flush(100 * MS)
    assert [(f["stamp_ns"] // MS, f["state"], f["image"]) for f in last] == [(100, "s1", "i0")]
    assert s.flush(100 * MS) == []
