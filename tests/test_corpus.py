"""The real-world corpus (corpus/threads): every label well-formed, every case analysed, and the
accuracy not below the floors measured when it was last tuned (docs/accuracy.md).

The floors guard against regressions; they are not targets. Raising one needs a general rule
checked on the development half and reported on both halves.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from firstfault.vocab import Category

CORPUS = Path(__file__).resolve().parent.parent / "corpus" / "threads"
CASES = sorted(p.parent for p in CORPUS.glob("*/label.toml"))
CATEGORIES = {c.value for c in Category}

#: measured 2026-12-04 over 208 cases (docs/accuracy.md: 72% and 87%); a little slack for label disputes
FLOOR_CATEGORY = 0.69
FLOOR_CULPRIT = 0.85
# failed cases answered "none": 6 of 175 (an nccl-tests run that hung after its table header, with
# no error line at all; a run whose paste stops after its last iteration, the hang at exit being in
# the thread only; docs/accuracy.md). The goal is 0; this guards against more.
CEILING_SILENT = 0.04


def test_the_corpus_is_there() -> None:
    assert len(CASES) >= 100


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_label_is_well_formed(case: Path) -> None:
    label = tomllib.loads((case / "label.toml").read_text(encoding="utf-8"))
    assert sorted(p.name for p in case.iterdir() if p.name != "second_reading.toml") == ["label.toml", "log.txt"]
    assert label["url"].startswith(("https://", "http://"))  # a forum page served over plain http
    assert label["category"] in CATEGORIES
    assert label["outcome"] in ("failed", "healthy")
    assert (label["outcome"] == "healthy") == (label["category"] == "none")
    assert all(isinstance(r, int) and r >= 0 for r in label["culprit_ranks"])
    log = (case / "log.txt").read_text(encoding="utf-8", errors="replace")
    assert label["root_line"] in log, "root_line must be copied from log.txt"
    assert len(log.encode()) < 40_000


SECOND = sorted(p.parent for p in CORPUS.glob("*/second_reading.toml"))


@pytest.mark.parametrize("case", SECOND, ids=[c.name for c in SECOND])
def test_second_reading_is_well_formed(case: Path) -> None:
    """A second reader's label of a failed case: the same vocabulary, its own confidence and why."""
    other = tomllib.loads((case / "second_reading.toml").read_text(encoding="utf-8"))
    assert sorted(other) == ["category", "culprit_ranks", "label_confidence", "rationale"]
    assert other["category"] in CATEGORIES - {"none"}
    assert other["label_confidence"] in ("high", "medium", "low")
    assert all(isinstance(r, int) and r >= 0 for r in other["culprit_ranks"])
    assert other["rationale"].strip()


def test_agreement_counts_two_readers_and_firstfault_against_each(tmp_path: Path) -> None:
    """Two readers who disagree cap any score: the table says how often they agree and where
    firstfault stands against each (here two cases: the readers agree on one)."""
    from firstfault_bench.corpus import agreement, evaluate_case

    src = CASES[0]
    for name, second in (("a", None), ("b", "agree"), ("c", "other")):
        case = tmp_path / name
        case.mkdir()
        (case / "log.txt").write_bytes((src / "log.txt").read_bytes())
        (case / "label.toml").write_bytes((src / "label.toml").read_bytes())
        if second is not None:
            label = tomllib.loads((src / "label.toml").read_text(encoding="utf-8"))
            cat = label["category"] if second == "agree" else ("hang" if label["category"] != "hang" else "numerical")
            (case / "second_reading.toml").write_text(
                f'category = "{cat}"\nculprit_ranks = []\nlabel_confidence = "low"\nrationale = "test"\n'
            )
    rows = agreement([evaluate_case(tmp_path / n) for n in "abc"])
    names = [name for name, _ in rows]
    assert len(names) == len(set(names)), "every row says what it counts"
    table = dict(rows)
    assert table["cases read twice"] == "2"
    assert table["the two readers agree on the category"] == "1/2 (50%)"
    assert table["  of them, where the second reader is low"] == "1/2 (50%)"
    # firstfault gives one answer for two copies of one log: it matches the first reader on both or
    # on neither, and the second reader on at most one (the readers differ on one case)
    first = table["firstfault's category = the first reader's"]
    assert first in ("2/2 (100%)", "0/2 (0%)")
    either = table["firstfault's category = either reader's"]
    assert either == first or first == "0/2 (0%)"


