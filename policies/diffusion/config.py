"""Configs of the ``diffusion`` trainer and policy (a light import: no torch)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from tether.core.config import ComponentConfig
from tether.core.types import TEXT_KEY as TEXT_KEY  # the language key (re-exported)

#: Observation keys a diffusion policy can read and the dataset feature each comes from.
DATASET_FEATURES = {"state": "observation.state", "env_state": "observation.environment_state"}
IMAGE_PREFIX = "images/"
#: the dataset feature of camera <cam> is IMAGE_FEATURE_PREFIX + <cam>
IMAGE_FEATURE_PREFIX = "observation.images."


def low_dim(key: str) -> bool:
    """An observation key normalised by min/max: not an image, not the instruction."""
    return not key.startswith(IMAGE_PREFIX) and key != TEXT_KEY


def dataset_feature(key: str) -> str:
    """LeRobot feature name of an Observation key (``images/front`` -> observation.images.front)."""
    if key.startswith(IMAGE_PREFIX):
        return IMAGE_FEATURE_PREFIX + key[len(IMAGE_PREFIX) :]
    if key == TEXT_KEY:
        return "task"
    return DATASET_FEATURES[key]


class DiffusionModelConfig(BaseModel):
    """Network and noise schedule; stored in every checkpoint's contract."""

    model_config = ConfigDict(extra="forbid")
    # observation keys in input order: low-dim (state, env_state), images/<cam> and/or
    # instruction (the language input of a VLA, docs/vla.md)
    obs_keys: list[str] = Field(default_factory=lambda: ["state", "env_state"], min_length=1)
    # observations stacked per prediction, action_dt apart (oldest first)
    obs_horizon: int = Field(2, ge=1)
    # rows of a predicted chunk; a multiple of 2**(len(down_dims)-1)
    horizon: int = Field(16, ge=1)
    # rows executed before the next prediction
    execute_steps: int = Field(8, ge=1)
    # noise predictor: a conditional 1D temporal U-Net, or a residual MLP over the flattened
    # chunk (far fewer graph nodes: fast on one CPU thread)
    denoiser: Literal["unet", "mlp"] = "unet"
    mlp_width: int = Field(256, ge=8)
    mlp_blocks: int = Field(4, ge=1)
    down_dims: list[int] = Field(default_factory=lambda: [32, 64, 128], min_length=1)
    kernel_size: int = Field(5, ge=1)
    # U-Net GroupNorm groups (each down_dims entry must be a multiple). 1 exports as one
    # LayerNormalization node per norm; more groups need five (reshape, normalize, reshape,
    # scale, shift) and per-node overhead dominates onnxruntime's CPU time at batch 1
    norm_groups: int = Field(8, ge=1)
    # U-Net activation: mish (the paper's; three slow nodes in ONNX) or silu (x * sigmoid(x),
    # which onnxruntime fuses into one vectorized QuickGelu node)
    activation: Literal["mish", "silu"] = "mish"
    # residual blocks per U-Net level (and in the middle); the graph's size scales with it
    res_blocks: int = Field(2, ge=1)
    # actions that are either open or closed (a gripper's fingers): the sampled value snaps
    # to the nearer end of the action's range. A continuous finger command drifts toward
    # closed as a chunk's later rows close it; the measured fingers then read "closing" and
    # the policy goes on closing, short of the cube (docs/diffusion.md)
    binary_actions: list[str] = Field(default_factory=list)
    # residual blocks at the bottom of the U-Net (unset: res_blocks); 0 drops them, the
    # costliest blocks of the graph (the widest convolutions)
    mid_blocks: int | None = Field(None, ge=0)
    # diffusion-step embedding width
    step_embed_dim: int = Field(64, ge=4)
    # image encoder: channels of its three ResNet stages and its keypoints (spatial softmax)
    image_channels: list[int] = Field(default_factory=lambda: [16, 32, 64], min_length=1)
    image_keypoints: int = Field(32, ge=1)
    # the stride of each stage (one per image_channels; unset: 1 for the first, 2 for the
    # rest). The stem halves the image first, so 96x96 ends at 12x12 with three stages by
    # default, at 24x24 with strides [1, 2, 1]: the keypoints' feature map four times finer
    image_strides: list[int] | None = None
    # a pose readout inside the model: a small head (256 SiLU) reads the cameras' keypoints
    # and the joint state of the latest frame and estimates the objects' poses
    # (observation.environment_state, scaled to [-1, 1]), trained on the true poses at
    # train.aux_env_state's weight; its estimate (gradient stopped) joins the conditioning.
    # The policy's inputs stay the cameras: the poses are needed in training only, and the
    # exported graph holds the head (docs/vla.md, the model table)
    pose_readout: bool = False
    num_train_timesteps: int = Field(100, ge=2)
    # DDIM steps at inference (export bakes this many into the graph)
    num_inference_steps: int = Field(10, ge=1)
    # the initial noise of sampling is scaled by this at inference (export bakes it into
    # the graph, before the first denoising step): 1 samples the learnt distribution; 0 is
    # deterministic DDIM from zero noise (the same chunk for the same observation), which
    # avoids rare modes sampled far from the demonstrations (docs/diffusion.md)
    noise_scale: float = Field(1.0, ge=0)
    beta_schedule: Literal["squaredcos_cap_v2", "linear"] = "squaredcos_cap_v2"
    # what the denoiser learns: ddpm (the noise, sampled by DDIM) or flow (flow matching:
    # the velocity from noise to actions along a straight path, sampled by integrating it
    # with num_inference_steps Euler steps, as pi0's and SmolVLA's action experts)
    objective: Literal["ddpm", "flow"] = "ddpm"
    # instruction: the frozen text encoder's embedding, projected to text_dim, joins the
    # conditioning; with text_film every stage of the image encoders is FiLM-modulated by it
    # (the instruction decides what the camera features look for; docs/vla.md)
    text_dim: int = Field(64, ge=1)
    text_film: bool = True
    # centre the instruction's embedding on the mean of the training instructions' and
    # scale it to unit RMS per element over them before it reaches text_proj and the FiLM
    # layers: the raw unit embeddings differ by about 0.03 per element between sub-tasks
    # (docs/vla.md); the statistics live in the contract's normalization and in the ONNX graph
    text_norm: bool = False
    # instruction guidance at inference (classifier-free guidance's form): each denoising
    # step predicts from the instruction and from the null instruction (zeros after
    # text_norm: the training instructions' mean) and goes on along
    # null + guidance * (instruction - null); 1 is the plain conditional prediction (one
    # pass), more follows the instruction harder at twice the compute (docs/vla.md)
    guidance: float = Field(1.0, ge=0)
    # training: the fraction of samples whose instruction is replaced by the null one, so
    # that the null prediction is one the network learnt (classifier-free guidance)
    text_dropout: float = Field(0.0, ge=0, lt=1)
    # at run time only (training never uses it): the instruction's embedding is replaced by
    # the mean of the training wordings' embeddings weighted by softmax(cosine / text_anchor),
    # renormalised, so an unseen wording reaches the policy as a blend of the training
    # wordings nearest it (their similarity decides, not a menu: any text still acts);
    # a training wording maps to itself within about exp(-0.1 / text_anchor). None: the
    # embedding as the encoder gives it (docs/vla.md, 'Anchoring the instruction')
    text_anchor: float | None = Field(None, gt=0)
    # one denoiser per group of train.paraphrases (a sub-task: its wordings), their
    # predictions mixed by the instruction's nearness to each group: softmax(cosine /
    # expert_temperature) over the training wordings, summed per group. A training wording
    # drives its own group's denoiser; any other text a blend (docs/vla.md, 'Per-task
    # experts'). The wordings' embeddings live in the weights, the groups in the contract
    task_experts: bool = False
    expert_temperature: float = Field(0.02, gt=0)


