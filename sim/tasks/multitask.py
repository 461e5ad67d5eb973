"""Multitask: one table scene, four sub-tasks asked for in words (docs/multitask.md).

The scene: three free 5 cm cubes (``red_cube``, ``blue_cube``, ``green_cube``), a flat yellow
``pad`` and a flat white ``square`` marked on the table (markers: no contacts). Each reset
draws the layout (every centre at least ``min_separation`` from the others, and the green
cube's path to the square clear of the other cubes), then the
episode's sub-task and one phrasing of it, the episode's **instruction**. Backends put the
instruction in ``Observation.instruction``; over ROS 2 the sim bridge publishes it on
``instruction`` and a new ``instruction`` message changes the sub-task the episode is judged
by (:meth:`MultitaskTask.set_instruction`).

Sub-tasks (success):

- ``lift_red`` / ``lift_blue``: that cube's centre ``lift_height`` above its resting height;
- ``push_green``: the green cube's centre inside the white square, on the table;
- ``place_blue``: the blue cube's centre inside the yellow pad, on the table, and the
  gripper risen ``release_height`` above it (let go).

Each sub-task has training phrasings and held-out paraphrases (``PHRASINGS``): datasets
record the training ones; evaluation can draw the held-out ones (``phrasing: heldout``).
"""

from __future__ import annotations

import numpy as np

from tether.core.protocols import BodyShape, SimBackend, TaskBody
from tether.core.types import normalise_instruction as normalise
from tether.sim.scene import CUBE_HALF, CUBE_MASS, GRIP_FRICTION
from tether.sim.tasks.config_tasks import MULTITASK_SUBTASKS, MultitaskConfig

CUBE_COLOURS = {
    "red_cube": (0.85, 0.15, 0.12, 1.0),
    "blue_cube": (0.12, 0.3, 0.9, 1.0),
    "green_cube": (0.12, 0.72, 0.2, 1.0),
}
PAD_RGBA = (0.95, 0.8, 0.1, 1.0)
SQUARE_RGBA = (0.95, 0.95, 0.95, 1.0)
# markers: this thick (m) on the table top
MARKER_HALF_Z = 0.001
# the push path starts this far (m) behind the green cube's centre (where the hand comes down)
PUSH_RUNUP = 0.07
# a cube counts as on the table (not lifted, not held up) below this centre height (m)
RESTING_Z = CUBE_HALF + 0.01

# sub-task -> (training phrasings, held-out paraphrases). Lower case, no final full stop
# (resolve() normalises what it is given the same way).
PHRASINGS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "lift_red": (
        ("lift the red cube", "pick up the red cube", "raise the red block"),
        ("grab the red block and lift it up", "take the red cube off the table"),
    ),
    "lift_blue": (
        ("lift the blue cube", "pick up the blue cube", "raise the blue block"),
        ("grab the blue block and lift it up", "take the blue cube off the table"),
    ),
    "push_green": (
        (
            "push the green cube onto the white square",
            "slide the green cube into the white square",
            "push the green block to the white area",
        ),
        ("shove the green block over to the white target", "move the green cube to the white mark"),
    ),
    "place_blue": (
        (
            "put the blue cube on the yellow pad",
            "place the blue block onto the yellow pad",
            "set the blue cube down on the yellow square",
        ),
        ("move the blue block onto the yellow mat", "drop the blue cube off on the yellow pad"),
    ),
}
# the cube each sub-task moves
TARGET = {
    "lift_red": "red_cube",
    "lift_blue": "blue_cube",
    "push_green": "green_cube",
    "place_blue": "blue_cube",
}


def phrasings(subtask: str, which: str = "all") -> tuple[str, ...]:
    """The phrasings of ``subtask``: ``train``, ``heldout`` or ``all``."""
    train, heldout = PHRASINGS[subtask]
    return {"train": train, "heldout": heldout, "all": train + heldout}[which]


def resolve(instruction: str | None) -> str | None:
    """The sub-task an instruction is a phrasing of (training or held-out), else None."""
    if not instruction:
        return None
    text = normalise(instruction)
    for subtask in MULTITASK_SUBTASKS:
        if text in phrasings(subtask):
            return subtask
    return None


def _yaw_quat(yaw: float) -> np.ndarray:
    return np.array([np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2)])


