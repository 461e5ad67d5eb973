"""Closed-loop evaluation of a checkpoint or an exported model over N seeded episodes.

This layer assembles the experiment an evaluation runs (the one the checkpoint was trained
in, from its contract, its policy section replaced by the checkpoint's policy) and summarizes
the results. Running the episodes needs a simulator or the ROS 2 graph, which sit beside or
above the policies: the caller hands in an :class:`EpisodeRunner` as ``options.runner``
(`tether eval` passes tether.cli.evaluate.run_evaluation), so nothing here imports them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol

from tether.core import registry
from tether.core.config import apply_overrides
from tether.core.errors import TetherError


class EpisodeRunner(Protocol):
    """Runs an evaluation experiment: ``options.episodes`` episodes from seed
    ``options.seed``, in-process or over ROS 2 (``options.ros``); writes summary.json under
    ``options.out`` and returns that summary (:func:`summarize`). ``source`` names the file
    the experiment came from, for error messages."""

    def __call__(
        self, experiment: dict[str, Any], checkpoint: Path, options: Any, source: str
    ) -> dict[str, Any]: ...


def runner_of(options: Any) -> EpisodeRunner:
    """The episode runner the caller handed in with the options."""
    runner = getattr(options, "runner", None)
    if runner is None:
        raise TetherError(
            "evaluation options carry no episode runner (options.runner); build them with "
            "tether.cli.train.EvalOptions"
        )
    return runner


def eval_experiment(checkpoint: Path, options: Any, policy: dict[str, Any]) -> dict[str, Any]:
    """The experiment dict an evaluation runs: the trained one, this policy, these episodes."""
    contract_file = checkpoint / "contract.json"
    contract = json.loads(contract_file.read_text())
    if "experiment" not in contract:
        raise TetherError(f"{contract_file}: no 'experiment' section to evaluate in")
    return episode_experiment(contract["experiment"], options, policy)


def episode_experiment(
    experiment: dict[str, Any], options: Any, policy: dict[str, Any]
) -> dict[str, Any]:
    """``experiment`` with ``policy`` in place of its own, the evaluation's episodes and the
    user's overrides (``options.sim`` among them).

    A policy served per observation (registry option, e.g. ``residual_onnx``: the residual
    corrects every control step from the latest observation) has the policy server answer
    each observation over ROS 2: ``ros.chunked`` (which the experiment may have inherited
    from its base's, a diffusion policy served in chunks) is turned off before the user's
    overrides (where the graph refuses it, tether_ros.graph)."""
    data = dict(experiment)
    data.pop("train", None)
    data.pop("finetune", None)
    data["policy"] = dict(policy)
    data["episodes"] = {
        **data.get("episodes", {}),
        "count": options.episodes,
        "seed": options.seed,
    }
    if registry.served_per_observation(str(policy.get("type"))) and isinstance(
        data.get("ros"), dict
    ):
        data["ros"] = {**data["ros"], "chunked": False}
    overrides = list(options.overrides)
    if options.sim:
        overrides.append(f"sim.type={options.sim}")
    return apply_overrides(data, overrides)


def evaluate_model(model_dir: Path, options: Any) -> dict[str, Any]:
    """Evaluate an exported model folder in the experiment its model.json carries, or in
    ``options.config`` (an experiment YAML): a policy folder (model.onnx + model.json of
    format tether-onnx/1, as in ``models/``) with the ``onnx`` policy, a base + residual
    folder (residual.onnx + model.json of format tether-residual/1, `tether export` of a
    finetune checkpoint) with the ``residual_onnx`` policy."""
    from tether.core.config import dump_config, load_config
    from tether.policies.residual.serve import read_residual_contract, residual_format
    from tether.policies.runtime import MODEL_FILE, read_contract

    if residual_format(model_dir):
        _, contract = read_residual_contract(model_dir)
        policy = {"type": "residual_onnx", "model": str(model_dir.resolve())}
    else:
        contract = read_contract(model_dir / MODEL_FILE)
        policy = {"type": "onnx", "model": str((model_dir / MODEL_FILE).resolve())}
    if options.config:
        experiment = dump_config(load_config(options.config))
    elif isinstance(contract.get("experiment"), dict):
        experiment = contract["experiment"]
    else:
        raise TetherError(
            f"{model_dir}/model.json names no experiment to evaluate in: pass --config "
            "<experiment.yaml>"
        )
    data = episode_experiment(experiment, options, policy)
    return runner_of(options)(data, model_dir, options, str(model_dir / "model.json"))


def evaluate_checkpoint(checkpoint: Path, options: Any, policy: dict[str, Any]) -> dict[str, Any]:
    """Run ``options.episodes`` episodes from seed ``options.seed``; returns the summary."""
    data = eval_experiment(checkpoint, options, policy)
    return runner_of(options)(data, checkpoint, options, str(checkpoint / "contract.json"))


def summarize(name: str, results: list[dict[str, Any]], extra: dict[str, Any]) -> dict[str, Any]:
    """The summary of an evaluation's episode results (each with ``success`` and optional
    ``latency_ms``): counts, success rate, latency percentiles (ms), ``extra``, per episode."""
    from tether.core.timing import percentiles_ms

    lat = percentiles_ms([x for r in results for x in r.get("latency_ms", [])])
    n = len(results)
    wins = sum(bool(r["success"]) for r in results)
    return {
        "experiment": name,
        "episodes": n,
        "successes": wins,
        "success_rate": wins / max(1, n),
        "latency_ms": lat,
        **extra,
        "per_episode": [{k: v for k, v in r.items() if k != "latency_ms"} for r in results],
    }
