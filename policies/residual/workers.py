"""Parallel rollouts for `tether finetune`: an SB3 ``VecEnv`` whose ``ResidualEnv``s live in
rollout workers (``finetune.workers``, docs/residual_rl.md "Parallel rollouts").

- ``inline``: SB3's ``DummyVecEnv`` in the trainer's process (one core; the reference the
  workers are tested against).
- ``local``: ``n_workers`` worker processes on this machine, each a fresh interpreter (as
  multiprocessing's ``spawn`` starts one: no forked torch / MuJoCo state; see _LocalWorker).
- ``ray``: the same worker as Ray actors (``ray.init(address=finetune.ray_address)``).

Worker w owns a contiguous block of the ``n_envs`` envs, builds them itself from the
experiment as JSON (``dump_config``) and steps all of them per request; while the workers
step, the trainer waits (``step_async`` sends to every worker before ``step_wait`` reads).
The run's evaluations run on the workers too (``evaluate_seeds``: each worker a share of the
seeds, in an evaluation env of its own; evaluation.py).
Messages are ``pack``ed bytes, both ways: a JSON header plus raw numpy arrays (dtype, shape,
bytes), never a pickle; local workers carry them with ``Connection.send_bytes`` /
``recv_bytes``, Ray actors take and return the same bytes (Ray moves them with its own
transport). The observation normaliser is fixed once the statistics are taken (model.py:
buffers, never trained), so its arrays go to each worker once, at start.

Semantics are DummyVecEnv's: per-env seeds from ``seed()`` used by the next ``reset()``
only, auto-reset with no seed (the env's own generator), ``terminal_observation`` and
``TimeLimit.truncated`` in the infos, rewards float32. A worker that dies or fails raises a
TetherError naming it; a reply slower than ``REPLY_TIMEOUT_S`` does too (no hang).
"""

from __future__ import annotations

import contextlib
import json
import os
import struct
import time
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tether.core.errors import ConfigError, TetherError

if TYPE_CHECKING:
    from tether.core.config import ExperimentConfig
    from tether.policies.residual.config import FinetuneConfig
    from tether.policies.residual.model import NumpyNormaliser

# longest wait for one worker's reply (a step of all its envs, or building them)
REPLY_TIMEOUT_S = 600.0
# an evaluation's reply: REPLY_TIMEOUT_S plus this much per episode of the worker's share
EVAL_EPISODE_TIMEOUT_S = 120.0
# on close: longest wait for a worker to close its envs before it is killed
CLOSE_TIMEOUT_S = 30.0
RAY_INSTALL = "pip install 'ray==2.60.0'"
_HEAD = struct.Struct("<I")
# array dtypes the wire carries (no object arrays)
_KINDS = set("biuf")


# ---- wire format --------------------------------------------------------------------------
def pack(header: dict[str, Any], arrays: dict[str, np.ndarray] | None = None) -> bytes:
    """One message: 4-byte length, JSON (``header`` and the arrays' dtype / shape), then the
    arrays' bytes in order."""
    specs, blobs = [], []
    for name, value in (arrays or {}).items():
        a = np.asarray(value)
        if a.dtype.kind not in _KINDS:
            raise TetherError(f"rollout message: array {name!r} has dtype {a.dtype}")
        specs.append([name, a.dtype.str, list(a.shape)])
        blobs.append(a.tobytes(order="C"))
    head = json.dumps({"h": header, "a": specs}, separators=(",", ":")).encode()
    return b"".join([_HEAD.pack(len(head)), head, *blobs])


