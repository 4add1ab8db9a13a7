"""Finding and normalising dumps: pickle and JSON forms, prefixes, bad files as warnings."""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path

from firstfault.flightrec.analyze import analyze_fr
from firstfault.flightrec.load import discover_dump_files, dump_prefixes_from_text, load_dump_file, load_dumps
from firstfault.flightrec.normalize import parse_profiling_name

FIX = Path(__file__).parent / "fixtures" / "fr"


def test_gloo_pickle_dump_normalised() -> None:
    d = load_dump_file(str(FIX / "gloo_hang" / "fr_trace_0"))
    assert d.rank == 0 and d.fmt == "pickle" and d.version == "2.10" and d.backend == "gloo"
    assert d.pg_config == {}, "gloo's empty placeholder pg_config is dropped"
    assert any("pg_config is empty" in n for n in d.notes)
    assert d.pg_status["0"].last_enqueued is not None
    e = d.entries[0]
    assert e.op == "all_reduce" and e.pg_name == "0" and e.pg_desc == "default_pg"
    assert e.state == "scheduled" and e.retired is True and e.frames
    assert not d.only_active and not d.ring_wrapped


def test_json_form_loads_and_matches_pickle() -> None:
    pk = load_dumps(FIX / "gloo_hang")
    js = load_dumps(FIX / "gloo_hang_json")
    assert [d.rank for d in js.dumps] == [0, 1, 2, 3] and all(d.fmt == "json" for d in js.dumps)
    for a, b in zip(pk.dumps, js.dumps, strict=True):
        assert [(e.pg_name, e.collective_seq_id, e.op, e.input_sizes) for e in a.entries] == [
            (e.pg_name, e.collective_seq_id, e.op, e.input_sizes) for e in b.entries
        ]
        assert b.entries[0].time_started_ns is None, "JSON 0 means no timestamp"
        assert isinstance(b.pg_status["0"].last_completed, int), "JSON strings become ints"
    ca = analyze_fr(pk.dumps).culprits
    cb = analyze_fr(js.dumps).culprits
    assert [c.rank for c in ca] == [c.rank for c in cb] == [3]


def test_nccl_json_shape(tmp_path: Path) -> None:
    raw = {
        "version": "2.10",
        "comm_lib_version": "2.27.3",
        "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}},
        "pg_status": {
            "0": {
                "last_enqueued_collective": "3",
                "last_started_collective": "-1",
                "last_completed_collective": "2",
            }
        },
        "entries": [
            {
                "record_id": 7,
                "pg_id": 0,
                "process_group": ["0", "default_pg"],
                "collective_seq_id": 3,
                "p2p_seq_id": 0,
                "op_id": 3,
                "profiling_name": "nccl:all_reduce",
                "time_created_ns": 5,
                "input_sizes": [[4]],
                "input_dtypes": ["Float"],
                "output_sizes": [[4]],
                "output_dtypes": ["Float"],
                "state": "scheduled",
                "time_discovered_started_ns": 0,
                "time_discovered_completed_ns": 0,
                "retired": False,
                "timeout_ms": 1000,
                "is_p2p": False,
            }
        ],
    }
    (tmp_path / "nccl_trace_rank_0").write_text(json.dumps(raw))
    d = load_dump_file(str(tmp_path / "nccl_trace_rank_0"))
    assert d.fmt == "json" and d.backend == "nccl" and d.only_active and not d.ring_wrapped
    assert d.pg_config["0"].ranks == (0, 1)
    assert d.pg_status["0"].last_enqueued == 3


