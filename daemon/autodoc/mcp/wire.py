"""What clients send that the SDK refuses before a tool sees it: a tools/call whose `arguments`
is a string holding a JSON object (some agent frameworks send it so). The SDK answered -32602
with empty data; here it is taken as the object it holds, marked so that the tool's answer says
so in a note (args.py), on both transports: stdio.py per message, `lenient` around the
streamable HTTP app. A string that holds no object is refused naming the field (-32602,
data.field "arguments"), on both.

Runs on: the event loop (pure, and an ASGI wrapper).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

ARGUMENTS_WERE_A_STRING = "__arguments_were_a_json_string"  # the marker args.py turns into a note
NOT_AN_OBJECT = (
    "invalid params: arguments must be an object of the tool's parameters by name, "
    'e.g. {"query": "lease recovery"}, not a string'
)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
ASGI = Callable[[Scope, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]], Awaitable[None]]


def string_arguments(method: Any, params: Any) -> bool | None:
    """For a tools/call whose arguments are a string: True when it held a JSON object, which
    now replaces it (in place, marked); False when it holds none. None for anything else."""
    if method != "tools/call" or not isinstance(params, dict) or not isinstance(params.get("arguments"), str):
        return None
    try:
        parsed = json.loads(params["arguments"])
    except ValueError:
        return False
    if not isinstance(parsed, dict):
        return False
    params["arguments"] = {**parsed, ARGUMENTS_WERE_A_STRING: True}
    return True


def lenient(app: ASGI) -> ASGI:
    """The streamable HTTP app, with a POSTed tools/call's string arguments read as their object."""

    async def wrapped(scope: Scope, receive: Callable[[], Awaitable[Message]], send: Any) -> None:
        if scope.get("type") != "http" or scope.get("method") != "POST":
            return await app(scope, receive, send)
        chunks: list[bytes] = []
        while True:
            m = await receive()
            if m["type"] != "http.request":  # the client went away: the app sees it as it came
                return await app(scope, _replay([m], receive), send)
            chunks.append(m.get("body", b""))
            if not m.get("more_body"):
                break
        body = b"".join(chunks)
        try:
            msg = json.loads(body)
        except ValueError:
            msg = None
        fixed = string_arguments(msg.get("method"), msg.get("params")) if isinstance(msg, dict) else None
        if fixed is False and isinstance(msg, dict) and "id" in msg:  # answered here, naming the field
            return await _json(send, refusal(msg["id"]))
        if fixed:
            body = json.dumps(msg).encode()
            scope = {**scope, "headers": [(k, v) for k, v in scope["headers"] if k.lower() != b"content-length"]}
            scope["headers"].append((b"content-length", str(len(body)).encode()))
        await app(scope, _replay([{"type": "http.request", "body": body, "more_body": False}], receive), send)

    return wrapped


def refusal(rid: Any) -> dict[str, Any]:
    """The answer to a tools/call whose string arguments hold no object."""
    error = {"code": -32602, "message": NOT_AN_OBJECT, "data": {"field": "arguments"}}
    return {"jsonrpc": "2.0", "id": rid, "error": error}


async def _json(send: Callable[[Message], Awaitable[None]], obj: dict[str, Any]) -> None:
    body = json.dumps(obj).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _replay(first: list[Message], receive: Callable[[], Awaitable[Message]]) -> Callable[[], Awaitable[Message]]:
    """A receive() that gives these messages first, then the connection's own."""
    pending = list(first)

    async def again() -> Message:
        return pending.pop(0) if pending else await receive()

    return again
