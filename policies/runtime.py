"""Run an exported policy (``model.onnx`` + ``model.json``) with onnxruntime alone.

What runs onboard: no torch import anywhere below this module (a test checks it). Any graph
that follows the I/O contract in docs/model_json.md runs here, diffusion or not: inputs are
raw observations (stacked over ``obs_horizon``) plus an optional ``noise`` input filled from
a seeded generator; the single output is an action chunk (1, horizon, action_dim).
"""

from __future__ import annotations

import copy
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tether.core.config import RuntimeConfig
from tether.core.errors import TetherError
from tether.core.spec import RobotSpec
from tether.core.types import NEIGHBOURS_KEY, TEXT_KEY, ActionChunk, Observation
from tether.policies.chunking import ChunkPlan, ObsHistory
from tether.policies.config_onnx import OnnxPolicyConfig

FORMAT = "tether-onnx/1"
NOISE_KEY = "noise"
PROVIDERS = {
    "cpu": "CPUExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "tensorrt": "TensorrtExecutionProvider",
}


def _import_ort() -> Any:
    try:
        import onnxruntime as ort
    except ModuleNotFoundError as exc:
        if exc.name != "onnxruntime":
            raise TetherError(f"onnxruntime could not be imported: {exc}") from exc
        raise TetherError(
            "onnxruntime is not installed: pip install onnxruntime (or onnxruntime-gpu)"
        ) from None
    except ImportError as exc:
        raise TetherError(f"onnxruntime is installed but could not be imported: {exc}") from exc
    return ort


MODEL_FILE = "model.onnx"


def model_file(model: str | Path) -> Path:
    """The ONNX file of ``model``: the path itself, or ``model.onnx`` in a model folder
    (what `tether export` writes and ``models/`` ships)."""
    p = Path(model)
    return p / MODEL_FILE if p.is_dir() else p


def portable_experiment(experiment: dict[str, Any] | None) -> dict[str, Any] | None:
    """The experiment a model was trained in, as model.json carries it (so `tether eval
    <model folder>` knows the robot, world and task): without the training and policy
    sections, and without this machine's paths (the DDS profile falls back to its default)."""
    if not isinstance(experiment, dict):
        return None
    out = {k: v for k, v in experiment.items() if k not in ("train", "policy")}
    if isinstance(out.get("ros"), dict):
        out["ros"] = {k: v for k, v in out["ros"].items() if k != "dds_profile"}
    return out


def contract_path(model: Path) -> Path:
    """model.json beside ``model`` (``<stem>.json`` wins when both exist)."""
    model = model_file(model)
    own = model.with_suffix(".json")
    return own if own.is_file() else model.parent / "model.json"


def read_contract(model: Path) -> dict[str, Any]:
    """The model's I/O contract (model.json), checked for the fields the runtime needs."""
    path = contract_path(model)
    if not model_file(model).is_file():
        raise TetherError(
            f"model file not found: {model_file(model)} (export one with `tether export "
            "<checkpoint>`, or set policy.model to an exported model folder such as "
            "models/panda_lift_diffusion)"
        )
    if not path.is_file():
        raise TetherError(f"{model}: no model.json beside it (the I/O contract is required)")
    try:
        contract = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise TetherError(f"{path}: not valid JSON ({exc})") from None
    if contract.get("format") != FORMAT:
        raise TetherError(f"{path}: format is {contract.get('format')!r}, expected {FORMAT!r}")
    for name in ("inputs", "outputs", "control_hz", "action_dt"):
        if name not in contract:
            raise TetherError(f"{path}: missing field '{name}'")
    if len(contract["outputs"]) != 1:
        raise TetherError(f"{path}: expected exactly one output (the action chunk)")
    return contract


