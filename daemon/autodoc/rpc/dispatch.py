"""RPC stage, JSON-RPC 2.0 semantics: one frame's JSON → its response(s).

Input: a parsed message (object or batch) from one connection ("peer").
Output: a response object, a list of them (batch), or None (notifications).

jsonrpcserver 5.0.9 does the per-request work through its public API only
(``async_dispatch_to_serializable``, a ``methods`` dict, ``Success``/``Error``):
finding the method, calling it and shaping the response. It is handed one
request object at a time, already parsed (``deserializer`` passes it through)
and already checked (``validator`` passes it through: ``request_problem`` ran
first and says what is wrong, where its jsonschema check of the same envelope
cost a third of the dispatch, docs/benchmarks/daemon_overhead.md), because:

- it checks a batch as a whole, so one bad element turns the whole batch into
  a single Invalid Request, where JSON-RPC 2.0 §6 answers each element (and it
  would take a nested batch ``[[…]]`` for a batch);
- a method cannot see its request's id, which cancellation and progress
  tokens need; here each request gets its own context;
- it answers every unexpected exception with the exception's text; here the
  text stays in the log and the client gets -32603 "internal error".

The envelope is checked here first (so a bad element answers -32600 with a
message saying what is wrong), params against ``schemas/<method>.params.json``
(rpc/schemas.py), so jsonrpcserver's signature check never sees a method's
real parameters.

Limits on what one frame may hold (the connection adds the per-connection
ones): nesting depth ``MAX_JSON_DEPTH`` and batch length ``MAX_BATCH_REQUESTS``,
both answered -32600; ``NaN``, ``Infinity`` and numbers beyond a double are not
JSON the daemon could answer with, so they are -32700.

Runs on: the event loop (InFlight.check also from the worker thread a method runs on).
"""

from __future__ import annotations

import inspect
import json
import logging
import math
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
from jsonrpcserver import Error, Success, async_dispatch_to_serializable

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
from .framing import encode_message

log = logging.getLogger("autodoc.rpc")

CANCEL_METHOD = "$/cancelRequest"
# Methods still answered while the daemon shuts down.
ALWAYS_ADMITTED = frozenset({CANCEL_METHOD})

# Arrays and objects inside one frame, the outermost counting 1. Real requests
# need fewer than 10; the cap keeps recursive code (schema checks, encoders)
# far from Python's recursion limit.
MAX_JSON_DEPTH = 64
# Elements of one batch. A longer batch is refused whole (one -32600, id null).
MAX_BATCH_REQUESTS = 256


class _NoId:
    """The id of a notification (a request without an ``id`` member)."""

    _instance: _NoId | None = None

    def __new__(cls) -> _NoId:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NOID"


NOID: Any = _NoId()


class InFlight:
    """One running request: its cancel scope, and a thread-safe flag that code
    running in a worker thread (an index run) can poll."""

    def __init__(self, request_id: Any):
        self.id = request_id
        self.scope = anyio.CancelScope()
        self.cancelled = threading.Event()
        self.reason = ""
        # a request with no task to cancel (a read handed to a thread, rpc/quick.py) answers here
        self.on_cancel: Callable[[], None] | None = None

    def cancel(self, reason: str = "cancelled") -> None:
        if not self.cancelled.is_set():
            self.reason = reason
            self.cancelled.set()
            self.scope.cancel()
            if self.on_cancel is not None:
                self.on_cancel()

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
    """A hashable key for a JSON-RPC id (1 and "1" are different ids; 7 and 7.0 are one, as a
    JavaScript client, with one number type, sees them: in-flight bookkeeping and cancellation)."""
    if type(request_id) is float and request_id.is_integer():
        request_id = int(request_id)
    return json.dumps(request_id)


def valid_id(value: Any) -> bool:
    return value is None or (isinstance(value, (str, int, float)) and not isinstance(value, bool))


# -- parsing a frame ---------------------------------------------------------------------------


def _not_json_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        # 1e999999 parses to inf, which no JSON answer can carry back.
        raise ValueError(f"number out of range: {text[:40]}")
    return value


_DECODER = json.JSONDecoder(parse_constant=_not_json_constant, parse_float=_finite_float)


def json_depth_exceeds(value: Any, limit: int) -> bool:
    """Whether ``value`` nests arrays/objects deeper than ``limit`` (iterative:
    the point is never to recurse on what a peer sent)."""
    if not isinstance(value, (dict, list)):
        return False
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        for child in children:
            if isinstance(child, (dict, list)):
                stack.append((child, depth + 1))
    return False