def unpack(data: bytes) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The inverse of :func:`pack` (arrays are copies, writable)."""
    (n,) = _HEAD.unpack_from(data, 0)
    meta = json.loads(data[_HEAD.size : _HEAD.size + n])
    pos = _HEAD.size + n
    arrays = {}
    for name, dtype_str, shape in meta["a"]:
        dtype = np.dtype(dtype_str)
        if dtype.kind not in _KINDS:
            raise TetherError(f"rollout message: array {name!r} has dtype {dtype}")
        size = dtype.itemsize * int(np.prod(shape, dtype=np.int64))
        arrays[name] = np.frombuffer(data, dtype, offset=pos, count=size // dtype.itemsize)
        arrays[name] = arrays[name].reshape(shape).copy()
        pos += size
    return meta["h"], arrays


def _split_info(info: dict[str, Any], prefix: str, arrays: dict[str, np.ndarray]) -> dict:
    """An env's info dict -> its JSON part; its arrays go to ``arrays`` under ``prefix``."""
    out: dict[str, Any] = {}
    for key, value in info.items():
        if isinstance(value, np.ndarray):
            arrays[f"{prefix}{key}"] = value
        elif isinstance(value, np.generic):
            out[key] = value.item()
        else:
            out[key] = _jsonable(value, f"info[{key!r}]")
    return out


def _join_info(part: dict[str, Any], prefix: str, arrays: dict[str, np.ndarray]) -> dict:
    info = dict(part)
    for name, value in arrays.items():
        if name.startswith(prefix):
            info[name[len(prefix) :]] = value
    return info


def _jsonable(value: Any, what: str) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    try:
        json.dumps(value)
    except TypeError:
        raise TetherError(f"rollout worker: {what} is a {type(value).__name__}, not JSON") from None
    return value


# ---- the worker: a group of envs behind one message handler ------------------------------
NORMALISER_FIELDS = ("obs_offset", "obs_scale", "act_mid", "act_half", "limit")


def normaliser_from_arrays(arrays: dict[str, np.ndarray]) -> NumpyNormaliser:
    """model.NumpyNormaliser rebuilt from its arrays (what a worker receives)."""
    from tether.policies.residual.model import NumpyNormaliser

    norm = NumpyNormaliser.__new__(NumpyNormaliser)
    for name in NORMALISER_FIELDS:
        setattr(norm, name, np.asarray(arrays[f"norm/{name}"], np.float64))
    norm.relative = [(int(a), int(b)) for a, b in arrays["norm/relative"].reshape(-1, 2)]
    return norm


def normaliser_arrays(norm: NumpyNormaliser | None) -> dict[str, np.ndarray]:
    if norm is None:
        return {}
    out = {f"norm/{k}": np.asarray(getattr(norm, k)) for k in NORMALISER_FIELDS}
    # finetune.relative_positions: the pairs of feature indices (int64, (n, 2))
    out["norm/relative"] = np.asarray(norm.relative, np.int64).reshape(-1, 2)
    return out


