"""The node graph of an experiment, shared by `tether up` and launch/sim.launch.py.

``plan_graph`` says which nodes run, with which parameters, namespace and environment;
``GraphProcesses`` starts them as separate processes (no ROS install needed: the nodes come
from the PyPI wheels) and stops them cleanly. The launch file turns the same plan into
launch_ros Node actions, so both read one experiment YAML the same way.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from tether.core import registry
from tether.core.config import ExperimentConfig, load_config
from tether.core.errors import ConfigError, TetherError
from tether.core.paths import find_given
from tether_ros import interface as itf
from tether_ros.kinds import experiment_io, kind_io


@dataclass(frozen=True)
class NodeSpec:
    """One node: ``package``/``executable`` as installed by colcon, ``module`` for python -m."""

    name: str
    package: str
    executable: str
    module: str
    namespace: str
    parameters: dict[str, object] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """Unique within a graph (process and log name): the name, after the namespace when the
        node has one (``cf0_policy_server``), since per-drone nodes share a name."""
        ns = self.namespace.strip("/").replace("/", "_")
        return f"{ns}_{self.name}" if ns else self.name


def chunked_refusal(policy: str) -> str:
    """The one sentence that refuses ros.chunked for a policy served per observation
    (registry option ``serving: per_observation``, e.g. a base + residual model: the
    residual corrects every step from the latest observation; a chunk executor executes rows
    planned earlier and asks for a chunk only when its queue runs low)."""
    return (
        f"ros.chunked: a {policy} policy corrects every control step from the latest "
        "observation, and a chunk executor executes rows planned earlier without it: set "
        "ros.chunked: false (the policy server then answers every observation)"
    )


def graph_env(cfg: ExperimentConfig, base: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for every node: Fast DDS with the shared-memory profile, headless GL."""
    env = dict(os.environ if base is None else base)
    env.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
    env.setdefault("MUJOCO_GL", "egl")
    env.setdefault("PYOPENGL_PLATFORM", "egl")
    env.setdefault("PYTHONUNBUFFERED", "1")
    if cfg.ros.dds_profile:  # absolute: load_config resolved it (tether.core.paths)
        env["FASTDDS_DEFAULT_PROFILES_FILE"] = str(cfg.ros.dds_profile)
    if cfg.ros.domain_id is not None:
        env["ROS_DOMAIN_ID"] = str(cfg.ros.domain_id)
    return env


