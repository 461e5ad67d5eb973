"""The VLA (issue #16) on the multi-task table scene: the shipped language-conditioned policy
as a user evaluates it (docs/vla.md).

In one run, on seeds no training used (1000 on; the demonstrations are seeds 0-204):
- success per sub-task, ONNX in process, with the training phrasings and with the held-out
  paraphrases (`tether eval models/panda_multitask_vla task.subtasks=[<s>]
  task.phrasing=train|heldout`), and the held-out ones again with the instruction's
  embedding as the encoder gives it, not anchored to the training wordings
  (`policy.text_anchor=raw`, docs/vla.md);
- the instruction-following check: the same scenes (seeds) under "lift the red cube" and
  "lift the blue cube": the seeds where both end in their own correct outcome;
- over ROS 2 (`tether eval --ros`, the graph `tether up` runs, chunked), a few episodes per
  sub-task with a fixed instruction (what `tether demo --instruction` does);
- latency with one onnxruntime thread: one chunk with both images (p50 / p99), and the text
  encoder once per new instruction;
- the training run's wall clock (the model folder's train.json);
- when a VLA residual is shipped (`tether finetune
  configs/experiments/panda_multitask_vla_residual.yaml`, exported to
  models/panda_multitask_vla_residual; none is now): the VLA alone and VLA + residual on the
  sub-task it was fine-tuned on (its model.json), the same seeds, in process and over ROS 2,
  and the fine-tuning run's summary (model.json's ``result``).

Writes benchmarks/results/vla.json (``--finetune-only``: the fine-tuning part alone;
``--latency-only``: the latency and the training record alone; each merged into the
existing file).

    python benchmarks/vla.py [--episodes N] [--ros-episodes N] [--follow N]
                             [--finetune-only | --latency-only]
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

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from common import write_result  # noqa: E402

from tether.cli.train import EvalOptions  # noqa: E402
from tether.policies.evaluation import evaluate_model  # noqa: E402

SEED = 1000
MODEL = REPO / "models" / "panda_multitask_vla"
RESIDUAL = REPO / "models" / "panda_multitask_vla_residual"
SUBTASKS = ("lift_red", "lift_blue", "push_green", "place_blue")
FOLLOW = ("lift the red cube", "lift the blue cube")


def evaluate(
    episodes: int, overrides: list[str], ros: bool = False, model: Path = MODEL
) -> dict[str, Any]:
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as out:
        opts = EvalOptions(
            episodes=episodes, seed=SEED, out=Path(out), video=False, ros=ros, overrides=overrides
        )
        summary = evaluate_model(model, opts)
    per = summary["per_episode"]
    return {
        "overrides": overrides,
        "mode": "ros2" if ros else "in_process",
        "episodes": summary["episodes"],
        "seeds": [SEED, SEED + episodes - 1],
        "successes": summary["successes"],
        "success_rate": summary["success_rate"],
        "failed_seeds": [e["seed"] for e in per if not e["success"]],
        "success_by_seed": {str(e["seed"]): bool(e["success"]) for e in per},
        "instructions": sorted({str(e.get("instruction")) for e in per}),
        "wall_s": round(time.monotonic() - t0, 1),
    }


def chunk_latency(reps: int = 300) -> dict[str, float]:
    """One chunk of the exported graph (both images, the instruction's embedding), one
    onnxruntime thread, batch 1; p50 / p99 ms."""
    from tether.policies.runtime import OnnxModel

    model = OnnxModel(MODEL, threads=1)
    g = np.random.default_rng(0)
    feeds = {}
    for spec in model.contract["inputs"]:
        shape = [int(s) for s in spec["shape"]]
        if spec.get("dtype") == "uint8":
            feeds[spec["name"]] = g.integers(0, 256, shape, dtype=np.uint8)
        else:
            feeds[spec["name"]] = g.standard_normal(shape).astype(np.float32)
    for _ in range(20):
        model.run(feeds)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        model.run(feeds)
        times.append((time.perf_counter() - t0) * 1e3)
    return {
        "p50": round(float(np.percentile(times, 50)), 3),
        "p99": round(float(np.percentile(times, 99)), 3),
    }


def text_latency(reps: int = 50) -> dict[str, float]:
    """The text encoder, once per new instruction (cache cleared each time), one thread."""
    from tether.policies.vla.text_encoder import TextEncoder

    enc = TextEncoder()
    times = []
    for i in range(reps + 5):
        enc._cache.clear()
        t0 = time.perf_counter()
        enc.encode("push the green cube onto the white square")
        if i >= 5:
            times.append((time.perf_counter() - t0) * 1e3)
    return {
        "p50": round(float(np.percentile(times, 50)), 3),
        "p99": round(float(np.percentile(times, 99)), 3),
    }


def finetune(episodes: int, ros_episodes: int) -> dict[str, Any] | None:
    """The shipped VLA + residual against the VLA alone on the fine-tuned sub-task (training
    phrasings, the same seeds); None when the residual is not shipped."""
    if not (RESIDUAL / "model.json").is_file():
        print(f"no {RESIDUAL.relative_to(REPO)}: the fine-tuning part is skipped", flush=True)
        return None
    meta = json.loads((RESIDUAL / "model.json").read_text())
    (sub,) = meta["experiment"]["task"]["subtasks"]  # the sub-task it was fine-tuned on
    ov = [f"task.subtasks=[{sub}]", "task.phrasing=train"]
    out: dict[str, Any] = {"subtask": sub, "model": str(RESIDUAL.relative_to(REPO))}
    for name, model in (("base", MODEL), ("base_plus_residual", RESIDUAL)):
        out[name] = evaluate(episodes, ov, model=model)
        print(f"{sub}, {name}: {out[name]['successes']}/{episodes}", flush=True)
    if ros_episodes:
        out["ros2"] = evaluate(ros_episodes, ov, True, model=RESIDUAL)
        print(f"{sub}, base + residual over ROS 2: {out['ros2']['successes']}", flush=True)
    out["training"] = meta.get("result")  # the fine-tuning run's summary (tether finetune)
    return out


def merge_into_result(**parts: Any) -> None:
    """Replace ``parts`` in the existing benchmarks/results/vla.json, the rest kept."""
    data = json.loads((REPO / "benchmarks" / "results" / "vla.json").read_text())
    for key in ("benchmark", "machine"):  # write_result adds them afresh
        data.pop(key, None)
    write_result("vla", {**data, **parts})


def training_record() -> dict[str, Any]:
    """The shipped model's training run, from its folder's train.json."""
    train = json.loads((MODEL / "train.json").read_text())
    keys = ("steps", "batch_size", "train_s", "episodes", "samples", "parameters")
    return {k: train.get(k) for k in keys}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--episodes", type=int, default=50, help="in-process episodes per case")
    ap.add_argument("--ros-episodes", type=int, default=5, help="episodes per sub-task over ROS 2")
    ap.add_argument("--follow", type=int, default=20, help="scenes of the instruction check")
    ap.add_argument(
        "--finetune-only", action="store_true", help="only the fine-tuning part, merged"
    )
    ap.add_argument(
        "--latency-only",
        action="store_true",
        help="only the latency and the training record (model folder's train.json), merged",
    )
    args = ap.parse_args()
    if args.latency_only:
        latency = {"chunk_with_images": chunk_latency(), "text_encoder": text_latency()}
        merge_into_result(latency_ms=latency, training=training_record())
        return 0
    if args.finetune_only:
        merge_into_result(finetune=finetune(args.episodes, args.ros_episodes))
        return 0
    cases, raw = [], []
    # the model as shipped (its instruction anchoring, model.json's text_anchor), then the
    # held-out paraphrases with the encoder's embedding fed as is (policy.text_anchor=raw)
    for phrasing, anchor, into in (
        ("train", [], cases),
        ("heldout", [], cases),
        ("heldout", ["policy.text_anchor=raw"], raw),
    ):
        for sub in SUBTASKS:
            ov = [f"task.subtasks=[{sub}]", f"task.phrasing={phrasing}", *anchor]
            into.append({"subtask": sub, "phrasing": phrasing, **evaluate(args.episodes, ov)})
            tag = f"{phrasing}{', raw' if anchor else ''}"
            print(f"{sub} ({tag}): {into[-1]['successes']}/{args.episodes}", flush=True)
    follow = {}
    for text in FOLLOW:
        follow[text] = evaluate(args.follow, [f"task.instruction={json.dumps(text)}"])
        print(f"'{text}': {follow[text]['successes']}/{args.follow}", flush=True)
    a, b = (follow[t]["success_by_seed"] for t in FOLLOW)
    both = [s for s in a if a[s] and b[s]]
    ros = []
    if args.ros_episodes:
        from tether.sim.tasks.multitask import phrasings

        for sub in SUBTASKS:
            text = phrasings(sub, "train")[0]
            ov = [f"task.instruction={json.dumps(text)}"]
            ros.append(
                {"subtask": sub, "instruction": text, **evaluate(args.ros_episodes, ov, True)}
            )
            print(f"{sub} over ROS 2: {ros[-1]['successes']}/{args.ros_episodes}", flush=True)
    mean = lambda p: float(np.mean([c["success_rate"] for c in cases if c["phrasing"] == p]))  # noqa: E731
    write_result(
        "vla",
        {
            "how": "tether eval models/panda_multitask_vla --episodes N --seed 1000 "
            "task.subtasks=[<s>] task.phrasing=train|heldout [--ros task.instruction=...]; "
            "latency: onnxruntime, one thread, batch 1",
            "model": str(MODEL.relative_to(REPO)),
            "text_anchor": json.loads((MODEL / "model.json").read_text()).get("text_anchor"),
            "cases": cases,
            "mean_success": {
                "train": round(mean("train"), 4),
                "heldout": round(mean("heldout"), 4),
                "heldout_raw": round(float(np.mean([c["success_rate"] for c in raw])), 4),
            },
            "heldout_raw_cases": raw,
            "instruction_following": {
                "instructions": list(FOLLOW),
                "scenes": args.follow,
                "both_correct": len(both),
                "seeds_both_correct": [int(s) for s in both],
                "each": {t: follow[t]["successes"] for t in FOLLOW},
            },
            "ros2": ros,
            "latency_ms": {"chunk_with_images": chunk_latency(), "text_encoder": text_latency()},
            "training": training_record(),
            "finetune": finetune(args.episodes, args.ros_episodes),
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
