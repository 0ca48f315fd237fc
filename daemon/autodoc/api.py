"""The method table: every RPC method, what it calls, and how it may run.

Every adapter derives from this one table: the daemon's RPC handlers
(rpc/methods.py) and where each runs (rpc/route.py reads the row's policy:
the writer slot, a reader process, the quick lane or a worker thread), the
in-process binding the CLI, the language server and the other clients use
when no daemon runs (connect.py), the CLI's choice of a writer or a reader,
and the contract tests. Adding a method: a row here (with its policy), its
schemas (schemas/<method>.params.json and .result.json), and its section in
protocol/PROTOCOL.md.

Params reach `call` already bound to names, checked by the method's JSON
Schema and with its schema's defaults filled in (rpc/schemas.py
``bind_params``), in-process exactly as over a socket: the schema's
``default`` is the only default, so a row reads ``p["limit"]``.

Runs on: the caller's thread (a worker thread of the daemon's reader pool or
its writer slot, or the CLI's main thread).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .index.job import Progress
    from .service import Service

Call = Callable[..., Any]  # (service, params, **run) -> JSON-safe result


@dataclass(frozen=True)
class Method:
    name: str
    call: Call | None  # None: only a daemon can answer it (it is about connections or the process)
    write: bool = False  # needs the writer lease; the daemon runs it on its single writer slot
    cancellable: bool = False  # gets `cancel`, an Event set when the client cancels
    progress: bool = False  # gets `progress(done, total, message)`, which may raise to stop the run
    pooled: bool = False  # a read a reader process may run (readers/pool.py) once the daemon is busy
    announce: str | None = None  # after it answers, subscribers hear `workspace.changed` with this op
    own: bool = False  # the daemon answers it with a handler of its own (rpc/methods.py: the process, the connection)

    @property
    def plain_read(self) -> bool:
        """A read whose handler only routes the call: the quick lane (rpc/quick.py) may answer it."""
        return self.call is not None and not self.write and not self.progress and not self.own


def _index(full: bool) -> Call:
    def call(s: Service, p: dict, *, progress: Progress | None = None, embed: bool = False) -> Any:
        return s.index(p["workspace"], full=full, progress=progress, embed=embed)

    return call


def _search(s: Service, p: dict, *, cancel: threading.Event | None = None) -> Any:
    return s.search(p["workspace"], p["query"], p.get("opts"), cancel=cancel)


TABLE = (
    Method("server.info", lambda s, p: s.info(), own=True),
    Method("server.shutdown", None, own=True),
    Method(
        "workspace.add",
        lambda s, p: s.workspace_add(p["name"], p["root"], p.get("config"), p["force"]),
        write=True,
        announce="added",
    ),
    Method("workspace.remove", lambda s, p: s.workspace_remove(p["name"]), write=True, announce="removed"),
    Method("workspace.list", lambda s, p: s.workspace_list()),
    Method(
        "workspace.configure",
        lambda s, p: s.workspace_configure(p["workspace"], p.get("options"), p.get("root"), p["force"]),
        write=True,
        announce="configured",
    ),
    Method(
        "workspace.section_size",
        lambda s, p: s.workspace_section_size(p["workspace"], p["tokens"]),
        write=True,
        announce="configured",
    ),
    Method("workspace.status", lambda s, p: s.workspace_status(p["workspace"])),
    Method("workspace.tags", lambda s, p: s.workspace_tags(p["workspace"], p.get("prefix"), p["limit"])),
    Method("workspace.index", _index(full=False), write=True, progress=True),
    Method("workspace.reindex", _index(full=True), write=True, progress=True),
    Method(
        "session.append",
        lambda s, p: s.session_append(p["workspace"], p["session_id"], p["events"], p.get("title")),
        write=True,
    ),
    Method("session.remove", lambda s, p: s.session_remove(p["workspace"], p["session_id"]), write=True),
    Method("session.list", lambda s, p: s.session_list(p["workspace"], p.get("after"), p["limit"])),
    Method("search.query", _search, cancellable=True, pooled=True),
    Method("search.similar", lambda s, p: s.search_similar(p["workspace"], p["path"], p.get("opts")), pooled=True),
    Method("document.read", lambda s, p: s.document_read(p["workspace"], p["path"], p.get("opts"))),
    Method("document.links", lambda s, p: s.document_links(p["workspace"], p["path"])),
    Method("document.backlinks", lambda s, p: s.document_backlinks(p["workspace"], p["path"])),
    Method("document.find", lambda s, p: s.document_find(p["workspace"], p["pattern"], p["limit"], p["facets"])),
    Method("document.outline", lambda s, p: s.document_outline(p["workspace"], p["path"])),
    Method("document.problems", lambda s, p: s.document_problems(p["workspace"], p.get("path"))),
    Method("changes.since", lambda s, p: s.changes_since(p["workspace"], p["cursor"], p["limit"])),
    Method("changes.subscribe", None, own=True),
    Method("changes.unsubscribe", None, own=True),
    Method("$/cancelRequest", None, own=True),
)

# Server → client notifications: they have params schemas (schemas/<name>.params.json) but no row.
NOTIFICATIONS = frozenset({"$/progress", "changes.changed", "embedding.progress", "workspace.changed"})

METHODS: dict[str, Method] = {m.name: m for m in TABLE}
WRITE_METHODS = frozenset(m.name for m in TABLE if m.write)