def plan_graph(
    experiment: str | Path,
    overrides: list[str] | None = None,
    recorder: dict[str, object] | None = None,
    policy: bool = True,
) -> list[NodeSpec]:
    """The nodes of an experiment: a sim bridge and the policy servers the robot's kind
    runs (tether_ros.kinds: one in the robot's namespace; a drone fleet: one per drone, in
    the drone's), plus a recorder when ``recorder`` gives its parameters (``output``,
    optionally ``fps``, ...). With a ``hardware:`` section the hardware bridge replaces the
    sim bridge, after the mock driver when ``hardware.mock`` (see hardware_nodes).
    ``policy=False`` leaves the policy servers out (a human drives through teleop).
    ``ros.chunked`` adds a chunk_executor and puts the policy server in chunk mode (kinds
    whose chunks an executor executes; not for a policy served per observation)."""
    path = str(find_given(experiment))
    cfg = load_config(path, overrides)  # fail here, once, with a clear message
    params: dict[str, object] = {"experiment": path}
    if overrides:
        params["overrides"] = list(overrides)
    ns = cfg.ros.namespace
    io = experiment_io(cfg)
    if cfg.ros.chunked and not io.chunked:
        chunked = [k for k in registry.available("ros_io") if kind_io(k).chunked]
        raise ConfigError(
            f"ros.chunked runs a chunk_executor, which executes the chunks of "
            f"{' and '.join(chunked)} robots; '{cfg.robot}' is a {io.kind}: leave ros.chunked off"
        )
    if cfg.ros.chunked and registry.served_per_observation(cfg.policy.type):
        raise ConfigError(chunked_refusal(cfg.policy.type))
    if cfg.sim is not None:  # an engine that cannot run here says so before a node starts
        from tether.sim.factory import engine_missing

        why = engine_missing(cfg.sim.type, cfg.robot)
        if why is not None:
            raise ConfigError(why)
    if cfg.hardware is not None:
        nodes = hardware_nodes(cfg, params)
    else:
        bridge = NodeSpec(
            "sim_bridge", "tether_ros", "sim_bridge", "tether_ros.sim_bridge", ns, params
        )
        nodes = [*standin_nodes(cfg, params), bridge]
    servers = io.policy_servers(cfg) if policy else []
    for sub, extra in servers:
        # the user's overrides first, then what the kind adds (a drone's one-drone world)
        own_overrides = [*(overrides or []), *extra]
        own = {**params, "overrides": own_overrides} if own_overrides else dict(params)
        if cfg.ros.chunked:
            own["chunk_mode"] = True
        # in the robot's namespace, or a namespace under it (a drone's cf<i>)
        where = "/".join(x for x in (ns.strip("/"), sub) if x) if sub else ns
        module = "tether_ros.policy_server"
        nodes.append(NodeSpec("policy_server", "tether_ros", "policy_server", module, where, own))
    if servers and cfg.ros.chunked:
        # executes the chunks on the robot side; in the sim graph on the sim's /clock, which
        # the chunks' stamps (observation times) are in
        executor: dict[str, object] = {**params, "use_sim_time": cfg.hardware is None}
        low_water = chunk_low_water_s(cfg)
        if low_water is not None:
            executor["low_water_s"] = low_water
        nodes.append(
            NodeSpec(
                "chunk_executor",
                "tether_ros",
                "chunk_executor",
                "tether_ros.chunk_executor",
                ns,
                executor,
            )
        )
    if recorder is not None:
        rec = {**params, **recorder}
        nodes.append(NodeSpec("recorder", "tether_ros", "recorder", "tether_ros.recorder", ns, rec))
    return nodes


def chunk_low_water_s(cfg: ExperimentConfig) -> float | None:
    """When a chunk executor should ask for the next chunk: once the part of a chunk the
    policy was trained to execute (``execute_steps`` rows of ``action_dt``) has run, i.e.
    with (horizon - execute_steps) rows left. From an onnx policy's model.json or a
    diffusion checkpoint's contract.json; None (the executor's default) for other policies."""
    policy = cfg.policy
    if policy.type == "onnx" and getattr(policy, "model", None) is not None:
        from tether.policies.runtime import read_contract

        c = read_contract(policy.model)  # type: ignore[attr-defined]
        horizon = int(c["outputs"][0]["shape"][-2])
    elif policy.type == "diffusion" and getattr(policy, "checkpoint", None) is not None:
        path = Path(policy.checkpoint) / "contract.json"  # type: ignore[attr-defined]
        if not path.is_file():
            return None  # the policy server says what is wrong with the checkpoint
        c = json.loads(path.read_text())
        horizon = int(c["horizon"])
    else:
        return None
    execute = int(getattr(policy, "execute_steps", None) or c.get("execute_steps", 1))
    return max(0.0, (horizon - execute) * float(c["action_dt"]))


def standin_nodes(cfg: ExperimentConfig, params: dict[str, object]) -> list[NodeSpec]:
    """A simulator reached over ROS 2 with ``sim.standin`` set: the node that stands in for
    it (its registry option ``standin_node``; isaac_ros: the MuJoCo world behind Isaac's
    interface), named as the scene node the bridge calls, started before the bridge."""
    sim = cfg.sim
    if sim is None or not getattr(sim, "standin", False):
        return []
    options = registry.entry("sim", sim.type).options
    exe, module = options.get("standin_node"), options.get("standin_module")
    if not exe or not module:
        return []
    name = str(getattr(sim, "scene_node", exe)).strip("/").split("/")[-1]
    return [NodeSpec(name, "tether_ros", str(exe), str(module), cfg.ros.namespace, params)]


