"""The few counters ``/metrics`` exposes, in Prometheus' text format written by hand.

A handful of counters and a sum/count pair do not need ``prometheus-client``; the exposition
format is three kinds of line (HELP, TYPE, sample). The queue's depth is read from the store at
scrape time, so it is right after a restart too; the counters are this process's since it started.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field


@dataclass
class Metrics:
    submitted: int = 0
    deduplicated: int = 0
    refused_requests: Counter[int] = field(default_factory=Counter)  # by HTTP status
    finished_by_state: Counter[str] = field(default_factory=Counter)
    analysis_seconds: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def submission(self, created: bool) -> None:
        with self._lock:
            if created:
                self.submitted += 1
            else:
                self.deduplicated += 1

    def refusal(self, status: int) -> None:
        with self._lock:
            self.refused_requests[status] += 1

    def finished(self, state: str, seconds: float) -> None:
        with self._lock:
            self.finished_by_state[state] += 1
            self.analysis_seconds += seconds

    def exposition(self, queue: dict[str, int]) -> str:
        with self._lock:
            lines = [
                "# HELP firstfault_jobs_submitted_total New jobs queued by this process.",
                "# TYPE firstfault_jobs_submitted_total counter",
                f"firstfault_jobs_submitted_total {self.submitted}",
                "# HELP firstfault_jobs_deduplicated_total Submissions answered with an existing job (same content).",
                "# TYPE firstfault_jobs_deduplicated_total counter",
                f"firstfault_jobs_deduplicated_total {self.deduplicated}",
                "# HELP firstfault_requests_refused_total Requests refused, by HTTP status.",
                "# TYPE firstfault_requests_refused_total counter",
                *(
                    f'firstfault_requests_refused_total{{status="{s}"}} {n}'
                    for s, n in sorted(self.refused_requests.items())
                ),
                "# HELP firstfault_jobs_finished_total Jobs this process finished, by outcome.",
                "# TYPE firstfault_jobs_finished_total counter",
                *(
                    f'firstfault_jobs_finished_total{{state="{s}"}} {n}'
                    for s, n in sorted(self.finished_by_state.items())
                ),
                "# HELP firstfault_analysis_seconds Wall time of analyses, sum and count.",
                "# TYPE firstfault_analysis_seconds summary",
                f"firstfault_analysis_seconds_sum {self.analysis_seconds:.6f}",
                f"firstfault_analysis_seconds_count {sum(self.finished_by_state.values())}",
            ]
        lines += [
            "# HELP firstfault_queue_jobs Jobs in the store, by state.",
            "# TYPE firstfault_queue_jobs gauge",
            *(f'firstfault_queue_jobs{{state="{s}"}} {n}' for s, n in sorted(queue.items())),
        ]
        return "\n".join(lines) + "\n"
