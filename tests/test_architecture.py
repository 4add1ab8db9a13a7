"""The layout is the architecture: stages import only earlier stages, nothing imports in a circle.

Layers, bottom up: the vocabulary (imports nothing of firstfault), discovery, parsing, matching and
the flight recorder's loading/analysis, alignment, reasoning (correlate -> rules -> attribute), the
reports, the pipeline, the public API (``firstfault/__init__``), the command line. A module may
import its own layer or lower ones. The simulators and benchmarks sit beside the product: only the
command line imports them.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parent.parent
LAYERS = [
    ("firstfault.vocab", 0),
    ("firstfault.heap", 0),  # hands freed memory back to the OS (parse workers, after the parse)
    ("firstfault.pathpolicy", 1),  # the allowed-roots policy the service and the MCP server share
    ("firstfault.discover", 1),
    ("firstfault.parse", 2),
    ("firstfault.match", 3),
    ("firstfault.flightrec", 3),
    ("firstfault.align", 4),
    ("firstfault.reason", 5),
    ("firstfault.report", 6),
    ("firstfault.pipeline", 7),
    ("firstfault.signatures", 7),
    ("firstfault.fleet", 8),  # beside the pipeline: calls it, keeps its verdicts
    ("firstfault.service", 8),  # beside the pipeline: the HTTP service calls it
    ("firstfault.slurm", 8),  # beside the pipeline: epilog hook, job monitor, exclude/drain
    ("firstfault.mcp", 8),  # beside the pipeline: the MCP server calls it, read-only
    ("firstfault.live", 8),  # beside the pipeline: follows a running job, calls the later stages
    ("firstfault.cli", 9),
    ("firstfault.audit", 8),
    ("firstfault", 8),  # the package itself: the public API
]
BESIDE = ("firstfault_sim", "firstfault_bench")


def layer(module: str) -> int:
    for prefix, n in LAYERS:
        if module == prefix or module.startswith(prefix + "."):
            return n
    raise AssertionError(f"{module} belongs to no layer; add it to LAYERS")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path) -> set[str]:
    """Every firstfault module ``path`` imports, at module level or inside a function."""
    mod = module_name(path)
    is_pkg = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.split(".")[0] in ("firstfault", *BESIDE))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = mod.split(".")
                base = base if is_pkg else base[:-1]
                base = base[: len(base) - (node.level - 1)]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            if name.split(".")[0] in ("firstfault", *BESIDE):
                out.add(name)
                out.update(
                    f"{name}.{a.name}"
                    for a in node.names
                    if (ROOT / (name + "." + a.name).replace(".", "/")).with_suffix(".py").exists()
                )
    return out


def graph() -> nx.DiGraph:
    g = nx.DiGraph()
    for path in sorted((ROOT / "firstfault").rglob("*.py")):
        mod = module_name(path)
        g.add_node(mod)
        for dep in imports(path):
            if dep != mod:
                g.add_edge(mod, dep)
    return g


def test_no_upward_imports() -> None:
    g = graph()
    upward = [
        f"{a} -> {b}"
        for a, b in g.edges
        if b.split(".")[0] == "firstfault"
        and layer(b) > layer(a)
        and not (a == "firstfault" and b.startswith("firstfault."))
    ]
    assert upward == []


def test_product_never_imports_simulators_or_benchmarks() -> None:
    g = graph()
    bad = [f"{a} -> {b}" for a, b in g.edges if b.split(".")[0] in BESIDE and not a.startswith("firstfault.cli")]
    assert bad == []


def test_no_import_cycles() -> None:
    g = graph()
    # a package's __init__ re-exporting its own modules is not a cycle of the design
    h = nx.DiGraph((a, b) for a, b in g.edges if not b.startswith(a + ".") and b in g)
    cycles = list(nx.simple_cycles(h))
    assert cycles == []


def test_only_the_command_line_imports_typer() -> None:
    users = [
        module_name(p)
        for p in (ROOT / "firstfault").rglob("*.py")
        if "typer" in {n.split(".")[0] for n in _third_party(p)} and not module_name(p).startswith("firstfault.cli")
    ]
    assert users == []


def test_vocabulary_imports_nothing_of_the_project() -> None:
    g = graph()
    bad = [
        f"{a} -> {b}" for a, b in g.edges if a.startswith("firstfault.vocab") and not b.startswith("firstfault.vocab")
    ]
    assert bad == []


def _writes_into_fields(path: Path) -> list[str]:
    """``X.fields[k] = v`` and ``X.fields.update/setdefault/pop/clear(...)`` in one file."""
    out: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AugAssign) else []
        )
        for t in targets:
            if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Attribute) and t.value.attr == "fields":
                out.append(f"{path.name}:{node.lineno}")
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("update", "setdefault", "pop", "clear", "__setitem__")
            and isinstance(node.func.value, ast.Attribute)
            and node.func.value.attr == "fields"
        ):
            out.append(f"{path.name}:{node.lineno}")
    return out


def test_after_the_parse_an_events_fields_are_written_only_by_copy() -> None:
    """The parse lets events with equal fields share one dict (memory at 16,384 ranks): a stage
    after it that wrote into ``e.fields`` would change every event sharing it. Only the parse
    (its hooks, before the sharing) writes in place; the rest call ``Event.set_field``."""
    bad = [
        w
        for p in sorted((ROOT / "firstfault").rglob("*.py"))
        if not module_name(p).startswith(("firstfault.parse", "firstfault.match"))
        for w in _writes_into_fields(p)
    ]
    assert bad == []


def _third_party(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            out.add(node.module)
    return out
