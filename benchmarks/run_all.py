"""`make bench`: run every benchmark, then rebuild the README's performance table from the
JSON results in benchmarks/results/ (the table is never edited by hand)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
README = HERE.parent / "README.md"
BENCHMARKS = [
    "ros_loop.py",
    "backend_step.py",
    "recorder.py",
    "quad_sim.py",
    "policy_latency.py",
    "quad_train.py",
    "drone_loop.py",
    "safety.py",
    "shipped_models.py",
    "residual_rl.py",
    "vla.py",
    "base_planner.py",
    "swarm.py",
    "gpu_latency.py",
]
START, END = "<!-- bench:start -->", "<!-- bench:end -->"


def _ms(x: float) -> str:
    return f"{x:.2f}"


def ros_loop_table(data: dict) -> list[str]:
    rows = [
        "| loop (Panda lift, MuJoCo) | ROS 2 rate (Hz) | ROS 2 p50 / p99 latency (ms) "
        "| in-process rate (Hz) | in-process p50 / p99 (ms) | rate ratio ROS / in-process |",
        "|---|---|---|---|---|---|",
    ]
    for c in data["cases"]:
        ros, loc = c["ros"], c["in_process"]
        target = f"{c['target_hz']} Hz wall clock" if c["target_hz"] else "as fast as possible"
        what = f"{c['case']}: {'96x96 camera @30 Hz, ' if c['camera'] else 'state only, '}{target}"
        if c["policy"] != "hold":
            what += f", {c['policy']}"
        rows.append(
            f"| {what} | {ros['achieved_hz']:.0f} | {_ms(ros['latency_ms']['p50'])} / "
            f"{_ms(ros['latency_ms']['p99'])} | {loc['achieved_hz']:.0f} | "
            f"{_ms(loc['latency_ms']['p50'])} / {_ms(loc['latency_ms']['p99'])} | "
            f"{c['ratio_rate_ros_over_local']:.2f} |"
        )
    for f in data.get("floors", {}).values():
        rows.append(
            f"| floor: bare rclpy, two processes, JointState -> JointTrajectory, "
            f"{f['executor']} executor | {f['rate_hz']:.0f} | {_ms(f['latency_ms']['p50'])} / "
            f"{_ms(f['latency_ms']['p99'])} | | | |"
        )
    for hz, f in (data.get("paced_floors") or {}).items():
        rows.append(
            f"| floor as above, {f['executor']} executor, paced at {hz} Hz by the wall clock "
            f"(both sides idle between steps, as in the timer cases) | {f['rate_hz']:.0f} | "
            f"{_ms(f['latency_ms']['p50'])} / {_ms(f['latency_ms']['p99'])} | | | |"
        )
    padded = data.get("padded_floor")
    if padded:
        sim_us, policy_us = padded["work_us"]
        rows.append(
            f"| floor as above, {padded['executor']} executor, padded with busy work per "
            f"message as long as Tether's work per step in-process (sim side {sim_us:.0f} us, "
            f"policy side {policy_us:.0f} us) | {padded['rate_hz']:.0f} | "
            f"{_ms(padded['latency_ms']['p50'])} / {_ms(padded['latency_ms']['p99'])} | | | |"
        )
    if "floor_ratios" in data:
        r, raw = data["floor_ratios"], data["raw_engine"]
        rows.append(
            f"| state_max against the {r['leanest_floor']} floor + the raw engine step "
            f"({raw['mean_ms']:.3f} ms): period ratio / p99 ratio (targets <= "
            f"{r['target_ratio_period']} / {r['target_ratio_p99']}) | "
            f"{_ms(r['ratio_period'])} | {_ms(r['ratio_p99'])} | | | |"
        )
        if "padded_floor_over_floor_plus_engine" in r:
            rows.append(
                "| the padded floor against the same (the period if Tether's work cost in the "
                "loop what it costs back to back) / state_max against the padded floor | "
                f"{_ms(r['padded_floor_over_floor_plus_engine'])} | "
                f"{_ms(r['loop_over_padded_floor'])} | | | |"
            )
        timers = [
            f"{name} rate {r[f'{name}_rate_error'] * 100:+.1f} %, p99 "
            f"{r[f'{name}_p99_over_floor_p99']:.2f}x the floor's"
            for name in ("state_500hz", "state_1khz")
            if f"{name}_rate_error" in r
        ]
        rows += [
            "",
            f"Against the {r['leanest_floor']} floor (issue #22's targets in brackets): "
            + "; ".join(timers)
            + " (rate within 1 %, p99 <= 1.5x); camera96_100hz p99 "
            f"{r['camera_100hz_p99_over_floor_p99']:.2f}x the floor's (<= 2.5x); camera "
            f"lockstep at {r['camera_over_state_lockstep_rate'] * 100:.0f} % of the state-only "
            "lockstep rate (>= 80 %).",
        ]
        suffix = "_p99_over_paced_floor_p99"
        paced = [f"{k.removesuffix(suffix)} {v:.2f}x" for k, v in r.items() if k.endswith(suffix)]
        if paced:
            rows += [
                "",
                "p99 of each timer case over the p99 of the floor paced at its rate (what bare "
                "rclpy gets when both processes sleep between steps): " + "; ".join(paced) + ".",
            ]
    chunked = [c for c in data["cases"] if "chunk_executor" in c["ros"]]
    if chunked:
        parts = []
        for c in chunked:
            ros, ex = c["ros"], c["ros"]["chunk_executor"]
            lat = ex["inference_latency_ms"]
            parts.append(
                f"{c['case']}: {ros['stale_steps']} of {ros['steps']} steps found no row in "
                f"force (the watchdog held), the executor asked for {ex['chunks']} chunks "
                f"(request -> chunk p50 {lat['p50']:.2f} / p99 {lat['p99']:.2f} ms) with "
                f"{ex['underruns']} underrun(s)"
            )
        rows += [
            "",
            "The chunked path (`ros.chunked: true`, a chunk executor between the policy server "
            "and the sim bridge; its latency column is observation -> the row in force, a "
            "period or more by design): " + "; ".join(parts) + ".",
        ]
    hot = data.get("hot_path_us")
    if hot:
        text = (
            "Tether's work per lockstep step in-process (`hot_path_us`: the two nodes' callbacks "
            "fed each other's messages, no transport), mean: sim bridge "
            f"{hot['sim_bridge']['mean_us']:.0f} us (the engine step included), policy server "
            f"{hot['policy_server']['mean_us']:.0f} us back to back; "
            f"{hot['sim_bridge_after_idle']['mean_us']:.0f} us and "
            f"{hot['policy_server_after_idle']['mean_us']:.0f} us each after "
            f"{hot['idle_s'] * 1e6:.0f} us asleep, as each node waits for the other in the loop."
        )
        r = data.get("floor_ratios", {})
        if "floor_plus_work_after_idle_ms" in r:
            text += (
                f" The floor plus the work after a sleep: {r['floor_plus_work_after_idle_ms']:.3f}"
                f" ms per step; state_max's period is "
                f"{r['loop_over_floor_plus_work_after_idle']:.2f}x that."
            )
        rows += ["", text]
    m = data["machine"]
    rows.append("")
    rows.append(
        f"`benchmarks/results/ros_loop.json`, {m['date']}, {m['cpus']} CPUs, "
        f"load {m['load_avg_1m']:.1f}; latency = observation published -> action received "
        f"(ROS 2) or policy call (in-process); policy `hold` unless named."
    )
    return rows


def backend_step_table(d: dict) -> list[str]:
    rows = [
        "",
        "| MuJoCo Panda backend step vs the raw `mj_step` it wraps (cameras off) | physics "
        "steps per control step | raw p50 (ms) | backend p50 (ms) | ratio p50 / mean / "
        f"block median (target <= {d['target_ratio']}) |",
        "|---|---|---|---|---|",
    ]
    for c in d["cases"]:
        rows.append(
            f"| {c['task']} (`{c['experiment']}`, expert trajectory) | "
            f"{c['physics_steps_per_control_step']} | {c['raw']['p50_ms']:.4f} | "
            f"{c['backend']['p50_ms']:.4f} | {c['ratio_p50']:.2f} / {c['ratio_mean']:.2f} / "
            f"{c['ratio_block_median']:.2f} |"
        )
    m = d["machine"]
    rows += [
        "",
        f"`benchmarks/results/backend_step.json`, {m['date']}, {m['cpus']} CPUs, load "
        f"{m['load_avg_1m']:.1f}; the same trajectory replayed in interleaved blocks (the "
        "backend: action check, ctrl, the same mj_step, observation, reward and success).",
    ]
    return rows


def recorder_table(d: dict) -> list[str]:
    return [
        "",
        "| recorder (`benchmarks/results/recorder.json`) | value |",
        "|---|---|",
        f"| episode | {d['duration_sim_s']:.0f} s sim time, {d['cameras']} + state, {d['fps']} fps |",
        f"| frames expected / written / dropped | {d['frames_expected']} / {d['frames_written']} "
        f"/ {d['frames_dropped']} |",
        f"| recorder CPU | {d['recorder_cpu_percent_of_one_core']:.0f} % of one core |",
        f"| wall clock / sim control rate achieved | {d['wall_s']:.0f} s / "
        f"{d['sim_control_hz']:.0f} Hz (target 100) |",
        f"| dataset written | {d['dataset_bytes'] / 1e6:.1f} MB ({d['write_mb_per_s']:.2f} MB/s; "
        f"raw images arrive at {d['raw_image_mb_per_s']:.0f} MB/s) |",
    ]


def quad_sim_table(d: dict) -> list[str]:
    rows = [
        "",
        "| quadrotor sim (`benchmarks/results/quad_sim.json`) | steps/s | vs raw engine "
        "| make_env overhead |",
        "|---|---|---|---|",
    ]
    for b in d["batched"]:
        rows.append(
            f"| BatchedHoverEnv (numpy), {b['drones']} drones | "
            f"{b['drone_steps_per_s']:,.0f} drone-steps | | |"
        )
    for e in d["engines"]:
        rows.append(
            f"| {e['engine']}, 1 Crazyflie, SimBackend.step | {e['backend_steps_per_s']:,.0f} "
            f"| raw engine loop {e['raw_steps_per_s']:,.0f}/s ({e['backend_over_raw']:.1f}x faster) "
            f"| {e['wrapper_overhead_pct']:.1f} % (gym {e['gym_steps_per_s']:,.0f}/s; "
            f"target <= 10 %) |"
        )
    m = d["machine"]
    rows.append("")
    rows.append(
        f"{m['date']}, {m['cpus']} CPUs, load {m['load_avg_1m']:.1f}; control steps at 100 Hz "
        "with 5 physics steps of 2 ms each."
    )
    return rows


def policy_latency_table(d: dict) -> list[str]:
    rows = [
        "",
        "| diffusion policy, batch 1, 1 CPU thread | DDIM steps | torch eager p50 / p99 (ms) "
        "| ONNX Runtime p50 / p99 (ms) | speed-up (p50) |",
        "|---|---|---|---|---|",
    ]
    for c in d["cases"]:
        t, o = c["torch_eager_ms"], c["ort_cpu_1thread_ms"]
        rows.append(
            f"| {c['variant']} ({c['parameters'] / 1e6:.2f} M params) | {c['steps']} | "
            f"{_ms(t['p50'])} / {_ms(t['p99'])} | {_ms(o['p50'])} / {_ms(o['p99'])} | "
            f"{c['speedup_p50']:.1f}x |"
        )
    m = d["machine"]
    rows += [
        "",
        f"`benchmarks/results/policy_latency.json`, {m['date']}, load {m['load_avg_1m']:.1f}; "
        "CPU time of the calling thread per call (wall clock in the JSON; shared machine).",
    ]
    return rows


def quad_train_table(d: dict) -> list[str]:
    rows = [
        "",
        "| learning to hover (`benchmarks/results/quad_train.json`) | wall clock to the bar "
        "| env steps | success: numpy 2 ms / PyBullet / MuJoCo |",
        "|---|---|---|---|",
    ]
    for name, r in d["paths"].items():
        t, s = r["train"], r["success"]
        wall = (
            f"{t['wall_s_to_bar']:.0f} s" if t["solved"] else f"not reached in {t['wall_s']:.0f} s"
        )
        rates = " / ".join(f"{s[k]['success_rate']:.0%}" for k in ("batched", "pybullet", "mujoco"))
        rows.append(f"| {name} | {wall} | {t['env_steps']:,} | {rates} |")
    m = d["machine"]
    rows.append(
        f"\n{m['date']}, {m['cpus']} CPUs, load {m['load_avg_1m']:.1f}; bar: {d['target']['bar']}."
    )
    return rows


def safety_table(d: dict) -> list[str]:
    rows = [
        "",
        "| safety under faults (`benchmarks/results/safety.json`) | value |",
        "|---|---|",
    ]
    for robot, k in d["kills"].items():
        r = k["reaction_periods"]
        rows.append(
            f"| policy server killed {k['kills']}x, {k['robot']} ({robot}) at {k['control_hz']:g} Hz: safe "
            f"command within 2 periods | {k['safe_within_target']}/{k['kills']} (reaction "
            f"p50 / p99 / max {r['p50']:g} / {r['p99']:g} / {r['max']:g} periods) |"
        )
    for f in d["fuzz"].values():
        rows.append(
            f"| fuzzed `{f['topic']}`: sent / rejected / passed / unsafe at the simulator "
            f"| {f['sent']:,} / {f['rejected']:,} / {f['passed']:,} / {f['unsafe_at_backend']} |"
        )
    m = d["machine"]
    rows.append(f"\n{m['date']}, {m['cpus']} CPUs, load {m['load_avg_1m']:.1f}.")
    return rows


def drone_loop_table(d: dict) -> list[str]:
    rows = [
        "",
        f"| drone policy over ROS 2 (`benchmarks/results/drone_loop.json`; {d['policy']}) "
        "| commands (Hz) | obs -> command p50 / p99 (ms) |",
        "|---|---|---|",
    ]
    for c in d["cases"]:
        realtime = c["rate_mode"] == "realtime" and c.get("target_hz")
        target = f", target {c['target_hz']:g} Hz" if realtime else ""
        lat = c["latency_ms"]
        rows.append(
            f"| {c['rate_mode']}{target} | {c['achieved_hz']:.0f} | "
            f"{_ms(lat['p50'])} / {_ms(lat['p99'])} |"
        )
    m = d["machine"]
    rows.append(f"\n{m['date']}, {m['cpus']} CPUs, load {m['load_avg_1m']:.1f}.")
    return rows


def shipped_models_table(d: dict) -> list[str]:
    rows = [
        "",
        "| shipped model (`benchmarks/results/shipped_models.json`) | task | simulator "
        "| episodes (seeds) | success |",
        "|---|---|---|---|---|",
    ]
    for c in d["cases"]:
        failed = f"; fails {', '.join(map(str, c['failed_seeds']))}" if c["failed_seeds"] else ""
        rows.append(
            f"| `{c['model']}` (ONNX) | {c['task']} | {c['sim']} | {c['episodes']} "
            f"({c['seeds'][0]}-{c['seeds'][1]}) | {c['successes']}/{c['episodes']} "
            f"({100 * c['success_rate']:.0f} %{failed}) |"
        )
    m = d["machine"]
    rows += ["", f"{m['date']}, {m['cpus']} CPUs, load {m['load_avg_1m']:.1f}; {d['how']}."]
    return rows


def residual_rl_table(d: dict) -> list[str]:
    t = d["task"]
    rows = [
        "",
        "| residual RL, peg-in-hole (`benchmarks/results/residual_rl.json`) | mode "
        "| episodes (seeds) | success |",
        "|---|---|---|---|",
    ]
    for c in d["cases"]:
        what = "base (BC diffusion)" if "diffusion" in c["model"] else "base + residual"
        rows.append(
            f"| {what}: `{c['model']}` | {c['mode'].replace('_', '-')} | {c['episodes']} "
            f"({c['seeds'][0]}-{c['seeds'][1]}) | {c['successes']}/{c['episodes']} "
            f"({100 * c['success_rate']:.0f} %) |"
        )
    ceiling = d.get("scripted_residual")
    if ceiling:
        rows.append(
            f"| reference: base + a hand-written residual with the true poses, same space, bound "
            f"and hold | {ceiling['mode'].replace('_', '-')} | {ceiling['episodes']} "
            f"({ceiling['seeds'][0]}-{ceiling['seeds'][1]}) | "
            f"{ceiling['successes']}/{ceiling['episodes']} "
            f"({100 * ceiling['success_rate']:.0f} %) |"
        )
    earlier = [r for r in d["training"] if not r.get("on_shipped_base", True)]
    rows += [
        "",
        "| fine-tuning run on the shipped base (`models/panda_insert_residual/finetune_runs.json`) "
        "| env steps | wall clock | base | best eval | to 90 % | to 95 % |",
        "|---|---|---|---|---|---|---|",
    ]

    def reach(x: dict | None) -> str:
        return (
            f"{x['env_steps'] / 1e6:.2f} M steps, {x['wall_s'] / 60:.0f} min"
            if x
            else "not reached"
        )

    for r in d["training"]:
        if not r.get("on_shipped_base", True):
            continue
        what = r.get("what") or f"{r['algorithm']}, {r['reward']} reward"
        rows.append(
            f"| {what}{' (shipped)' if r['shipped'] else ''} | {r['env_steps'] / 1e6:.2f} M "
            f"| {r['wall_s'] / 60:.0f} min | {100 * r['base_success']:.0f} % "
            f"| {100 * r['best_eval_success']:.0f} % ({r['eval_episodes']} episodes) "
            f"| {reach(r['to_90'])} | {reach(r['to_95'])} |"
        )
    if earlier:
        best = max(r["best_eval_success"] for r in earlier)
        rows += [
            "",
            f"{len(earlier)} earlier runs on earlier bases (in the same file) reached at best "
            f"{100 * best:.0f} % in their evaluations.",
        ]
    lat = d["latency_ms"]
    m = d["machine"]
    tcp = (
        f" + the TCP-to-joint map {lat['tcp_map']['p50_ms']:.3f} / "
        f"{lat['tcp_map']['p99_ms']:.3f} ms"
        if "tcp_map" in lat
        else ""
    )
    rows += [
        "",
        f"Deployed model, one onnxruntime thread: base chunk p50 / p99 "
        f"{lat['base']['p50_ms']:.2f} / {lat['base']['p99_ms']:.2f} ms, residual per control "
        f"step {lat['residual']['p50_ms']:.3f} / {lat['residual']['p99_ms']:.3f} ms{tcp}, fused "
        f"alternative {lat['fused']['p50_ms']:.2f} / {lat['fused']['p99_ms']:.2f} ms per step. "
        f"Task: {t['type']}, clearance {t['clearance'] * 1000:.0f} mm total. "
        f"{m['date']}, {m['cpus']} CPUs, load {m['load_avg_1m']:.1f}; {d['how']}.",
    ]
    return rows


def vla_table(d: dict) -> list[str]:
    rows = [
        "",
        "| VLA, multi-task scene (`benchmarks/results/vla.json`): sub-task | training phrasings "
        "| held-out paraphrases | held-out, embedding not anchored | over ROS 2 (fixed "
        "instruction) |",
        "|---|---|---|---|---|",
    ]
    ros = {r["subtask"]: r for r in d.get("ros2", [])}
    for sub in dict.fromkeys(c["subtask"] for c in d["cases"]):
        cell = {}
        for c in d["cases"]:
            if c["subtask"] == sub:
                cell[c["phrasing"]] = f"{c['successes']}/{c['episodes']}"
        for c in d.get("heldout_raw_cases", []):
            if c["subtask"] == sub:
                cell["raw"] = f"{c['successes']}/{c['episodes']}"
        r = ros.get(sub)
        over_ros = f"{r['successes']}/{r['episodes']}" if r else "-"
        rows.append(
            f"| {sub} | {cell.get('train', '-')} | {cell.get('heldout', '-')} "
            f"| {cell.get('raw', '-')} | {over_ros} |"
        )
    raw_mean = (
        f"{100 * d['mean_success']['heldout_raw']:.0f} %"
        if "heldout_raw" in d["mean_success"]
        else "-"
    )
    anchor = (
        f"The instruction's embedding is anchored to the training wordings' (softmax of the "
        f"cosine over {d['text_anchor']}, model.json's `text_anchor`, docs/vla.md); the "
        f"not-anchored column feeds it as the encoder gives it. "
        if d.get("text_anchor")
        else ""
    )
    ms, f, lat, tr, m = (
        d["mean_success"],
        d["instruction_following"],
        d["latency_ms"],
        d["training"],
        d["machine"],
    )
    rows += [
        f"| **mean** | {100 * ms['train']:.0f} % | {100 * ms['heldout']:.0f} % | {raw_mean} | |",
        "",
        f"{anchor}Instruction following: of {f['scenes']} scenes, {f['both_correct']} end in the right "
        f"outcome under both '{f['instructions'][0]}' and '{f['instructions'][1]}'. Latency, one "
        f"onnxruntime thread: a chunk with both images p50 / p99 "
        f"{lat['chunk_with_images']['p50']:.2f} / {lat['chunk_with_images']['p99']:.2f} ms; the "
        f"text encoder per new instruction {lat['text_encoder']['p50']:.2f} / "
        f"{lat['text_encoder']['p99']:.2f} ms. Training: {tr['steps']} steps of {tr['batch_size']}, "
        f"{tr['train_s'] / 60:.0f} min, {tr['parameters'] / 1e6:.2f} M parameters. "
        f"{m['date']}, {m['cpus']} CPUs, load {m['load_avg_1m']:.1f}; seeds from 1000; {d['how']}.",
    ]
    return rows


def base_planner_table(d: dict) -> list[str]:
    rows = [
        "",
        "| local planners, Husky obstacle course (`benchmarks/results/base_planner.json`): "
        "engine, density | planner | success | collision | timeout | mean time / path of "
        "successes |",
        "|---|---|---|---|---|---|",
    ]
    for c in d["cases"]:
        tp = "-"
        if "mean_time_s" in c:
            tp = f"{c['mean_time_s']:.1f} s / {c['mean_path_length_m']:.1f} m"
        rows.append(
            f"| {c['engine']}, {c['level']} | {c['planner']} | {100 * c['success_rate']:.0f} % | "
            f"{100 * c['collision_rate']:.0f} % | {100 * c['timeout_rate']:.0f} % | {tp} |"
        )
    note = ""
    learned = d.get("learned")
    if learned:
        lat = learned["latency_ms"]
        note = (
            f" The learned planner (`{learned['model']}`, reading the odometry, wheels with the "
            f"IMU's heading, as `dwa_odometry` does; `dwa` and `base_expert` read the true pose, "
            f"`dwa_wheel_odometry` wheel odometry alone): per-step latency p50 / p99 "
            f"{lat['p50']:.3f} / {lat['p99']:.3f} ms on one onnxruntime thread"
        )
        tr = learned.get("training")
        if tr:
            note += f", trained in {tr['wall_s'] / 60:.0f} min ({tr['env_steps'] / 1e6:.1f} M env steps)"
        note += "."
    for r in d.get("ros", []):
        note += (
            f" Over ROS 2 (`tether eval --ros`, {r['engine']}, {r['level']}): "
            f"{r['successes']}/{r['episodes']} at the goal."
        )
    m = d["machine"]
    rows += [
        "",
        f"{d['episodes']} seeds per case from 1000, end at the first touch.{note} "
        f"{m['date']}, {m['cpus']} CPUs, load {m['load_avg_1m']:.1f}; {d['how']}.",
    ]
    return rows


def swarm_table(d: dict) -> list[str]:
    rows = [
        "",
        "| drone swarms, Crazyflies with downwash (`benchmarks/results/swarm.json`): scenario, "
        "drones | policy | all at goal | any collision | mean least separation | mean time to "
        "goal of successes |",
        "|---|---|---|---|---|---|",
    ]
    for c in d["cases"]:
        t = f"{c['mean_time_to_goal_s']:.1f} s" if "mean_time_to_goal_s" in c else "-"
        rows.append(
            f"| {c['scenario']}, {c['n']} ({c['episodes']} seeds) | {c['policy']} | "
            f"{100 * c['success_rate']:.0f} % | {100 * c['collision_rate']:.0f} % | "
            f"{c['mean_min_separation_m']:.2f} m | {t} |"
        )
    note = ""
    learned = d.get("learned")
    if learned:
        lat = learned["latency_ms"]
        one, full = lat["one_drone_7"], lat["swarm_16"]
        note = (
            f" The learned policy (`{learned['model']}`): one drone's query (itself and 6 "
            f"neighbours) p50 / p99 {one['p50']:.3f} / {one['p99']:.3f} ms, a 16-drone swarm "
            f"in one call {full['p50']:.3f} / {full['p99']:.3f} ms, one onnxruntime thread"
        )
        tr = learned.get("training")
        if tr:
            note += (
                f"; trained in {tr['wall_s'] / 60:.0f} min ({tr['env_steps'] / 1e6:.1f} M PPO "
                "agent decisions"
            )
            if tr.get("imitation_decisions"):
                note += f" after {tr['imitation_decisions'] / 1e6:.1f} M of imitation"
            note += ")"
        note += "."
    ros = d.get("ros_servers")
    if ros:
        a, b = ros["per_drone"], ros["batched"]
        note += (
            f" Over ROS 2 (`tether eval --ros`, {ros['drones']} drones, lockstep, a process per "
            f"node on these 2 CPUs): a policy server per drone {a['control_hz']:.0f} Hz, "
            f"obs->action p50 / p99 {a['latency_ms']['p50']:.1f} / {a['latency_ms']['p99']:.1f} ms; "
            f"one batched server {b['control_hz']:.0f} Hz, {b['latency_ms']['p50']:.1f} / "
            f"{b['latency_ms']['p99']:.1f} ms."
        )
        four = ros.get("swap_4")
        if four:
            runs = four["per_seed"]
            clean = sum(r["outcome"] == "success" for r in runs)
            seps = [r["min_separation_m"] for r in runs if r["min_separation_m"] is not None]
            note += (
                f" 4 namespaced drones, a server each: {clean} of {len(runs)} swaps all at goal "
                "without collision"
                + (f" (least separation {min(seps):.2f} m)" if seps else "")
                + "."
            )
    m = d["machine"]
    rows += [
        "",
        f"{d['engine']}, seeds from 1000, end at the first collision.{note} {m['date']}, "
        f"{m['cpus']} CPUs, load {m['load_avg_1m']:.1f}; {d['how']}.",
    ]
    return rows


def gpu_latency_table(d: dict) -> list[str]:
    if d.get("skipped"):
        return [
            "",
            "| GPU latency (`benchmarks/results/gpu_latency.json`) | |",
            "|---|---|",
            f"| not measured on the machine that ran `make bench` ({d['machine']['date']}) "
            f"| {d['skipped']} |",
        ]
    rows = [
        "",
        "| exported model, batch 1 (`benchmarks/results/gpu_latency.json`) | CPU p50 / p99 (ms) "
        "| CUDA p50 / p99 (ms) | TensorRT fp16 p50 / p99 (ms) |",
        "|---|---|---|---|",
    ]
    for c in d["cases"]:
        cells = []
        for name in ("cpu", "cuda", "tensorrt"):
            r = c["providers"].get(name, {})
            lat = r.get("latency_ms")
            cells.append(f"{_ms(lat['p50'])} / {_ms(lat['p99'])}" if lat else "-")
        rows.append(f"| {c['model']} | {' | '.join(cells)} |")
    rows += ["", f"{d['machine']['date']}; {d['how']}."]
    return rows


TABLES = [
    ("ros_loop.json", ros_loop_table),
    ("backend_step.json", backend_step_table),
    ("recorder.json", recorder_table),
    ("quad_sim.json", quad_sim_table),
    ("policy_latency.json", policy_latency_table),
    ("quad_train.json", quad_train_table),
    ("drone_loop.json", drone_loop_table),
    ("safety.json", safety_table),
    ("shipped_models.json", shipped_models_table),
    ("residual_rl.json", residual_rl_table),
    ("vla.json", vla_table),
    ("base_planner.json", base_planner_table),
    ("swarm.json", swarm_table),
    ("gpu_latency.json", gpu_latency_table),
]


def render_block() -> str:
    """The README's performance block (markers included) from benchmarks/results/*.json."""
    lines: list[str] = []
    for name, table in TABLES:
        path = HERE / "results" / name
        if path.exists():
            lines += table(json.loads(path.read_text()))
    return START + "\n" + "\n".join(lines) + "\n" + END


def render() -> None:
    text = README.read_text()
    if START not in text or END not in text:
        print("README has no benchmark markers; table not written")
        return
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    README.write_text(head + render_block() + tail)
    print(f"updated the performance table in {README}")


def main() -> int:
    only_render = "--render" in sys.argv
    code = 0
    if not only_render:
        for script in BENCHMARKS:
            print(f"== {script}", flush=True)
            rc = subprocess.call([sys.executable, str(HERE / script)])
            code = code or rc
    render()
    return code


if __name__ == "__main__":
    sys.exit(main())