class MultitaskTask:
    """Reads and writes state only through ``body_pose`` / ``set_body_pose`` / ``ee_pose``.

    ``instruction`` (the sentence in force) and ``subtask`` (what it asks for, None for a
    sentence that is no phrasing of a sub-task) change at each reset and with
    :meth:`set_instruction`."""

    name = "multitask"
    objects: tuple[str, ...] = ("red_cube", "blue_cube", "green_cube", "pad", "square")

    def __init__(self, cfg: MultitaskConfig | None = None) -> None:
        self.cfg = c = cfg or MultitaskConfig()
        self.max_duration_s = c.max_duration_s
        cube = (BodyShape(shape="box", size=(CUBE_HALF,) * 3),)
        self.bodies: tuple[TaskBody, ...] = (
            *(
                TaskBody(
                    name=name,
                    shapes=cube,
                    mass=CUBE_MASS,
                    rgba=rgba,
                    friction=GRIP_FRICTION,
                    pos=(0.5, 0.1 * (i - 1), CUBE_HALF),
                )
                for i, (name, rgba) in enumerate(CUBE_COLOURS.items())
            ),
            TaskBody(
                name="pad",
                shapes=(BodyShape(shape="box", size=(c.pad_half, c.pad_half, MARKER_HALF_Z)),),
                rgba=PAD_RGBA,
                collide=False,
                pos=(0.4, 0.2, MARKER_HALF_Z),
            ),
            TaskBody(
                name="square",
                shapes=(
                    BodyShape(shape="box", size=(c.square_half, c.square_half, MARKER_HALF_Z)),
                ),
                rgba=SQUARE_RGBA,
                collide=False,
                pos=(0.4, -0.2, MARKER_HALF_Z),
            ),
        )
        self.instruction: str | None = c.instruction
        self.subtask: str | None = resolve(c.instruction)

    # ---- layout and instruction --------------------------------------------------------

    def layout(self, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Centres (x, y) of the five objects, every two at least ``min_separation`` apart
        (rejection sampling, object by object)."""
        c = self.cfg
        lo = np.array([c.x_range[0], c.y_range[0]])
        hi = np.array([c.x_range[1], c.y_range[1]])
        while True:
            placed: dict[str, np.ndarray] = {}
            for name in self.objects:
                for _ in range(200):
                    p = rng.uniform(lo, hi)
                    if all(np.linalg.norm(p - q) >= c.min_separation for q in placed.values()):
                        placed[name] = p
                        break
                else:
                    break  # no room left: start the layout over
            if len(placed) == len(self.objects) and self._push_clear(placed):
                return placed

    def _push_clear(self, placed: dict[str, np.ndarray]) -> bool:
        """The straight path of the green cube to the square, from a hand's width behind
        it (a point inside the area), passes the other cubes by at least
        ``min_separation``: a scene never blocks the push, whatever sub-task the episode
        asks for."""
        start, end = placed["green_cube"], placed["square"]
        span = end - start
        length = float(np.linalg.norm(span))
        u = span / max(length, 1e-9)
        start = start - u * PUSH_RUNUP
        c = self.cfg
        if not (
            c.x_range[0] <= start[0] <= c.x_range[1] and c.y_range[0] <= start[1] <= c.y_range[1]
        ):
            return False  # the hand would come down outside the area (too close to the base)
        for cube in ("red_cube", "blue_cube"):
            t = float(np.clip(np.dot(placed[cube] - start, u), 0.0, length + PUSH_RUNUP))
            if np.linalg.norm(placed[cube] - (start + t * u)) < self.cfg.min_separation:
                return False
        return True

    def reset(self, sim: SimBackend, rng: np.random.Generator) -> None:
        """Lay the scene out, then draw the sub-task and its phrasing (unless the config
        fixes the instruction), so one seed gives one scene whatever is asked in it."""
        c = self.cfg
        for name, xy in self.layout(rng).items():
            if name in CUBE_COLOURS:
                sim.set_body_pose(
                    name, np.array([*xy, CUBE_HALF]), _yaw_quat(rng.uniform(*c.yaw_range))
                )
            else:
                sim.set_body_pose(name, np.array([*xy, MARKER_HALF_Z]), _yaw_quat(0.0))
        if c.instruction is not None:
            self.set_instruction(c.instruction)
            return
        subtask = c.subtasks[int(rng.integers(len(c.subtasks)))]
        options = phrasings(subtask, c.phrasing)
        self.instruction = options[int(rng.integers(len(options)))]
        self.subtask = subtask

    def set_instruction(self, text: str) -> None:
        """Judge the episode by what ``text`` asks for from now on."""
        self.instruction = text
        self.subtask = resolve(text)

    # ---- measures ---------------------------------------------------------------------

    def _xy_in(self, sim: SimBackend, cube: str, marker: str, half: float) -> bool:
        pos = sim.body_pose(cube)[0]
        centre = sim.body_pose(marker)[0]
        return bool(np.all(np.abs(pos[:2] - centre[:2]) <= half))

    def _resting(self, sim: SimBackend, cube: str) -> bool:
        return bool(sim.body_pose(cube)[0][2] <= RESTING_Z)

    # ---- Task -------------------------------------------------------------------------

    def reward(self, sim: SimBackend) -> float:
        """Dense reward in [0, 3] for the sub-task in force (0 without one): reaching
        ``1 - tanh(10 * |tcp - cube|)`` plus, for lift, ``2 * clip(height / lift_height)``
        while the TCP is within 3 cm of the cube; for push and place, ``2 * (1 - tanh(10 *
        |cube - goal|))`` (xy distance to the marker's centre)."""
        if self.subtask is None:
            return 0.0
        cube = sim.body_pose(TARGET[self.subtask])[0]
        dist = float(np.linalg.norm(sim.ee_pose()[0] - cube))
        reward = 1.0 - np.tanh(10.0 * dist)
        if self.subtask.startswith("lift"):
            if dist < 0.03:
                height = (cube[2] - CUBE_HALF) / self.cfg.lift_height
                reward += 2.0 * float(np.clip(height, 0.0, 1.0))
            return float(reward)
        goal = sim.body_pose("square" if self.subtask == "push_green" else "pad")[0]
        reward += 2.0 * (1.0 - np.tanh(10.0 * float(np.linalg.norm(cube[:2] - goal[:2]))))
        return float(reward)

    def success(self, sim: SimBackend) -> bool:
        """The sub-task in force is done (see the module's docstring); never without one."""
        c, sub = self.cfg, self.subtask
        if sub is None:
            return False
        cube = TARGET[sub]
        if sub.startswith("lift"):
            return bool(sim.body_pose(cube)[0][2] - CUBE_HALF >= c.lift_height)
        if sub == "push_green":
            return self._resting(sim, cube) and self._xy_in(sim, cube, "square", c.square_half)
        let_go = sim.ee_pose()[0][2] - sim.body_pose(cube)[0][2] >= c.release_height
        return self._resting(sim, cube) and let_go and self._xy_in(sim, cube, "pad", c.pad_half)
