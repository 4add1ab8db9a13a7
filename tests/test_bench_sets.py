"""`firstfault bench sets`: real jobs scored set by set against the real-world bar.

The labelled real sets live outside the repository; the bundles in tests/fixtures/realjobs are
real jobs of the same scripts with the same ``truth.json``, so they stand in for a set here. The
measures are checked against ``analyze`` itself (the table must say what the verdicts say), and
the bar, the excerpt grouping, refusals and ``--against`` on small sets built from those bundles.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from firstfault.cli import app
from firstfault.pipeline import analyze
from firstfault_bench.real_sets import (
    CUT,
    KEPT,
    REFUSED,
    UNPLACED,
    JobRow,
    SetScore,
    compare,
    excerpt_evidence,
    set_dirs,
)

REAL = Path(__file__).parent / "fixtures" / "realjobs"


def _copy(names: list[str], dest: Path, fragment: str | None = None) -> Path:
    dest.mkdir(parents=True)
    for n in names:
        shutil.copytree(REAL / n, dest / n)
        if fragment:
            t = json.loads((dest / n / "truth.json").read_text())
            t["fragment"] = fragment
            (dest / n / "truth.json").write_text(json.dumps(t))
    return dest


def test_rows_are_the_verdicts_of_analyze(tmp_path: Path) -> None:
    """Every job of the set is one row holding its label and the verdict `analyze` gives it."""
    rows_file, md = tmp_path / "rows.jsonl", tmp_path / "sets.md"
    res = CliRunner().invoke(app, ["bench", "sets", str(REAL), "--rows", str(rows_file), "--markdown", str(md)])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in rows_file.read_text().splitlines()]
    jobs = sorted(p.parent.name for p in REAL.glob("*/truth.json"))
    assert sorted(r["job"] for r in rows) == jobs
    for r in rows[::8]:  # a sample: the whole set is analysed once above
        v = analyze(REAL / r["job"])
        truth = json.loads((REAL / r["job"] / "truth.json").read_text())
        assert (r["category"], r["ranks"]) == (str(v.category), list(v.culprit.ranks))
        assert (r["truth_category"], r["truth_ranks"]) == (truth["expected_category"], truth["culprit_ranks"])
    score = SetScore("realjobs", [JobRow(**r) for r in rows])
    text = md.read_text()
    assert f"| realjobs | {score.jobs} | " in text
    assert f"{score.culprit}/{score.ranked} (" in text  # the culprit measure counts only labels naming a rank
    cuts = sum(1 for r in rows if r["fragment"])
    assert f"| all whole jobs | {len(rows) - cuts} |" in text and f"| all excerpts | {cuts} |" in text
    assert "| confidence | whole jobs | excerpts |" in text and "| 0.85-1.00 | " in text


def test_measures_and_the_bar() -> None:
    """Culprit over labels that name a rank; healthy flagged and failed -> none on their own; the
    bar falls with any one of them."""

    def row(job: str, truth: str, tr: list[int], cat: str, ranks: list[int]) -> JobRow:
        return JobRow("s", job, truth, tr, cat, ranks, 0.5, "")

    good = [row(f"j{i}", "hang", [1], "hang", [1]) for i in range(19)] + [row("h", "none", [], "none", [])]
    s = SetScore("s", good)
    assert (s.ranked, s.culprit, s.unranked, s.no_rank_ok) == (19, 19, 1, 1) and s.meets_bar()
    assert not SetScore("s", [*good[1:], row("x", "hang", [1], "hang", [2])]).meets_bar()  # 18/19 < 95%
    assert not SetScore("s", [*good, row("y", "none", [], "straggler", [3])]).meets_bar()  # healthy flagged
    silent = SetScore("s", [*good, row("z", "hang", [], "none", [])])
    assert silent.failed_none == 1 and not silent.meets_bar()
    refused = SetScore("s", [*good, row("r", "hang", [], REFUSED, [])])
    assert refused.refused == ["r"] and refused.category == len(good)


def test_sets_excerpts_refusals_and_against(tmp_path: Path) -> None:
    """A folder of sets is read set by set; a job whose label says ``fragment`` is an excerpt,
    totalled apart from whole jobs; a job refused as unusable is a miss, named; ``--against`` lists each moved
    verdict as better or worse."""
    root = tmp_path / "sets"
    _copy(["size_mismatch_r1", "healthy_warnings"], root / "whole")
    cut = _copy(["tail_hang_r2"], root / "cuts", fragment="tail 60")
    junk = cut / "junk"
    junk.mkdir()
    (junk / "console.log").write_bytes(b"\x00\x01\x02 not a log \xff" * 64)
    (junk / "truth.json").write_text(
        json.dumps({"expected_category": "hang", "culprit_ranks": [1], "fragment": "tail 60"})
    )
    broken = root / "whole" / "broken"
    broken.mkdir()
    (broken / "truth.json").write_text("{not json")
    assert set_dirs([root]) == [root / "cuts", root / "whole"]
    assert set_dirs([root / "whole"]) == [root / "whole"]

    rows_file, md = tmp_path / "rows.jsonl", tmp_path / "sets.md"
    res = CliRunner().invoke(app, ["bench", "sets", str(root), "--rows", str(rows_file), "--markdown", str(md)])
    assert res.exit_code == 0, res.output
    assert "left out: whole/broken: truth.json unreadable" in res.output
    text = md.read_text()
    assert "| all whole jobs | 2 |" in text and "| all excerpts | 2 |" in text
    rows = {r["job"]: r for r in map(json.loads, rows_file.read_text().splitlines())}
    assert rows["junk"]["category"] == REFUSED
    assert "| cuts | 2 | " in text and " | 1 | not met |" in text  # one refused, and the bar not met

    # --against: an earlier run that read rank 1's job as another rank is "better" now
    rows["size_mismatch_r1"]["ranks"] = [0]
    rows["size_mismatch_r1"]["category"] = "process_crash"
    base = tmp_path / "base.jsonl"
    base.write_text("".join(json.dumps(r) + "\n" for r in rows.values()))
    moved = compare([JobRow(**json.loads(line)) for line in rows_file.read_text().splitlines()], base)
    assert len(moved) == 1 and moved[0].startswith("better  whole/size_mismatch_r1: process_crash [0] -> ")


def test_no_set_found_is_an_error(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["bench", "sets", str(tmp_path)])
    assert res.exit_code == 2 and "no set found" in res.output


def test_excerpts_apart_by_whether_they_kept_the_faults_line(tmp_path: Path) -> None:
    """An excerpt whose job was read right is split by whether its text holds that verdict's root
    line: the excerpts' misses are then read apart from what the cut left out."""
    root = tmp_path / "sets"
    _copy(["size_mismatch_r1"], root / "tr1")
    rule = "the last 60 lines of tr1/size_mismatch_r1/console.log"
    cuts = _copy(["size_mismatch_r1"], root / "frag", fragment=rule)
    shutil.copytree(cuts / "size_mismatch_r1", cuts / "head_only")
    shutil.rmtree(cuts / "head_only" / "logs")
    console = (cuts / "head_only" / "console.log").read_text().splitlines()
    (cuts / "head_only" / "console.log").write_text("\n".join(console[:5]) + "\n")
    shutil.copytree(cuts / "size_mismatch_r1", cuts / "elsewhere")
    t = json.loads((cuts / "elsewhere" / "truth.json").read_text())
    t["fragment"] = "the last 60 lines of tr9/not_here/console.log"
    (cuts / "elsewhere" / "truth.json").write_text(json.dumps(t))

    rows_file, md = tmp_path / "rows.jsonl", tmp_path / "sets.md"
    res = CliRunner().invoke(app, ["bench", "sets", str(root), "--rows", str(rows_file), "--markdown", str(md)])
    assert res.exit_code == 0, res.output
    rows = [JobRow(**json.loads(line)) for line in rows_file.read_text().splitlines()]
    whole = next(r for r in rows if r.set == "tr1")
    assert (
        whole.right and whole.root_line and whole.root_line in (REAL / "size_mismatch_r1" / "console.log").read_text()
    )
    kinds = excerpt_evidence(rows, {(r.set, r.job): (root / r.set / r.job / "console.log").read_text() for r in rows})
    assert kinds[("frag", "size_mismatch_r1")] == KEPT
    assert kinds[("frag", "head_only")] == CUT
    assert kinds[("frag", "elsewhere")] == UNPLACED
    text = md.read_text()
    assert f"| {KEPT} | 1 | " in text and f"| {CUT} | 1 | " in text and f"| {UNPLACED} | 1 | " in text
