"""Every number a user reads in README.md and docs/ says where it comes from.

A paragraph or table row that states a result (a success rate, an error, a latency, a rate, a
speed-up, a count of successes) must name the test (``tests/...py``) that asserts it or the
benchmark (``benchmarks/...``, whose JSON `make bench` rewrites) that measured it; a row of
physical parameters names the file that defines them. Old results kept for the record start
with "History (not re-measured" and are exempt, visibly to the reader. The performance table between the
``bench`` markers is generated from the JSONs and is checked separately (it must match them).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
# a number with a unit or form that results come in
CLAIM = re.compile(
    r"(?<![\w.\-/])\d[\d,]*(\.\d+)?\s*"
    r"(%|ms\b|Hz\b|kHz\b|x\b|×|mm\b|cm\b|s\b|min\b|/\d+\b|of \d+\b|M params|MB\b)"
)
# a file in the repository that proves or defines the number
SOURCE = re.compile(
    r"((?:tests|benchmarks|sim|core|robots|policies|hardware|configs|models|ros2_ws)/[\w./\-]+"
    r"\.(?:py|json|yaml|xml|urdf))"
)


def claim_blocks(text: str) -> list[tuple[str, str]]:
    """(block, context) for paragraphs and table rows outside code fences and the generated
    bench block; a table row's context is its table's caption (the paragraph just before
    the table) and header row, where a table names its source once."""
    blocks: list[tuple[str, str]] = []
    cur: list[str] = []
    caption = ""
    table_context: str | None = None
    fence = generated = False

    def close_paragraph() -> None:
        nonlocal cur, caption
        if cur:
            caption = " ".join(cur)
            blocks.append((caption, ""))
            cur = []

    for line in text.splitlines():
        if line.startswith("```"):
            fence = not fence
            continue
        if "<!-- bench:start -->" in line:
            generated = True
        if "<!-- bench:end -->" in line:
            generated = False
            continue
        if fence or generated:
            continue
        if line.startswith("|"):
            close_paragraph()
            if table_context is None:  # the header row
                table_context = caption + " " + line
            elif not set(line) <= set("|-: "):
                blocks.append((line, table_context))
            continue
        table_context = None
        if not line.strip() or line.startswith("#"):
            close_paragraph()
            if line.startswith("#"):
                caption = ""
            continue
        cur.append(line.strip())
    close_paragraph()
    return blocks


# a block that says so is history: kept for the record, proven by nothing in the suite
HISTORY = "History (not re-measured"


def unsourced(text: str) -> list[str]:
    """Blocks that state a number and name no existing file that proves or defines it (nor
    say that they are history)."""
    out = []
    for block, context in claim_blocks(text):
        if not CLAIM.search(block) or block.startswith(HISTORY):
            continue
        sources = [s for s in SOURCE.findall(block + " " + context) if (REPO / s).exists()]
        if not sources:
            out.append(block)
    return out


def test_the_checker_tells_sourced_from_unsourced():
    text = (
        "Lifts 94 % of 50 unseen seeds (`benchmarks/results/quad_train.json`).\n\n"
        "The loop runs at 500 Hz.\n\n"
        "Hover:\n\n| case | error |\n|---|---|\n| hover | 0.7 mm (`tests/no/such_test.py`) |\n\n"
        "Measured by `tests/test_readme_claims.py`:\n\n"
        "| case | error |\n|---|---|\n| hover | 0.7 mm |\n\n"
        "```\nsuccess 10/10 (100%)\n```\n"
    )
    assert unsourced(text) == [
        "The loop runs at 500 Hz.",
        "| hover | 0.7 mm (`tests/no/such_test.py`) |",
    ]


@pytest.mark.parametrize("doc", DOCS, ids=[d.name for d in DOCS])
def test_every_number_names_its_source(doc):
    missing = unsourced(doc.read_text())
    assert not missing, f"{doc.name}: numbers without a test or benchmark:\n" + "\n".join(
        f"  - {m[:200]}" for m in missing
    )


def test_the_performance_table_is_what_the_benchmarks_wrote():
    """README's generated block equals what benchmarks/run_all.py renders from the JSONs."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("run_all", REPO / "benchmarks" / "run_all.py")
    assert spec and spec.loader
    run_all = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run_all)
    readme = (REPO / "README.md").read_text()
    start, end = readme.index(run_all.START), readme.index(run_all.END)
    assert readme[start : end + len(run_all.END)] == run_all.render_block(), (
        "README's performance table differs from benchmarks/results/*.json: run "
        "`python benchmarks/run_all.py --render`"
    )
