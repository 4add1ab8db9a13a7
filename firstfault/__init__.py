"""firstfault: find the first failure in a failed distributed training job.

The public Python API, for a notebook, a service or a batch job::

    import firstfault

    verdict = firstfault.analyze("logs/job-1234")      # a directory, a .tar.gz or one log file
    print(verdict.category, verdict.culprit.ranks, verdict.action)
    print(verdict.summary)
    data = verdict.to_dict()                             # the versioned JSON contract (docs/verdict-schema.md)

    # the pieces, when the bundle is already discovered or the registry extended:
    registry = firstfault.load_registry(["my_signatures/"])
    bundle = firstfault.discover_bundle("logs/job-1234")
    try:
        verdict = firstfault.analyze_bundle(bundle, registry)
    finally:
        bundle.close()

    # flight-recorder dumps alone:
    loaded = firstfault.load_dumps("fr/")
    fr = firstfault.analyze_fr(loaded.dumps)

Unusable input raises :class:`InputError` (``BundleError``), with a one-line reason. Names are
imported on first use, so ``import firstfault`` (and ``firstfault --help``) stays fast.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.2.0"

_EXPORTS = {
    "analyze": "firstfault.pipeline",
    "analyze_bundle": "firstfault.pipeline",
    "discover_bundle": "firstfault.discover",
    "load_registry": "firstfault.match.registry",
    "load_dumps": "firstfault.flightrec.load",
    "analyze_fr": "firstfault.flightrec.analyze",
    "Verdict": "firstfault.vocab",
    "Event": "firstfault.vocab",
    "ChainLink": "firstfault.vocab",
    "Culprit": "firstfault.vocab",
    "Hypothesis": "firstfault.vocab",
    "Category": "firstfault.vocab",
    "Role": "firstfault.vocab",
    "Layer": "firstfault.vocab",
    "Action": "firstfault.vocab",
    "FRAnalysis": "firstfault.vocab",
    "FirstfaultError": "firstfault.vocab",
    "InputError": "firstfault.vocab",
    "BundleError": "firstfault.vocab",
    "SignatureError": "firstfault.vocab",
    "SCHEMA_VERSION": "firstfault.vocab",
}

# a public name that differs from the module's own (the stage module ``firstfault.discover`` owns that name)
_ALIASES = {"discover_bundle": "discover"}

__all__ = [
    "SCHEMA_VERSION",
    "Action",
    "BundleError",
    "Category",
    "ChainLink",
    "Culprit",
    "Event",
    "FRAnalysis",
    "FirstfaultError",
    "Hypothesis",
    "InputError",
    "Layer",
    "Role",
    "SignatureError",
    "Verdict",
    "__version__",
    "analyze",
    "analyze_bundle",
    "analyze_fr",
    "discover_bundle",
    "load_dumps",
    "load_registry",
]

if TYPE_CHECKING:  # pragma: no cover - the names as a type checker sees them
    from firstfault.discover import discover as discover_bundle
    from firstfault.flightrec.analyze import analyze_fr
    from firstfault.flightrec.load import load_dumps
    from firstfault.match.registry import load_registry
    from firstfault.pipeline import analyze, analyze_bundle
    from firstfault.vocab import (
        SCHEMA_VERSION,
        Action,
        BundleError,
        Category,
        ChainLink,
        Culprit,
        Event,
        FirstfaultError,
        FRAnalysis,
        Hypothesis,
        InputError,
        Layer,
        Role,
        SignatureError,
        Verdict,
    )


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'firstfault' has no attribute {name!r}")
    value = getattr(import_module(module), _ALIASES.get(name, name))
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
