"""What the policy layer registers (tether.core.registry discovers this table). Light."""

from __future__ import annotations

from tether.core.registry import PER_OBSERVATION, SERVING, Entry

PLUGINS = {
    "policy": {
        "hold": Entry("tether.core.policies:HoldPolicyConfig", "tether.core.policies:HoldPolicy"),
        "onnx": Entry(
            "tether.policies.config_onnx:OnnxPolicyConfig", "tether.policies.runtime:OnnxPolicy"
        ),
        "diffusion": Entry(
            "tether.policies.diffusion.config:DiffusionPolicyConfig",
            "tether.policies.diffusion.policy:DiffusionPolicy",
        ),
        # an exported base + residual folder (tether-residual/1), onnxruntime only; the
        # residual corrects every control step from the latest observation, so it is served
        # per observation, never through a chunk executor (tether_ros.graph)
        "residual_onnx": Entry(
            "tether.policies.residual.config:ResidualOnnxConfig",
            "tether.policies.residual.serve:ResidualOnnxPolicy",
            {SERVING: PER_OBSERVATION},
        ),
        # a LeRobot checkpoint (ACT, diffusion, SmolVLA, pi0, ...) served from LeRobot's own
        # environment by a worker process (docs/lerobot.md)
        "lerobot": Entry(
            "tether.policies.lerobot.config:LerobotPolicyConfig",
            "tether.policies.lerobot.policy:LerobotPolicy",
        ),
    },
    "trainer": {
        "diffusion": Entry(
            "tether.policies.diffusion.config:DiffusionTrainConfig",
            "tether.policies.diffusion.trainer:DiffusionTrainer",
        ),
        # a language-conditioned policy (VLA): the diffusion trainer with an instruction
        # input and a flow-matching head (docs/vla.md)
        "vla": Entry(
            "tether.policies.vla.config:VlaTrainConfig",
            "tether.policies.diffusion.trainer:DiffusionTrainer",
        ),
        "quad_hover": Entry(
            "tether.policies.quad.config_quad:QuadHoverTrainConfig",
            "tether.policies.quad.trainer:QuadHoverTrainer",
        ),
        "nav_ppo": Entry(
            "tether.policies.nav.config:NavTrainConfig",
            "tether.policies.nav.trainer:NavTrainer",
        ),
        # the decentralised drone-swarm policy (docs/swarm.md)
        "swarm_ppo": Entry(
            "tether.policies.swarm.config:SwarmTrainConfig",
            "tether.policies.swarm.trainer:SwarmTrainer",
        ),
        # the ``finetune:`` section: a per-step residual RL policy on a frozen base
        "residual": Entry(
            "tether.policies.residual.config:FinetuneConfig",
            "tether.policies.residual.trainer:ResidualTrainer",
        ),
    },
}
