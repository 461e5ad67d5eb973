"""The closed loop in one process: observation -> policy -> SimRunner, no transport.

The baseline the ROS 2 loop is compared with (same runner, safety filter and policy), and
the in-process path of evaluation.
"""

from __future__ import annotations

import time
from typing import Any

from tether.core.config import ExperimentConfig
from tether.core.experiment import build_policy
from tether.core.timing import now_ns
from tether.core.types import IMAGE_PREFIX, Observation
from tether.sim.runner import SimRunner


def run_local_episode(
    cfg: ExperimentConfig,
    runner: SimRunner | None = None,
    policy: Any = None,
    realtime: bool = False,
) -> dict[str, Any]:
    """Run one episode (reset with the next seed) and return SimRunner.summary().

    ``realtime``: pace steps at control_hz on the wall clock (else as fast as possible).
    Cameras render at their fps in sim time and the policy sees the latest image, as over
    ROS 2; latency is the policy's obs -> action time.
    """
    runner = runner or SimRunner(cfg)
    policy = policy or build_policy(cfg, runner.spec)
    keys = policy.contract.get("observation_keys", ["state"])
    obs = runner.reset()
    policy.reset()
    images: dict[str, Any] = {}
    period_ns = round(runner.spec.dt * 1e9)
    next_tick = now_ns()
    while not runner.done:
        for cam in runner.cameras_due():
            images[IMAGE_PREFIX + cam.name] = runner.backend.render(cam.name)
        data = {k: obs[k] for k in ("state", "env_state") if k in obs}
        # other keys the policy's contract names (a mobile base's scan and base_pose)
        data.update({k: obs[k] for k in keys if k in obs and not k.startswith(IMAGE_PREFIX)})
        data.update({k: v for k, v in images.items() if k in keys})
        runner.latency.mark(obs.stamp_ns)
        chunk = policy.act(Observation(data, stamp_ns=obs.stamp_ns, instruction=obs.instruction))
        chunk.t0_ns = obs.stamp_ns
        runner.submit(chunk)
        runner.step()
        obs = runner.obs
        if realtime:
            next_tick += period_ns
            delay = next_tick - now_ns()
            if delay > 0:
                time.sleep(delay * 1e-9)
    return runner.summary()