def test_agreed_rows_keep_the_labels_two_readers_share(tmp_path: Path) -> None:
    """Scores on shared labels: a case whose readers differ on the category is left out, and the
    culprit is scored only where they name the same first rank (or both none)."""
    from firstfault_bench.corpus import agreed_rows, evaluate_case

    # a case whose label names a culprit rank, so that a second reader can name another one
    src = next(c for c in CASES if tomllib.loads((c / "label.toml").read_text(encoding="utf-8"))["culprit_ranks"])
    label = tomllib.loads((src / "label.toml").read_text(encoding="utf-8"))
    other = "hang" if label["category"] != "hang" else "numerical"
    first_rank = label["culprit_ranks"][0]
    for name, cat, ranks in (
        ("a", None, ""),
        ("b", label["category"], f"[{first_rank}]"),
        ("c", other, "[]"),
        ("d", label["category"], f"[{first_rank + 1}]"),  # same category, another first rank
        ("e", label["category"], "[]"),  # same category, no rank named
    ):
        case = tmp_path / name
        case.mkdir()
        (case / "log.txt").write_bytes((src / "log.txt").read_bytes())
        (case / "label.toml").write_bytes((src / "label.toml").read_bytes())
        if cat is not None:
            (case / "second_reading.toml").write_text(
                f'category = "{cat}"\nculprit_ranks = {ranks}\nlabel_confidence = "high"\nrationale = "test"\n'
            )
    rows = agreed_rows([evaluate_case(tmp_path / n) for n in "abcde"])
    assert [r.name for r in rows] == ["b", "d", "e"]
    assert rows[0].culprit_known == evaluate_case(src).culprit_known
    assert not rows[1].culprit_known and not rows[2].culprit_known


def test_every_case_is_analysed_and_accuracy_holds() -> None:
    from firstfault_bench.corpus import evaluate_case

    results = [evaluate_case(c) for c in CASES]
    crashed = [r.name for r in results if r.error and "Traceback" in r.error]
    assert not crashed
    failed = [r for r in results if r.failed]
    category = sum(r.category_ok for r in results) / len(results)
    scored = [r for r in results if r.culprit_scored]
    culprit = sum(r.culprit_ok for r in scored) / len(scored)
    silent = sum(r.silent for r in failed) / len(failed)
    print(f"category {category:.0%}, culprit {culprit:.0%}, failed answered none {silent:.0%}")
    assert category >= FLOOR_CATEGORY
    assert culprit >= FLOOR_CULPRIT
    assert silent <= CEILING_SILENT
    # the verdict's confidence means something: its surest band is right more often than its least sure
    from firstfault_bench.corpus import CONFIDENCE_BANDS

    answered = [r for r in results if r.category != "error"]
    lo, hi = CONFIDENCE_BANDS[0], CONFIDENCE_BANDS[-1]
    unsure = [r.category_ok for r in answered if lo[0] <= r.confidence < lo[1]]
    sure = [r.category_ok for r in answered if hi[0] <= r.confidence < hi[1]]
    assert unsure and sure and sum(sure) / len(sure) > sum(unsure) / len(unsure)


def test_run_corpus_prints_and_writes_every_table(tmp_path: Path) -> None:
    """`bench accuracy --corpus DIR --markdown F`: the totals, the shared-label scores, the
    calibration and the two readers' table, then one row per case."""
    from firstfault_bench.corpus import run_corpus

    read_twice = [c for c in CASES if (c / "second_reading.toml").exists()][:2]
    root = tmp_path / "threads"
    for src in [*read_twice, CASES[0]]:
        case = root / src.name
        case.mkdir(parents=True, exist_ok=True)
        for f in src.iterdir():
            (case / f.name).write_bytes(f.read_bytes())
    md = tmp_path / "corpus.md"
    rows = run_corpus(root, markdown=md, verbose=False)
    text = md.read_text(encoding="utf-8")
    assert len(rows) == len(list(root.iterdir()))
    for head in (
        "| measure | all | dev | held-out |",
        "| two readers | all |",
        "| on the labels two readers agree on |",
    ):
        assert head in text
    assert all(f"| {r.name} | {r.split} |" in text for r in rows)