def parse_message(payload: bytes) -> tuple[Any, dict | None]:
    """(message, None), or (None, the error response) when the frame is not
    JSON (-32700) or nests deeper than MAX_JSON_DEPTH (-32600)."""
    try:
        text = payload.decode("utf-8-sig")  # a leading BOM is tolerated, as json.loads(bytes) did
        message = _DECODER.decode(text)
    except RecursionError:
        return None, error_response(
            InvalidRequest(f"invalid request: nested deeper than {MAX_JSON_DEPTH} levels"), None
        )
    except (UnicodeDecodeError, ValueError) as exc:
        reason = str(exc).split("\n")[0][:200]
        return None, error_response(ParseError(f"parse error: {reason}"), None)
    if json_depth_exceeds(message, MAX_JSON_DEPTH):
        rid = message.get("id") if isinstance(message, dict) and valid_id(message.get("id")) else None
        return None, error_response(InvalidRequest(f"invalid request: nested deeper than {MAX_JSON_DEPTH} levels"), rid)
    return message, None


def envelope_error(message: Any) -> dict | None:
    """The one answer to a whole frame that cannot be dispatched element by
    element (an empty or too long batch), else None."""
    if isinstance(message, list):
        if not message:
            return error_response(InvalidRequest("invalid request: empty batch"), None)
        if len(message) > MAX_BATCH_REQUESTS:
            return error_response(
                InvalidRequest(
                    f"invalid request: a batch of {len(message)} requests exceeds the limit of {MAX_BATCH_REQUESTS}",
                    {"limit": MAX_BATCH_REQUESTS},
                ),
                None,
            )
    return None


def error_for(exc: Exception, name: str, failed: str = "%s failed") -> AutodocError:
    """The error a call that raised ``exc`` answers with: its own when it is an AutodocError,
    else -32603 "internal error", the traceback logged (``failed % name``), never sent.
    Called in the ``except`` block, so the log has the traceback."""
    if isinstance(exc, AutodocError):
        return exc
    log.exception(failed, name)
    return InternalError("internal error")


def error_response(error: AutodocError, request_id: Any) -> dict:
    return {"jsonrpc": "2.0", "error": error.to_rpc(), "id": request_id}


def elements(message: Any) -> list[Any]:
    """A batch's elements, or a single message as a one-element list."""
    return message if isinstance(message, list) else [message]


def request_id_of(item: Any) -> Any:
    """The id of a well-formed request that expects an answer, else NOID."""
    if request_problem(item) is None and "id" in item:
        return item["id"]
    return NOID


def cancel_target(message: Any) -> Any:
    """The id a ``$/cancelRequest`` notification names, else NOID."""
    if (
        isinstance(message, dict)
        and message.get("method") == CANCEL_METHOD
        and "id" not in message
        and isinstance(message.get("params"), dict)
        and "id" in message["params"]
        and valid_id(message["params"]["id"])
    ):
        return message["params"]["id"]
    return NOID


def request_problem(item: Any) -> str | None:
    """What makes ``item`` not a JSON-RPC 2.0 request object, or None."""
    if not isinstance(item, dict):
        return f"a request must be an object, not {_json_type(item)}"
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
    return None