# what each provider falls back to, in order (runtime.fallback)
FALLBACK_CHAIN = {"tensorrt": ("tensorrt", "cuda", "cpu"), "cuda": ("cuda", "cpu"), "cpu": ("cpu",)}
PROVIDER_HINTS = {
    "cuda": "install onnxruntime-gpu (CUDA 12) on a machine with an NVIDIA GPU and driver",
    "tensorrt": (
        "install onnxruntime-gpu and TensorRT 10 (pip install tensorrt-cu12) on a machine "
        "with an NVIDIA GPU and driver"
    ),
}
TRT_CACHE = "trt_cache"


@dataclass
class ProviderChoice:
    """What a session was asked for and what it runs on (``used``); ``note``: why they
    differ (a fallback the user allowed), None when they do not."""

    requested: str
    used: str
    providers: list[Any] = field(default_factory=list)  # what InferenceSession is given
    note: str | None = None

    def report(self) -> dict[str, Any]:
        """For logs and episode_status: {"provider", "requested"[, "fallback"]}."""
        out: dict[str, Any] = {"provider": self.used, "requested": self.requested}
        if self.note:
            out["fallback"] = self.note
        return out


def _missing(name: str, have: set[str]) -> str:
    return (
        f"onnxruntime has no {PROVIDERS[name]} here (available: {', '.join(sorted(have))}); "
        f"{PROVIDER_HINTS.get(name, '')}"
    )


def choose_providers(runtime: RuntimeConfig | None, model_dir: Path) -> ProviderChoice:
    """The execution providers for a session on ``runtime.provider``: that provider, then
    the ones after it in FALLBACK_CHAIN that this onnxruntime has (ORT gives a node the
    first provider that takes it). A requested provider that is missing is one TetherError,
    unless ``runtime.fallback`` allows the next one. TensorRT gets its engine cache
    (``runtime.trt_cache``, default ``<model folder>/trt_cache``) and fp16 flag."""
    ort = _import_ort()
    rt = runtime or RuntimeConfig()
    have = set(ort.get_available_providers())
    usable = [n for n in FALLBACK_CHAIN[rt.provider] if PROVIDERS[n] in have]
    note = None
    if not usable or usable[0] != rt.provider:
        why = _missing(rt.provider, have)
        if not rt.fallback or not usable:
            raise TetherError(f"{why} (or set runtime.fallback: true to run on the next one)")
        note = f"{why}; running on {usable[0]} (runtime.fallback)"
    providers: list[Any] = []
    for name in usable:
        if name == "tensorrt":
            cache = rt.trt_cache or model_dir / TRT_CACHE
            options = {
                "trt_engine_cache_enable": True,
                "trt_engine_cache_path": str(cache),
                "trt_fp16_enable": bool(rt.trt_fp16),
            }
            providers.append((PROVIDERS[name], options))
        else:
            providers.append(PROVIDERS[name])
    return ProviderChoice(rt.provider, usable[0], providers, note)


def open_session(
    path: Path, threads: int = 1, runtime: RuntimeConfig | None = None
) -> tuple[Any, ProviderChoice]:
    """An InferenceSession on ``runtime``'s provider, and what it runs on. onnxruntime
    falls back to the CPU by itself when a GPU provider it has cannot start (no device, a
    missing CUDA or TensorRT library): that is a TetherError too unless fallback is allowed."""
    ort = _import_ort()
    choice = choose_providers(runtime, path.parent)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = int(threads)
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = ort.InferenceSession(str(path), sess_options=opts, providers=choice.providers)
    started = list(session.get_providers())
    if started and started[0] != PROVIDERS[choice.used]:
        actual = next((k for k, v in PROVIDERS.items() if v == started[0]), started[0])
        why = (
            f"onnxruntime could not start {PROVIDERS[choice.used]} for {path} (it runs on "
            f"{started[0]}): is an NVIDIA GPU visible, with its CUDA 12 and TensorRT 10 "
            "libraries? onnxruntime's log above says which one failed"
        )
        if not (runtime and runtime.fallback):
            raise TetherError(f"{why} (or set runtime.fallback: true to run on {actual})")
        choice.note = f"{why}; running on {actual} (runtime.fallback)"
        choice.used = actual
    if choice.note:
        print(f"warning: {choice.note}", file=sys.stderr, flush=True)
    return session, choice


