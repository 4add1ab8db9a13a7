"""SLURM: the scheduler's side of a failed job, and where each rank ran.

SLURM leaves evidence in several shapes, all handled by one :class:`SlurmParser` (file kind
``slurm_output``), which tells them apart from the file's first lines:

* **job output** (``slurm-<jobid>.out``): the tasks' output, labelled by ``srun -l`` with the
  task id (``0: ...``, padded ``  12: ...`` in wide jobs), and srun's and slurmstepd's own
  lines: ``srun: error: node02: task 2: Exited with exit code 1``, ``srun: error: node01:
  tasks 0-1: Terminated``, ``slurmstepd-node01: error: *** JOB 4 ON node01 CANCELLED AT
  2026-12-02T14:54:20 DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***`` (older
  releases and single-slurmd builds print ``slurmstepd: error:``).
* ``scontrol show job`` and jobcomp/filetxt records: ``Key=Value`` pairs (``JobState=TIMEOUT
  Reason=TimeLimit``, ``NodeList=node[01-02]``, ``EndTime=...``).
* ``sacct --parsable2``: a ``|``-separated header and rows.
* slurmctld / slurmd logs: ``[2026-12-02T14:54:20.276] Killing JobId=4 on failed node node02``.

The signatures (``signatures/slurm.toml``) say what a line means; this module says where and
when: the host a srun/slurmstepd line names, the global rank an ``srun -l`` label is (when
srun launched one task per rank; under ``srun torchrun`` a label is a node's agent), and the
rank -> host map the bundle states (srun's per-task exit lines, ``SLURM_JOB_NODELIST`` +
``SLURM_TASKS_PER_NODE``, ``scontrol``'s ``NodeList`` + task counts with SLURM's default block
distribution). Facts are learned from the file's first and last 64 KiB before any event is
located, so the first event already knows its host; the file is never read whole.

``expand_hostlist``, ``parse_scontrol_job`` and ``parse_sacct`` are the plain functions
behind it, usable on their own.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from firstfault.discover import SourceFile
from firstfault.parse.base import LineInfo, ParseContext, SourceParser, register_parser
from firstfault.parse.stream import Hit
from firstfault.parse.timestamps import parse_timestamp
from firstfault.vocab import FileKind, TsQuality
from firstfault.vocab.identity import ELASTIC_PREFIX, srun_labels_agent
from firstfault.vocab.topology import Topology

HEAD_BYTES = 64 * 1024
TAIL_BYTES = 64 * 1024
#: A hostlist that expands past this is refused (``node[0-999999999]`` must not eat memory).
MAX_HOSTS = 100_000
MAX_TASKS = 1_000_000

# "srun -l" label; then what may follow it
_SRUN_LABEL = re.compile(r"^\s*(?P<task>\d{1,7}): ")
_RANK = re.compile(r"^\[rank(?P<rank>\d+)\]: ?")
# srun's per-task lines (src/srun/launch.c, _task_finish): "HOST: task(s) LIST: what"
_SRUN_TASKS = re.compile(r"^srun: error: (?P<host>\S+): tasks? (?P<tasks>[\d,\-]+): ")
_SRUN_NODE_FAIL = re.compile(r"^srun: error: Node failure on (?P<host>\S+)")
# slurmstepd's log prefix: "slurmstepd: " or, naming the node, "slurmstepd-node01: "
_STEPD = re.compile(r"^slurmstepd(?:-(?P<host>[^:\s]+))?: ")
_ON_HOST = re.compile(r"\*\*\* (?:JOB|STEP) \S+ ON (?P<host>\S+) ")
# slurmctld / slurmd log line: "[2026-12-02T14:54:20.276] " (LogTimeFormat=iso8601_ms, the default)
_DAEMON_TS = re.compile(r"^\[(?P<ts>\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?)\] ")
# "[4.0] " step tag slurmd puts after the time on slurmstepd lines
_STEP_TAG = re.compile(r"^\[(?P<step>\d+\.(?:\d+|batch|extern))\] ")
_ENV_ECHO = re.compile(
    r"\b(?P<key>SLURM_(?:JOB_NODELIST|NODELIST|STEP_NODELIST|TASKS_PER_NODE|NTASKS|NNODES|JOB_NUM_NODES"
    r"|STEP_TASKS_PER_NODE|JOB_ID))=(?P<val>\S+)"
)
# torchrun agent lines naming a worker: "failed (exitcode: 1) local_rank: 0 (pid: ...)"
# torchrun's own glog lines (the agent, not a worker): "W1202 16:28:56.950997 1228267 torch/distributed/run.py:793]"
# an entry of torchrun's ChildFailedError summary (torch/distributed/elastic/multiprocessing/errors:
# _FAILURE_FORMAT_TEMPLATE "  rank      : ${rank} (local_rank: ${local_rank})")
_SUMMARY_RANK = re.compile(r"^\s*rank\s*: (?P<rank>\d+) \(local_rank: (?P<lr>\d+)\)")
_AGENT_LR = re.compile(r"\blocal_rank: (?P<lr>\d+)\b")
_KV_KEY = re.compile(r"(?:^|(?<=\s))(?P<key>[A-Za-z][\w/:.()-]*)=")
_TPN = re.compile(r"^(?P<n>\d+)(?:\(x(?P<times>\d+)\))?$")


# ---------------------------------------------------------------------------
# hostlists and task lists
# ---------------------------------------------------------------------------


def _split_top(expr: str, sep: str = ",") -> list[str]:
    """Split on ``sep`` outside brackets: ``a[1,2],b`` -> ``a[1,2]``, ``b``."""
    out: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in expr:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(0, depth - 1)
        if ch == sep and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur))
    return [p.strip() for p in out if p.strip()]


def _range_values(body: str) -> list[str] | None:
    """``001-004,007`` -> ``["001", ..., "004", "007"]`` (width kept from the lower bound)."""
    vals: list[str] = []
    for item in body.split(","):
        item = item.strip()
        lo, dash, hi = item.partition("-")
        if not lo.isdigit() or (dash and not hi.isdigit()):
            return None
        if not dash:
            vals.append(lo)
            continue
        a, b = int(lo), int(hi)
        if b < a or len(vals) + (b - a + 1) > MAX_HOSTS:
            return None
        width = len(lo) if lo.startswith("0") or len(lo) == len(hi) else 0
        vals.extend(str(i).zfill(width) for i in range(a, b + 1))
    return vals


def _expand_one(token: str) -> list[str] | None:
    m = re.search(r"\[([^\[\]]*)\]", token)
    if m is None:
        return None if ("[" in token or "]" in token) else [token]
    vals = _range_values(m[1])
    if vals is None:
        return None
    rest = _expand_one(token[m.end() :])
    if rest is None:
        return None
    head = token[: m.start()]
    if len(vals) * len(rest) > MAX_HOSTS:
        return None
    return [f"{head}{v}{r}" for v in vals for r in rest]


def expand_hostlist(expr: str | None) -> list[str]:
    """SLURM hostlist expression -> host names, in SLURM's order.

    ``node[001-004,007]`` -> node001..node004, node007; ``gpu-a[1-2]-b[3,5]`` -> gpu-a1-b3,
    gpu-a1-b5, gpu-a2-b3, gpu-a2-b5; ``n1,n2`` -> n1, n2. Empty, ``(null)``, ``None assigned``
    -> ``[]``. A malformed term is kept as it is (bad input never raises); an expansion past
    :data:`MAX_HOSTS` is refused (the term is kept unexpanded).
    """
    if not expr:
        return []
    expr = expr.strip()
    if expr in ("(null)", "None assigned", "None", "(None)", "Unknown"):
        return []
    out: list[str] = []
    for token in _split_top(expr):
        got = _expand_one(token)
        out.extend(got if got is not None else [token])
        if len(out) > MAX_HOSTS:
            return out[:MAX_HOSTS]
    return out


def expand_tasks(spec: str) -> list[int]:
    """srun's task list (``bit_fmt``): ``0-2,5`` -> [0, 1, 2, 5]. Malformed parts are skipped."""
    out: list[int] = []
    for item in spec.split(","):
        lo, dash, hi = item.strip().partition("-")
        if not lo.isdigit():
            continue
        if dash and hi.isdigit():
            a, b = int(lo), int(hi)
            if b >= a and len(out) + b - a < MAX_TASKS:
                out.extend(range(a, b + 1))
        elif not dash:
            out.append(int(lo))
    return out


