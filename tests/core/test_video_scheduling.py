"""The dataset video encoder leaves the process's scheduling as it found it.

SVT-AV1 (libsvtav1), in a process that may do so (root: most containers, CI here), moves the
calling thread and its ~40 worker threads to SCHED_FIFO priority 99 when the encoder opens.
A recorder at that priority preempts the simulator, the policy server and the safety
watchdog, and every process it starts inherits it (a test that started CPU hogs from such a
process froze the machine). Each case runs in a fresh interpreter, so this test process is
never switched itself.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("av")

PROBE = r"""
import os, sys, threading
import numpy as np
from pathlib import Path
from tether.core.data.video import VideoEncoder, pick_codec
RT = {os.SCHED_FIFO, os.SCHED_RR}

def realtime_threads():
    out = []
    for t in os.listdir("/proc/self/task"):
        try:
            if os.sched_getscheduler(int(t)) in RT:
                out.append(int(t))
        except OSError:
            pass
    return out

deliberate = None
if sys.argv[1] == "deliberate":  # a thread the user made real-time on purpose keeps it
    ready, done = threading.Event(), threading.Event()
    def rt_thread():
        global deliberate
        deliberate = threading.get_native_id()
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
        ready.set(); done.wait()
    threading.Thread(target=rt_thread, daemon=True).start(); ready.wait()

codec = pick_codec("libsvtav1")
if sys.argv[1] == "raw":  # what the encoder does unguarded
    import av
    c = av.open(sys.argv[2], "w", format="mp4")
    s = c.add_stream(codec, rate=30); s.width = s.height = 64; s.pix_fmt = "yuv420p"
    for p in s.encode(av.VideoFrame.from_ndarray(np.zeros((64, 64, 3), np.uint8), format="rgb24")):
        c.mux(p)
else:
    e = VideoEncoder(Path(sys.argv[2]), 30, 64, 64, codec)
    for i in range(4):
        e.add(np.full((64, 64, 3), 40 * i, np.uint8))
    e.close()
rt = realtime_threads()
print(codec, len(rt), os.sched_getscheduler(0), sorted(set(rt) - {deliberate}), deliberate in rt)
"""


def _probe(mode: str, tmp_path) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, mode, str(tmp_path / f"{mode}.mp4")],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "SVT_LOG": "1"},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip().split(maxsplit=4)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux scheduling policies")
def test_the_encoder_leaves_no_thread_real_time(tmp_path):
    codec, n_rt, main_policy, others, _ = _probe("guarded", tmp_path)
    assert n_rt == "0" and main_policy == str(os.SCHED_OTHER), (codec, n_rt, others)


@pytest.mark.skipif(os.geteuid() != 0, reason="only a privileged process can be switched")
def test_unguarded_svt_av1_would_switch_threads_to_fifo(tmp_path):
    """The reason for the guard (so the guard test above can fail): as root, the bare
    encoder turns the calling thread and its workers real-time."""
    codec, n_rt, main_policy, _, _ = _probe("raw", tmp_path)
    if codec != "libsvtav1":
        pytest.skip(f"this FFmpeg encodes with {codec}, not SVT-AV1")
    assert int(n_rt) > 1 and main_policy == str(os.SCHED_FIFO)


@pytest.mark.skipif(os.geteuid() != 0, reason="setting SCHED_FIFO needs privileges")
def test_a_deliberately_real_time_thread_stays_real_time(tmp_path):
    _, _, main_policy, others, kept = _probe("deliberate", tmp_path)
    assert main_policy == str(os.SCHED_OTHER) and others == "[]" and kept == "True"
