"""The CLI as a user runs it: one-line errors naming the field, non-zero exit codes."""

from __future__ import annotations

import subprocess
import sys

import pytest


def tether(*args: str, cwd=None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tether.cli.main", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("content", "field"),
    [
        (
            "name: x\nsim: {type: mujoco, control_hz: -1}\ntask: {type: lift}\npolicy: {type: hold}\n",
            "sim.control_hz",
        ),
        (
            "name: x\nsim: {type: mujoco}\ntask: {type: lift, max_duration_s: fast}\npolicy: {type: hold}\n",
            "task.max_duration_s",
        ),
        (
            "name: x\nsim: {type: mujoco}\ntask: {type: lift}\npolicy: {type: hold}\nsafty: {}\n",
            "safty",
        ),
        ("sim: {type: mujoco}\ntask: {type: lift}\npolicy: {type: hold}\n", "name"),
        ("name: x\nsim: {type: gazebo}\ntask: {type: lift}\npolicy: {type: hold}\n", "sim.type"),
        # a variant of a shipped experiment (extends: resolves there by name)
        ("extends: panda_lift_demo.yaml\nsim: {control_hz: -1}\n", "sim.control_hz"),
        ("extends: no_such_experiment.yaml\nname: x\n", "extends"),
    ],
)
def test_malformed_config_gives_one_line_naming_the_field(tmp_path, content, field):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(content)
    for verb in (["check", str(cfg)], ["up", str(cfg)], ["demo", "--config", str(cfg)]):
        r = tether(*verb)
        assert r.returncode == 2, (verb, r.stdout, r.stderr)
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1, r.stderr
        assert lines[0].startswith("error: ") and f": {field}:" in lines[0], lines[0]
        assert "Traceback" not in r.stderr


def test_bad_override_on_the_command_line(repo):
    r = tether("check", str(repo / "configs/experiments/panda_lift_demo.yaml"), "sim.control_hz=0")
    assert r.returncode == 2
    assert "sim.control_hz" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_check_prints_resolved_config(repo):
    r = tether("check", str(repo / "configs/experiments/panda_lift_demo.yaml"), "episodes.count=3")
    assert r.returncode == 0, r.stderr
    assert "count: 3" in r.stdout and "type: mujoco" in r.stdout


def test_plugins_lists_every_kind_and_each_robot_with_its_kind():
    from tether.core import registry

    r = tether("plugins")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    headers = [ln.split(" (")[0] for ln in lines if not ln.startswith(" ")]
    assert headers == list(registry.KINDS)
    rows = {tuple(ln.split()[:2]) for ln in lines if ln.startswith("  ")}
    assert {("panda", "arm"), ("husky", "mobile_base"), ("crazyflie", "quadcopter")} <= rows
    assert ("mujoco/arm", "tether.sim.mujoco.backend:MujocoBackend") in rows
    assert ("scripted_expert", "tether.sim.experts.expert:ScriptedExpert") in rows
    panda = next(ln for ln in lines if ln.split()[:1] == ["panda"])
    assert "Franka" in panda and "robots/panda]" in panda  # summary and folder
    assert tether("list").stdout == r.stdout


def test_plugins_shows_a_new_robot_and_why_a_broken_one_fails(capsys):
    """A newcomer's robot folder shows up with its kind; one whose description does not
    load is listed with the error, the others still are, and the exit code says so."""
    from tether.cli.main import main
    from tether.core import registry

    registry.register("robot", "newbot", "tether.robots.husky.robot:ROBOT")
    registry.register("robot", "brokenbot", "tether.robots.no_such_robot.robot:ROBOT")
    try:
        code = main(["plugins"])
    finally:
        registry.unregister("robot", "newbot")
        registry.unregister("robot", "brokenbot")
    out = capsys.readouterr().out
    assert code == 2
    assert any(ln.split()[:2] == ["newbot", "mobile_base"] for ln in out.splitlines())
    broken = next(ln for ln in out.splitlines() if ln.split()[:1] == ["brokenbot"])
    assert "error: ModuleNotFoundError" in broken and "no_such_robot" in broken
    assert any(ln.split()[:2] == ["panda", "arm"] for ln in out.splitlines())


@pytest.mark.parametrize("teleop", ["scripted", "keyboard"])
def test_record_to_an_unwritable_place_is_one_clear_error(repo, tmp_path, teleop):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    exp = str(repo / "configs/experiments/panda_lift_expert.yaml")
    r = tether("record", exp, "--teleop", teleop, "--out", str(blocker / "ds"))
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: cannot write the dataset to"), r.stderr


def test_record_with_an_unknown_device_names_the_choices(repo):
    exp = str(repo / "configs/experiments/panda_lift_expert.yaml")
    r = tether("record", exp, "--teleop", "joystick9000")
    assert r.returncode == 2
    assert "keyboard" in r.stderr and "spacemouse" in r.stderr
