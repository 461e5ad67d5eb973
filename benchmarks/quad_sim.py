"""Quadrotor simulator throughput and the cost of each layer above the physics engine.

Measured side by side in one run (this machine is shared and noisy, so the engine layers are
timed in interleaved blocks and the median block is kept):
- BatchedHoverEnv (numpy, RK4, 5 physics steps of 2 ms per control step) at N drones:
  drone control steps per second;
- per engine (PyBullet, MuJoCo; one Crazyflie, 100 Hz control, 2 ms physics, rotor_rpm):
  ``raw``      a hand-written loop on the engine alone: per physics step apply the four
               rotor forces and the yaw torque of a fixed rpm, step (no model, no checks);
  ``backend``  the SimBackend, ``backend.step(rpm)``: action checks, motor lag, aero loads
               from the state per physics step, task scoring, observation;
  ``gym``      ``tether.sim.make_env(...).step(a)``: the gymnasium wrapper on that backend.
  ``wrapper_overhead_pct`` = gym vs backend, the median over blocks of the time ratio of a
  gym block to its neighbouring backend block (target <= 10 %); ``backend_over_raw`` says
  what the SimBackend layer (the drone model in Python, task scoring) costs over the bare
  engine.
Writes benchmarks/results/quad_sim.json.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from common import write_result  # noqa: E402

from tether.core.config import load_config  # noqa: E402
from tether.robots.crazyflie.robot import CRAZYFLIE  # noqa: E402
from tether.sim.quadrotor.batched_env import BatchedHoverEnv  # noqa: E402

EXPERIMENT = REPO / "configs/experiments/quad_pid_hover.yaml"
WRAPPER_TARGET_PCT = 10.0


def _rate(fn: Callable[[], Any], steps: int) -> float:
    """Calls of ``fn`` per second over ``steps`` calls (after 10 warm-up calls)."""
    for _ in range(10):
        fn()
    t0 = time.perf_counter()
    for _ in range(steps):
        fn()
    return steps / (time.perf_counter() - t0)


def batched(n: int, steps: int) -> dict[str, Any]:
    env = BatchedHoverEnv(n, seed=0)
    env.reset()
    action = np.zeros((n, 4))
    hz = _rate(lambda: env.step(action), steps)
    return {"drones": n, "control_steps_per_s": hz, "drone_steps_per_s": hz * n}


def _raw_pybullet() -> tuple[Callable[[], None], Callable[[], None]]:
    import pybullet as pb

    from tether.robots.crazyflie.robot import ROBOT

    urdf = ROBOT.asset(ROBOT.pybullet.urdf)
    cid = pb.connect(pb.DIRECT)
    pb.setGravity(0, 0, -9.81, physicsClientId=cid)
    pb.setTimeStep(0.002, physicsClientId=cid)
    body = pb.loadURDF(
        str(urdf), (0, 0, 1), flags=pb.URDF_USE_INERTIA_FROM_FILE, physicsClientId=cid
    )
    pb.changeDynamics(body, -1, linearDamping=0, angularDamping=0, physicsClientId=cid)
    f = CRAZYFLIE.kf * CRAZYFLIE.hover_rpm**2
    rotors = CRAZYFLIE.rotor_positions().tolist()

    def step() -> None:
        for _ in range(5):
            for r in rotors:
                pb.applyExternalForce(body, -1, (0, 0, f), r, pb.LINK_FRAME, physicsClientId=cid)
            pb.applyExternalTorque(body, -1, (0, 0, 0.0), pb.WORLD_FRAME, physicsClientId=cid)
            pb.stepSimulation(physicsClientId=cid)

    return step, lambda: pb.disconnect(physicsClientId=cid)


def _raw_mujoco() -> tuple[Callable[[], None], Callable[[], None]]:
    import mujoco

    from tether.robots.crazyflie.robot import ROBOT
    from tether.sim.mujoco.quadrotor import scene_xml

    xml = scene_xml(ROBOT.asset(ROBOT.mujoco.scene), 1, 0.002, ROBOT.mujoco)
    model = mujoco.MjModel.from_xml_string(xml)
    data = mujoco.MjData(model)
    body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, "cf0")
    data.xfrc_applied[body, 2] = 4 * CRAZYFLIE.kf * CRAZYFLIE.hover_rpm**2

    def step() -> None:
        for _ in range(5):
            data.xfrc_applied[body, 2] = 4 * CRAZYFLIE.kf * CRAZYFLIE.hover_rpm**2
            mujoco.mj_step(model, data)

    return step, lambda: None


def engine_layers(engine: str, blocks: int, block_steps: int) -> dict[str, Any]:
    """Raw engine, backend and gym steps, interleaved block by block (so load changes hit
    all three alike); rates from the median block of each."""
    from tether.sim import make_env

    cfg = load_config(
        EXPERIMENT, [f"sim.type={engine}", "sim.cameras=[]", "task.max_duration_s=1e6"]
    )
    env = make_env(cfg)
    backend = env.backend
    rpm = np.full(4, CRAZYFLIE.hover_rpm)
    zero = np.zeros(4, dtype=np.float32)
    raw, close_raw = _raw_pybullet() if engine == "pybullet" else _raw_mujoco()
    calls: dict[str, Callable[[], Any]] = {
        "raw": raw,
        "backend": lambda: backend.step(rpm),
        "gym": lambda: env.step(zero),
    }
    times: dict[str, list[float]] = {k: [] for k in calls}
    try:
        for fn in calls.values():  # warm-up
            for _ in range(10):
                fn()
        for b in range(blocks):
            # alternate the order so neither layer always runs right after the other
            order = list(calls.items()) if b % 2 == 0 else list(reversed(calls.items()))
            for name, fn in order:
                # every block starts from the same hovering start (the hover task's seed 0)
                env.reset(seed=0)
                t0 = time.perf_counter()
                for _ in range(block_steps):
                    fn()
                times[name].append((time.perf_counter() - t0) / block_steps)
    finally:
        env.close()
        close_raw()
    rate = {k: 1.0 / float(np.median(v)) for k, v in times.items()}
    # per block pair, so load drifts between blocks cancel
    ratio = np.asarray(times["gym"]) / np.asarray(times["backend"])
    return {
        "engine": engine,
        "control_hz": cfg.sim.control_hz,
        "physics_steps_per_control_step": backend.substeps,
        "blocks": blocks,
        "block_steps": block_steps,
        "raw_steps_per_s": rate["raw"],
        "backend_steps_per_s": rate["backend"],
        "gym_steps_per_s": rate["gym"],
        "wrapper_overhead_pct": 100.0 * (float(np.median(ratio)) - 1.0),
        "wrapper_overhead_pct_p25_p75": [
            100.0 * (float(np.percentile(ratio, q)) - 1.0) for q in (25, 75)
        ],
        "backend_over_raw": rate["raw"] / rate["backend"],
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=300, help="batched env: control steps at N=1")
    p.add_argument("--rounds", type=int, default=3, help="batched env: best of this many")
    p.add_argument("--blocks", type=int, default=80, help="engines: interleaved blocks")
    p.add_argument("--block-steps", type=int, default=25, help="engines: steps per block")
    p.add_argument("--drones", type=int, nargs="*", default=[1, 256, 4096])
    args = p.parse_args()
    rows = []
    for n in args.drones:
        r = max(
            (batched(n, max(20, args.steps * 16 // max(16, n))) for _ in range(args.rounds)),
            key=lambda x: x["drone_steps_per_s"],
        )
        rows.append(r)
        print(f"batched N={n:5d}: {r['drone_steps_per_s']:12.0f} drone-steps/s", flush=True)
    engines = []
    for engine in ("pybullet", "mujoco"):
        e = engine_layers(engine, args.blocks, args.block_steps)
        engines.append(e)
        print(
            f"{engine:9s} raw {e['raw_steps_per_s']:8.0f}/s  backend {e['backend_steps_per_s']:8.0f}/s"
            f"  gym {e['gym_steps_per_s']:8.0f}/s  wrapper overhead {e['wrapper_overhead_pct']:5.1f} %",
            flush=True,
        )
    targets = {
        f"{e['engine']}_wrapper_overhead_le_{WRAPPER_TARGET_PCT:.0f}pct": e["wrapper_overhead_pct"]
        <= WRAPPER_TARGET_PCT
        for e in engines
    }
    write_result(
        "quad_sim",
        {
            "note": "2 shared CPU cores: absolute rates are contended; engine-layer ratios "
            "come from interleaved blocks of one run (median block of each)",
            "batched": rows,
            "engines": engines,
            "targets": targets,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