def hardware_nodes(cfg: ExperimentConfig, params: dict[str, object]) -> list[NodeSpec]:
    """The hardware bridge in place of the sim bridge, after the mock hardware when
    ``hardware.mock`` and the hardware type has one (its registry options: ``mock_node``,
    and ``mock_namespace``: "driver" = the driver namespace, where a real driver's topics
    would be, else the bridge's)."""
    hw = cfg.hardware
    assert hw is not None
    if hw.fleet:
        # a swarm: each member's mock and bridge in its namespace, on its one-drone experiment
        nodes = []
        for i, member in enumerate(hw.fleet):
            own = [*params.get("overrides", []), *hw.member_overrides(i)]  # type: ignore[misc]
            where = "/".join(
                x for x in (cfg.ros.namespace.strip("/"), member.namespace.strip("/")) if x
            )
            one = load_config(str(params["experiment"]), own)
            nodes += hardware_nodes(
                one.model_copy(update={"ros": one.ros.model_copy(update={"namespace": where})}),
                {**params, "overrides": own},
            )
        return nodes
    ns = cfg.ros.namespace
    options = registry.entry("hardware", hw.type).options
    mock = options.get("mock_node")
    nodes = []
    if hw.mock and mock:
        where = hw.driver_namespace.strip("/") if options.get("mock_namespace") == "driver" else ns
        nodes.append(NodeSpec(mock, "tether_ros", mock, "tether_ros.mock_nodes", where, params))
    bridge = "tether_ros.hardware_bridge"
    nodes.append(NodeSpec("hardware_bridge", "tether_ros", "hardware_bridge", bridge, ns, params))
    return nodes


def launch_overrides(
    robot: str = "", sim: str = "", task: str = "", policy: str = "", headless: str = ""
) -> list[str]:
    """Dotted overrides from the launch arguments of launch/sim.launch.py (empty = keep)."""
    out = []
    if robot:
        out.append(f"robot={robot}")
    for section, value in (("sim", sim), ("task", task), ("policy", policy)):
        if value:
            out.append(f"{section}.type={value}")
    if headless and headless.lower() in ("false", "0", "no"):
        out.append("sim.headless=false")
    return out


def ros_args(node: NodeSpec) -> list[str]:
    """Command-line ``--ros-args`` for a node spec (name, namespace, parameters)."""
    args = ["--ros-args", "-r", f"__node:={node.name}"]
    if node.namespace:
        args += ["-r", f"__ns:=/{node.namespace.strip('/')}"]
    for key, value in node.parameters.items():
        if isinstance(value, list):
            if not value:
                continue
            value = "[" + ", ".join(f"'{v}'" for v in value) + "]"
        args += ["-p", f"{key}:={value}"]
    return args