class EnvGroup:
    """A worker's envs and its message handler: ``handle(bytes) -> bytes``."""

    def __init__(self) -> None:
        self.envs: list[Any] = []
        self.closed = False
        # what _init built the envs from, and the evaluation env (built on first use)
        self._built: tuple[Any, Any, bool] | None = None
        self.eval_env: Any = None

    def handle(self, message: bytes) -> bytes:
        try:
            header, arrays = unpack(message)
            self.closed = header["cmd"] == "close"
            reply = getattr(self, f"_{header['cmd']}")(header, arrays)
        except Exception as exc:  # noqa: BLE001 - every failure crosses to the trainer
            return pack({"error": f"{type(exc).__name__}: {exc}"})
        return pack(*reply)

    def _init(self, header: dict[str, Any], arrays: dict[str, np.ndarray]) -> tuple:
        from tether.core.config import parse_experiment
        from tether.policies.residual.env import ResidualEnv

        cfg = parse_experiment(header["experiment"], "rollout worker")
        fcfg = cfg.finetune
        norm = normaliser_from_arrays(arrays) if arrays else None
        for _ in range(int(header["n_envs"])):
            self.envs.append(ResidualEnv(cfg, fcfg, norm, squash=bool(header["squash"])))
        self._built = (cfg, norm, bool(header["squash"]))
        env = self.envs[0]
        space = {
            "obs_shape": list(env.observation_space.shape),
            "act_shape": list(env.action_space.shape),
            "act_bound": float(env.action_space.high[0]),
            "pid": os.getpid(),
        }
        return space, {}

    def _reset(self, header: dict[str, Any], arrays: dict[str, np.ndarray]) -> tuple:
        obs, infos = [], []
        out: dict[str, np.ndarray] = {}
        for i, (env, seed) in enumerate(zip(self.envs, header["seeds"], strict=True)):
            options = header["options"][i] or {}
            o, info = env.reset(seed=seed, **({"options": options} if options else {}))
            obs.append(o)
            infos.append(_split_info(info, f"r{i}/", out))
        out["obs"] = np.stack(obs)
        return {"reset_infos": infos}, out

    def _step(self, header: dict[str, Any], arrays: dict[str, np.ndarray]) -> tuple:
        actions = arrays["actions"]
        out: dict[str, np.ndarray] = {}
        obs, rewards, dones, infos, reset_infos = [], [], [], [], []
        for i, env in enumerate(self.envs):
            o, reward, terminated, truncated, info = env.step(actions[i])
            done = terminated or truncated
            info["TimeLimit.truncated"] = truncated and not terminated
            reset_info: dict[str, Any] = {}
            if done:
                info["terminal_observation"] = o
                o, reset_info = env.reset()
            obs.append(o)
            rewards.append(reward)
            dones.append(done)
            infos.append(_split_info(info, f"i{i}/", out))
            reset_infos.append(_split_info(reset_info, f"r{i}/", out))
        out["obs"] = np.stack(obs)
        out["rewards"] = np.asarray(rewards, np.float32)
        out["dones"] = np.asarray(dones, bool)
        return {"infos": infos, "reset_infos": reset_infos}, out

    def _get_attr(self, header: dict[str, Any], arrays: dict[str, np.ndarray]) -> tuple:
        name = header["name"]
        values = [getattr(self.envs[i], name) for i in header["envs"]]
        return {"values": [_jsonable(v, f"attribute {name!r}") for v in values]}, {}

    def _set_attr(self, header: dict[str, Any], arrays: dict[str, np.ndarray]) -> tuple:
        for i in header["envs"]:
            setattr(self.envs[i], header["name"], header["value"])
        return {}, {}

    def _env_method(self, header: dict[str, Any], arrays: dict[str, np.ndarray]) -> tuple:
        name = header["name"]
        values = [
            getattr(self.envs[i], name)(*header["args"], **header["kwargs"]) for i in header["envs"]
        ]
        return {"values": [_jsonable(v, f"{name}()'s result") for v in values]}, {}

    def _evaluate(self, header: dict[str, Any], arrays: dict[str, np.ndarray]) -> tuple:
        """One episode per seed of ``header["seeds"]`` in the worker's evaluation env (a
        ResidualEnv of its own, the task's time limit: the training envs keep their
        episodes), base + the residual sent as arrays (evaluation.model_arrays), or the
        base alone; the per-seed outcomes (evaluation.run_seeds)."""
        from tether.policies.residual.env import ResidualEnv
        from tether.policies.residual.evaluation import model_from_arrays, run_seeds

        if self._built is None:
            raise TetherError("evaluate before init")
        if self.eval_env is None:
            import torch

            # one thread per worker: the workers share the cores (torch's default, a thread
            # per core in each worker, made the workers' evaluation slower than one inline)
            torch.set_num_threads(1)
            cfg, norm, squash = self._built
            self.eval_env = ResidualEnv(cfg, cfg.finetune, norm, squash=squash)
        config = header["model"]
        model = None if config is None else model_from_arrays(arrays, config)
        return {"per_seed": run_seeds(self.eval_env, model, header["seeds"])}, {}

    def _close(self, header: dict[str, Any], arrays: dict[str, np.ndarray]) -> tuple:
        for env in self.envs:
            env.close()
        if self.eval_env is not None:
            self.eval_env.close()
            self.eval_env = None
        self.envs = []
        return {}, {}


