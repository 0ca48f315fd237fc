"""The package's shape, checked: no import cycles (between modules, or between
the pipeline's packages), no module too long to read in one sitting, SQL only
in store/, and one method table that every adapter derives from."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from autodoc.api import METHODS, TABLE, WRITE_METHODS
from autodoc.rpc import schemas

PKG = Path(__file__).resolve().parents[1] / "daemon" / "autodoc"
PROTOCOL = Path(__file__).resolve().parents[1] / "protocol" / "PROTOCOL.md"
MAX_LINES = 500


def _module(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module(p): p for p in sorted(PKG.rglob("*.py"))}


def _imports(name: str, path: Path) -> set[str]:
    """Every autodoc module this one imports at run time, wherever the import sits
    (a function-level import is still a dependency); `if TYPE_CHECKING:` blocks excepted."""
    pkg = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()

    class Visitor(ast.NodeVisitor):
        def visit_If(self, node: ast.If) -> None:
            test = node.test
            if getattr(test, "id", None) == "TYPE_CHECKING" or getattr(test, "attr", None) == "TYPE_CHECKING":
                for n in node.orelse:
                    self.visit(n)
                return
            self.generic_visit(node)

        def visit_Import(self, node: ast.Import) -> None:
            found.update(a.name for a in node.names if a.name.startswith("autodoc"))

        def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
            if node.level:
                base = pkg[: len(pkg) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for a in node.names:
                full = f"{target}.{a.name}"
                found.add(full if full in MODULES else target)

    Visitor().visit(ast.parse(path.read_text(encoding="utf-8")))
    # importing autodoc.store.reads runs autodoc/store/__init__.py first (but a module's own
    # packages are already being imported when it runs)
    own = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
    parents = {".".join(m.split(".")[:i]) for m in found for i in range(2, m.count(".") + 1)}
    return {m for m in found | parents if m in MODULES and m != name and m not in own}


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph, or None."""
    state: dict[str, int] = {}  # 1: on the path, 2: done
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


def test_the_import_graph_is_read_correctly():
    # a check that found nothing because it read nothing would pass too
    assert "autodoc.store" in GRAPH["autodoc.service"] and "autodoc.store.store" in GRAPH["autodoc.store"]
    assert {"autodoc.search.semantic", "autodoc.search"} <= GRAPH["autodoc.service"]
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_no_module_imports_itself_back():
    assert _cycle(GRAPH) is None


def test_no_two_stages_import_each_other():
    # autodoc.store → autodoc.search → autodoc.store is a cycle even when no module closes it
    def stage(m: str) -> str:
        return ".".join(m.split(".")[:2])

    stages: dict[str, set[str]] = {}
    for m, deps in GRAPH.items():
        stages.setdefault(stage(m), set()).update(stage(d) for d in deps if stage(d) != stage(m))
    assert _cycle(stages) is None


@pytest.mark.parametrize("name", sorted(MODULES))
def test_modules_stay_readable(name):
    lines = MODULES[name].read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_LINES, f"{name} has {lines} lines: a stage is missing its module"


def test_sql_runs_only_in_store():
    runs_sql = re.compile(r"\.(execute|executemany)\(")
    outside = [
        n
        for n, p in MODULES.items()
        if not n.startswith("autodoc.store") and runs_sql.search(p.read_text(encoding="utf-8"))
    ]
    assert outside == []


def test_no_import_fallbacks():
    assert [n for n, p in MODULES.items() if "except ImportError" in p.read_text(encoding="utf-8")] == []


def test_the_method_table_is_the_contract():
    assert len(METHODS) == len(TABLE)  # no name twice
    with_handlers = set(METHODS)
    assert with_handlers == set(schemas.methods_with_schemas()) - schemas.NOTIFICATIONS
    protocol = PROTOCOL.read_text(encoding="utf-8")
    for name in METHODS:
        assert f"`{name}`" in protocol, f"{name} is not in protocol/PROTOCOL.md"
    assert {"workspace.add", "workspace.index", "workspace.configure"} <= WRITE_METHODS
    assert not {"search.query", "document.read", "server.info"} & WRITE_METHODS


def test_the_rpc_handlers_derive_from_the_table():
    from autodoc.rpc.methods import Methods
    from autodoc.rpc.route import Router

    class App:
        service = socket_path = None
        watching: list[str] = []

    route = Router(None, readers=None, writer=None)  # type: ignore[arg-type]
    assert set(Methods(App(), route).handlers()) == set(METHODS)
    # where a call runs is the row's policy, read in rpc/route.py alone
    assert {m.name for m in TABLE if m.pooled} == {"search.query", "search.similar"}
    assert set(route.lane_reads()) == {m.name for m in TABLE if m.plain_read}
    assert all(m.own for m in TABLE if m.call is None)


def test_a_new_row_needs_no_other_code(monkeypatch):
    """Adding a method is its row (with its policy), its schema and its PROTOCOL.md section: its
    handler, where it runs (the writer slot, a worker thread, the quick lane) and what its
    subscribers hear all follow from the row (the schema is stood in for here)."""
    import threading

    import anyio

    from autodoc import api
    from autodoc.rpc.dispatch import RequestContext
    from autodoc.rpc.server import RpcServer

    ran: dict[str, int] = {}

    def call(name: str):
        def run(s, p):
            ran[name] = threading.get_ident()
            return {"name": p["name"], "config": {}}

        return run

    rows = [
        api.Method("test.read", call("test.read")),
        api.Method("test.write", call("test.write"), write=True, announce="configured"),
    ]
    for m in rows:
        monkeypatch.setitem(api.METHODS, m.name, m)
    monkeypatch.setattr(schemas, "bind_params", lambda name, raw: dict(raw or {}))

    class Service:
        def add_change_listener(self, fn): ...

        def remove_change_listener(self, fn): ...

    heard: list[tuple] = []

    async def main() -> None:
        server = RpcServer(Service())
        server.broadcast = lambda *a: heard.append(a)  # type: ignore[method-assign]
        assert server.quick is not None
        assert "test.read" in server.quick.reads and "test.write" not in server.quick.reads
        for m in rows:
            ctx = RequestContext(peer=None, method=m.name, id=1)
            assert await server.dispatcher.handlers[m.name](ctx, {"name": "kb"}) == {"name": "kb", "config": {}}

    anyio.run(main)
    assert set(ran) == {"test.read", "test.write"} and threading.get_ident() not in ran.values()
    assert heard == [("kb", "workspace.changed", {"workspace": "kb", "op": "configured", "config": {}})]