def _die_with_parent() -> None:
    """In the child: ask Linux to send SIGTERM when the parent process dies, and take
    SIGINT back from an 'ignore' inherited from a background shell, so stop() works."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGTERM)
    except OSError:
        pass  # not Linux: stop() still cleans up on a normal exit


# how long a graph about to start listens for another one on its ROS 2 domain (discovery on
# one idle machine takes 20-70 ms here; a busy one, several test graphs at once, can need
# several hundred)
DOMAIN_PROBE_S = 1.0
DDS_ENV = ("RMW_IMPLEMENTATION", "FASTDDS_DEFAULT_PROFILES_FILE", "ROS_DOMAIN_ID")


def domain_conflict(
    nodes: list[NodeSpec], env: dict[str, str], wait_s: float | None = None
) -> str | None:
    """One sentence if another graph already runs where ``nodes`` would: a node of the same
    name in the same namespace on this ROS 2 domain, or, for a simulated graph, a /clock
    already published (another simulation, or a robot's bridge); None when the domain is free
    (after listening ``wait_s``, by default ``DOMAIN_PROBE_S``; a conflict ends it early).

    Two graphs on one domain mix silently: each sim bridge takes both policies' commands,
    each supervisor's resets reach both bridges, and a recording saves the other's episodes."""
    import rclpy
    from rclpy.node import Node

    for key in DDS_ENV:  # listen with the nodes' DDS settings (the supervisor does the same)
        if key in env:
            os.environ[key] = env[key]
    wanted = {("/" + n.namespace.strip("/"), n.name) for n in nodes}
    simulated = any(n.name == "sim_bridge" for n in nodes)
    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    try:
        probe = Node(
            "tether_domain_probe",
            context=ctx,
            start_parameter_services=False,
            enable_rosout=False,
        )
        deadline = time.monotonic() + (DOMAIN_PROBE_S if wait_s is None else wait_s)
        while True:
            found = sorted(
                f"{ns.rstrip('/')}/{name}"
                for name, ns in probe.get_node_names_and_namespaces()
                if (ns, name) in wanted
            )
            clock = simulated and probe.count_publishers("/clock") > 0
            if found or clock or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        probe.destroy_node()
    finally:
        rclpy.shutdown(context=ctx)
    if not found and not clock:
        return None
    what = f"nodes {', '.join(found)}" if found else "a /clock published by another graph"
    domain = env.get("ROS_DOMAIN_ID", "0")
    return (
        f"ROS_DOMAIN_ID {domain} already has {what}: another graph (tether up, record, "
        "eval --ros, a launch file) runs there, and two graphs on one domain take each "
        f"other's commands, resets and recordings; {itf.FREE_DOMAIN}"
    )


class GraphProcesses:
    """Start each node as its own process; stop all of them on exit or when one dies.
    A graph refuses to start where another already runs (:func:`domain_conflict`)."""

    def __init__(self, nodes: list[NodeSpec], env: dict[str, str], log_dir: Path | None = None):
        self.nodes = nodes
        self.env = env
        self.log_dir = log_dir
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self) -> None:
        why = domain_conflict(self.nodes, self.env)
        if why is not None:
            raise TetherError(why)
        for node in self.nodes:
            out = None
            if self.log_dir is not None:
                self.log_dir.mkdir(parents=True, exist_ok=True)
                out = open(self.log_dir / f"{node.key}.log", "wb")  # noqa: SIM115
            self.procs[node.key] = subprocess.Popen(
                [sys.executable, "-m", node.module, *ros_args(node)],
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT if out else None,
                stdin=subprocess.DEVNULL,
                # own process group: Ctrl-C reaches the supervisor, which stops nodes in order
                start_new_session=True,
                # and if the supervisor itself is killed, the kernel stops the nodes
                preexec_fn=_die_with_parent,
            )

    def dead(self) -> list[tuple[str, int]]:
        """Nodes that exited, with their exit codes."""
        return [(n, p.returncode) for n, p in self.procs.items() if p.poll() is not None]

    def log_tail(self, name: str, lines: int = 15) -> str:
        if self.log_dir is None:
            return ""
        path = self.log_dir / f"{name}.log"
        return (
            "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
            if path.exists()
            else ""
        )

    def stop(self, timeout_s: float = 5.0) -> None:
        """SIGINT (clean shutdown) to one node after the other in reverse start order, each
        waited for, ``timeout_s`` for all of them; then SIGTERM, then SIGKILL for stragglers.

        The order matters: a bridge's last act is its safe stop (zero twist, hold, land) to
        the driver started before it (a mock driver), which must still be there to get it."""
        deadline = time.monotonic() + timeout_s
        for p in reversed(list(self.procs.values())):
            if p.poll() is not None:
                continue
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(max(0.0, deadline - time.monotonic()))
        for sig, wait in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 2.0)):
            alive = [p for p in self.procs.values() if p.poll() is None]
            if not alive:
                return
            for p in alive:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, sig)
            deadline = time.monotonic() + wait
            for p in alive:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    p.wait(max(0.0, deadline - time.monotonic()))

    def __enter__(self) -> GraphProcesses:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
