"""Latency of an exported base + residual, served two ways (one thread, onnxruntime only):

- ``two_graphs`` (what `tether export` writes): the base graph once per chunk, the residual
  graph at every control step on the latest observation and the base's row (plus, in tcp
  space, the numpy map of the TCP motion to the joints, ``tcp_map``);
- ``fused``: one graph holding both (the base's inputs in, this step's action out), which a
  per-step residual has to run at every control step.

Used to choose the export layout (docs/residual_rl.md); torch-free.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from tether.policies.residual.serve import read_residual_contract


def fuse(folder: Path, out: Path) -> Path:
    """One ONNX graph: base graph -> (latest observation frames, row 0) -> residual graph.
    Inputs: the base's; output ``action`` (1, A)."""
    import onnx
    from onnx import compose, helper, numpy_helper

    folder, meta = read_residual_contract(folder)
    base_dir = folder / meta["base"]["model"]
    base = onnx.load(str(base_dir / "model.onnx"))
    res = onnx.load(str(folder / meta["residual"]["model"]))
    keys = [i["name"] for i in meta["residual"]["inputs"] if i["name"] != "base_action"]
    g = base.graph
    out_name = g.output[0].name
    g.initializer.append(numpy_helper.from_array(np.array(-1, np.int64), "fuse_last"))
    g.initializer.append(numpy_helper.from_array(np.array(0, np.int64), "fuse_first"))
    for k in keys:  # the latest frame of a stacked (1, T, n) input
        g.node.append(helper.make_node("Gather", [k, "fuse_last"], [f"{k}_latest"], axis=1))
        g.output.append(helper.make_tensor_value_info(f"{k}_latest", onnx.TensorProto.FLOAT, None))
    g.node.append(helper.make_node("Gather", [out_name, "fuse_first"], ["row0"], axis=1))
    g.output.append(helper.make_tensor_value_info("row0", onnx.TensorProto.FLOAT, None))
    io_map = [(f"{k}_latest", k) for k in keys] + [("row0", "base_action")]
    res.ir_version = base.ir_version
    fused = compose.merge_models(base, res, io_map=io_map, prefix2="res_")
    out_res = "res_" + str(meta["residual"]["outputs"][0]["name"])  # action, or residual (tcp)
    keep = [o for o in fused.graph.output if o.name == out_res]
    del fused.graph.output[:]
    fused.graph.output.extend(keep)
    out.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(fused, str(out))
    return out


def _session(path: Path) -> Any:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    return ort.InferenceSession(str(path), sess_options=opts, providers=["CPUExecutionProvider"])


def _stats(samples: list[float]) -> dict[str, float]:
    x = np.asarray(samples) * 1e3
    return {"p50_ms": float(np.percentile(x, 50)), "p99_ms": float(np.percentile(x, 99)),
            "mean_ms": float(x.mean())}  # fmt: skip


def measure(folder: Path, steps: int = 400, execute_every: int = 26) -> dict[str, Any]:
    """Per-call latency of the base graph, the residual graph and the fused graph, and the
    mean cost per control step of each layout (the base replanning every
    ``execute_every`` steps: 8 rows of 33 ms at 100 Hz for the shipped lift model)."""
    folder, meta = read_residual_contract(folder)
    base_dir = folder / meta["base"]["model"]
    import json

    bmeta = json.loads((base_dir / "model.json").read_text())
    g = np.random.default_rng(0)
    base_feeds = {
        i["name"]: g.standard_normal([int(s) for s in i["shape"]]).astype(np.float32)
        for i in bmeta["inputs"]
    }
    res_feeds = {
        i["name"]: g.standard_normal([int(s) for s in i["shape"]]).astype(np.float32)
        for i in meta["residual"]["inputs"]
    }
    fused_path = fuse(folder, folder / "fused_measure.onnx")
    sessions = {
        "base": (_session(base_dir / "model.onnx"), base_feeds),
        "residual": (_session(folder / meta["residual"]["model"]), res_feeds),
        "fused": (_session(fused_path), base_feeds),
    }
    out: dict[str, Any] = {}
    for name, (sess, feeds) in sessions.items():
        for _ in range(20):
            sess.run(None, feeds)
        samples = []
        for _ in range(steps):
            t = time.perf_counter()
            sess.run(None, feeds)
            samples.append(time.perf_counter() - t)
        out[name] = _stats(samples)
    fused_path.unlink()
    per_step_two = out["residual"]["mean_ms"] + out["base"]["mean_ms"] / execute_every
    space_meta = meta["residual"].get("space")
    if space_meta and space_meta.get("space") == "tcp":
        # the TCP motion -> joints map the runtime adds at every step (numpy, space.py)
        from tether.core import registry
        from tether.policies.residual.space import space_from_meta

        spec = registry.load("robot", meta["robot"]).spec(control_hz=float(meta["control_hz"]))
        space = space_from_meta(spec, space_meta)
        mid = (spec.action.low_array() + spec.action.high_array()) / 2
        rows = mid + 0.1 * g.standard_normal((steps, mid.shape[0]))
        motion = space.limit * g.uniform(-1, 1, (steps, space.dim))
        samples = []
        for row, r in zip(rows, motion, strict=True):
            t = time.perf_counter()
            space.to_joint(row, r)
            samples.append(time.perf_counter() - t)
        out["tcp_map"] = _stats(samples)
        per_step_two += out["tcp_map"]["mean_ms"]
    out["per_control_step_mean_ms"] = {
        "two_graphs": per_step_two,
        "fused": out["fused"]["mean_ms"],
    }
    return out
