"""Training windows from a LeRobot v3 dataset: (obs_horizon observations, horizon actions).

A sample at frame k of an episode holds observations at frames k-To+1 .. k (the first frame
repeated before the episode starts) and actions at frames k .. k+H-1 (the last action
repeated past the end), as in Diffusion Policy. Everything is decoded into memory once.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tether.core.data.lerobot import LeRobotReader
from tether.core.errors import TetherError
from tether.core.types import normalise_instruction
from tether.policies.diffusion.config import (
    IMAGE_PREFIX,
    TEXT_KEY,
    DiffusionModelConfig,
    dataset_feature,
    low_dim,
)


@dataclass
class WindowDataset:
    """All frames of all episodes back to back plus per-sample index windows."""

    obs: dict[str, np.ndarray]  # key -> (N, ...) frames
    action: np.ndarray  # (N, D)
    obs_index: np.ndarray  # (S, To) frame indices
    action_index: np.ndarray  # (S, H) frame indices
    fps: float
    stats: dict[str, tuple[np.ndarray, np.ndarray]]  # key or "action" -> (min, max)
    action_names: list[str]
    episodes: int
    # the distinct instructions of the episodes (TEXT_KEY), in first-seen order
    instructions: list[str] | None = None
    # the text encoder's record (text_encoder.json) when TEXT_KEY is read
    text_encoder: dict[str, Any] | None = None
    # with paraphrases (load_windows): every wording trained on (P, E), the rows of each
    # group in it, and each frame's group
    wordings: np.ndarray | None = None
    group_rows: list[np.ndarray] | None = None
    frame_group: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.obs_index)

    def batch(self, idx: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """Observations {key: (B, To, ...)} and actions (B, H, D) of samples ``idx``."""
        oi, ai = self.obs_index[idx], self.action_index[idx]
        return {k: v[oi] for k, v in self.obs.items()}, self.action[ai]

    def paraphrase(self, idx: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Instruction embeddings (B, To, E) of samples ``idx``, each a wording drawn from the
        paraphrase group of its episode's instruction (the same for all its frames)."""
        if self.wordings is None or self.group_rows is None or self.frame_group is None:
            raise TetherError("this dataset was loaded without paraphrases")
        groups = self.frame_group[self.obs_index[idx, -1]]
        rows = np.array([self.group_rows[g][rng.integers(len(self.group_rows[g]))] for g in groups])
        to = self.obs_index.shape[1]
        return np.repeat(self.wordings[rows][:, None], to, axis=1)

    def text_table(self) -> np.ndarray:
        """The distinct instruction embeddings trained on (the text normalisation's input)."""
        return self.obs[TEXT_KEY] if self.wordings is None else self.wordings


def _group_instructions(
    root: str | Path, instructions: list[str], paraphrases: dict[str, list[str]]
) -> tuple[list[str], list[np.ndarray], dict[str, int]]:
    """The wordings of the groups that hold the dataset's instructions (first-seen order),
    each group's rows among them, and each instruction's group. An instruction in no group,
    or in two, is refused: its paraphrases would be a guess."""
    norm = {g: [normalise_instruction(w) for w in ws] for g, ws in paraphrases.items()}
    used: list[str] = []
    of: dict[str, int] = {}
    for text in instructions:
        hits = [g for g, ws in norm.items() if normalise_instruction(text) in ws]
        if len(hits) != 1:
            where = "no group" if not hits else f"{len(hits)} groups ({', '.join(hits)})"
            raise TetherError(
                f"{root}: the instruction '{text}' is in {where} of train.paraphrases; "
                "list it in exactly one group of wordings that mean the same"
            )
        if hits[0] not in used:
            used.append(hits[0])
        of[text] = used.index(hits[0])
    wordings: list[str] = []
    rows: list[np.ndarray] = []
    for g in used:
        ws = list(dict.fromkeys(norm[g]))
        rows.append(np.arange(len(wordings), len(wordings) + len(ws)))
        wordings += ws
    return wordings, rows, of


