"""Bodies a task declares (tether.core.protocols.TaskBody) built in PyBullet: the PyBullet
arm backend creates them when a task needs them (the MuJoCo backend adds them to its MjSpec)."""

from __future__ import annotations

from typing import Any

from tether.core.protocols import BodyShape, TaskBody
from tether.sim import scene


def create_task_body(pb: Any, cid: int, body: TaskBody) -> int:
    """Create a task's declared body in client ``cid``: its shapes as one (compound) body,
    mass 0 = static; friction as the body's. Returns the body id."""
    kinds = {"box": pb.GEOM_BOX, "cylinder": pb.GEOM_CYLINDER, "sphere": pb.GEOM_SPHERE}

    def dims(shape: BodyShape) -> dict[str, Any]:
        if shape.shape == "box":
            return {"halfExtents": shape.size}
        if shape.shape == "cylinder":
            return {"radius": shape.size[0], "length": 2.0 * shape.size[1]}
        return {"radius": shape.size[0]}

    if len(body.shapes) == 1:
        shape = body.shapes[0]
        frame = {"collisionFramePosition": shape.pos}
        col = (
            pb.createCollisionShape(kinds[shape.shape], **dims(shape), **frame, physicsClientId=cid)
            if body.collide
            else -1
        )
        vis = pb.createVisualShape(
            kinds[shape.shape],
            **dims(shape),
            rgbaColor=body.rgba,
            visualFramePosition=shape.pos,
            physicsClientId=cid,
        )
    else:
        types = [kinds[s.shape] for s in body.shapes]
        half = [s.size if s.shape == "box" else (0.0, 0.0, 0.0) for s in body.shapes]
        radii = [s.size[0] if s.shape != "box" else 0.0 for s in body.shapes]
        lengths = [2.0 * s.size[1] if s.shape == "cylinder" else 0.0 for s in body.shapes]
        poses = [s.pos for s in body.shapes]
        col = (
            pb.createCollisionShapeArray(
                types,
                radii=radii,
                halfExtents=half,
                lengths=lengths,
                collisionFramePositions=poses,
                physicsClientId=cid,
            )
            if body.collide
            else -1
        )
        vis = pb.createVisualShapeArray(
            types,
            radii=radii,
            halfExtents=half,
            lengths=lengths,
            rgbaColors=[body.rgba] * len(types),
            visualFramePositions=poses,
            physicsClientId=cid,
        )
    uid = int(
        pb.createMultiBody(
            baseMass=body.mass,
            baseCollisionShapeIndex=col,
            baseVisualShapeIndex=vis,
            basePosition=body.pos,
            physicsClientId=cid,
        )
    )
    if body.collide:
        pb.changeDynamics(uid, -1, **scene.friction_kwargs(body.friction), physicsClientId=cid)
    return uid
