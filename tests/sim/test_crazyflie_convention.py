"""The Crazyflie model follows the real vehicle: body axes, rotor numbering and spin.

The documented layout (docs/quadrotor.md, sim/quadrotor/crazyflie.py) is Bitcraze's: body
frame REP-103 (x forward between the front rotors M1 and M4, y left, z up); rotor index i
is motor M(i+1); M1 front-right CCW, M2 back-right CW, M3 back-left CCW, M4 front-left CW
(Bitcraze's cf2-coordinate-system page; bitcraze/crazyflie-simulation gazebo model.sdf;
crazyflie-firmware power_distribution_quadrotor.c). The expected signs below are written
out from that table and rigid-body physics, never computed by the code under test, so the
convention cannot drift in the numpy model, the engines or the mixer without a failure here.

Physics used for the expected signs (REP-103, right-hand rule):
- A rotor at body (x, y, 0) pushing up with force f exerts torque r x F = (y f, -x f, 0).
  Extra thrust at the front (x > 0) gives a negative torque about +y: the nose goes UP
  (positive pitch about +y tilts the nose down). Extra thrust on the right (y < 0) gives a
  negative torque about +x: the right side rises, the drone rolls left.
- Air drag brakes a spinning propeller, so its motor pushes back on the body: the reaction
  torque about +z is opposite to the rotor's spin. Speeding up the CW rotors (spin -z)
  yaws the body CCW (+z); speeding up the CCW rotors yaws it CW (-z).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

import numpy as np
import pytest

from tether.core import registry
from tether.robots.crazyflie.robot import CRAZYFLIE, ROBOT, ROTOR_LAYOUT, crazyflie_spec
from tether.sim.quadrotor.dynamics import QuadrotorDynamics, hover_state

# Bitcraze's Crazyflie 2.x, written out by hand: motor, (sign x, sign y), spin seen from
# above. Index in this tuple = Tether's rotor index.
BITCRAZE = (
    ("M1", (+1, -1), "CCW"),  # front-right
    ("M2", (-1, -1), "CW"),  # back-right
    ("M3", (-1, +1), "CCW"),  # back-left
    ("M4", (+1, +1), "CW"),  # front-left
)
ARM = 0.0397  # m, centre to rotor axis (cf2x.urdf "arm", Bitcraze: 92 mm motor-to-motor)

# (what is raised, rotor indices, expected sign of the angular acceleration about body
# x, y, z; 0 = no acceleration about that axis, the pair's effects cancel)
PAIRS = [
    # front pair M1 (+x, -y) + M4 (+x, +y): torque_y = -x f < 0, nose up; the pair's
    # y offsets cancel (no roll); M1 CCW + M4 CW reactions cancel (no yaw)
    ("front M1+M4: nose up", (0, 3), (0, -1, 0)),
    # back pair M2 + M3: torque_y = -x f > 0, nose down
    ("back M2+M3: nose down", (1, 2), (0, +1, 0)),
    # right pair M1 (+x, -y) + M2 (-x, -y): torque_x = y f < 0, right side up, roll left;
    # x offsets cancel (no pitch); M1 CCW + M2 CW cancel (no yaw)
    ("right M1+M2: roll left", (0, 1), (-1, 0, 0)),
    # left pair M3 + M4: torque_x = y f > 0, left side up, roll right
    ("left M3+M4: roll right", (2, 3), (+1, 0, 0)),
    # CW pair M2 (-,-) + M4 (+,+): diagonal, thrust moments cancel; reaction of two CW
    # rotors is +z: yaw CCW
    ("CW pair M2+M4: yaw CCW", (1, 3), (0, 0, +1)),
    # CCW pair M1 (+,-) + M3 (-,+): reaction -z: yaw CW
    ("CCW pair M1+M3: yaw CW", (0, 2), (0, 0, -1)),
]
RAISE = 1.05  # the raised pair's speed, times hover; the other two stay at hover
ENGINES = [
    pytest.param("pybullet", marks=pytest.mark.pybullet),
    pytest.param("mujoco", marks=pytest.mark.mujoco),
]


def _rpm(raised: tuple[int, ...]) -> np.ndarray:
    rpm = np.full((1, 4), CRAZYFLIE.hover_rpm)
    rpm[0, list(raised)] *= RAISE
    return rpm


def _check_signs(dw: np.ndarray, expected: tuple[int, int, int], what: str) -> None:
    """dw (3,): angular acceleration (or rate change) about body x, y, z."""
    main = int(np.argmax(np.abs(expected)))
    assert np.sign(dw[main]) == expected[main], f"{what}: {dw}"
    for k in range(3):
        if expected[k] == 0:
            # the other axes: at least 100x smaller than the commanded one
            assert abs(dw[k]) < 1e-2 * abs(dw[main]), f"{what}: axis {k} of {dw}"


def test_rotor_positions_and_spins_are_bitcraze() -> None:
    a = ARM / np.sqrt(2.0)
    # what the engines and controllers read: the registered description's parameters
    assert registry.load("robot", "crazyflie").params is CRAZYFLIE
    assert CRAZYFLIE.rotors == ROTOR_LAYOUT
    pos = CRAZYFLIE.rotor_positions()
    for i, (motor, (sx, sy), spin) in enumerate(BITCRAZE):
        assert ROTOR_LAYOUT[i].motor == motor
        np.testing.assert_allclose(pos[i], [sx * a, sy * a, 0.0], atol=1e-12)
        # QuadrotorParams.spin: +1 = CCW seen from above
        assert CRAZYFLIE.spin[i] == (1.0 if spin == "CCW" else -1.0), motor
    # rotor<i> of the rotor_rpm action is M(i+1)
    assert crazyflie_spec(mode="rotor_rpm").action.names == ("rotor0", "rotor1", "rotor2", "rotor3")


def test_engine_assets_put_the_rotors_where_bitcraze_does() -> None:
    a = ARM / np.sqrt(2.0)
    # the assets the engines load: the description's
    root = ET.parse(ROBOT.asset(ROBOT.mujoco.scene)).getroot()
    sites = {s.get("name"): s.get("pos") for s in root.iter("site")}
    for i, (motor, (sx, sy), _) in enumerate(BITCRAZE):
        xyz = [float(v) for v in str(sites[f"rotor{i}"]).split()]
        np.testing.assert_allclose(xyz, [sx * a, sy * a, 0.0], atol=1e-4, err_msg=motor)
    # the URDF draws the front (red) rotors at +x
    urdf = ET.parse(ROBOT.asset(ROBOT.pybullet.urdf)).getroot()
    for vis in urdf.iter("visual"):
        mat = vis.find("material")
        if mat is not None and mat.get("name") in ("front", "back"):
            x = float(str(vis.find("origin").get("xyz")).split()[0])  # type: ignore[union-attr]
            assert (x > 0) == (mat.get("name") == "front")


def test_mixer_matches_the_firmware_power_distribution() -> None:
    """The inverse mixer (the PID's torque -> rotor map) raises the rotors Bitcraze's
    firmware raises: power_distribution_quadrotor.c, force/torque mode, motors M1..M4:
    roll (-, -, +, +), pitch (-, +, +, -), yaw (-, +, -, +)."""
    inv = np.linalg.inv(CRAZYFLIE.mixer())  # rpm^2 = inv @ (thrust, tx, ty, tz)
    np.testing.assert_array_equal(np.sign(inv[:, 0]), [1, 1, 1, 1])
    np.testing.assert_array_equal(np.sign(inv[:, 1]), [-1, -1, 1, 1])
    np.testing.assert_array_equal(np.sign(inv[:, 2]), [-1, 1, 1, -1])
    np.testing.assert_array_equal(np.sign(inv[:, 3]), [-1, 1, -1, 1])


@pytest.mark.parametrize(("what", "raised", "expected"), PAIRS, ids=[p[0] for p in PAIRS])
def test_numpy_model_pair_imbalance(
    what: str, raised: tuple[int, ...], expected: tuple[int, int, int]
) -> None:
    dyn = QuadrotorDynamics(drag=True, ground_effect=True)
    deriv = dyn.derivative(hover_state(1), _rpm(raised))
    _check_signs(deriv[0, 10:13], expected, what)


@pytest.mark.parametrize(("what", "raised", "expected"), PAIRS, ids=[p[0] for p in PAIRS])
def test_torch_model_pair_imbalance(
    what: str, raised: tuple[int, ...], expected: tuple[int, int, int]
) -> None:
    torch = pytest.importorskip("torch")
    from tether.policies.quad.diff_sim import DiffQuadrotor

    sim = DiffQuadrotor(dt=0.002)
    rpm = torch.tensor(_rpm(raised), dtype=torch.float32)
    state = torch.tensor(hover_state(1), dtype=torch.float32)
    new, _ = sim.step(state, rpm, rpm)
    _check_signs(new[0, 10:13].detach().numpy().astype(np.float64), expected, what)


@pytest.fixture(params=ENGINES)
def engine_sim(request: pytest.FixtureRequest) -> Any:
    engine = str(request.param)
    pytest.importorskip(engine)
    cfg = registry.config_class("backend", f"{engine}/quadcopter")(
        cameras=[], quadrotor={"action_mode": "rotor_rpm"}
    )
    backend = registry.build("sim", cfg, robot="crazyflie", task=None)
    yield backend
    backend.close()


def test_engine_pair_imbalance(engine_sim: Any) -> None:
    """From a level hover at 1 m, one 10 ms control step with a pair raised: the body rates
    (which start at zero) move the way the layout says, in PyBullet and in MuJoCo."""
    for what, raised, expected in PAIRS:
        engine_sim.reset(seed=0)
        rpm = _rpm(raised)
        engine_sim.set_drone_states(hover_state(1), rotor_rpm=rpm)
        obs = engine_sim.step(rpm[0]).observation
        _check_signs(obs["state"][10:13].astype(np.float64), expected, f"{what}")


def test_documented_rotor_speed_limits_are_the_computed_ones() -> None:
    """docs/quadrotor.md states max 21 714 rpm and hover 14 476 rpm: what the parameters give
    (sqrt(t2w m g / (4 kf)) and sqrt(m g / (4 kf)), g = 9.81)."""
    from tether.robots.crazyflie.robot import CRAZYFLIE

    assert round(CRAZYFLIE.max_rpm) == 21714
    assert round(CRAZYFLIE.hover_rpm) == 14476
