"""The package's shape, checked: no module too long to read in one sitting, SQL
only in store/, and one method table that every adapter derives from. The
import graph (layer direction, cycles) is checked in test_layers.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from autodoc.api import METHODS, TABLE, WRITE_METHODS
from autodoc.rpc import schemas

PKG = Path(__file__).resolve().parents[2] / "daemon" / "autodoc"
PROTOCOL = Path(__file__).resolve().parents[2] / "protocol" / "PROTOCOL.md"
MAX_LINES = 500


def _module(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module(p): p for p in sorted(PKG.rglob("*.py"))}


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
            return {"name": p["name"], "config": {}, "root": "/kb"}

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
            assert await server.dispatcher.handlers[m.name](ctx, {"name": "kb"}) == {
                "name": "kb",
                "config": {},
                "root": "/kb",
            }

    anyio.run(main)
    assert set(ran) == {"test.read", "test.write"} and threading.get_ident() not in ran.values()
    assert heard == [("kb", "workspace.changed", {"workspace": "kb", "op": "configured", "config": {}, "root": "/kb"})]