def _minmax(reader: LeRobotReader, feature: str, data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    st = reader.stats.get(feature)
    if st is not None and "min" in st and "max" in st:
        return np.asarray(st["min"], np.float64), np.asarray(st["max"], np.float64)
    return data.min(0).astype(np.float64), data.max(0).astype(np.float64)


def load_windows(
    root: str | Path,
    cfg: DiffusionModelConfig,
    max_episodes: int | None = None,
    text_encoder: str | None = None,
    paraphrases: dict[str, list[str]] | None = None,
    extra_keys: tuple[str, ...] = (),
) -> WindowDataset:
    """Decode a dataset into training windows for ``cfg``'s keys and horizons. The
    instruction key becomes each frame's task string embedded by the frozen text encoder
    ``text_encoder`` (a name under tether.policies.vla.text_encoder.encoders_root()), once
    per distinct string. ``paraphrases`` (group -> wordings that mean the same): each
    instruction must be in one group; :meth:`WindowDataset.paraphrase` then draws any
    wording of its group, and ``instructions`` lists every wording of the groups used.
    ``extra_keys``: low-dim keys loaded beside the model's (training targets such as
    train.aux_env_state's), in ``obs`` and ``stats`` but not among the policy's inputs."""
    reader = LeRobotReader(root)
    if reader.num_episodes == 0:
        raise TetherError(f"{root}: the dataset has no episodes")
    keys = list(dict.fromkeys([*cfg.obs_keys, *extra_keys]))
    for key in keys:
        if key == TEXT_KEY:
            continue
        if key.startswith(IMAGE_PREFIX) or key in ("state", "env_state"):
            feature = dataset_feature(key)
            if feature not in reader.features:
                have = ", ".join(k for k in reader.features if k.startswith("observation"))
                raise TetherError(f"{root}: no feature {feature} for '{key}' (has {have})")
        else:
            raise TetherError(
                f"unknown observation key '{key}' (state, env_state, images/<cam>, {TEXT_KEY})"
            )
    encoder: Any = None
    if TEXT_KEY in cfg.obs_keys:
        from tether.policies.vla.text_encoder import DEFAULT_ENCODER, TextEncoder, text_encoder_dir

        encoder = TextEncoder(text_encoder_dir(text_encoder or DEFAULT_ENCODER))
    instructions: list[str] = []
    frame_texts: list[str] = []
    n_eps = min(reader.num_episodes, max_episodes or reader.num_episodes)
    frames: dict[str, list[np.ndarray]] = {k: [] for k in keys}
    # camera frames are most of the memory (two 96x96 cameras: 55 kB a frame): they go
    # straight into one array per camera, not a list concatenated at the end (twice the peak)
    total = int(sum(r["length"] for r in reader.episodes[:n_eps]))
    images: dict[str, np.ndarray] = {}
    actions: list[np.ndarray] = []
    obs_index: list[np.ndarray] = []
    action_index: list[np.ndarray] = []
    start = 0
    for i in range(n_eps):
        ep: dict[str, Any] = reader.episode(i, decode_video=False)
        n = len(ep["index"])
        for key in keys:
            feature = dataset_feature(key)
            if key.startswith(IMAGE_PREFIX):
                img = reader.frames(i, feature, ep["timestamp"].astype(np.float64))
                if key not in images:
                    images[key] = np.empty((total, *img.shape[1:]), img.dtype)
                images[key][start : start + n] = img
            elif key == TEXT_KEY:
                texts = [str(t) for t in ep["task"]]
                frame_texts += texts
                instructions += [t for t in dict.fromkeys(texts) if t not in instructions]
                frames[key].append(np.stack([encoder.encode(t) for t in texts]))
            else:
                frames[key].append(np.asarray(ep[feature], np.float32))
        actions.append(np.asarray(ep["action"], np.float32))
        k = np.arange(n)
        obs_index.append(
            start + np.clip(k[:, None] + np.arange(-cfg.obs_horizon + 1, 1)[None], 0, n - 1)
        )
        action_index.append(start + np.clip(k[:, None] + np.arange(cfg.horizon)[None], 0, n - 1))
        start += n
    obs = {k: images[k] if k in images else np.concatenate(frames[k]) for k in keys}
    wordings = group_rows = frame_group = None
    if paraphrases is not None:
        if encoder is None:
            raise TetherError(f"train.paraphrases needs '{TEXT_KEY}' in train.model.obs_keys")
        texts, group_rows, of = _group_instructions(root, instructions, paraphrases)
        frame_group = np.array([of[t] for t in frame_texts], np.int64)
        wordings = np.stack([encoder.encode(t) for t in texts]).astype(np.float32)
        instructions = texts
    action = np.concatenate(actions)
    stats = {k: _minmax(reader, dataset_feature(k), obs[k]) for k in keys if low_dim(k)}
    stats["action"] = _minmax(reader, "action", action)
    names = reader.features["action"].get("names") or [f"a{i}" for i in range(action.shape[1])]
    return WindowDataset(
        obs=obs,
        action=action,
        obs_index=np.concatenate(obs_index),
        action_index=np.concatenate(action_index),
        fps=float(reader.fps),
        stats=stats,
        action_names=list(names),
        episodes=n_eps,
        instructions=instructions if encoder is not None else None,
        text_encoder=dict(encoder.meta) if encoder is not None else None,
        wordings=wordings,
        group_rows=group_rows,
        frame_group=frame_group,
    )
