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
VARIANTS = {
    "state": ("configs/experiments/panda_lift_diffusion.yaml", {"state": [9], "env_state": [7]}),
    "image96": (
        "configs/experiments/panda_lift_diffusion_image.yaml",
        {"state": [9], "images/front": [96, 96, 3]},
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


def _time(fn: Any, n: int, warmup: int = 3) -> list[float]:
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1e3)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, nargs="+", default=[10, 100])
    ap.add_argument("--iters", type=int, default=100, help="timed calls at 10 steps")
    args = ap.parse_args()

    import torch

    from tether.policies.diffusion.checkpoint import build_net, synthetic_contract
    from tether.policies.diffusion.export import SampleGraph, example_inputs, export_onnx
    from tether.policies.runtime import OnnxModel

    torch.set_num_threads(1)
    torch.manual_seed(0)
    cases = []
    with tempfile.TemporaryDirectory() as tmp:
        for variant, (config, shapes) in VARIANTS.items():
            model_cfg = load_config(ROOT / config).train.model  # type: ignore[union-attr]
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
                t_ms = _pct(_time(run_torch, n))
                o_ms = _pct(_time(lambda m=model, f=feeds: m.run(f), n))
                case = {
                    "variant": variant,
                    "obs_keys": list(model_cfg.obs_keys),
                    "parameters": params,
                    "steps": steps,
                    "torch_eager_ms": t_ms,
                    "ort_cpu_1thread_ms": o_ms,
                    "speedup_p50": t_ms["p50"] / o_ms["p50"],
                }
                cases.append(case)
                print(
                    f"{variant:8s} {steps:3d} steps: torch p50 {t_ms['p50']:7.2f} p99 "
                    f"{t_ms['p99']:7.2f} ms | ORT p50 {o_ms['p50']:6.2f} p99 {o_ms['p99']:6.2f} "
                    f"ms | x{case['speedup_p50']:.1f}",
                    flush=True,
                )
    write_result(
        "policy_latency",
        {
            "what": "diffusion policy inference, batch 1, one CPU thread, inputs -> action chunk",
            "torch": torch.__version__,
            "onnxruntime": __import__("onnxruntime").__version__,
            "cases": cases,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
