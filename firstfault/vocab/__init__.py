"""firstfault's vocabulary: the records, enums, place and time helpers every stage speaks.

This package imports nothing else of firstfault: it is the bottom of the import graph, so any
stage (and any tool built on firstfault) can use it without pulling in a parser or a report.
"""

from firstfault.vocab.enums import (
    TEXT_KINDS,
    Action,
    CandidateKind,
    Category,
    FileKind,
    FRKind,
    Layer,
    Role,
    Severity,
    TsQuality,
)
from firstfault.vocab.errors import BundleError, FirstfaultError, InputError, ReportError, SignatureError
from firstfault.vocab.flightrec import FRAnalysis, FRCulprit, FRGroupSummary, compress_ranks
from firstfault.vocab.records import (
    MAX_CONTEXT_EVENTS,
    SCHEMA_VERSION,
    ChainLink,
    Culprit,
    Event,
    Hypothesis,
    RankProgress,
    Verdict,
)
from firstfault.vocab.timefmt import iso, iso_ns
from firstfault.vocab.topology import Topology, normalize_ip, normalize_pci, short_host

__all__ = [
    "MAX_CONTEXT_EVENTS",
    "SCHEMA_VERSION",
    "TEXT_KINDS",
    "Action",
    "BundleError",
    "CandidateKind",
    "Category",
    "ChainLink",
    "Culprit",
    "Event",
    "FRAnalysis",
    "FRCulprit",
    "FRGroupSummary",
    "FRKind",
    "FileKind",
    "FirstfaultError",
    "Hypothesis",
    "InputError",
    "Layer",
    "RankProgress",
    "ReportError",
    "Role",
    "Severity",
    "SignatureError",
    "Topology",
    "TsQuality",
    "Verdict",
    "compress_ranks",
    "iso",
    "iso_ns",
    "normalize_ip",
    "normalize_pci",
    "short_host",
]
