"""Diffusion policy inference latency at batch 1: torch eager vs onnxruntime (CPU, 1 thread),
state-only and 96x96 image variants, 10 and 100 DDIM steps, side by side in one run.

The networks have the architecture of configs/experiments/panda_lift_diffusion*.yaml
(untrained weights: latency does not depend on them). Both runtimes get the same inputs;
the ORT model is the exported graph (normalization and the DDIM loop inside). Writes
benchmarks/results/policy_latency.json.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write_result  # noqa: E402

from tether.core.config import load_config  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
STATE = {"state": [9], "env_state": [7]}
IMAGE = {"state": [9], "images/front": [96, 96, 3]}
# name -> (experiment, overrides, observation shapes)
VARIANTS: dict[str, tuple[str, list[str], dict[str, list[int]]]] = {
    "state_unet": ("configs/experiments/panda_lift_diffusion.yaml", [], STATE),
    "state_mlp": ("configs/experiments/panda_lift_diffusion_mlp.yaml", [], STATE),
    "image96_unet": ("configs/experiments/panda_lift_diffusion_image.yaml", [], IMAGE),
    "image96_mlp": (
        "configs/experiments/panda_lift_diffusion_image.yaml",
        ["train.model.denoiser=mlp"],
        IMAGE,
    ),
}


def _pct(samples: list[float]) -> dict[str, float]:
    a = np.asarray(samples)
    return {
        "p50": float(np.percentile(a, 50)),
        "p99": float(np.percentile(a, 99)),
        "mean": float(a.mean()),
        "n": len(a),
    }


def _time(fn: Any, n: int, warmup: int = 3) -> tuple[list[float], list[float]]:
    """Wall-clock and this thread's CPU time (ms) per call. With one intra-op thread both
    runtimes compute on the calling thread, so CPU time is the latency the call would have
    on an idle core: the number to read on a shared machine."""
    for _ in range(warmup):
        fn()
    wall, cpu = [], []
    for _ in range(n):
        t, c = time.perf_counter(), time.thread_time()
        fn()
        cpu.append((time.thread_time() - c) * 1e3)
        wall.append((time.perf_counter() - t) * 1e3)
    return wall, cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, nargs="+", default=[10, 100])
    ap.add_argument("--iters", type=int, default=100, help="timed calls at 10 steps")
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    args = ap.parse_args()

    import torch

    from tether.policies.diffusion.checkpoint import build_net, synthetic_contract
    from tether.policies.diffusion.export import SampleGraph, example_inputs, export_onnx
    from tether.policies.runtime import OnnxModel

    torch.set_num_threads(1)
    torch.manual_seed(0)
    cases = []
    with tempfile.TemporaryDirectory() as tmp:
        for variant in args.variants:
            config, overrides, shapes = VARIANTS[variant]
            exp = load_config(ROOT / config, overrides)
            model_cfg = exp.train.model  # type: ignore[union-attr]
            contract = synthetic_contract(model_cfg, shapes)
            net = build_net(contract).eval()
            params = sum(p.numel() for p in net.parameters())
            for steps in args.steps:
                n = max(10, args.iters * 10 // steps)
                x = example_inputs(net, contract)
                graph = SampleGraph(net, steps).eval()

                def run_torch(graph: Any = graph, x: Any = x) -> None:
                    with torch.inference_mode():
                        graph(*x)

                path = export_onnx(net, contract, Path(tmp) / f"{variant}_{steps}", steps)
                model = OnnxModel(path, threads=1, providers=["cpu"])
                feeds = {
                    i["name"]: t.numpy() for i, t in zip(model.contract["inputs"], x, strict=True)
                }
                t_wall, t_cpu = _time(run_torch, n)
                o_wall, o_cpu = _time(lambda m=model, f=feeds: m.run(f), n)
                t_ms, o_ms = _pct(t_cpu), _pct(o_cpu)
                case = {
                    "variant": variant,
                    "denoiser": model_cfg.denoiser,
                    "obs_keys": list(model_cfg.obs_keys),
                    "parameters": params,
                    "steps": steps,
                    # thread CPU time per call (see _time); wall clock below
                    "torch_eager_ms": t_ms,
                    "ort_cpu_1thread_ms": o_ms,
                    "torch_eager_wall_ms": _pct(t_wall),
                    "ort_cpu_1thread_wall_ms": _pct(o_wall),
                    "speedup_p50": t_ms["p50"] / o_ms["p50"],
                }
                cases.append(case)
                print(
                    f"{variant:12s} {steps:3d} steps (CPU ms): torch p50 {t_ms['p50']:7.2f} p99 "
                    f"{t_ms['p99']:7.2f} ms | ORT p50 {o_ms['p50']:6.2f} p99 {o_ms['p99']:6.2f} "
                    f"ms | x{case['speedup_p50']:.1f}",
                    flush=True,
                )
    write_result(
        "policy_latency",
        {
            "what": "diffusion policy inference, batch 1, one CPU thread, inputs -> action chunk; "
            "*_ms: CPU time of the calling thread, *_wall_ms: wall clock (machine shared)",
            "load_avg_1m_end": __import__("os").getloadavg()[0],
            "torch": torch.__version__,
            "onnxruntime": __import__("onnxruntime").__version__,
            "cases": cases,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