def expand_tasks_per_node(spec: str) -> list[int]:
    """``SLURM_TASKS_PER_NODE`` / ``SLURM_STEP_TASKS_PER_NODE``: ``2(x3),1`` -> [2, 2, 2, 1]."""
    out: list[int] = []
    for item in spec.split(","):
        m = _TPN.match(item.strip())
        if not m:
            return []
        times = int(m["times"] or 1)
        if len(out) + times > MAX_HOSTS:
            return []
        out.extend([int(m["n"])] * times)
    return out


def block_layout(hosts: list[str], tasks_per_node: list[int]) -> dict[int, str]:
    """SLURM's default ``--distribution=block``: the first node gets tasks 0..n0-1, and so on."""
    out: dict[int, str] = {}
    rank = 0
    for host, n in zip(hosts, tasks_per_node, strict=False):
        for _ in range(n):
            out[rank] = host
            rank += 1
    return out


# ---------------------------------------------------------------------------
# scontrol show job / jobcomp records, sacct
# ---------------------------------------------------------------------------


def _kv_line(line: str) -> Iterator[tuple[str, str]]:
    """``Key=Value`` pairs of one line; a value runs to the next key (values may hold spaces)."""
    keys = list(_KV_KEY.finditer(line))
    for i, m in enumerate(keys):
        end = keys[i + 1].start() if i + 1 < len(keys) else len(line)
        yield m["key"], line[m.end() : end].strip()


