"""The `tether` command line: up, demo, record, dataset, replay, train, finetune, eval, export,
check, list (alias plugins).

Errors a user can cause print one line (``error: ...``) and exit with code 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from tether.core.errors import ConfigError, TetherError

DEFAULT_DEMO = "configs/experiments/panda_lift_demo.yaml"


PROVIDERS = ("cpu", "cuda", "tensorrt")
INSTRUCTION_HELP = (
    "the instruction of every episode, for a language-conditioned task and policy "
    "(task.instruction; docs/vla.md), e.g. 'lift the red cube'"
)


PROVIDER_HELP = (
    "where an exported (ONNX) policy runs: cpu, cuda or tensorrt (runtime.provider; "
    "missing here is an error unless runtime.fallback=true)"
)


def provider_override(provider: str | None) -> list[str]:
    """``--provider NAME`` as the dotted override ``runtime.provider=NAME``."""
    return [] if provider is None else [f"runtime.provider={provider}"]


def instruction_override(text: str | None) -> list[str]:
    """``--instruction TEXT`` as a dotted override (JSON-quoted: any text is one string)."""
    if text is None:
        return []
    if not text.strip():
        raise ConfigError("--instruction: give the words (an empty instruction asks for nothing)")
    return [f"task.instruction={json.dumps(text.strip())}"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tether", description="Tether: ROS 2 robot learning stack.")
    sub = p.add_subparsers(dest="cmd", required=True)

    up = sub.add_parser("up", help="run an experiment's ROS 2 node graph (Ctrl-C stops it)")
    up.add_argument(
        "experiment", help="experiment YAML, e.g. configs/experiments/panda_lift_expert.yaml"
    )
    up.add_argument("overrides", nargs="*", help="dotted overrides, e.g. sim.control_hz=50")
    up.add_argument("--log-dir", default=None, help="write each node's output to DIR/<node>.log")
    up.add_argument("--instruction", default=None, help=INSTRUCTION_HELP)
    up.add_argument("--provider", choices=PROVIDERS, default=None, help=PROVIDER_HELP)

    demo = sub.add_parser("demo", help="run seeded expert episodes through the ROS 2 loop")
    demo.add_argument("overrides", nargs="*", help="dotted overrides, e.g. episodes.count=5")
    demo.add_argument(
        "--config", default=DEFAULT_DEMO, help=f"experiment YAML (default {DEFAULT_DEMO})"
    )
    demo.add_argument("--out", default=None, help="output folder (default runs/demo-<time>)")
    demo.add_argument("--episodes", type=int, default=None, help="number of episodes")
    demo.add_argument("--no-video", action="store_true", help="skip the MP4 of episode 0")
    demo.add_argument("--instruction", default=None, help=INSTRUCTION_HELP)
    demo.add_argument("--provider", choices=PROVIDERS, default=None, help=PROVIDER_HELP)

    rec = sub.add_parser("record", help="record demonstrations over ROS 2 (LeRobot v3 dataset)")
    rec.add_argument("experiment", help="experiment YAML")
    rec.add_argument("overrides", nargs="*", help="dotted overrides")
    rec.add_argument("--episodes", type=int, default=10, help="successful episodes to save")
    rec.add_argument(
        "--teleop",
        default="scripted",
        help="data source: scripted (the task expert), keyboard, gamepad or spacemouse",
    )
    rec.add_argument(
        "--out", default=None, help="dataset directory (default datasets/<name>-<time>)"
    )
    rec.add_argument("--fps", type=int, default=30, help="dataset frames per second")
    rec.add_argument(
        "--task", default=None, help="task sentence stored with each episode (default: the task's)"
    )
    rec.add_argument(
        "--mcap",
        action="store_true",
        help="also write each episode's raw topics to DIR/mcap/ (rosbag2 MCAP)",
    )
    rec.add_argument(
        "--realtime",
        action="store_true",
        help="step the sim on the wall clock with the scripted expert (default: in sim time, "
        "lockstep, so the machine's speed changes nothing; human devices are always realtime)",
    )

    ds = sub.add_parser("dataset", help="inspect, render, merge or re-render recorded datasets")
    ds_sub = ds.add_subparsers(dest="ds_cmd", required=True)
    ds_info = ds_sub.add_parser("info", help="episodes, frames, fps, features, stats")
    ds_info.add_argument("root", help="dataset directory")
    ds_render = ds_sub.add_parser(
        "render", help="an episode's cameras as MP4, or a PNG frame strip with state/action plots"
    )
    ds_render.add_argument("root", help="dataset directory")
    ds_render.add_argument("--episode", type=int, default=0, help="episode index (default 0)")
    ds_render.add_argument(
        "--out", default=None, help="FILE.mp4 or FILE.png (default runs/<dataset>-ep<K>.mp4)"
    )
    ds_merge = ds_sub.add_parser(
        "merge",
        help="one new dataset from several recorded with the same robot and cameras (e.g. in "
        "parallel processes); videos are copied, not re-encoded",
    )
    ds_merge.add_argument("out", help="new dataset directory")
    ds_merge.add_argument("inputs", nargs="+", help="dataset directories, in episode order")
    ds_rerender = ds_sub.add_parser(
        "rerender",
        help="a simulated dataset seen through the experiment's sim.cameras: every frame "
        "posed from its recorded joint state and object poses and rendered again",
    )
    ds_rerender.add_argument("root", help="dataset directory (recorded in simulation)")
    ds_rerender.add_argument("out", help="new dataset directory")
    ds_rerender.add_argument(
        "--config", required=True, help="the experiment YAML it was recorded with"
    )
    ds_rerender.add_argument(
        "--episodes", default=None, help="FIRST:END, a range of episodes (default all)"
    )
    ds_rerender.add_argument(
        "--workers",
        type=int,
        default=1,
        help="processes, each rendering a range of episodes, merged in order (default 1)",
    )
    ds_rerender.add_argument(
        "overrides", nargs="*", help="dotted overrides, e.g. sim.cameras=[...]"
    )

    rep = sub.add_parser(
        "replay", help="play a recorded episode's actions back in sim and measure the drift"
    )
    rep.add_argument("root", help="dataset directory")
    rep.add_argument("overrides", nargs="*", help="dotted overrides, e.g. sim.control_hz=50")
    rep.add_argument("--episode", type=int, default=0, help="episode index (default 0)")
    replay_cfg = "configs/experiments/panda_lift_expert.yaml"
    rep.add_argument("--config", default=replay_cfg, help=f"experiment YAML (default {replay_cfg})")
    rep.add_argument(
        "--seed", type=int, default=None, help="reset seed (default: the episode index)"
    )
    rep.add_argument("--out", default=None, help="output folder (default runs/replay-<time>)")
    rep.add_argument("--no-video", action="store_true", help="skip the side-by-side MP4")
    rep.add_argument(
        "--interpolate",
        choices=("hold", "linear"),
        default="hold",
        help="hold each action for 1/fps (default) or interpolate linearly between frames",
    )
    rep.add_argument(
        "--settle",
        type=float,
        default=0.5,
        help="seconds to hold the last action after the last frame (default 0.5)",
    )

    tr = sub.add_parser("train", help="train the experiment's policy (its train: section)")
    tr.add_argument("experiment", help="experiment YAML with a train: section")
    tr.add_argument("overrides", nargs="*", help="dotted overrides, e.g. train.steps=1000")
    tr.add_argument(
        "--out", default=None, help="checkpoint folder (default runs/train-<name>-<time>)"
    )
    tr.add_argument("--resume", action="store_true", help="continue from the checkpoint in --out")

    ft = sub.add_parser(
        "finetune", help="RL fine-tuning of the experiment's policy (its finetune: section)"
    )
    ft.add_argument("experiment", help="experiment YAML with a finetune: section")
    ft.add_argument("overrides", nargs="*", help="dotted overrides, e.g. finetune.n_envs=4")
    ft.add_argument(
        "--out", default=None, help="checkpoint folder (default runs/finetune-<name>-<time>)"
    )
    ft.add_argument("--resume", action="store_true", help="continue from the checkpoint in --out")

    ev = sub.add_parser("eval", help="run a checkpoint closed-loop over seeded episodes")
    ev.add_argument(
        "checkpoint",
        help="checkpoint directory (holds contract.json) or exported model folder (model.json "
        "+ model.onnx, e.g. models/panda_lift_diffusion; or a base + residual folder, "
        "model.json + residual.onnx + base/, e.g. models/panda_insert_residual)",
    )
    ev.add_argument("overrides", nargs="*", help="dotted overrides of the checkpoint's experiment")
    ev.add_argument("--episodes", type=int, default=10, help="number of episodes (default 10)")
    ev.add_argument("--seed", type=int, default=0, help="first episode seed (default 0)")
    ev.add_argument("--sim", default=None, help="evaluate in another simulator (e.g. mujoco)")
    ev.add_argument(
        "--ros", action="store_true", help="run the loop over ROS 2 (default in-process)"
    )
    ev.add_argument("--out", default=None, help="output folder (default runs/eval-<ckpt>-<time>)")
    ev.add_argument("--no-video", action="store_true", help="skip the rollout MP4")
    ev.add_argument("--provider", choices=PROVIDERS, default=None, help=PROVIDER_HELP)
    ev.add_argument(
        "--config",
        default=None,
        help="experiment YAML for an exported model folder (default: the one in its model.json)",
    )

    ex = sub.add_parser("export", help="export a checkpoint for onboard inference")
    ex.add_argument(
        "checkpoint",
        help="checkpoint directory, or an exported model folder (for --format tensorrt)",
    )
    ex.add_argument("--format", default="onnx", choices=("onnx", "tensorrt"), help="default onnx")
    ex.add_argument(
        "--tensorrt",
        action="store_true",
        help="also build a TensorRT engine (model.engine) on this machine's GPU: --format tensorrt",
    )
    ex.add_argument(
        "--no-fp16",
        action="store_true",
        help="TensorRT: fp32 kernels only (default: fp16 where the GPU has it)",
    )
    ex.add_argument("--out", default=None, help="output folder (default <checkpoint>/export)")

    check = sub.add_parser("check", help="validate an experiment YAML and print it resolved")
    check.add_argument("experiment")
    check.add_argument("overrides", nargs="*")

    sub.add_parser(
        "list",
        aliases=["plugins"],
        help="list every registered plugin: robots (with kind and folder), simulators, backends, "
        "tasks, policies, trainers, hardware types, ROS I/O adapters",
    )
    return p


def list_plugins() -> int:
    """Print every registered kind and type (tether.core.registry): each robot with its kind,
    summary and folder, each other plugin with the target it builds. A robot whose
    description fails to load is listed with the error (exit 2)."""
    from tether.core import registry

    failed = False
    for kind in registry.KINDS:
        names = registry.available(kind)
        print(f"{kind} ({len(names)})")
        for name in names:
            if kind == "robot":
                try:
                    desc = registry.load("robot", name)
                except Exception as exc:  # a broken robot folder: say why, list the rest
                    failed = True
                    print(f"  {name:22s} error: {type(exc).__name__}: {exc}")
                    continue
                folder = f"  [{desc.folder}]" if desc.folder else ""
                print(f"  {name:22s} {desc.kind:12s} {desc.summary}{folder}")
            else:
                print(f"  {name:22s} {registry.entry(kind, name).target}")
    return 2 if failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    # overrides may follow options (`record exp.yaml --episodes 3 sim.control_hz=50`):
    # argparse leaves such late positionals unparsed, so they are collected here
    args, extra = parser.parse_known_args(argv)
    late = [x for x in extra if "=" in x and not x.startswith("-")]
    if len(late) != len(extra) or (late and not hasattr(args, "overrides")):
        parser.error(
            f"unrecognized arguments: {' '.join(x for x in extra if x not in late) or ' '.join(late)}"
        )
    if late:
        args.overrides = [*args.overrides, *late]
    try:
        if args.cmd == "up":
            from tether.cli.up import run_up

            overrides = [
                *args.overrides,
                *instruction_override(args.instruction),
                *provider_override(args.provider),
            ]
            return run_up(args.experiment, overrides, args.log_dir)
        if args.cmd == "demo":
            from tether.cli.demo import run_demo

            overrides = [
                *args.overrides,
                *instruction_override(args.instruction),
                *provider_override(args.provider),
            ]
            if args.episodes is not None:
                overrides.append(f"episodes.count={args.episodes}")
            return run_demo(args.config, overrides, args.out, video=not args.no_video)
        if args.cmd == "record":
            from tether.cli.record import run_record

            if args.episodes < 1:
                raise TetherError("--episodes must be at least 1")
            return run_record(
                args.experiment,
                args.overrides,
                args.out,
                args.episodes,
                args.teleop,
                args.fps,
                mcap=args.mcap,
                task_text=args.task,
                realtime=args.realtime,
            )
        if args.cmd == "dataset":
            if args.ds_cmd == "render":
                from tether.cli.dataset import run_render

                return run_render(args.root, args.episode, args.out)
            if args.ds_cmd == "merge":
                from tether.cli.record import run_dataset_merge

                return run_dataset_merge(args.inputs, args.out)
            if args.ds_cmd == "rerender":
                from tether.cli.rerender import run_dataset_rerender

                return run_dataset_rerender(
                    args.root, args.out, args.config, args.overrides, args.episodes, args.workers
                )
            from tether.cli.record import run_dataset_info

            return run_dataset_info(args.root)
        if args.cmd == "replay":
            from tether.cli.dataset import run_replay

            return run_replay(
                args.root,
                args.episode,
                args.config,
                args.overrides,
                seed=args.seed,
                out=args.out,
                video=not args.no_video,
                interpolate=args.interpolate,
                settle_s=args.settle,
            )
        if args.cmd == "train":
            from tether.cli.train import run_train

            return run_train(args.experiment, args.overrides, args.out, args.resume)
        if args.cmd == "finetune":
            from tether.cli.finetune import run_finetune

            return run_finetune(args.experiment, args.overrides, args.out, args.resume)
        if args.cmd == "eval":
            from pathlib import Path

            from tether.cli.train import EvalOptions, run_eval

            if args.episodes < 1:
                raise TetherError("--episodes must be at least 1")
            opts = EvalOptions(
                episodes=args.episodes,
                seed=args.seed,
                out=Path(args.out) if args.out else None,
                ros=args.ros,
                video=not args.no_video,
                sim=args.sim,
                overrides=[*args.overrides, *provider_override(args.provider)],
                config=args.config,
            )
            return run_eval(args.checkpoint, opts)
        if args.cmd == "export":
            from tether.cli.train import run_export

            fmt = "tensorrt" if args.tensorrt else args.format
            return run_export(args.checkpoint, fmt, args.out, fp16=not args.no_fp16)
        if args.cmd == "check":
            import yaml

            from tether.core.config import dump_config, load_config

            cfg = load_config(args.experiment, args.overrides)
            print(yaml.safe_dump(dump_config(cfg), sort_keys=False), end="")
            return 0
        if args.cmd in ("list", "plugins"):
            return list_plugins()
    except TetherError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return 1


if __name__ == "__main__":
    sys.exit(main())