def _serve(conn: Any) -> None:
    """A local worker process: answer requests until ``close`` or the trainer goes away."""
    group = EnvGroup()
    while True:
        try:
            message = conn.recv_bytes()
        except (EOFError, OSError, KeyboardInterrupt):
            break
        reply = group.handle(message)
        try:
            conn.send_bytes(reply)
        except (BrokenPipeError, OSError):
            break
        if group.closed:
            break
    conn.close()


# ---- transports ---------------------------------------------------------------------------
def worker_main(fd: int) -> None:
    """Entry of a local worker process: serve requests on the socket ``fd``."""
    from multiprocessing.connection import Connection

    _serve(Connection(fd))


class _LocalWorker:
    """A fresh interpreter (``python -c``, as multiprocessing's spawn would start, without
    its pickled bootstrap, the re-import of the caller's ``__main__`` or its resource
    tracker) talking over a socket pair with ``Connection.send_bytes`` / ``recv_bytes``."""

    def __init__(self, index: int) -> None:
        import socket
        import subprocess
        import sys
        from multiprocessing.connection import Connection

        self.index = index
        mine, theirs = socket.socketpair()
        fd = theirs.fileno()
        code = f"from tether.policies.residual.workers import worker_main; worker_main({fd})"
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-c", code], pass_fds=(fd,), stdin=subprocess.DEVNULL
            )
        finally:
            theirs.close()
        self.conn = Connection(mine.detach())

    def name(self) -> str:
        return f"rollout worker {self.index} (pid {self.process.pid})"

    def send(self, message: bytes) -> None:
        try:
            self.conn.send_bytes(message)
        except OSError:
            raise self._died() from None

    def receive(self, timeout_s: float) -> bytes:
        deadline = time.monotonic() + timeout_s
        try:
            while not self.conn.poll(0.2):
                if self.process.poll() is not None:
                    raise self._died()
                if time.monotonic() > deadline:
                    raise TetherError(f"{self.name()}: no reply within {timeout_s:.0f} s")
            return bytes(self.conn.recv_bytes())
        except (EOFError, OSError):
            raise self._died() from None

    def _died(self) -> TetherError:
        try:
            code = self.process.wait(timeout=1.0)
        except Exception:  # noqa: BLE001 - still running: its socket failed
            code = None
        return TetherError(f"{self.name()} died (exit code {code})")

    def stop(self) -> None:
        """Wait for the worker to exit (it does on ``close`` or on end of file), else kill."""
        import subprocess

        self.conn.close()
        try:
            self.process.wait(timeout=10.0)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5.0)


class _RayWorker:
    def __init__(self, index: int, actor_cls: Any) -> None:
        self.index = index
        self.actor = actor_cls.remote()
        self.pending: Any = None

    def name(self) -> str:
        return f"rollout worker {self.index} (Ray actor)"

    def send(self, message: bytes) -> None:
        self.pending = self.actor.handle.remote(message)

    def receive(self, timeout_s: float) -> bytes:
        import ray
        from ray.exceptions import GetTimeoutError, RayError

        ref, self.pending = self.pending, None
        try:
            return bytes(ray.get(ref, timeout=timeout_s))
        except GetTimeoutError:
            raise TetherError(f"{self.name()}: no reply within {timeout_s:.0f} s") from None
        except RayError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise TetherError(f"{self.name()} failed: {first}") from None

    def stop(self) -> None:
        import ray

        ray.kill(self.actor)