def parse_scontrol_jobs(text: str) -> list[dict[str, str]]:
    """Every job record in ``scontrol show job`` output (or jobcomp/filetxt lines).

    A record starts at each ``JobId=``; keys keep SLURM's spelling (``JobState``, ``Reason``,
    ``ExitCode``, ``NodeList``, ``BatchHost``, ``NumNodes``, ``NumTasks``, ``StartTime``,
    ``EndTime``, ``NtasksPerN:B:S:C`` ...). Lines without ``=`` are ignored.
    """
    jobs: list[dict[str, str]] = []
    cur: dict[str, str] | None = None
    for line in text.splitlines():
        for key, val in _kv_line(line):
            if key == "JobId":
                cur = {}
                jobs.append(cur)
            if cur is not None and key not in cur:
                cur[key] = val
    return jobs


def parse_scontrol_job(text: str) -> dict[str, str]:
    """The first job record of ``scontrol show job`` output, or ``{}``."""
    jobs = parse_scontrol_jobs(text)
    return jobs[0] if jobs else {}


def parse_sacct(text: str) -> list[dict[str, str]]:
    """``sacct --parsable2`` (or ``--parsable``, trailing ``|``) -> one dict per row.

    The first non-empty line is the header. A row with fewer fields is padded with ``""``;
    extra fields are dropped. ``sacct -n`` output (no header) is not accepted: there is no
    way to know the columns.
    """
    header: list[str] | None = None
    rows: list[dict[str, str]] = []
    for raw in text.splitlines():
        line = raw.rstrip("\r")
        if not line.strip():
            continue
        cells = line.split("|")
        if cells and cells[-1] == "" and len(cells) > 1:
            cells = cells[:-1]  # --parsable ends every line with "|"
        if header is None:
            if not any(c.strip().lower() == "jobid" for c in cells):
                return []
            header = [c.strip() for c in cells]
            continue
        cells = (cells + [""] * len(header))[: len(header)]
        rows.append(dict(zip(header, cells, strict=True)))
    return rows


def job_layout(job: dict[str, str]) -> dict[int, str]:
    """rank -> host from a job record, when the record says enough to know it.

    Needs ``NodeList`` and either ``NtasksPerN`` (``--ntasks-per-node``) or ``NumTasks``
    divisible by the number of nodes; SLURM's default block distribution is assumed.
    """
    hosts = expand_hostlist(job.get("NodeList"))
    if not hosts:
        return {}
    per = 0
    for key, val in job.items():
        if key.startswith("NtasksPerN") and val.split(":", 1)[0].isdigit():
            per = int(val.split(":", 1)[0])
    if per <= 0:
        try:
            ntasks = int(job.get("NumTasks", "0"))
        except ValueError:
            return {}
        if ntasks <= 0 or ntasks % len(hosts):
            return {}
        per = ntasks // len(hosts)
    return block_layout(hosts, [per] * len(hosts))