def _json_type(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return "null" if value is None else type(value).__name__


# -- dispatching -------------------------------------------------------------------------------


class _MethodTable(dict):
    """jsonrpcserver's method dict; an unknown name gets a stub answering our
    MethodNotFound, so its answer carries data.name like every other error."""

    def __missing__(self, name: str) -> Callable[..., Awaitable[Any]]:
        async def not_found(_ctx: Any, /, *args: Any, **kwargs: Any) -> Any:
            return _error_result(MethodNotFound(f"method not found: {name}", {"method": name}))

        return not_found


def _error_result(error: AutodocError) -> Any:
    err = error.to_rpc()
    return Error(err["code"], err["message"], err["data"])


def _already_parsed(item: Any) -> Any:
    # The connection parsed the frame once (it needs the ids before anything
    # runs, to register them for $/cancelRequest); jsonrpcserver gets the object.
    return item


def _already_checked(item: Any) -> Any:
    # request_problem() checked this envelope before jsonrpcserver saw it.
    return item


class Dispatcher:
    def __init__(self, handlers: dict[str, Handler], *, check_results: bool = False):
        self.handlers = dict(handlers)
        self.check_results = check_results
        self._methods = _MethodTable({name: self._wrap(name, h) for name, h in self.handlers.items()})

    async def dispatch(
        self,
        message: Any,
        peer: Peer,
        *,
        admitted: bool = True,
        refused: dict[int, AutodocError] | None = None,
    ) -> Any:
        """The response(s) to one parsed message. ``admitted`` is False when the
        message arrived after shutdown began (its requests answer -32020).
        ``refused`` maps element indexes the connection would not run (an id
        already in flight, a limit reached) to the error each answers."""
        whole = envelope_error(message)
        if whole is not None:
            return whole
        refused = refused or {}
        if isinstance(message, list):
            out: list[Any] = [None] * len(message)

            async def one(i: int, item: Any) -> None:
                out[i] = await self._dispatch_one(item, peer, admitted, refused.get(i))

            async with anyio.create_task_group() as tg:
                for i, item in enumerate(message):
                    tg.start_soon(one, i, item)
            responses = [r for r in out if r is not None]
            return responses or None
        return await self._dispatch_one(message, peer, admitted, refused.get(0))

    async def _dispatch_one(self, item: Any, peer: Peer, admitted: bool, refusal: AutodocError | None) -> dict | None:
        problem = request_problem(item)
        if problem is not None:
            rid = item.get("id") if isinstance(item, dict) and valid_id(item.get("id")) else None
            return error_response(InvalidRequest(f"invalid request: {problem}"), rid)
        rid = item.get("id", NOID)
        if refusal is not None:
            return None if rid is NOID else error_response(refusal, rid)
        inflight = peer.inflight_for(rid) if rid is not NOID else None
        ctx = RequestContext(peer=peer, method=item["method"], id=rid, inflight=inflight)
        ctx.data["admitted"] = admitted
        try:
            # one request: one answer or none, never a list
            return await async_dispatch_to_serializable(  # type: ignore[return-value]
                item,
                self._methods,
                context=ctx,
                deserializer=_already_parsed,
                validator=_already_checked,
            )
        finally:
            if rid is not NOID:
                peer.end_request(rid, inflight)

    def _wrap(self, name: str, handler: Handler) -> Callable[..., Awaitable[Any]]:
        async def method(ctx: RequestContext, /, *args: Any, **kwargs: Any) -> Any:
            try:
                return Success(await self._invoke(name, handler, ctx, list(args) if args else kwargs))
            except Exception as exc:
                error = error_for(exc, name)
                if ctx.is_notification and error is exc:
                    log.debug("notification %s failed: %s", name, error.message)
                return _error_result(error)

        # jsonrpcserver checks the arguments against inspect.signature(method) on
        # every call; computed once here, it is read from the attribute instead.
        method.__signature__ = inspect.signature(method)  # type: ignore[attr-defined]
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
                check_result(name, result)
        if scope.cancelled_caught:
            raise inflight.error() if inflight is not None else RequestCancelled("request cancelled")
        return result


def check_result(name: str, result: Any) -> None:
    """InternalError when ``result`` breaks ``name``'s result schema (AUTODOC_CHECK_RESULTS)."""
    problems = schemas.result_errors(name, result)
    if problems:
        log.error("%s answered outside its schema: %s", name, "; ".join(problems[:5]))
        raise InternalError("internal error: the answer broke its schema", {"problems": problems[:20]})


def encode_answer(message: Any, framing: str) -> bytes:
    """``message`` as a frame; an answer that is not JSON (NaN, a Path…: the method's bug,
    not the client's) goes as -32603 to its id, or to null when even the id will not encode.
    Pure: worker threads encode their own answers (rpc/quick.py)."""
    try:
        return encode_message(message, framing)
    except (TypeError, ValueError, RecursionError):
        log.exception("an answer could not be encoded as JSON")
        if isinstance(message, list):
            return encode_message([_encodable(m, framing) for m in message], framing)
        return encode_message(_encodable(message, framing), framing)


def _encodable(message: Any, framing: str) -> Any:
    try:
        encode_message(message, framing)
        return message
    except (TypeError, ValueError, RecursionError):
        broken = error_response(InternalError("internal error: the answer was not JSON"), None)
        rid = message.get("id") if isinstance(message, dict) else None
        try:
            encode_message(rid, framing)
            return {**broken, "id": rid}
        except (TypeError, ValueError, RecursionError):
            return broken
