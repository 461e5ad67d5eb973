"""ONNX export of a swarm checkpoint: ``model.onnx`` + ``model.json`` (format tether-onnx/1,
docs/model_json.md), served by the generic ``onnx`` policy like any other model.

The graph takes the whole swarm's observation and answers for every drone: ``state``
(1, 1, 13 N: each drone's position, quaternion, velocity, body rates) and ``goal`` (1, 1,
7 M, M <= N: ``env_state``, the drones' goal poses; missing ones are the first's) in,
``action`` (1, hold_steps, 4 N: each drone's velocity setpoint vx, vy, vz m/s and a yaw
rate holding heading 0) out. N is free (a -1 dimension in model.json): the graph finds each
drone's K nearest neighbours itself (TopK over the pairwise distances, padded with K absent
drones), so one exported file flies 4 or 16 drones in one world, and one drone's policy
server over ROS 2 feeds it its own state first, then its neighbours' (``"neighbours":
true`` in model.json), with its own goal, and flies the first 4 columns.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from tether.policies.runtime import portable_experiment
from tether.policies.swarm.trainer import TRAINER, load_actor

OPSET = 17
STATE_DIM = 13
GOAL_DIM = 7
FAR = 1.0e4  # m: where the padding drones sit (beyond any sensing range)
YAW_P = 2.0  # 1/s, as the quad_pid policy's heading hold


class SwarmExport(nn.Module):
    """Swarm observation -> features (as tether.sim.quadrotor.swarm.swarm_features) ->
    shared actor per drone -> velocity setpoints (1, hold, 4 N)."""

    def __init__(self, actor: nn.Module, contract: dict[str, Any]) -> None:
        super().__init__()
        f = contract["features"]
        self.actor = actor
        self.k = int(f["neighbours"])
        self.v_max = float(f["v_max"])
        self.goal_cap = float(f["goal_cap"])
        self.sense = float(f["sense_range"])
        self.hold = int(f["hold_steps"])

    def forward(self, state: torch.Tensor, goal: torch.Tensor) -> torch.Tensor:
        s = state.reshape(-1, STATE_DIM)
        g = goal.reshape(-1, GOAL_DIM)[:, 0:3]
        pos, vel = s[:, 0:3], s[:, 7:10]
        # fewer goals than drones (one drone's server knows its own goal only): the first
        # goal stands in for the others, whose actions nobody uses
        g = torch.cat([g, g[0:1].expand(pos.shape[0] - g.shape[0], 3)], dim=0)
        err = (g - pos) / self.goal_cap
        err = err / torch.clamp(torch.linalg.vector_norm(err, dim=1, keepdim=True), min=1.0)
        own = torch.cat([err, vel / self.v_max, pos[:, 2:3] - 1.0], dim=1)
        k = self.k
        pad_p = torch.full((k, 3), FAR, dtype=pos.dtype) + pos[0:1] * 0.0
        all_p = torch.cat([pos, pad_p], dim=0)  # (N + k, 3)
        all_v = torch.cat([vel, torch.zeros_like(pad_p)], dim=0)
        diff = all_p[None, :, :] - pos[:, None, :]  # (N, N + k, 3)
        dist = torch.linalg.vector_norm(diff, dim=2)
        n = pos.shape[0]
        rows = torch.arange(n)[:, None]
        cols = torch.arange(all_p.shape[0])[None, :]
        dist = dist + (rows == cols).to(dist.dtype) * (10.0 * FAR)  # never oneself
        near, order = torch.topk(dist, k, dim=1, largest=False, sorted=True)  # (N, k)
        pj = all_p[order]  # (N, k, 3)
        vj = all_v[order]
        rel = (pj - pos[:, None, :]) / self.sense
        rel = rel / torch.clamp(torch.linalg.vector_norm(rel, dim=2, keepdim=True), min=1.0)
        rv = (vj - vel[:, None, :]) / (2.0 * self.v_max)
        close = torch.clamp(1.0 - near / self.sense, min=0.0)[:, :, None]
        present = (near < FAR / 2).to(rel.dtype)[:, :, None]
        nb = torch.cat([rel, rv, close], dim=2) * present
        x = torch.cat([own, nb.reshape(n, -1)], dim=1)
        v = self.actor(x)  # (N, 3), m/s
        q = s[:, 3:7]
        yaw = torch.atan2(
            2.0 * (q[:, 0] * q[:, 3] + q[:, 1] * q[:, 2]),
            1.0 - 2.0 * (q[:, 2] * q[:, 2] + q[:, 3] * q[:, 3]),
        )
        yaw_rate = torch.clamp(-YAW_P * yaw, -2.0, 2.0)[:, None]
        return torch.cat([v, yaw_rate], dim=1).reshape(1, 1, -1).repeat(1, self.hold, 1)


def model_json(contract: dict[str, Any]) -> dict[str, Any]:
    hz = float(contract["control_hz"])
    hold = int(contract["features"]["hold_steps"])
    return {
        "format": "tether-onnx/1",
        "trainer": TRAINER,
        "robot": contract["robot"],
        "action_mode": contract["action_mode"],
        "action_names": contract["action_names"],
        "control_hz": hz,
        "action_dt": 1.0 / hz,
        "obs_horizon": 1,
        "inputs": [
            {
                "name": "state",
                "key": "state",
                "shape": [1, 1, -1],
                "multiple_of": STATE_DIM,
                "dtype": "float32",
            },
            {
                "name": "goal",
                "key": "env_state",
                "shape": [1, 1, -1],
                "multiple_of": GOAL_DIM,
                "dtype": "float32",
            },
        ],
        "outputs": [{"name": "action", "shape": [1, hold, -1], "multiple_of": 4}],
        "execute_steps": hold,
        # a policy server of one drone feeds its neighbours' states after its own
        "neighbours": True,
        "features": contract["features"],
        "description": "decentralised swarm policy: every drone's state and goal -> every "
        "drone's velocity setpoint, each from its own state and its K nearest neighbours "
        "(shared weights; any number of drones)",
        "experiment": portable_experiment(contract.get("experiment")),
    }


def export_onnx(checkpoint: Path, out: Path | None = None) -> Path:
    """Export a checkpoint to ``out``/model.onnx (default ``<checkpoint>/onnx``)."""
    actor, contract = load_actor(checkpoint)
    out = out or checkpoint / "onnx"
    out.mkdir(parents=True, exist_ok=True)
    path = out / "model.onnx"
    module = SwarmExport(actor, contract).eval()
    state, goal = example_swarm(np.random.default_rng(0), 8)
    torch.onnx.export(
        module,
        (torch.from_numpy(state), torch.from_numpy(goal)),
        str(path),
        input_names=["state", "goal"],
        output_names=["action"],
        dynamic_axes={"state": {2: "state_len"}, "goal": {2: "goal_len"}, "action": {2: "act_len"}},
        opset_version=OPSET,
        dynamo=False,
    )
    fix_output_dims(path, int(contract["features"]["hold_steps"]))
    meta = model_json(contract)
    meta["parity"] = parity(module, path)
    (out / "model.json").write_text(json.dumps(meta, indent=2))
    return path


def fix_output_dims(path: Path, hold: int) -> None:
    """Write the output's static dimensions (1, hold, -1) into the graph: the exporter
    names every dimension of a Tile output, model.json fixes all but the drones'."""
    import onnx

    m = onnx.load(str(path))
    dims = m.graph.output[0].type.tensor_type.shape.dim
    dims[0].dim_value = 1
    dims[1].dim_value = hold
    onnx.checker.check_model(m)
    onnx.save(m, str(path))