def test_discovery_prefixes_and_bundles(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    (bundle / "fr").mkdir(parents=True)
    for r in range(4):
        shutil.copy(FIX / "gloo_hang" / f"fr_trace_{r}", bundle / "fr" / f"nccl_trace_rank_{r}")
    (bundle / "fr" / "notes.txt").write_text("not a dump")
    (bundle / "fr" / "core.1").write_bytes(b"\x00" * 10)
    found = discover_dump_files(str(bundle))
    assert [r for _, r in found] == [0, 1, 2, 3]
    res = load_dumps(bundle)
    assert len(res.dumps) == 4 and not res.issues


def test_both_pickle_and_json_for_a_rank_prefers_pickle(tmp_path: Path) -> None:
    for r in range(4):
        shutil.copy(FIX / "gloo_hang" / f"fr_trace_{r}", tmp_path / f"fr_trace_{r}")
        shutil.copy(FIX / "gloo_hang_json" / f"fr_trace_{r}.json", tmp_path / f"fr_trace_{r}.json")
    res = load_dumps(tmp_path)
    assert [d.fmt for d in res.dumps] == ["pickle"] * 4


def test_env_prefix_from_text(tmp_path: Path) -> None:
    text = "export TORCH_FR_DUMP_TEMP_FILE=/scratch/job7/frdump_\nTORCH_NCCL_DEBUG_INFO_TEMP_FILE='/x/nccl_'"
    assert dump_prefixes_from_text(text) == ["/scratch/job7/frdump_", "/x/nccl_"]
    for r in range(4):
        shutil.copy(FIX / "gloo_hang" / f"fr_trace_{r}", tmp_path / f"frdump_{r}")
    for r in range(6):
        (tmp_path / f"step_{r}").write_bytes(b"junk")
    (tmp_path / "launcher.log").write_text(text)
    found = discover_dump_files(str(tmp_path))
    assert [Path(p).name for p, _ in found] == [f"frdump_{r}" for r in range(4)]


def test_bad_files_are_warnings_not_errors(tmp_path: Path) -> None:
    for r in range(3):
        shutil.copy(FIX / "gloo_hang" / f"fr_trace_{r}", tmp_path / f"fr_trace_{r}")
    data = (FIX / "gloo_hang" / "fr_trace_3").read_bytes()
    (tmp_path / "fr_trace_3").write_bytes(data[: len(data) // 2])
    (tmp_path / "fr_trace_4").write_bytes(b"")
    (tmp_path / "fr_trace_5").write_bytes(pickle.dumps([1, 2, 3]))
    (tmp_path / "fr_trace_6").write_text("{not json")
    res = load_dumps(tmp_path)
    assert [d.rank for d in res.dumps] == [0, 1, 2]
    kinds = {Path(i.path).name: i.kind for i in res.issues}
    assert kinds == {
        "fr_trace_3": "TruncatedPickleError",
        "fr_trace_4": "EmptyFileError",
        "fr_trace_5": "not_a_dump",
        "fr_trace_6": "not_a_dump",
    }
    assert any("truncated" in w for w in res.warnings)
    assert res.unusable_ranks == [3, 4, 5, 6] and res.world_size_hint == 7
    assert any("no usable dump for rank(s) 3, 4, 5, 6" in w for w in res.warnings)


def test_ring_buffer_wrap_is_a_warning(tmp_path: Path) -> None:
    raw = pickle.dumps(
        {
            "version": "2.10",
            "pg_config": {},
            "pg_status": {},
            "entries": [
                {
                    "record_id": 50,
                    "pg_id": 0,
                    "process_group": ("0", "default_pg"),
                    "collective_seq_id": 51,
                    "profiling_name": "nccl:all_reduce",
                    "state": "completed",
                    "time_created_ns": 1,
                }
            ],
        },
        protocol=2,
    )
    (tmp_path / "_dump_0").write_bytes(raw)
    res = load_dumps(tmp_path)
    assert res.dumps[0].ring_wrapped
    assert any("ring buffer wrapped" in w for w in res.warnings)


def test_profiling_names() -> None:
    assert parse_profiling_name("nccl:send 3->0") == ("nccl", "send", 0)
    assert parse_profiling_name("nccl:recv 3<-2") == ("nccl", "recv", 2)
    assert parse_profiling_name("gloo:all_reduce") == ("gloo", "all_reduce", None)
    assert parse_profiling_name("nccl:_all_gather_base") == ("nccl", "_all_gather_base", None)
    assert parse_profiling_name("weird") == ("", "weird", None)


def test_missing_path_and_empty_dir(tmp_path: Path) -> None:
    res = load_dumps(tmp_path / "nope")
    assert not res.dumps and any("no such" in w for w in res.warnings)
    res = load_dumps(tmp_path)
    assert not res.dumps and any("no flight-recorder dump files" in w for w in res.warnings)
