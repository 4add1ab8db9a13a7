"""Who printed a line: the launcher prefixes that name a rank.

torchrun's ``--tee`` writes ``[default3]:`` (role and *local* rank), torch's c10 logger and
distributed errors ``[rank3]:`` (the *global* rank), ``srun -l`` ``3: `` (the global task id),
Open MPI's ``mpirun --tag-output`` ``[1,3]<stdout>:`` (job id and MPI rank: Horovod, nccl-tests),
pdsh's ``worker-1: `` (the host, before any of the others: DeepSpeed's and Accelerate's multi-node runs),
Ray's ``(RayTrainWorker pid=1584) `` (a process, not a rank), and a paste's own Markdown quote
marker ``> `` before them all.
Every stage that reads a raw line (parsing, the registry's self-check, reports) peels them the same way.
"""

from __future__ import annotations

import re

# torchrun --tee / --log-line-prefix-template default: "[default3]:" (role name + local rank)
ELASTIC_PREFIX = re.compile(r"^\[(?!rank\d)(?P<role>[A-Za-z_][\w-]*?)(?P<lr>\d+)\]:")
# torch's c10 logger and distributed errors: "[rank3]:" (global rank); Lightning's rank-prefixed
# messages, "[rank: 1] " (lightning_utilities rank_prefixed_message: f"[rank: {rank}] {message}");
# the "[rank=2] " many trainers print before a rank's own log lines
RANK_PREFIX = re.compile(r"^\[rank(?:(?P<rank>\d+)\]:|(?:=|: )(?P<rank_eq>\d+)\] )")
# srun -l / --label: "3: " (global task id), padded with spaces for wide jobs
SRUN_PREFIX = re.compile(r"^\s*(?P<task>\d{1,6}): ")
# A node's torchrun agent speaking for itself (torch.distributed.run, the elastic agent, its process
# handling: "W1202 10:01:02.123000 245 torch/distributed/run.py:793] ..."). Under ``srun torchrun`` the
# srun label on such a line is the node's agent, not a rank (``parse.slurm``, ``parse.facts``). The
# path is the module's as torch was imported, so a virtualenv's prefix may come first (a real run:
# "E1207 06:16:39.953000 25265 .venv/lib/python3.11/site-packages/torch/distributed/elastic/...").
TORCHRUN_AGENT = re.compile(
    r"^[IWEF]\d{4} [\d:.]+ +\d+ (?:\S*/)?torch/distributed/(?:run\.py|elastic/agent/|elastic/multiprocessing/api\.py)"
)


def srun_labels_agent(line: str) -> bool:
    """Is this ``srun -l`` label a node's torchrun agent, not a rank? It is when the line after it is
    the agent's own (``TORCHRUN_AGENT``) or a worker's line the agent prefixed (``[default0]:``)."""
    m = SRUN_PREFIX.match(line)
    if m is None:
        return False
    body = line[m.end() :]
    return bool(ELASTIC_PREFIX.match(body) or TORCHRUN_AGENT.match(body))


# mpirun --tag-output (Open MPI orte/mca/iof: "[%s,%d]<%s>:" job id, vpid, stream), after an optional
# leading timestamp that a log collector put in front ("2019-06-02T16:13:44.884Z: [1,12]<stdout>:")
MPI_PREFIX = re.compile(r"^(?:\S{8,40}: )?\[(?P<job>\d+),(?P<rank>\d+)\]<(?:stdout|stderr|stddiag)>:")
# pdsh, the remote shell DeepSpeed's and Accelerate's multi-node launchers run, labels every remote
# line "host: " (pdsh(1): "-N  Disable hostname: prefix on lines of output"). A bare "Word: " is also
# how an exception line starts, so it is a host only when the name is an IPv4 address or holds a
# digit or a hyphen, as host names do and exception names ("RuntimeError: [../gloo/...]") do not,
# and what follows starts as a job's line does: a bracket (a time, "[rank3]:", "[default0]:"), or
# Python's traceback, frame or exception line. Real: "192.168.13.81: [rank19]:[E808 ...".
PDSH_PREFIX = re.compile(
    r"^(?P<host>(?:\d{1,3}\.){3}\d{1,3}|[A-Za-z][\w.-]*?[\d-][\w.-]*): "
    r"(?=\[|Traceback \(most recent call last\)|  File \"|[A-Za-z_][\w.]*(?:Error|Exception)\b)"
)
# a tqdm progress bar the next line was printed onto (its "\r" redraws lost in the capture):
# "  0%|          | 0/60 [00:00<?, ?it/s][rank0]:[E ...]", "... 496/1155 [05:07<06:48,  1.61it/s]WARNING:torch..."
# (a trainer's metric columns may come before the bar)
TQDM_BAR = re.compile(r"^[^\[\n]{0,160}?\d{1,3}%\|[^|\n]{0,200}\|[^\[\n]{0,40}\[[^\]\n]{0,80}\](?=[\[A-Za-z])")