class DiffusionTrainConfig(ComponentConfig):
    """``train:`` section of an experiment with ``type: diffusion``."""

    type: str = "diffusion"
    # LeRobot v3 dataset recorded by `tether record`
    dataset: Path
    model: DiffusionModelConfig = Field(default_factory=DiffusionModelConfig)
    steps: int = Field(3000, ge=1)
    batch_size: int = Field(256, ge=1)
    lr: float = Field(1e-3, gt=0)
    weight_decay: float = Field(1e-6, ge=0)
    warmup_steps: int = Field(100, ge=0)
    # exponential moving average of the weights (the EMA weights are what eval/export use)
    ema_decay: float = Field(0.995, ge=0, lt=1)
    # random shift of images by up to this many pixels (augmentation)
    image_shift: int = Field(4, ge=0)
    # instruction augmentation: Gaussian noise of this std per element added to the text
    # embedding (then renormalised), so nearby wordings map to the same behaviour
    text_noise: float = Field(0.0, ge=0)
    # instruction augmentation: a YAML file of groups of wordings that mean the same
    # ({group: [wording, ...]}); each sample's instruction becomes a wording drawn from the
    # group of its episode's instruction (docs/vla.md, configs/paraphrases/multitask.yaml)
    paraphrases: Path | None = None
    checkpoint_every: int = Field(500, ge=1)
    # start from another checkpoint's (EMA) weights wherever names and shapes match (the
    # rest as initialised; a shared denoiser seeds each of model.task_experts' experts);
    # normalization comes from this run's dataset. Ignored on --resume
    init_from: Path | None = None
    # auxiliary loss (0: off): the image features of the latest frame (every camera's
    # keypoints) also predict the scene's true object poses (the dataset's
    # observation.environment_state, scaled to [-1, 1]) through a small head, at this weight
    # beside the denoiser's loss, so the image encoder learns where the objects are. The
    # head is used only in training: the policy's inputs and the exported model are
    # unchanged (docs/vla.md)
    aux_env_state: float = Field(0.0, ge=0)
    # torch intra-op threads while training; more threads than free cores slows training
    # down several-fold (OpenMP threads wait on each other)
    threads: int = Field(1, ge=1)
    seed: int = 0
    # use at most this many episodes of the dataset (None: all)
    max_episodes: int | None = Field(None, ge=1)
    # the frozen sentence encoder of the instruction key, by name (built at set-up under
    # tether.policies.vla.text_encoder.encoders_root())
    text_encoder: str = "all-minilm-l6-v2"


class DiffusionPolicyConfig(ComponentConfig):
    """``policy:`` section with ``type: diffusion``: a torch checkpoint served as is."""

    type: str = "diffusion"
    # checkpoint directory written by `tether train` (contract.json + model.safetensors)
    checkpoint: Path
    # DDIM steps (None: the checkpoint's num_inference_steps)
    num_inference_steps: int | None = Field(None, ge=1)
    execute_steps: int | None = Field(None, ge=1)
    threads: int = Field(1, ge=1)
    seed: int = 0
    # a VLA's instruction anchoring (docs/vla.md, 'Anchoring the instruction'): None keeps
    # the model's own (its contract's text_anchor); a temperature replaces it; raw feeds the
    # text encoder's embedding as is
    text_anchor: float | Literal["raw"] | None = None
