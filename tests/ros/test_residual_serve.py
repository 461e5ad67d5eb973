"""A base + residual model (tether-residual/1, `tether export` of a finetune checkpoint)
deployed over ROS 2: `tether eval <folder> --ros` runs the graph `tether up` runs (sim bridge
with its safety filter, policy server serving ``residual_onnx`` per observation) and gets,
seed for seed, what the in-process loop gets; ``ros.chunked`` is refused for it.

The model is the reach case's biased base (configs/experiments/panda_reach_residual.yaml:
shoulder and elbow offset, it stops ~6 cm short) with a residual built, not trained, to
cancel the offset (policy_helpers.reach_residual_folder): base alone fails, base + residual
succeeds, so a ROS 2 path that dropped or misfed the residual fails the test."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tether.core.errors import ConfigError

pytest.importorskip("rclpy")
pytestmark = pytest.mark.ros

from tether_ros.graph import plan_graph  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "policies"))
SEED, EPISODES = 1000, 3


def _experiment(tmp_path: Path, chunked: bool) -> Path:
    """`tether up` of an exported residual: the reach expert's world, residual_onnx policy
    (the model path is not read by plan_graph)."""
    path = tmp_path / "reach_residual_up.yaml"
    expert = REPO / "configs/experiments/panda_reach_expert.yaml"
    path.write_text(
        f"extends: {expert}\nname: reach_residual_up\n"
        "policy: {type: residual_onnx, model: models/reach_residual}\n"
        f"ros: {{chunked: {str(chunked).lower()}}}\n"
    )
    return path


def test_chunked_residual_is_refused_in_one_sentence(tmp_path: Path) -> None:
    nodes = plan_graph(_experiment(tmp_path, chunked=False))
    assert [n.name for n in nodes] == ["sim_bridge", "policy_server"]
    assert "chunk_mode" not in nodes[1].parameters
    with pytest.raises(ConfigError) as err:
        plan_graph(_experiment(tmp_path, chunked=True))
    msg = str(err.value)
    assert msg.startswith("ros.chunked: a residual_onnx policy corrects every control step")
    assert "ros.chunked: false" in msg and "\n" not in msg


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    pytest.importorskip("torch")
    pytest.importorskip("mujoco")
    pytest.importorskip("onnxruntime")
    from policy_helpers import reach_residual_folder

    root = tmp_path_factory.mktemp("reach_residual")
    return {
        "residual": reach_residual_folder(root / "residual", cancel=True),
        "base": reach_residual_folder(root / "base", cancel=False),
    }


def _eval(folder: Path, out: Path, ros: bool, overrides: list[str]) -> list[tuple[int, bool, int]]:
    """(seed, success, steps) per episode of `tether eval <folder>` (--ros)."""
    from tether.cli.train import EvalOptions, run_eval

    opts = EvalOptions(
        episodes=EPISODES, seed=SEED, out=out, ros=ros, video=False, overrides=overrides
    )
    assert run_eval(str(folder), opts) == 0
    summary = json.loads((out / "summary.json").read_text())
    return [(e["seed"], bool(e["success"]), int(e["steps"])) for e in summary["per_episode"]]


def _same(ros: list[tuple[int, bool, int]], local: list[tuple[int, bool, int]], steps: int):
    """The same (seed, success) per episode, step counts within ``steps``."""
    assert [r[:2] for r in ros] == [r[:2] for r in local], (ros, local)
    for r, loc in zip(ros, local, strict=True):
        assert abs(r[2] - loc[2]) <= steps, (ros, local)


@pytest.mark.slow
@pytest.mark.mujoco
def test_residual_over_ros_matches_in_process(folders: dict[str, Path], tmp_path: Path) -> None:
    seeds = list(range(SEED, SEED + EPISODES))
    # in-process: the residual is what makes these seeds succeed
    base = _eval(folders["base"], tmp_path / "base", False, [])
    local = _eval(folders["residual"], tmp_path / "local", False, [])
    assert [r[0] for r in local] == seeds
    assert not any(r[1] for r in base), base
    assert all(r[1] for r in local), local

    # over ROS 2 at the experiment's rate mode (realtime, the robot's): the same outcome per
    # seed (the step count may differ: a late answer is a stale step)
    _same(_eval(folders["residual"], tmp_path / "ros_rt", True, []), local, steps=200)
    # lockstep: the same steps too
    lockstep = ["ros.rate_mode=lockstep"]
    _same(_eval(folders["residual"], tmp_path / "ros_ls", True, lockstep), local, steps=1)
    _same(_eval(folders["base"], tmp_path / "ros_base", True, lockstep), base, steps=1)

    # the sim bridge's safety filter stays in front of the residual: a slower velocity limit
    # changes the outcome in-process, and over ROS 2 identically
    slow = ["safety.velocity_scale=0.2"]
    local_slow = _eval(folders["residual"], tmp_path / "local_slow", False, slow)
    assert [r[1] for r in local_slow] != [r[1] for r in local], local_slow
    ros_slow = _eval(folders["residual"], tmp_path / "ros_slow", True, [*lockstep, *slow])
    _same(ros_slow, local_slow, steps=1)


@pytest.mark.slow
@pytest.mark.mujoco
@pytest.mark.pybullet
def test_installed_package_serves_a_residual_on_a_model_base(tmp_path: Path) -> None:
    """A residual whose base is an exported model folder (base/ inside the residual's folder)
    under models/, with an experiment under configs/experiments/, needs no code: colcon
    installs the subfolder into share/tether_ros and the installed graph serves it from any
    directory (what test_installed_graphs runs for every shipped experiment)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnxruntime")
    import numpy as np
    import test_installed_graphs as installed
    from colcon_helpers import PKG, build_workspace, sourced_env

    from tether.core.config import dump_config, load_config
    from tether.core.experiment import robot_spec
    from tether.policies.residual.checkpoint import save_checkpoint
    from tether.policies.residual.export import export_checkpoint
    from tether.policies.residual.model import ResidualMLP

    torch.manual_seed(0)
    lift = REPO / "configs/experiments/panda_lift_diffusion.yaml"
    cfg = load_config(lift)
    spec = robot_spec(cfg)
    low, high = spec.action.low_array(), spec.action.high_array()
    model = ResidualMLP(np.zeros(16), np.ones(16), low, high, 0.1, (16,), last_layer_init=1e-3)
    contract = {
        "algorithm": "ppo", "robot": "panda", "action_names": list(spec.action.names),
        "control_hz": spec.control_hz, "observation_keys": ["state", "env_state"],
        "observation_sizes": [9, 7], "experiment": dump_config(cfg),
        "base": {"model": str(REPO / "models/panda_lift_diffusion"), "offset": None},
    }  # fmt: skip
    name = "panda_lift_residual_test.yaml"
    ckpt = save_checkpoint(tmp_path / "ckpt", model, contract)

    def add_residual(pkg: Path) -> None:
        export_checkpoint(ckpt, "onnx", pkg / "models" / "lift_residual")
        (pkg / "configs" / "experiments" / name).write_text(
            "extends: panda_lift_diffusion.yaml\nname: panda_lift_residual_test\n"
            "policy: {type: residual_onnx, model: models/lift_residual}\n"
            "ros: {chunked: false}\n"
        )

    install = build_workspace(tmp_path / "ws", prepare=add_residual)
    share = install / PKG / "share" / PKG / "models" / "lift_residual"
    assert sorted(p.name for p in share.iterdir()) == ["base", "model.json", "residual.onnx"]
    assert (share / "base" / "model.onnx").is_file() and (share / "base" / "model.json").is_file()
    run = tmp_path / "run"
    run.mkdir()
    installed.test_installed_graph_reaches_its_first_action(
        name, install, sourced_env(install), run
    )
    log = (run / "cwd" / "policy_server.log").read_text(errors="replace")
    assert "policy residual_onnx for panda" in log, log


SHIPPED = REPO / "models" / "panda_insert_residual"


@pytest.mark.slow
@pytest.mark.mujoco
def test_shipped_insert_residual_over_ros_matches_in_process(tmp_path: Path) -> None:
    """The shipped fine-tuned model (models/panda_insert_residual: the behaviour-cloned
    insertion base + its residual), as `tether up configs/experiments/
    panda_insert_residual.yaml` serves it (policy server per observation, the sim bridge's
    safety filter in front), gives in lockstep the in-process outcome and step count on
    seeds 1000-1002; the residual is applied (its graph moves the base's action:
    tests/policies/test_shipped_models.py::test_residual_folder_matches_its_graphs)."""
    pytest.importorskip("mujoco")
    pytest.importorskip("onnxruntime")
    from tether.core.config import load_config

    up = load_config(REPO / "configs/experiments/panda_insert_residual.yaml")
    assert up.policy.type == "residual_onnx" and Path(up.policy.model) == SHIPPED
    nodes = plan_graph(REPO / "configs/experiments/panda_insert_residual.yaml")
    assert [n.name for n in nodes] == ["sim_bridge", "policy_server"]
    local = _eval(SHIPPED, tmp_path / "local", False, [])
    assert [r[0] for r in local] == list(range(SEED, SEED + EPISODES))
    ros = _eval(SHIPPED, tmp_path / "ros", True, ["ros.rate_mode=lockstep"])
    _same(ros, local, steps=1)