# ---------------------------------------------------------------------------
# what a file says about placement
# ---------------------------------------------------------------------------


class Facts:
    """Placement facts one file states, before they are merged into the shared topology."""

    def __init__(self) -> None:
        self.exact: dict[int, str] = {}  # task -> host, from srun's per-task lines
        self.layout: dict[int, str] = {}  # task -> host, from node lists + counts
        self.env: dict[str, str] = {}
        self.agent_labels = False  # "N: [default0]:" -> srun tasks are torchrun agents
        self.agent_offset: dict[int, int] = {}  # agent label -> its first global rank
        self.world: int | None = None

    def learn_line(self, line: str) -> None:
        m = _SRUN_LABEL.match(line)
        body = line[m.end() :] if m else line
        if srun_labels_agent(line):
            # "245: W1202 ... torch/distributed/run.py:793] ...", "0: [default1]: ...": a node's torchrun
            self.agent_labels = True
        if m and (e := ELASTIC_PREFIX.match(body)) and (r := _RANK.match(body[e.end() :])):
            # "0: [default1]:[rank1]: ..." -> agent 0's local rank 1 is global rank 1
            self.agent_offset.setdefault(int(m["task"]), int(r["rank"]) - int(e["lr"]))
        if m and (s := _SUMMARY_RANK.match(body)):
            # torchrun's failure summary, "1:   rank      : 3 (local_rank: 1)": agent 1 starts at rank 2
            self.agent_offset.setdefault(int(m["task"]), int(s["rank"]) - int(s["lr"]))
        if (t := _SRUN_TASKS.match(body)) is not None:
            for task in expand_tasks(t["tasks"]):
                self.exact.setdefault(task, t["host"])
        if "SLURM_" in body:
            for e in _ENV_ECHO.finditer(body):
                self.env.setdefault(e["key"], e["val"])

    def offset_of(self, task: int) -> int | None:
        """Agent ``task``'s first global rank: seen on one of its lines, else ``task * n`` when every
        agent seen so far starts at a multiple of one ``n`` (the same --nproc-per-node everywhere)."""
        if task in self.agent_offset:
            return self.agent_offset[task]
        per = {off // t for t, off in self.agent_offset.items() if t > 0 and off % t == 0}
        if len(per) == 1 and all(off == t * next(iter(per)) for t, off in self.agent_offset.items()):
            return task * next(iter(per))
        return None

    def learn_env(self) -> None:
        nodes = self.env.get("SLURM_JOB_NODELIST") or self.env.get("SLURM_NODELIST")
        nodes = self.env.get("SLURM_STEP_NODELIST") or nodes
        tpn = self.env.get("SLURM_STEP_TASKS_PER_NODE") or self.env.get("SLURM_TASKS_PER_NODE")
        if nodes and tpn:
            hosts = expand_hostlist(nodes)
            per = expand_tasks_per_node(tpn)
            if hosts and len(per) == len(hosts):
                self.layout = block_layout(hosts, per)
        if self.env.get("SLURM_NTASKS", "").isdigit():
            self.world = int(self.env["SLURM_NTASKS"])

    def learn_job(self, job: dict[str, str]) -> None:
        if not self.layout:
            self.layout = job_layout(job)
        if self.world is None and job.get("NumTasks", "").isdigit():
            self.world = int(job["NumTasks"])

    def task_host(self) -> dict[int, str]:
        merged = dict(self.layout)
        merged.update(self.exact)  # what srun said about a task wins over inference
        return merged

    def apply(self, topo: Topology) -> None:
        """Merge into the bundle's topology; srun tasks are ranks only without torchrun agents."""
        if self.agent_labels:
            return
        for rank, host in self.task_host().items():
            topo.rank_host.setdefault(rank, host)
        if self.world and topo.world_size is None:
            topo.world_size = self.world


def _read_head_tail(sf: SourceFile) -> tuple[str, str]:
    try:
        with open(sf.path, "rb") as fh:
            head = fh.read(HEAD_BYTES)
            tail = b""
            if sf.size > HEAD_BYTES:
                fh.seek(max(HEAD_BYTES, sf.size - TAIL_BYTES))
                tail = fh.read(TAIL_BYTES)
    except OSError:
        return "", ""
    t = tail.decode("utf-8", "replace")
    if tail:
        t = t.split("\n", 1)[1] if "\n" in t else ""  # drop the cut first line
    return head.decode("utf-8", "replace"), t


def _sniff(head: str) -> str:
    """Which SLURM artefact a file is: job_output, scontrol, sacct or daemon_log."""
    lines = [ln for ln in head.splitlines()[:50] if ln.strip()]
    if not lines:
        return "job_output"
    first = lines[0]
    if "|" in first and any(c.strip().lower() == "jobid" for c in first.split("|")):
        return "sacct"
    if first.lstrip().startswith("JobId=") and any("JobState=" in ln for ln in lines[:5]):
        return "scontrol"
    if sum(1 for ln in lines[:20] if _DAEMON_TS.match(ln)) >= max(1, min(len(lines), 20) // 2):
        return "daemon_log"
    return "job_output"


@register_parser(FileKind.SLURM_OUTPUT)
class SlurmParser(SourceParser):
    """Locates SLURM lines: host from what the line names, rank from ``srun -l`` labels."""

    def __init__(self, sf: SourceFile, ctx: ParseContext):
        super().__init__(sf, ctx)
        head, tail = _read_head_tail(sf)
        self.shape = _sniff(head)
        self.facts = Facts()
        self.end_ts: float | None = None
        self.sacct_end: int | None = None
        text = head + "\n" + tail
        if self.shape in ("scontrol",):
            jobs = parse_scontrol_jobs(text)
            if jobs:
                self.facts.learn_job(jobs[0])
                end = jobs[0].get("EndTime") or jobs[0].get("StartTime")
                self.end_ts = parse_timestamp(end or "", ctx.year_hint)
                self._learn_window(jobs[0].get("StartTime"), jobs[0].get("EndTime"))
        elif self.shape == "sacct":
            rows = parse_sacct(head)
            hdr = head.splitlines()[0].split("|") if head else []
            low = [h.strip().lower() for h in hdr]
            self.sacct_end = low.index("end") if "end" in low else None
            if rows:
                self.facts.learn_job({"NodeList": rows[0].get("NodeList", "")})
                self._learn_window(rows[0].get("Start"), rows[0].get("End"))
        else:
            for line in text.splitlines():
                self.facts.learn_line(line)
            self.facts.learn_env()
        self.facts.apply(ctx.topology)
        self.task_host = self.facts.task_host()

    @property
    def job_output(self) -> bool:
        return self.shape == "job_output"

    def _learn_window(self, start: str | None, end: str | None) -> None:
        """The scheduler's record of when the job ran: the outer bounds of its window."""
        for key, value in (("start", start), ("end", end)):
            ts = parse_timestamp(value or "", self.ctx.year_hint) if value and value[:1].isdigit() else None
            if ts is not None:
                old = self.ctx.sched.get(key)
                self.ctx.sched[key] = ts if old is None else (min(old, ts) if key == "start" else max(old, ts))

    def is_copy(self, hit: Hit) -> bool:
        """A worker's line ("N: [default3]:...") that its per-rank file under the log dir holds too."""
        if not self.ctx.skip_tee_copies or self.shape != "job_output" or not self.facts.agent_labels:
            return False
        text = hit.text
        m = _SRUN_LABEL.match(text)
        if m is None:
            return False
        e = ELASTIC_PREFIX.match(text[m.end() : m.end() + 40])
        if e is None:
            return False
        return (self.task_host.get(int(m["task"])), int(e["lr"])) in self.ctx.rank_files

    def strip(self, text: str, info: LineInfo) -> str:
        m = _SRUN_LABEL.match(text)
        task: int | None = None
        if m and self.shape == "job_output":
            task = int(m["task"])
            text = text[m.end() :]
        if self.shape == "daemon_log":
            d = _DAEMON_TS.match(text)
            if d:
                info.ts = parse_timestamp(d["ts"], self.ctx.year_hint)
                text = text[d.end() :]
                if s := _STEP_TAG.match(text):
                    text = text[s.end() :]
        e = ELASTIC_PREFIX.match(text)
        if e:
            info.local_rank = int(e["lr"])
            text = text[e.end() :]
        r = _RANK.match(text)
        if r:
            info.rank = int(r["rank"])
            text = text[r.end() :]
            if task is not None and e and self.facts.agent_labels:
                # "104: [default4]:[rank836]: ..." places agent 104 for its later unprefixed lines
                self.facts.agent_offset.setdefault(task, info.rank - int(e["lr"]))
        if task is not None:
            if self.facts.agent_labels:
                # srun torchrun: the label is the node's agent, not a rank
                info.host = info.host or self.task_host.get(task)
                offset = self.facts.offset_of(task)
                lr = info.local_rank
                if lr is None and (a := _AGENT_LR.search(text)):
                    lr = int(a["lr"])  # the agent's own line about one of its workers
                if info.rank is None and offset is not None and lr is not None:
                    info.rank = offset + lr
            elif not text.startswith(("slurmstepd", "srun: ")):
                # srun puts slurmstepd's step messages on task 0's stream: not rank 0's
                if info.rank is None:
                    info.rank = task
                info.host = info.host or self.task_host.get(task)
        self._host_from_text(text, info)
        return text

    def _host_from_text(self, text: str, info: LineInfo) -> None:
        """The host a SLURM line itself names beats any inference."""
        if (t := _SRUN_TASKS.match(text)) is not None:
            info.host = t["host"]
            tasks = expand_tasks(t["tasks"])
            if len(tasks) == 1 and not self.facts.agent_labels:
                info.rank = tasks[0]
            return
        if (n := _SRUN_NODE_FAIL.match(text)) is not None:
            info.host = n["host"]  # where the failure is, not who reported it
            return
        s = _STEPD.match(text)
        if s:
            on = _ON_HOST.search(text)
            host = s["host"] or (on["host"] if on else None)
            if host:
                info.host = host

    def _labelled(self, raw: str) -> bool:
        return self.shape == "job_output" and _SRUN_LABEL.match(raw) is not None

    def timestamp(self, hit: Hit, text: str) -> tuple[float | None, TsQuality]:
        if self.shape == "scontrol" and self.end_ts is not None:
            return self.end_ts, TsQuality.COARSE
        if self.shape == "sacct" and self.sacct_end is not None:
            cells = hit.text.split("|")
            if self.sacct_end < len(cells):
                ts = parse_timestamp(cells[self.sacct_end], self.ctx.year_hint)
                if ts is not None:
                    return ts, TsQuality.COARSE  # a summary record, whole seconds: never beats a log line
        return super().timestamp(hit, text)

    def locate(self, hit: Hit) -> LineInfo:
        info = LineInfo(text="")
        info.host = self.sf.host or self.ctx.default_host
        text = self.strip(hit.text, info)
        info.text = text
        if info.ts is not None:
            info.ts_quality = TsQuality.EXACT
        else:
            info.ts, info.ts_quality = self.timestamp(hit, text)
        if info.ts is not None:
            self.last_ts = info.ts
        if info.rank is None and info.local_rank is not None and not self._labelled(hit.text):
            info.rank = self.global_rank(info.local_rank, info.host)  # plain torchrun console
        if info.rank is not None:
            if info.host is None:
                info.host = self.ctx.topology.rank_host.get(info.rank)
            info.gpu = self.ctx.topology.rank_gpu.get(info.rank)
        return info


def learn_topology(lines: Iterable[str], topo: Topology) -> dict[int, str]:
    """Rank -> host facts of some job-output lines, merged into ``topo``; returns task -> host."""
    facts = Facts()
    for line in lines:
        facts.learn_line(line)
    facts.learn_env()
    facts.apply(topo)
    return facts.task_host()
