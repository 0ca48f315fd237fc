"""The layers' direction, checked: every import between the package's parts
follows an edge listed in ALLOWED (type-only imports included), and no cycle
closes between modules even through `if TYPE_CHECKING:` imports.

The list is the architecture (docs/architecture.md draws it): adapters on top
reach the daemon through the one client backend (connect.py); the RPC layer
routes calls to the method table (api.py) and knows nothing of the stages; the
Service composes the stages; the stages sit on the store; the store sits on
the pure parts. An edge that is not here is a layer running the wrong way:
add it only with the reason beside it."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "daemon" / "autodoc"

# part -> the parts it may import. A part is a subpackage (autodoc.store) or a
# top-level module (autodoc.service); "autodoc" is the package's own __init__.
ALLOWED: dict[str, set[str]] = {
    # the foundation: imports nothing of ours but each other
    "autodoc": set(),
    "errors": set(),
    "config": {"errors"},
    "suggest": {"errors"},
    "refs": set(),  # the one citable ref (WS:PATH#LA-B), shell-quoted when needed: pure
    "budget": {"refs"},  # an answer's token budget: pure
    "fuzzy": set(),  # fzf-like matching of titles and paths (document.find): pure
    # pure stages
    "ingest": {"errors", "config"},
    "fmschema": {"errors", "config", "ingest"},
    # the store, and the stages on it
    "store": {"errors", "config", "suggest", "ingest", "fmschema"},
    "embed": {"errors", "config", "store"},
    "rerank": {"errors", "config", "embed"},
    "index": {"errors", "config", "ingest", "fmschema", "store", "embed"},
    "search": {"errors", "config", "budget", "refs", "ingest", "fmschema", "store", "embed", "rerank"},
    # the facade that composes them, and the method table over it
    "documents": {"errors", "config", "suggest", "ingest", "store", "fuzzy"},
    "workspaces": {"errors", "config", "suggest", "ingest", "fmschema", "store", "embed", "rerank"},
    "peers": {"store"},  # who hears of a committed change: listeners here, daemons sharing a store
    "service": {
        "autodoc",
        "errors",
        "config",
        "suggest",
        "ingest",
        "fmschema",
        "store",
        "embed",
        "rerank",
        "index",
        "search",
        "documents",
        "workspaces",
        "peers",
    },
    "api": {"errors", "service", "index"},
    # the server side: readers serve searches in their own processes; rpc routes calls to the table
    "readers": {"errors", "config", "store", "search", "embed", "service", "api", "rpc"},
    "rpc": {"errors", "config", "api", "suggest"},
    "daemon": {"errors", "config", "api", "service", "index", "rpc", "readers"},
    # the client side: one backend, and the adapters over it
    "connect": {"errors", "config", "api", "rpc", "service", "store", "progress"},
    "progress": {"errors", "config"},
    "doctor": {"errors", "config", "connect", "store", "embed"},
    "sessioncli": {"errors", "config", "connect", "ingest"},
    "storecli": {"errors", "config", "store"},  # `autodoc store copy`: a store file into a database
    "indexcli": {"errors", "config", "connect", "cliout"},  # `autodoc index`: the run, then the daemon that embeds
    "cliargs": {"autodoc", "indexcli", "sessioncli", "storecli"},  # `autodoc …` as typed: the commands, their options
    "cliout": {"refs"},  # the CLI's output for people: pure
    "earlywire": set(),  # the stdio wire lsp/ and mcp/ answer first requests on before their library loads
    "lsp": {"autodoc", "errors", "config", "connect", "ingest", "earlywire"},
    "mcp": {"autodoc", "errors", "config", "budget", "connect", "api", "suggest", "refs", "earlywire"},
    "tui": {"errors", "config", "connect", "rpc", "fuzzy", "refs"},
    "cli": {
        "cliargs",
        "errors",
        "config",
        "connect",
        "progress",
        "daemon",
        "doctor",
        "sessioncli",
        "storecli",
        "indexcli",
        "cliout",
        "refs",
        "lsp",
        "mcp",
        "tui",
    },
}


def _name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_name(p): p for p in sorted(PKG.rglob("*.py"))}


def _imports(name: str, path: Path) -> set[str]:
    """Every module of ours this one imports, type-only imports included."""
    pkg = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("autodoc"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg[: len(pkg) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "autodoc":
                continue
            for a in node.names:
                full = f"{target}.{a.name}"
                found.add(full if full in MODULES else target)
    return {m for m in found if m in MODULES and m != name}


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "autodoc"


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(v: str) -> list[str] | None:
        state[v] = 1
        path.append(v)
        for w in sorted(graph.get(v, ())):
            if state.get(w) == 1:
                return path[path.index(w) :] + [w]
            if w not in state and (found := visit(w)):
                return found
        path.pop()
        state[v] = 2
        return None

    for v in sorted(graph):
        if v not in state and (found := visit(v)):
            return found
    return None


def test_the_graph_is_read():
    # a check that read nothing would pass too
    assert any(_part(m) == "store" for m in GRAPH["autodoc.service"])
    assert any(_part(m) == "api" for m in GRAPH["autodoc.rpc.route"] | GRAPH.get("autodoc.rpc.methods", set()))
    assert _cycle({"a": {"b"}, "b": {"a"}}) == ["a", "b", "a"]


def test_every_part_is_placed():
    assert sorted({_part(m) for m in MODULES} - set(ALLOWED)) == []


def test_imports_follow_the_layers():
    wrong = sorted(
        f"{m} -> {d}"
        for m, deps in GRAPH.items()
        for d in deps
        if _part(d) != _part(m) and _part(d) not in ALLOWED[_part(m)]
    )
    assert wrong == [], "imports against the layers (tests/unit/test_layers.py ALLOWED):\n" + "\n".join(wrong)


def test_no_cycle_even_through_type_only_imports():
    assert _cycle(GRAPH) is None


def test_the_parts_form_no_cycle():
    parts: dict[str, set[str]] = {}
    for m, deps in GRAPH.items():
        parts.setdefault(_part(m), set()).update(_part(d) for d in deps if _part(d) != _part(m))
    assert _cycle(parts) is None
