"""The one error hierarchy. Each class carries its JSON-RPC code; the RPC layer
maps any AutodocError to a response in one place and every other exception to
-32603 without leaking a traceback. Codes are listed in protocol/PROTOCOL.md.

Runs on: any thread (pure: no I/O, no shared state).
"""

from __future__ import annotations

from typing import Any


class AutodocError(Exception):
    code: int = -32000
    name: str = "rpc.server_error"
    relayed: dict | None = None  # the error object exactly as a daemon answered it (from_rpc)
    field: str  # declared only (no class value): set by InvalidParams, and by from_rpc when the data names one

    def __init__(self, message: str, data: Any = None):
        super().__init__(message)
        self.message = message
        self.data = data

    def to_rpc(self) -> dict:
        if self.relayed is not None:  # passed on as it was answered
            return dict(self.relayed)
        err: dict[str, Any] = {"code": self.code, "message": self.message}
        data = {"name": self.name}
        if isinstance(self.data, dict):
            data.update(self.data)
        elif self.data is not None:
            data["detail"] = self.data
        err["data"] = data
        return err


class ParseError(AutodocError):
    code, name = -32700, "rpc.parse_error"


class InvalidRequest(AutodocError):
    code, name = -32600, "rpc.invalid_request"


class MethodNotFound(AutodocError):
    code, name = -32601, "rpc.method_not_found"


class InvalidParams(AutodocError):
    """-32602; `field` names the offending parameter (a JSON pointer-ish path)."""

    code, name = -32602, "rpc.invalid_params"

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}", {"field": field})
        self.field = field


class InternalError(AutodocError):
    code, name = -32603, "rpc.internal_error"


class RequestCancelled(AutodocError):
    # LSP's RequestCancelled code; clients already understand it.
    code, name = -32800, "rpc.cancelled"


# -- AutoDoc's own codes, all in -32000..-32099 ------------------------------


class WorkspaceNotFound(AutodocError):
    code, name = -32001, "workspace.not_found"


class WorkspaceExists(AutodocError):
    code, name = -32002, "workspace.exists"


class DocumentNotFound(AutodocError):
    code, name = -32003, "document.not_found"


class PathOutsideWorkspace(AutodocError):
    code, name = -32004, "document.outside_workspace"


class CursorExpired(AutodocError):
    """The cursor predates the retained change log: the client must resync."""

    code, name = -32005, "changes.cursor_expired"


class GenerationGone(AutodocError):
    """document.read named a generation the index no longer keeps (it keeps a document's latest)."""

    code, name = -32006, "document.generation_gone"


class StoreLocked(AutodocError):
    """Another process holds the writer lease on the store."""

    code, name = -32010, "store.locked"


class StoreTooNew(AutodocError):
    code, name = -32011, "store.schema_too_new"


class StoreUnreachable(AutodocError):
    """The store's database cannot be reached or refuses the connection (a PostgreSQL store:
    down, a wrong host, port, database, user or password). The message names the store with
    its password masked and says the cause; `data.store` is that masked name."""

    code, name = -32012, "store.unreachable"


class StoreReadOnly(AutodocError, RuntimeError):
    """A write on a store this process may only read: a PostgreSQL store reached as a role that
    cannot write (`data.role`). Searches and reads answer; indexing, adding a workspace and saving a
    session do not. A RuntimeError too, as a store opened read-only has always refused writes."""

    code, name = -32013, "store.read_only"


class ShuttingDown(AutodocError):
    code, name = -32020, "server.shutting_down"


class Overloaded(AutodocError):
    """A connection already has as many requests (or bytes) in flight as it
    may; the request was not run. Retry once some have answered."""

    code, name = -32021, "server.overloaded"


class Unsupported(AutodocError):
    code, name = -32065, "rpc.unsupported"


class EmbedFailed(AutodocError):
    code, name = -32067, "rpc.embed_failed"


class Switching(AutodocError):
    code, name = -32069, "rpc.switching"


ALL_ERRORS: tuple[type[AutodocError], ...] = (
    ParseError,
    InvalidRequest,
    MethodNotFound,
    InvalidParams,
    InternalError,
    RequestCancelled,
    WorkspaceNotFound,
    WorkspaceExists,
    DocumentNotFound,
    PathOutsideWorkspace,
    CursorExpired,
    StoreLocked,
    StoreTooNew,
    StoreUnreachable,
    StoreReadOnly,
    ShuttingDown,
    Overloaded,
    Unsupported,
    EmbedFailed,
    Switching,
)


def from_rpc(err: dict[str, Any]) -> AutodocError:
    """An error a daemon answered, as the class it was raised as there (both ends share
    this hierarchy), so a client handles a remote DocumentNotFound like a local one."""
    code = err.get("code", InternalError.code)
    cls = next((c for c in ALL_ERRORS if c.code == code), AutodocError)
    data = err.get("data")
    e = cls.__new__(cls)
    AutodocError.__init__(e, str(err.get("message", "")), data)
    e.code = code
    e.relayed = {"code": code, "message": err.get("message", ""), "data": data}
    if isinstance(data, dict):
        e.name = data.get("name", cls.name)
        if "field" in data:
            e.field = data["field"]  # what InvalidParams' own __init__ would have set
    return e
