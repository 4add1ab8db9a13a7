"""``kill -9`` of a real ``firstfault serve`` mid-analysis loses no submission and duplicates none.

The server runs as a subprocess on a loopback port (``firstfault_bench.serve`` starts it, loads it
from 10 clients, kills it with SIGKILL while jobs are running, restarts it on the same folder and
reads its SQLite file at the end). Every content must end with exactly one job and a verdict; the
jobs that were running at the kill are analysed again, and no analysis process outlives its server.
"""

from __future__ import annotations

import pytest

pytest.importorskip("httpx")
pytest.importorskip("psutil")


@pytest.mark.slow
def test_kill9_mid_analysis_loses_and_duplicates_nothing() -> None:
    from firstfault_bench.serve import run_serve

    # two workers with a backlog: at least one job is running when the kill lands
    r = run_serve(count=40, clients=10, kill_at=8, workers=2)
    assert r.lost == 0 and r.duplicated == 0
    assert r.states == {"done": r.distinct}
    assert r.running_at_kill >= 1
    assert r.analysed_twice == r.running_at_kill  # those, and only those, ran again
    assert r.orphans == 0