# A log collector's own time in front of a rank's prefix: ``kubectl logs --timestamps`` and
# ``docker logs -t`` write RFC 3339 ("2026-02-18T10:48:25.681Z [rank7]:[E218 ...]"), a logging
# wrapper or ``ts`` a plain date and time ("2024-11-20 14:37:16 [rank3]: torch.OutOfMemoryError").
# Peeled only where a rank's or torchrun's prefix follows (``RANK_PREFIX``, ``ELASTIC_PREFIX``), so
# the prefix still names the rank; the line keeps the time (``parse.base.SourceParser.timestamp``
# reads it from the unpeeled line).
COLLECTOR_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d{1,9})?(?:Z|[+-]\d{2}:?\d{2})?:? ")


# Ray's log monitor labels each worker's line with the process that printed it ("(RayTrainWorker
# pid=1584) ", "(pid=34272, ip=10.0.0.3) ", ray/_private/log_monitor.py / worker.py print_logs):
# a process, not a rank, so it is peeled for what follows (an exception line, a launcher's prefix).
RAY_PREFIX = re.compile(r"^\((?:[A-Za-z_][\w.:-]* )?pid=(?P<pid>\d+)(?:, ip=[\w.:-]+)?\) ")


def peel_quote(text: str) -> str:
    """The line without a Markdown quote marker ("> "): a log pasted into an issue thread as a
    quote keeps it on every line, and a signature anchored at the line's start would miss it."""
    return text[2:] if text.startswith("> ") else text


def peel_pdsh(text: str) -> tuple[str, str | None]:
    """(the line without pdsh's "host: ", the host), or (the line, None) (see ``PDSH_PREFIX``)."""
    if text.find(": ", 0, 80) > 0 and (m := PDSH_PREFIX.match(text)):
        return text[m.end() :], m["host"]
    return text, None


def strip_prefixes(text: str, srun: bool = True, pdsh: bool = True) -> tuple[str, int | None, int | None]:
    """Remove launcher prefixes; returns (text, local_rank, global_rank) where they said.
    ``pdsh=False`` when the caller has peeled the quote marker and pdsh's host label itself (to
    keep the host: ``parse.base.SourceParser.strip``)."""
    local_rank = rank = None
    if pdsh:
        if text.startswith("> "):  # peel_quote, inline: this runs on every line of a file's head and tail
            text = text[2:]
        text = peel_pdsh(text)[0]
    if text[:1] == "(" and (ray := RAY_PREFIX.match(text)):
        text = text[ray.end() :]
    if text[:1].isdigit() and (clock := COLLECTOR_TIME.match(text)):
        rest = text[clock.end() :]
        if RANK_PREFIX.match(rest) or ELASTIC_PREFIX.match(rest):
            text = rest
    if "%|" in text and (bar := TQDM_BAR.match(text)):
        text = text[bar.end() :]
    if text.find(">:", 0, 64) >= 0 and (mpi := MPI_PREFIX.match(text)):
        rank = int(mpi["rank"])
        text = text[mpi.end() :]
    m = ELASTIC_PREFIX.match(text)
    if m:
        local_rank = int(m["lr"])
        text = text[m.end() :]
    elif srun and (m2 := SRUN_PREFIX.match(text)):
        rank = int(m2["task"])
        text = text[m2.end() :]
    m3 = RANK_PREFIX.match(text)
    if m3:
        rank = int(m3["rank"] or m3["rank_eq"])
        end = m3.end() + 1 if text[m3.end() : m3.end() + 1] == " " else m3.end()
        text = text[end:]
    return text, local_rank, rank


def rank_numbers(text: str, cap: int) -> list[int]:
    """The rank numbers in a list a line names ("0, 1, 3", "2 5"), in their order.

    A number at or above ``cap`` (the largest world the limits allow) is a claim, not a rank: a
    ready list is turned into the ranks it lacks, so "0, 9999999" must not become ten million of
    them. Both the parser's hooks (Horovod's stall lists) and the reasoning (who the victims
    waited for) read rank lists; one rule serves both.
    """
    parts = re.split(r"[,\s]+", text)
    return [r for x in parts if x.isascii() and x.isdecimal() and len(x) < 9 and (r := int(x)) < cap]
