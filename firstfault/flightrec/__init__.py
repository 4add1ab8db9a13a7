"""Flight-recorder (FR) analysis: load PyTorch FR dumps safely and name the culprit ranks.

Entry points: :func:`firstfault.flightrec.load.load_dumps` and
:func:`firstfault.flightrec.analyze.analyze_fr`.
"""

from firstfault.flightrec.analyze import FRAnalysis, FRCulprit, FRGroupSummary, analyze_fr
from firstfault.flightrec.load import load_dumps
from firstfault.flightrec.pickle_errors import DumpLoadError, UnsafePickleError
from firstfault.flightrec.records import FRDump, FREntry, FRLoadResult

__all__ = [
    "DumpLoadError",
    "FRAnalysis",
    "FRCulprit",
    "FRDump",
    "FREntry",
    "FRGroupSummary",
    "FRLoadResult",
    "UnsafePickleError",
    "analyze_fr",
    "load_dumps",
]