def example_swarm(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """A random swarm observation: state (1, 1, 13 n), goal (1, 1, 7 n), float32."""
    s = np.zeros((n, STATE_DIM), np.float32)
    s[:, 0:3] = rng.uniform([-2, -2, 0.5], [2, 2, 2], (n, 3))
    q = rng.normal(size=(n, 4)) * [1, 0.1, 0.1, 0.5] + [3, 0, 0, 0]
    s[:, 3:7] = q / np.linalg.norm(q, axis=1, keepdims=True)
    s[:, 7:10] = rng.uniform(-1, 1, (n, 3))
    g = np.zeros((n, GOAL_DIM), np.float32)
    g[:, 0:3] = rng.uniform([-2, -2, 0.8], [2, 2, 1.6], (n, 3))
    g[:, 3] = 1.0
    return s.reshape(1, 1, -1), g.reshape(1, 1, -1)


def parity(module: nn.Module, path: Path, trials: int = 12) -> float:
    """Largest |torch - onnxruntime| (m/s, rad/s) over random swarms of 1 to 16 drones."""
    import onnxruntime as ort

    rng = np.random.default_rng(1)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    worst = 0.0
    for t in range(trials):
        state, goal = example_swarm(rng, [1, 2, 4, 8, 16][t % 5])
        with torch.no_grad():
            ref = module(torch.from_numpy(state), torch.from_numpy(goal)).numpy()
        (got,) = sess.run(None, {"state": state, "goal": goal})
        worst = max(worst, float(np.abs(ref - got).max()))
    return worst
