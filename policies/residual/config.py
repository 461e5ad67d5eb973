"""Config of the residual fine-tuner (the experiment's ``finetune:`` section). Light import."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, model_validator

from tether.core.config import ComponentConfig, RuntimeConfig


class PPOConfig(BaseModel):
    """On-policy: stable-baselines3 PPO on n_envs parallel envs (ResiP)."""

    model_config = ConfigDict(extra="forbid")
    # env steps per env between updates (rollout length)
    n_steps: int = Field(256, ge=8)
    batch_size: int = Field(256, ge=8)
    epochs: int = Field(10, ge=1)
    lr: float = Field(3e-4, gt=0)
    gamma: float = Field(0.99, gt=0, le=1)
    gae_lambda: float = Field(0.95, gt=0, le=1)
    clip_range: float = Field(0.2, gt=0)
    ent_coef: float = Field(0.0, ge=0)
    # initial exploration std of the pre-tanh residual (1 = the full residual range)
    init_std: float = Field(0.3, gt=0)
    # SB3 normalises advantages per minibatch; with a sparse reward and no success in a
    # rollout that turns the critic's noise into unit-sized advantages and walks the
    # residual away from the base (peg-in-hole: the base's 10 % went to 0 % within a few
    # updates, docs/residual_rl.md); false keeps updates as small as the signal
    normalize_advantage: bool = True
    # stop an update's epochs once the approximate KL to the rollout policy exceeds this
    # (SB3's target_kl; None: all epochs)
    target_kl: float | None = Field(None, gt=0)
    # state-dependent exploration (SB3's gSDE): the noise is a random linear function of
    # the actor's last hidden features, redrawn every sde_sample_freq learner steps (-1: at
    # each rollout's start), so it varies smoothly along an episode instead of jittering at
    # every decision (an arm that must stay within 1 mm of an axis jams on jitter); with
    # it, init_std is the std per feature of that function
    use_sde: bool = False
    sde_sample_freq: int = -1


class OffPolicyConfig(BaseModel):
    """Off-policy with a high update-to-data ratio, n-step returns and LayerNorm critics
    (ResFiT): a deterministic TD3 actor with fixed Gaussian exploration and a critic burn-in
    (ResFiT; Silver et al.'s Residual Policy Learning), or SAC."""

    model_config = ConfigDict(extra="forbid")
    # td3: deterministic actor, Gaussian exploration noise of fixed std (action_noise),
    # delayed actor updates, and the critic trained alone first (critic_warmup_steps);
    # sac: a stochastic actor with an entropy bonus
    learner: Literal["td3", "sac"] = "td3"
    # gradient updates per env step (update-to-data ratio)
    utd: int = Field(4, ge=1)
    n_step: int = Field(3, ge=1)
    batch_size: int = Field(256, ge=8)
    buffer_size: int = Field(200_000, ge=1000)
    lr: float = Field(3e-4, gt=0)
    gamma: float = Field(0.99, gt=0, le=1)
    tau: float = Field(0.005, gt=0, le=1)
    # learner steps (transitions, each hold_steps control steps) of base rollouts put in
    # the replay buffer before learning: ResFiT's buffer warm start with the base's own
    # behaviour (zero residual; td3: plus its exploration noise)
    base_rollout_steps: int = Field(1000, ge=0)
    # entropy coefficient: "auto" tunes it (from init_ent_coef) towards target_entropy
    # per action element; fixed and small by default: on the reach case "auto" drove the
    # residual to saturation (docs/residual_rl.md)
    ent_coef: float | Literal["auto"] = 0.005
    init_ent_coef: float = Field(0.05, gt=0)
    # initial exploration std of the pre-tanh residual
    init_std: float = Field(0.3, gt=0)
    target_entropy_per_dim: float = -2.0
    layer_norm: bool = True
    # td3: std of the exploration noise added to the actor's output (in [-1, 1] units of
    # the residual's bound), in training and in the warm-start rollouts
    action_noise: float = Field(0.1, ge=0)
    # td3: one actor (and target) update every policy_delay critic updates
    policy_delay: int = Field(2, ge=1)
    # td3: smoothing noise on the target actor's action (std, clip), [-1, 1] units
    target_policy_noise: float = Field(0.1, ge=0)
    target_noise_clip: float = Field(0.3, ge=0)
    # td3: gradient steps of the critics alone on the warm-start buffer before the actor
    # moves (an untrained critic's gradient walks the residual away from the base)
    critic_warmup_steps: int = Field(0, ge=0)
    # td3: weight of mean(residual^2) (in [-1, 1] units) in the actor's loss beside
    # -Q / mean|Q| (TD3+BC's form, the base as the behaviour): keeps the actor where the
    # critic has data
    actor_l2: float = Field(0.0, ge=0)


class GRPOConfig(BaseModel):
    """On-policy with group-relative advantages (grpo.py): PPO's clipped update, no critic,
    each episode's baseline the mean return of the episodes that share its seed."""

    model_config = ConfigDict(extra="forbid")
    # envs (and so episodes) per seed; divides n_envs
    group_size: int = Field(8, ge=2)
    # an update once this many episodes of complete groups are in
    episodes_per_update: int = Field(32, ge=1)
    epochs: int = Field(5, ge=1)
    batch_size: int = Field(512, ge=8)
    lr: float = Field(3e-4, gt=0)
    clip_range: float = Field(0.2, gt=0)
    max_grad_norm: float = Field(0.5, gt=0)
    # initial exploration std of the pre-tanh residual (learned from there)
    init_std: float = Field(0.15, gt=0)
    # the exploration noise of consecutive decisions: AR(1) with this coefficient (0: a fresh
    # draw each decision); 0.8 at 10 decisions/s keeps a push for about half a second, long
    # enough to move an arm that filters out a 0.1 s jitter (docs/residual_rl.md)
    noise_correlation: float = Field(0.0, ge=0, lt=1)
    # explore only in one window of this many learner steps per episode, at the same place
    # for every episode of a group (drawn per group); elsewhere the policy's mean acts. The
    # episodes of a group then share their course up to the window (same seed, same
    # deterministic mean), and what differs in their outcomes comes from that window alone
    # (TRPO's "vine" rollouts without restoring simulator states). None: every step explores
    explore_window: int | None = Field(None, ge=1)
    # a reverse curriculum of where exploration starts (Florensa et al.'s reverse curriculum,
    # Salimans & Chen's start states from a demonstration, without restoring simulator
    # states): each group's episodes run the policy's mean up to a start decision and
    # explore from there to the end; the starts are drawn late in the episode first and
    # move to its beginning over this many env steps (then every decision explores). Late
    # starts leave one correction to find (centring a peg already over the hole); once the
    # mean makes it, a correction earlier in the episode (keeping the peg low) pays too.
    # On peg-in-hole it did not beat the base (docs/residual_rl.md). None: off
    explore_curriculum_steps: int | None = Field(None, ge=1)
    # exploration gated by a success predictor (grpo.py, SuccessGate): a small network
    # predicts, from a decision's observation, whether the episode will succeed under the
    # residual's mean (it learns from one episode per group that runs the mean throughout);
    # the noise's std is scaled by 1 - that prediction, never below explore_gate_floor
    # (> 0: a zero std would make the update's log-probabilities infinite). States from
    # which the mean already succeeds get almost no noise (on a 1 mm task any noise costs
    # the base its successes, docs/residual_rl.md), states heading for a failure get all
    # of it. None: off
    explore_gate_floor: float | None = Field(None, gt=0, le=1)
    # with the gate: episodes (one per seed, the mean only) before any exploration
    gate_warmup_episodes: int = Field(64, ge=0)
    # branch each group from its first episode (the mean's, whose decisions the env keeps as
    # in-memory snapshots: branching.py) instead of replaying it: the other group_size - 1
    # episodes start at one of its decisions, drawn in branch_span (fractions of its
    # length), on the same env, and explore from there to the end; the mean's return from
    # that decision on is their baseline's share. "failures": only scenes where the mean
    # fails (where it succeeds no noise is spent: the group is its one episode); "all":
    # every scene; "none": off (every episode from the reset)
    branch: Literal["none", "all", "failures"] = "none"
    branch_span: tuple[float, float] = (0.0, 1.0)
    # self-imitation (reward-weighted regression with the 0/1 success reward, Peters &
    # Schaal; Oh et al.'s self-imitation learning): every decision of a successful episode
    # (its action as taken, noise included) goes into a buffer of the latest
    # imitation_buffer such decisions, and after each update the mean is regressed towards
    # them (imitation_steps minibatches of batch_size: the MSE of the mean to the action,
    # times this weight). Where the noise made no difference, the actions of successes
    # average to the mean's own (no pull); where one direction made successes likelier, the
    # mean moves that way, state by state: credit per decision without a critic. 0: off
    self_imitation: float = Field(0.0, ge=0)
    imitation_steps: int = Field(20, ge=1)
    imitation_buffer: int = Field(200_000, ge=1)
    # how the kept decisions weigh in that regression. "uniform": all alike. "advantage":
    # each by its return above the mean's success value, (1 - P(success | observation))
    # from the success gate's predictor (self-imitation learning's (R - V)+ with R = 1): a
    # decision taken where the mean already succeeds pulls little, one that turned a scene
    # the mean loses pulls fully. Needs explore_gate_floor (the predictor); weight 1 until
    # it is ready
    imitation_weighting: Literal["uniform", "advantage"] = "uniform"
    # credit per decision from the success gate's predictor (a Monte-Carlo success value of
    # the mean, learnt anyway): each explored decision's baseline is (1 - w) x its group's
    # mean return + w x P(success | that decision's observation), w this weight. A failure
    # after states from which the mean succeeds blames the decisions taken there, not
    # those after the scene was already lost; a success from states the mean loses credits
    # the decisions that turned it. Needs explore_gate_floor (the predictor). 0: off
    value_baseline: float = Field(0.0, ge=0, le=1)
    # replay of the scenes the mean fails (prioritised level replay, Jiang et al. 2021,
    # with the mean's own outcome as the score): a group whose first episode, the mean's
    # (with the success gate; else any episode of the group), fails puts its seed in a
    # queue, and a new group takes the oldest queued seed with this probability instead of
    # a fresh one, each seed at most replay_max times. In the plateau, where the mean
    # solves most fresh scenes and most groups carry no signal, more of the groups explore
    # the scenes still lost. The queue is not saved (a resumed run refills it). 0: off
    replay_failures: float = Field(0.0, ge=0, lt=1)
    replay_max: int = Field(3, ge=1)
    # the policy PPO's ratio (and the KL early stop) is taken against: False, the one each
    # decision ran with (its stored log-probability); True, the policy at the start of this
    # update, the log-probabilities recomputed then (as phasic policy gradient does after
    # its auxiliary phase). Self-imitation moves the mean between updates, and where the
    # success gate shrinks the noise (std x 0.05) a small move of the mean is a large KL to
    # the stored ones: the update then stops before its first minibatch (docs/residual_rl.md
    # 'The update that stopped': on, one run on peg-in-hole made 170 of 200 unseen seeds in
    # 60 min where the same seed off made 173)
    refresh_log_probs: bool = False
    # divide the advantages by their std over the update's steps; off by default: the
    # group-relative advantages of a 0/1 reward are already in [-1, 1], and normalising
    # turns one group's chance difference into a full-size update (Dr. GRPO)
    normalize_advantage: bool = False
    # stop an update's epochs once the approximate KL exceeds 1.5 x this (None: all epochs)
    target_kl: float | None = Field(0.02, gt=0)

    @model_validator(mode="after")
    def _one_exploration_schedule(self) -> GRPOConfig:
        set_ = [
            name
            for name, on in (
                ("explore_window", self.explore_window is not None),
                ("explore_curriculum_steps", self.explore_curriculum_steps is not None),
                ("branch", self.branch != "none"),
            )
            if on
        ]
        if len(set_) > 1:
            raise ValueError(
                f"{' and '.join(set_)} are schedules of where episodes explore: set one"
            )
        # the options that read the success gate's predictor
        uses_gate = [
            name
            for name, on in (
                ("grpo.value_baseline", self.value_baseline > 0),
                ("grpo.imitation_weighting: advantage", self.imitation_weighting == "advantage"),
            )
            if on
        ]
        if uses_gate and self.explore_gate_floor is None:
            raise ValueError(
                f"{' and '.join(uses_gate)} use the success gate's predictor: set "
                "grpo.explore_gate_floor too"
            )
        if self.replay_failures > 0 and self.branch != "none":
            raise ValueError("grpo.replay_failures and grpo.branch both choose scenes: set one")
        lo, hi = self.branch_span
        if not 0 <= lo < hi <= 1:
            raise ValueError(f"branch_span {self.branch_span}: need 0 <= start < end <= 1")
        return self


class FinetuneConfig(ComponentConfig):
    """`tether finetune`: a per-step residual on a frozen base policy (docs/residual_rl.md)."""

    type: Literal["residual"] = "residual"
    # ppo: stable-baselines3 PPO (ResiP); offpolicy: TD3 / SAC with a high update-to-data
    # ratio (ResFiT); grpo: PPO's update with group-relative advantages (episodes that share a
    # seed are each other's baseline; grpo.py)
    algorithm: Literal["ppo", "offpolicy", "grpo"] = "ppo"
    # the frozen base: an exported model folder (model.onnx + model.json); None: the
    # experiment's policy: section (any registered policy)
    base_model: Path | None = None
    # for tests and demos: a constant offset added to every base action (a miscalibrated
    # base with a known bias), in action units; length = action dim
    base_offset: list[float] | None = None
    # when the base is asked for a chunk: "policy", every step as the in-process loop does
    # (a chunked base replans on its own schedule); "chunk_end", when its chunk runs out
    # (policies/residual/base_executor.py)
    base_replan: Literal["policy", "chunk_end"] = "policy"
    # the residual is decided every hold_steps control steps, from the observation and the
    # base's row then, and held in between (the base's row still changes every step); one
    # learner step = hold_steps control steps. 1: a fresh residual every step. At 100 Hz a
    # fresh, independent exploration draw each step is mostly filtered out by the arm's
    # servos, and the return is 1,200 decisions away; ResiP's residual acts at 10 Hz
    # (docs/residual_rl.md, "Holding the residual")
    hold_steps: int = Field(1, ge=1)
    # largest residual per action element, as a fraction of the element's range / 2 (the
    # bound of the applied correction in either space)
    scale: float = Field(0.1, gt=0, le=1)
    # where the residual acts (policies/residual/space.py): "joint", one correction per
    # action element; "tcp", a motion of the tool centre point (3 linear, 3 angular, base
    # frame) mapped to the arm's joints at each step (damped least squares), fingers as in
    # joint; arms commanded by joint positions only
    space: Literal["joint", "tcp"] = "joint"
    # tcp: the largest linear (m) and angular (rad) element
    tcp_scale: tuple[PositiveFloat, PositiveFloat] = (0.01, 0.05)
    # tcp: damping of the least-squares map (bounds the joint motion near a singularity)
    tcp_damping: float = Field(0.05, gt=0)
    # what the residual observes (arrays of the observation, flattened in this order);
    # None: the base contract's keys without its cameras. A base that sees images (a VLA)
    # still gets them and its instruction; the residual takes state keys only
    observation_keys: list[str] | None = None
    # pairs of the task's objects [a, b] (names of its ``objects``, whose poses env_state
    # holds): the residual also sees a's position minus b's, in mm, squashed by
    # sign(x) log(1 + |x|) (fine near zero, bounded far away), computed inside the graph from
    # env_state, which observation_keys must then hold. A centring correction of a millimetre
    # is a 1e-3 difference of two normalised coordinates without it (peg-in-hole, [[peg,
    # hole]]: docs/residual_rl.md)
    relative_positions: list[tuple[str, str]] = Field(default_factory=list)
    hidden: list[int] = Field(default_factory=lambda: [256, 256], min_length=1)
    activation: Literal["relu", "tanh"] = "relu"
    # std of the residual's last layer at init (0: base + residual == base exactly)
    last_layer_init: float = Field(1e-3, ge=0)
    # sparse: 1 on success, else 0 (ResiP); dense: the task's reward per step, and on a
    # success that ends the episode that reward for each step left (see env.py)
    reward: Literal["sparse", "dense"] = "sparse"
    # reward penalty per step on |residual / limit|^2 (mean over elements)
    residual_penalty: float = Field(0.0, ge=0)
    # time limit (s of sim time) of the training episodes, below the task's own (which
    # evaluation keeps): failing episodes run to the limit, so on peg-in-hole, where the base
    # succeeds by 7.5 s or not at all, 9 s instead of 12 s gives a quarter more episodes per
    # hour. None: the task's limit
    train_episode_s: float | None = Field(None, gt=0)
    total_env_steps: int = Field(200_000, ge=1)
    # stop after this many seconds of wall clock (0: no limit)
    wall_budget_s: float = Field(0.0, ge=0)
    # stop when the evaluated success rate reaches this
    success_target: float = Field(1.0, gt=0, le=1)
    n_envs: int = Field(8, ge=1)
    # where the n_envs training envs run (policies/residual/workers.py): "inline", all in
    # the trainer's process (SB3's DummyVecEnv); "local", worker processes on this machine;
    # "ray", the same workers as Ray actors. Inline by default: on the reach case local
    # workers were slower on a 2-core machine (docs/residual_rl.md, "Parallel rollouts")
    workers: Literal["inline", "local", "ray"] = "inline"
    # rollout workers, each stepping n_envs / n_workers envs (0: min(n_envs, CPU count))
    n_workers: int = Field(0, ge=0)
    # workers: ray: the cluster to join ("auto": the one this machine belongs to); None
    # starts a local Ray (a running one, ray.init before the run, is used as it is)
    ray_address: str | None = None
    seed: int = 0
    # episodes of base-only rollouts for observation statistics (keys without a
    # normalization in the base's contract)
    stats_episodes: int = Field(1, ge=1)
    # evaluation of the deterministic residual: episodes, first seed (unseen in training),
    # and how often (env steps)
    eval_episodes: int = Field(20, ge=1)
    eval_seed: int = 100_000
    eval_every_steps: int = Field(10_000, ge=1)
    # torch threads (1 keeps the simulators' core free on a small machine)
    threads: int = Field(1, ge=1)
    ppo: PPOConfig = Field(default_factory=PPOConfig)
    offpolicy: OffPolicyConfig = Field(default_factory=OffPolicyConfig)
    grpo: GRPOConfig = Field(default_factory=GRPOConfig)

    @model_validator(mode="after")
    def _value_baseline_needs_a_success_return(self) -> FinetuneConfig:
        if self.grpo.value_baseline > 0 and self.reward != "sparse":
            raise ValueError(
                "grpo.value_baseline compares an episode's 0/1 success with a success "
                f"probability: it needs finetune.reward: sparse (got {self.reward})"
            )
        return self


class ResidualOnnxConfig(ComponentConfig):
    """Serve an exported base + residual folder (`tether export` of a finetune checkpoint:
    model.json of format tether-residual/1) with onnxruntime."""

    type: Literal["residual_onnx"] = "residual_onnx"
    # the exported folder (or its model.json)
    model: Path
    # onnxruntime intra-op threads of each graph
    threads: int = Field(1, ge=1)
    # seed of the base graph's noise input (diffusion bases)
    seed: int = 0
    # where the base graph runs (the residual stays on the CPU); None: the experiment's
    # ``runtime:`` section
    runtime: RuntimeConfig | None = None