class OnnxModel:
    """An InferenceSession plus its contract; ``run(feeds)`` -> the action chunk array."""

    def __init__(
        self, model: str | Path, threads: int = 1, runtime: RuntimeConfig | None = None
    ) -> None:
        self.path = model_file(model)
        self.contract = read_contract(self.path)  # says what is missing
        self.session, self.provider = open_session(self.path, threads, runtime)
        graph_inputs = {i.name for i in self.session.get_inputs()}
        declared = {i["name"] for i in self.contract["inputs"]}
        if graph_inputs != declared:
            raise TetherError(
                f"{self.path}: graph inputs {sorted(graph_inputs)} differ from model.json "
                f"{sorted(declared)}"
            )
        self.output = self.contract["outputs"][0]["name"]

    def warm_up(self) -> None:
        """Run the graph once on zero inputs of the contract's shapes: onnxruntime's first
        run allocates and plans, and a robot should not wait for that in its first chunk."""
        self.run(
            {
                i["name"]: np.zeros(
                    [int(s) if int(s) >= 0 else int(i.get("multiple_of", 1)) for s in i["shape"]],
                    np.dtype(i.get("dtype", "float32")),
                )
                for i in self.contract["inputs"]
            }
        )

    def run(self, feeds: dict[str, np.ndarray]) -> np.ndarray:
        """Run the graph once; returns the output array (1, horizon, action_dim)."""
        return np.asarray(self.session.run([self.output], feeds)[0])


