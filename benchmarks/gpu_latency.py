"""Latency of every shipped exported model at batch 1 on the CPU, CUDA and TensorRT, side by
side in one run: onnxruntime's CPU (one thread), CUDA and TensorRT (fp16, engine cache in a
temporary folder, built before timing) execution providers, the same inputs (random, of
model.json's shapes). What a policy server runs with `--provider cpu|cuda|tensorrt`.

Needs an NVIDIA GPU and onnxruntime-gpu (with TensorRT 10 for the TensorRT column). Without
them it writes a result that says it was skipped and why, and keeps an earlier GPU result
if one is in benchmarks/results/gpu_latency.json (a CPU machine's `make bench` does not
erase what a GPU machine measured). Writes benchmarks/results/gpu_latency.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS, write_result  # noqa: E402

from tether.core.config import RuntimeConfig  # noqa: E402
from tether.policies.runtime import FORMAT, open_session  # noqa: E402
from tether.policies.tensorrt import example_feeds  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PROVIDERS = ("cpu", "cuda", "tensorrt")


def shipped_models() -> list[Path]:
    """Every models/<name>/model.onnx with a tether-onnx/1 contract (residual folders: their
    base graph, base/model.onnx)."""
    out = []
    for contract in sorted(ROOT.glob("models/*/model.json")) + sorted(
        ROOT.glob("models/*/base/model.json")
    ):
        meta = json.loads(contract.read_text())
        if meta.get("format") == FORMAT and (contract.parent / "model.onnx").is_file():
            out.append(contract.parent / "model.onnx")
    return out


def gpu_missing() -> str | None:
    """Why there is nothing to measure here (None: a GPU provider is present)."""
    import onnxruntime as ort

    have = ort.get_available_providers()
    if "CUDAExecutionProvider" not in have:
        return (
            f"no GPU execution provider in this onnxruntime ({', '.join(have)}): needs an "
            "NVIDIA GPU, onnxruntime-gpu and, for the TensorRT column, TensorRT 10"
        )
    return None


def time_session(session: Any, feeds: dict[str, np.ndarray], runs: int) -> dict[str, float]:
    out = session.get_outputs()[0].name
    for _ in range(max(3, runs // 10)):  # warm-up (TensorRT builds its engine on the first)
        session.run([out], feeds)
    ms = []
    for _ in range(runs):
        t0 = time.perf_counter()
        session.run([out], feeds)
        ms.append((time.perf_counter() - t0) * 1e3)
    return {"p50": float(np.percentile(ms, 50)), "p99": float(np.percentile(ms, 99))}


def measure(model: Path, runs: int, cache: Path) -> dict[str, Any]:
    meta = json.loads((model.parent / "model.json").read_text())
    feeds = example_feeds(meta)
    case: dict[str, Any] = {"model": str(model.parent.relative_to(ROOT)), "providers": {}}
    ref = None
    for name in PROVIDERS:
        runtime = RuntimeConfig(provider=name, trt_cache=cache / model.parent.name)
        try:
            t0 = time.perf_counter()
            session, choice = open_session(model, 1, runtime)
            got = np.asarray(session.run(None, feeds)[0])  # TensorRT: builds the engine
            first_s = time.perf_counter() - t0
        except Exception as exc:  # a provider missing here is a result, not a crash
            case["providers"][name] = {"error": str(exc)}
            continue
        if ref is None:
            ref = got
        case["providers"][name] = {
            "latency_ms": time_session(session, feeds, runs),
            "first_call_s": round(first_s, 2),
            "max_abs_diff_vs_cpu": float(np.abs(got - ref).max()),
            "runs_on": choice.used,
        }
    return case


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=500)
    args = ap.parse_args()
    why = gpu_missing()
    if why is not None:
        old = RESULTS / "gpu_latency.json"
        if old.is_file() and json.loads(old.read_text()).get("cases"):
            print(f"gpu_latency: skipped ({why}); kept the GPU result in {old}")
            return 0
        print(f"gpu_latency: skipped: {why}")
        write_result("gpu_latency", {"skipped": why, "cases": []})
        return 0
    import onnxruntime as ort

    with tempfile.TemporaryDirectory() as tmp:
        cases = [measure(m, args.runs, Path(tmp)) for m in shipped_models()]
    write_result(
        "gpu_latency",
        {
            "how": "onnxruntime at batch 1, one intra-op thread, random inputs of model.json's "
            f"shapes, {args.runs} runs after warm-up; TensorRT: fp16, engine built first",
            "onnxruntime": ort.__version__,
            "available_providers": ort.get_available_providers(),
            "cases": cases,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