def _ray_actor_class(address: str | None, n_workers: int) -> tuple[Any, bool]:
    """The Ray actor class of EnvGroup; starts Ray (``address``) unless it is running.
    Each actor asks for one CPU, or its share when the cluster has fewer CPUs than workers
    (more actors than CPUs would wait for each other forever). Returns (class, whether Ray
    was started here)."""
    try:
        import ray
    except ImportError:
        raise ConfigError(
            f"finetune.workers: ray needs Ray installed ({RAY_INSTALL}); or use workers: local"
        ) from None
    started = False
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=True)
        started = True
    cpus = float(ray.cluster_resources().get("CPU", 1.0))
    return ray.remote(num_cpus=min(1.0, cpus / n_workers))(EnvGroup), started


def _blocks(n_envs: int, n_workers: int) -> list[range]:
    """Contiguous env indices per worker, sizes differing by at most one."""
    edges = np.linspace(0, n_envs, n_workers + 1).round().astype(int)
    return [range(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:], strict=True)]


def resolve_workers(fcfg: FinetuneConfig) -> int:
    """``finetune.n_workers`` (0: one per env up to the CPU count), at most ``n_envs``."""
    n = fcfg.n_workers or min(fcfg.n_envs, os.cpu_count() or 1)
    return max(1, min(n, fcfg.n_envs))


# ---- the VecEnv ---------------------------------------------------------------------------
def _vec_env_base() -> type:
    from stable_baselines3.common.vec_env import VecEnv

    return VecEnv


class _Workers:
    """Start and stop the workers (kept apart from the VecEnv so a finaliser can hold it)."""

    def __init__(self, kind: str, n_workers: int, ray_address: str | None) -> None:
        self.kind = kind
        self.workers: list[Any] = []
        self.ray_started = False
        if kind == "ray":
            actor_cls, self.ray_started = _ray_actor_class(ray_address, n_workers)
            self.workers = [_RayWorker(w, actor_cls) for w in range(n_workers)]
        else:
            self.workers = [_LocalWorker(w) for w in range(n_workers)]

    def stop(self) -> None:
        for worker in self.workers:
            with contextlib.suppress(Exception):  # best effort at shutdown
                worker.stop()
        self.workers = []
        if self.ray_started:
            import ray

            ray.shutdown()
            self.ray_started = False


def _stop(workers: _Workers) -> None:
    workers.stop()


def RolloutVecEnv(  # noqa: N802 - a class made on first use (SB3 is imported lazily)
    experiment: dict[str, Any],
    n_envs: int,
    *,
    squash: bool,
    normaliser: NumpyNormaliser | None = None,
    kind: str = "local",
    n_workers: int = 1,
    ray_address: str | None = None,
) -> Any:
    """An SB3 VecEnv of ``n_envs`` ResidualEnvs of ``experiment`` (a ``dump_config`` dict)
    in ``n_workers`` workers of ``kind`` (``local`` or ``ray``)."""
    cls = _rollout_class()
    return cls(experiment, n_envs, squash, normaliser, kind, n_workers, ray_address)


_CLASS: type | None = None


