"""RPC stage, JSON-RPC 2.0 semantics: one frame's JSON → its response(s).

Input: a parsed message (object or batch) from one connection ("peer").
Output: a response object, a list of them (batch), or None (notifications).

jsonrpcserver 5.0.9 does the per-request work: checking the request object
against its JSON-RPC request schema, finding the method, calling it, turning a
JsonRpcError into an error response and serialising responses. Its batch
entry point (``dispatch_to_response``) is not used, for three reasons:

- it checks a batch as a whole, so one bad element turns the whole batch into
  a single Invalid Request, where JSON-RPC 2.0 §6 answers each element;
- a method cannot see its request's id, which cancellation and progress
  tokens need; here each request gets its own context;
- it answers every unexpected exception with the exception's text; here the
  text stays in the log and the client gets -32603 "internal error".

Params are checked against ``schemas/<method>.params.json`` (rpc/schemas.py),
so jsonrpcserver's signature check never sees a method's real parameters.
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Protocol

import anyio
from jsonrpcserver.async_dispatcher import dispatch_request
from jsonrpcserver.dispatcher import create_request, to_response
from jsonrpcserver.exceptions import JsonRpcError
from jsonrpcserver.main import default_validator
from jsonrpcserver.response import to_serializable_one
from jsonrpcserver.result import Success
from jsonrpcserver.sentinels import NOID

from ..errors import (
    AutodocError,
    InternalError,
    InvalidRequest,
    MethodNotFound,
    ParseError,
    RequestCancelled,
    ShuttingDown,
)
from . import schemas

log = logging.getLogger("autodoc.rpc")

CANCEL_METHOD = "$/cancelRequest"
# Methods still answered while the daemon shuts down.
ALWAYS_ADMITTED = frozenset({CANCEL_METHOD})


class InFlight:
    """One running request: its cancel scope, and a thread-safe flag that code
    running in a worker thread (an index run) can poll."""

    def __init__(self, request_id: Any):
        self.id = request_id
        self.scope = anyio.CancelScope()
        self.cancelled = threading.Event()
        self.reason = ""

    def cancel(self, reason: str = "cancelled") -> None:
        if not self.cancelled.is_set():
            self.reason = reason
            self.cancelled.set()
            self.scope.cancel()

    def error(self) -> AutodocError:
        if self.reason == "shutdown":
            return ShuttingDown("request cancelled: the daemon is shutting down", {"id": self.id})
        if self.reason == "disconnect":
            return RequestCancelled("request cancelled: the client disconnected", {"id": self.id})
        return RequestCancelled("request cancelled", {"id": self.id})

    def check(self) -> None:
        """Raise the cancellation error if cancelled (call from worker threads)."""
        if self.cancelled.is_set():
            raise self.error()


class Peer(Protocol):
    """What the dispatcher needs from a connection."""

    def inflight_for(self, request_id: Any) -> InFlight | None: ...

    def end_request(self, request_id: Any, inflight: InFlight | None) -> None: ...

    def notify_nowait(self, method: str, params: Any) -> bool: ...


@dataclass
class RequestContext:
    peer: Any
    method: str
    id: Any = NOID  # NOID for a notification
    inflight: InFlight | None = None
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def is_notification(self) -> bool:
        return self.id is NOID


Handler = Callable[[RequestContext, dict[str, Any]], Awaitable[Any]]


def id_key(request_id: Any) -> str:
    """A hashable key for a JSON-RPC id (1 and "1" are different ids)."""
    return json.dumps(request_id)


def valid_id(value: Any) -> bool:
    return value is None or (isinstance(value, (str, int, float)) and not isinstance(value, bool))


def parse_message(payload: bytes) -> tuple[Any, dict | None]:
    """(message, None), or (None, a -32700 response) when it is not JSON."""
    try:
        return json.loads(payload), None
    except (UnicodeDecodeError, ValueError) as exc:
        reason = str(exc).split("\n")[0][:200]
        return None, error_response(ParseError(f"parse error: {reason}"), None)


def error_response(error: AutodocError, request_id: Any) -> dict:
    return {"jsonrpc": "2.0", "error": error.to_rpc(), "id": request_id}


def request_ids(message: Any) -> list[Any]:
    """Ids of the well-formed requests (not notifications) in a message, so a
    connection can register them before they run (a $/cancelRequest right
    behind a request then always finds it)."""
    items = message if isinstance(message, list) else [message]
    out = []
    for item in items:
        if isinstance(item, dict) and "id" in item and isinstance(item.get("method"), str) and valid_id(item["id"]):
            out.append(item["id"])
    return out


def cancel_target(message: Any) -> Any:
    """The id a ``$/cancelRequest`` notification names, else NOID."""
    if (
        isinstance(message, dict)
        and message.get("method") == CANCEL_METHOD
        and "id" not in message
        and isinstance(message.get("params"), dict)
        and valid_id(message["params"].get("id"))
    ):
        return message["params"]["id"]
    return NOID


class _MethodTable(dict):
    """jsonrpcserver's method dict; an unknown name gets a stub raising our
    MethodNotFound, so its answer carries data.name like every other error."""

    def __missing__(self, name: str) -> Callable[..., Awaitable[Any]]:
        async def not_found(_ctx: Any, /, *args: Any, **kwargs: Any) -> Any:
            raise _rpc_error(MethodNotFound(f"method not found: {name}", {"method": name}))

        return not_found


def _rpc_error(error: AutodocError) -> JsonRpcError:
    err = error.to_rpc()
    return JsonRpcError(err["code"], err["message"], err.get("data"))


class Dispatcher:
    def __init__(self, handlers: dict[str, Handler], *, check_results: bool = False):
        self.handlers = dict(handlers)
        self.check_results = check_results
        self._methods = _MethodTable({name: self._wrap(name, h) for name, h in self.handlers.items()})

    async def dispatch(self, message: Any, peer: Peer, *, admitted: bool = True) -> Any:
        """The response(s) to one parsed message. ``admitted`` is False when the
        message arrived after shutdown began (its requests answer -32020)."""
        if isinstance(message, list):
            if not message:
                return error_response(InvalidRequest("invalid request: empty batch"), None)
            out: list[Any] = [None] * len(message)

            async def one(i: int, item: Any) -> None:
                out[i] = await self._dispatch_one(item, peer, admitted)

            async with anyio.create_task_group() as tg:
                for i, item in enumerate(message):
                    tg.start_soon(one, i, item)
            responses = [r for r in out if r is not None]
            return responses or None
        return await self._dispatch_one(message, peer, admitted)

    async def _dispatch_one(self, item: Any, peer: Peer, admitted: bool) -> dict | None:
        try:
            default_validator(item)
        except Exception:
            rid = item.get("id") if isinstance(item, dict) and valid_id(item.get("id")) else None
            return error_response(InvalidRequest(f"invalid request: {_request_problem(item)}"), rid)
        request = create_request(item)
        inflight = peer.inflight_for(request.id) if request.id is not NOID else None
        ctx = RequestContext(peer=peer, method=request.method, id=request.id, inflight=inflight)
        ctx.data["admitted"] = admitted
        try:
            _, result = await dispatch_request(self._methods, ctx, request)
        finally:
            if request.id is not NOID:
                peer.end_request(request.id, inflight)
        if request.id is NOID:
            return None
        return to_serializable_one(to_response(request, result))

    def _wrap(self, name: str, handler: Handler) -> Callable[..., Awaitable[Any]]:
        async def method(ctx: RequestContext, /, *args: Any, **kwargs: Any) -> Any:
            try:
                return Success(await self._invoke(name, handler, ctx, list(args) if args else kwargs))
            except AutodocError as exc:
                if ctx.is_notification:
                    log.debug("notification %s failed: %s", name, exc.message)
                raise _rpc_error(exc) from None
            except JsonRpcError:
                raise
            except Exception:
                log.exception("%s failed", name)
                raise _rpc_error(InternalError("internal error")) from None

        return method

    async def _invoke(self, name: str, handler: Handler, ctx: RequestContext, raw: Any) -> Any:
        params = schemas.bind_params(name, raw)
        if not ctx.data.get("admitted", True) and name not in ALWAYS_ADMITTED:
            raise ShuttingDown("the daemon is shutting down")
        inflight = ctx.inflight
        scope = inflight.scope if inflight is not None else anyio.CancelScope()
        with scope:
            result = await handler(ctx, params)
            if self.check_results:
                problems = schemas.result_errors(name, result)
                if problems:
                    log.error("%s answered outside its schema: %s", name, "; ".join(problems[:5]))
                    raise InternalError("internal error: the answer broke its schema", {"problems": problems[:20]})
        if scope.cancelled_caught:
            raise inflight.error() if inflight is not None else RequestCancelled("request cancelled")
        return result


def _request_problem(item: Any) -> str:
    if not isinstance(item, dict):
        return f"a request must be an object, not {type(item).__name__}"
    if item.get("jsonrpc") != "2.0":
        return 'jsonrpc must be "2.0"'
    if not isinstance(item.get("method"), str):
        return "method must be a string"
    if "id" in item and not valid_id(item["id"]):
        return "id must be a string, a number or null"
    if "params" in item and not isinstance(item["params"], (list, dict)):
        return "params must be an array or an object"
    extra = sorted(k for k in item if k not in ("jsonrpc", "method", "id", "params"))
    if extra:
        return f"unknown member {extra[0]!r}"
    return "not a JSON-RPC 2.0 request"