class OnnxPolicy:
    """The ``onnx`` policy type: an exported graph behind the Policy protocol.

    Keeps ``obs_horizon`` observations ``action_dt`` apart, predicts a chunk when the
    executed part (``execute_steps`` rows) of the last one has passed, and answers every
    observation with the rest of the plan at the control rate.
    """

    def __init__(self, cfg: OnnxPolicyConfig, spec: RobotSpec, task: Any = None) -> None:
        self.cfg = cfg
        self.spec = spec
        self.model = OnnxModel(cfg.model, cfg.threads, cfg.runtime)
        c = self.model.contract
        self._inputs = c["inputs"]
        self.obs_keys = [i["key"] for i in self._inputs if i["key"] != NOISE_KEY]
        self.language: Any = None
        if TEXT_KEY in self.obs_keys:  # a VLA: refuse a missing or foreign encoder now
            from tether.policies.vla.language import LanguageInput

            self.language = LanguageInput(c, self.model.path.parent, cfg.text_anchor)
        dim = int(c["outputs"][0]["shape"][-1])
        self._dynamic_output = dim < 0
        per = int(c["outputs"][0].get("multiple_of", 1))
        if dim < 0 and spec.action.dim % per:
            raise TetherError(
                f"{cfg.model}: the model outputs {per} actions per robot, robot {spec.name} "
                f"takes {spec.action.dim}"
            )
        if dim >= 0 and dim != spec.action.dim:
            raise TetherError(
                f"{cfg.model}: the model outputs {dim} actions, robot {spec.name} takes "
                f"{spec.action.dim}"
            )
        horizon = int(c.get("obs_horizon", 1))
        keys = [k for k in self.obs_keys if k != TEXT_KEY]
        self.history = ObsHistory(keys, horizon, float(c["action_dt"]))
        execute = cfg.execute_steps or int(c.get("execute_steps", 1))
        self.plan = ChunkPlan(float(c["action_dt"]), spec.dt, execute)
        self.rng = np.random.default_rng(cfg.seed)
        self.inferences = 0

    def reset(self) -> None:
        self.history.reset()
        self.plan.reset()

    def replan(self) -> None:
        """Predict a fresh chunk at the next act() (a chunk executor asked for one)."""
        self.plan.reset()

    def state(self) -> dict[str, Any]:
        """A copy of what the policy remembers within an episode (its observation history,
        the plan in force, the noise generator, the instruction in force): with a
        simulator's snapshot, a simulated episode goes back to a moment and on from there."""
        return {
            "history": copy.deepcopy(self.history),
            "plan": copy.deepcopy(self.plan),
            "rng": copy.deepcopy(self.rng.bit_generator.state),
            "inferences": self.inferences,
            "language": None if self.language is None else self.language.state(),
        }

    def load_state(self, state: dict[str, Any]) -> None:
        """Back to what :meth:`state` returned (which stays usable again)."""
        self.history = copy.deepcopy(state["history"])
        self.plan = copy.deepcopy(state["plan"])
        self.rng.bit_generator.state = copy.deepcopy(state["rng"])
        self.inferences = state["inferences"]
        if self.language is not None:
            self.language.load_state(state["language"])

    def warm_up(self) -> None:
        """One run on zero inputs before the first observation (OnnxModel.warm_up)."""
        self.model.warm_up()

    def observe(self, obs: Observation) -> None:
        """Keep an observation in the history without predicting (chunk mode: the policy
        server observes at the control rate and predicts only when a chunk is requested)."""
        self.history.push(obs)

    def feeds(self, text: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """Graph inputs from the observation history (and fresh noise); ``text``: the
        instruction's embedding (dim,) for a language input."""
        stacked = self.history.stacked()
        if text is not None:
            stacked[TEXT_KEY] = text[None]
        out: dict[str, np.ndarray] = {}
        for spec in self._inputs:
            shape = [int(s) for s in spec["shape"]]
            dtype = np.dtype(spec.get("dtype", "float32"))
            if spec["key"] == NOISE_KEY:
                out[spec["name"]] = self.rng.standard_normal(shape).astype(dtype)
                continue
            value = stacked[spec["key"]]
            if "slice" in spec:  # part of each step's vector (a planner's goal: env_state[0:2])
                lo, hi = (int(v) for v in spec["slice"])
                value = value.reshape(value.shape[0], -1)[:, lo:hi]
            if spec["key"] == TEXT_KEY:  # one embedding for every stacked frame
                value = np.broadcast_to(value, (int(np.prod(shape)) // value.size, value.size))
            # a -1 dimension takes any size that is a multiple of ``multiple_of`` (a swarm
            # policy's per-drone inputs: 13 N state values for N drones)
            known = int(np.prod([d for d in shape if d >= 0])) * int(spec.get("multiple_of", 1))
            fits = value.size % known == 0 < value.size if -1 in shape else value.size == known
            if not fits:
                raise TetherError(
                    f"observation '{spec['key']}' has shape {value.shape[1:]} per step, the model "
                    f"input '{spec['name']}' expects {shape}"
                )
            out[spec["name"]] = value.reshape(shape).astype(dtype, copy=False)
        return out

    def act(self, obs: Observation) -> ActionChunk:
        self.history.push(obs)
        text = None
        if self.language is not None:
            text, hold = self.language.gate(obs, self.spec, self.plan)
            if hold is not None:
                return hold
        if self.plan.needs_plan(obs.stamp_ns):
            chunk = self.model.run(self.feeds(text))
            chunk = chunk.reshape(-1, chunk.shape[-1])
            if chunk.shape[-1] > self.spec.action.dim and self._dynamic_output:
                # a dynamic-width output answers for every robot fed in (a swarm policy
                # given its neighbours): this robot's columns come first
                chunk = chunk[:, : self.spec.action.dim]
            self.plan.set(chunk, obs.stamp_ns)
            self.inferences += 1
        return self.plan.chunk_at(obs.stamp_ns)

    @property
    def runtime_report(self) -> dict[str, Any]:
        """The execution provider the graph runs on (and what was asked for)."""
        return self.model.provider.report()

    @property
    def contract(self) -> dict[str, Any]:
        return {
            **self.model.contract,
            # a swarm policy (model.json "neighbours"): one drone's policy server also reads
            # the other drones' states, after its own in ``state``
            "observation_keys": self.obs_keys
            + ([NEIGHBOURS_KEY] if self.model.contract.get("neighbours") else []),
            "joint_names": list(self.model.contract.get("action_names", self.spec.action.names)),
        }