def _rollout_class() -> type:
    global _CLASS
    if _CLASS is not None:
        return _CLASS
    import gymnasium as gym

    base = _vec_env_base()

    class _RolloutVecEnv(base):  # type: ignore[misc, valid-type]
        def __init__(
            self,
            experiment: dict[str, Any],
            n_envs: int,
            squash: bool,
            normaliser: NumpyNormaliser | None,
            kind: str,
            n_workers: int,
            ray_address: str | None,
        ) -> None:
            if kind not in ("local", "ray"):
                raise ConfigError(f"finetune.workers: {kind!r} is not local or ray")
            self.blocks = _blocks(n_envs, max(1, min(n_workers, n_envs)))
            self.closed = False
            self.waiting = False
            self._pool = _Workers(kind, len(self.blocks), ray_address)
            self._finalizer = weakref.finalize(self, _stop, self._pool)
            try:
                norm = normaliser_arrays(normaliser)
                for worker, block in zip(self._pool.workers, self.blocks, strict=True):
                    header = {
                        "cmd": "init",
                        "experiment": experiment,
                        "n_envs": len(block),
                        "squash": squash,
                    }
                    worker.send(pack(header, norm))
                spaces = [self._reply(w)[0] for w in self._pool.workers]
            except BaseException:
                self._finalizer()
                raise
            first = spaces[0]
            self.worker_pids = [s["pid"] for s in spaces]
            obs_space = gym.spaces.Box(-np.inf, np.inf, tuple(first["obs_shape"]), np.float32)
            bound = first["act_bound"]
            act_space = gym.spaces.Box(-bound, bound, tuple(first["act_shape"]), np.float32)
            super().__init__(n_envs, obs_space, act_space)

        @property
        def workers(self) -> list[Any]:
            return self._pool.workers

        def _reply(
            self, worker: Any, timeout_s: float = REPLY_TIMEOUT_S
        ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
            header, arrays = unpack(worker.receive(timeout_s))
            if "error" in header:
                raise TetherError(f"{worker.name()}: {header['error']}")
            return header, arrays

        def _gather(
            self, timeout_s: float = REPLY_TIMEOUT_S, workers: list[Any] | None = None
        ) -> list[tuple[dict[str, Any], dict[str, np.ndarray]]]:
            """Every worker's reply (of ``workers``, default all); the first failure is
            raised after all were read."""
            replies, error = [], None
            for worker in self.workers if workers is None else workers:
                try:
                    replies.append(self._reply(worker, timeout_s))
                except TetherError as exc:
                    error = error or exc
            if error is not None:
                raise error
            return replies

        # ---- stepping ------------------------------------------------------------------
        def reset(self) -> np.ndarray:
            for worker, block in zip(self.workers, self.blocks, strict=True):
                header = {
                    "cmd": "reset",
                    "seeds": [self._seeds[i] for i in block],
                    "options": [self._options[i] or None for i in block],
                }
                worker.send(pack(header))
            obs, self.reset_infos = [], []
            for header, arrays in self._gather():
                obs.append(arrays["obs"])
                for i, part in enumerate(header["reset_infos"]):
                    self.reset_infos.append(_join_info(part, f"r{i}/", arrays))
            self._reset_seeds()
            self._reset_options()
            return np.concatenate(obs)

        def step_async(self, actions: np.ndarray) -> None:
            actions = np.asarray(actions)
            for worker, block in zip(self.workers, self.blocks, strict=True):
                worker.send(pack({"cmd": "step"}, {"actions": actions[block.start : block.stop]}))
            self.waiting = True

        def step_wait(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[dict]]:
            try:
                replies = self._gather()
            finally:
                self.waiting = False
            obs, rewards, dones, infos, reset_infos = [], [], [], [], []
            for header, arrays in replies:
                obs.append(arrays["obs"])
                rewards.append(arrays["rewards"])
                dones.append(arrays["dones"])
                for i, part in enumerate(header["infos"]):
                    infos.append(_join_info(part, f"i{i}/", arrays))
                for i, part in enumerate(header["reset_infos"]):
                    reset_infos.append(_join_info(part, f"r{i}/", arrays))
            self.reset_infos = reset_infos
            return np.concatenate(obs), np.concatenate(rewards), np.concatenate(dones), infos

        def close(self) -> None:
            if self.closed:
                return
            self.closed = True
            try:
                if self.waiting:
                    self._gather(CLOSE_TIMEOUT_S)
                for worker in self.workers:
                    worker.send(pack({"cmd": "close"}))
                self._gather(CLOSE_TIMEOUT_S)
            except TetherError:
                pass  # a worker that died or hangs: stopped (killed) below
            finally:
                self._finalizer()

        # ---- evaluation ----------------------------------------------------------------
        def evaluate_seeds(self, model: Any, seeds: list[int]) -> dict[str, list]:
            """One episode per seed, the seeds split in contiguous shares over the workers
            (EnvGroup._evaluate); the per-seed outcomes in the order of ``seeds``.
            ``model``: the residual (a ResidualMLP) or None (the base alone)."""
            from tether.policies.residual.checkpoint import model_contract
            from tether.policies.residual.evaluation import model_arrays

            header: dict[str, Any] = {"cmd": "evaluate", "model": None}
            arrays: dict[str, np.ndarray] = {}
            if model is not None:
                header["model"] = model_contract(model)
                arrays = model_arrays(model)
            shares = [s for s in _blocks(len(seeds), len(self.workers)) if len(s)]
            targets = self.workers[: len(shares)]
            for worker, share in zip(targets, shares, strict=True):
                worker.send(pack({**header, "seeds": [int(seeds[i]) for i in share]}, arrays))
            # a longer wait than a step's: each worker runs whole episodes
            timeout = REPLY_TIMEOUT_S + EVAL_EPISODE_TIMEOUT_S * max(len(s) for s in shares)
            out: dict[str, list] = {}
            for reply, _ in self._gather(timeout, targets):
                for key, values in reply["per_seed"].items():
                    out.setdefault(key, []).extend(values)
            return out

        # ---- attributes and methods (JSON values only) ----------------------------------
        def _by_worker(self, indices: Any) -> list[tuple[Any, list[int]]]:
            wanted = set(self._get_indices(indices))
            out = []
            for worker, block in zip(self.workers, self.blocks, strict=True):
                local = [i - block.start for i in block if i in wanted]
                if local:
                    out.append((worker, local))
            return out

        def _call(self, header: dict[str, Any], indices: Any) -> list[Any]:
            targets = self._by_worker(indices)
            for worker, local in targets:
                worker.send(pack({**header, "envs": local}))
            values: list[Any] = []
            for worker, _ in targets:
                values += self._reply(worker)[0].get("values", [])
            return values

        def get_attr(self, attr_name: str, indices: Any = None) -> list[Any]:
            return self._call({"cmd": "get_attr", "name": attr_name}, indices)

        def set_attr(self, attr_name: str, value: Any, indices: Any = None) -> None:
            value = _jsonable(value, f"attribute {attr_name!r}")
            self._call({"cmd": "set_attr", "name": attr_name, "value": value}, indices)

        def env_method(
            self, method_name: str, *method_args: Any, indices: Any = None, **method_kwargs: Any
        ) -> list[Any]:
            header = {
                "cmd": "env_method",
                "name": method_name,
                "args": _jsonable(list(method_args), f"{method_name}()'s arguments"),
                "kwargs": _jsonable(method_kwargs, f"{method_name}()'s arguments"),
            }
            return self._call(header, indices)

        def env_is_wrapped(self, wrapper_class: type, indices: Any = None) -> list[bool]:
            # the workers' envs are bare ResidualEnvs
            return [False for _ in self._get_indices(indices)]

        def get_images(self) -> Sequence[np.ndarray | None]:
            return [None for _ in range(self.num_envs)]

    _RolloutVecEnv.__name__ = _RolloutVecEnv.__qualname__ = "RolloutVecEnv"
    _CLASS = _RolloutVecEnv
    return _CLASS


def make_venv(
    cfg: ExperimentConfig,
    fcfg: FinetuneConfig,
    normaliser: NumpyNormaliser | None,
    *,
    squash: bool,
) -> Any:
    """The training envs of ``tether finetune`` as ``finetune.workers`` says."""
    if fcfg.workers == "inline":
        from stable_baselines3.common.vec_env import DummyVecEnv

        from tether.policies.residual.env import ResidualEnv

        return DummyVecEnv(
            [lambda: ResidualEnv(cfg, fcfg, normaliser, squash=squash) for _ in range(fcfg.n_envs)]
        )
    from tether.core.config import dump_config

    return RolloutVecEnv(
        dump_config(cfg),
        fcfg.n_envs,
        squash=squash,
        normaliser=normaliser,
        kind=fcfg.workers,
        n_workers=resolve_workers(fcfg),
        ray_address=fcfg.ray_address,
    )
