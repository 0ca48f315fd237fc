"""The MCP server's stdio transport, between the SDK's line reader and its
server: every message the SDK could not take is answered, and every request
read before stdin closed is answered before the server stops.

The SDK hands a line that is not JSON, or not a JSON-RPC message MCP knows (a
batch, `"jsonrpc": "1.0"`, params that are not an object, an id without a
method), to its server as an exception, which logs it at debug level and
answers nothing: the client waits for ever (a trial found this, while
`autodoc serve` answered each the way JSON-RPC asks). Here each gets -32700
(not JSON) or -32600 (not a request; -32602 when only its params are wrong),
with the request's id when it had one; a bad notification or a bad response of
the client's is not answered, as JSON-RPC asks. (The SDK takes a request whose
id is neither a string nor an integer, `1.5` or `true`, for a notification:
that one is still not answered.) A tools/call whose `arguments` is a string
holding a JSON object (some clients send it so) is taken as that object, and
the tool's answer says so in a note (wire.py); one whose string holds no object
gets -32602 naming the field, where the SDK answered -32602 with empty data. And at the end of input the SDK
cancels the requests still running and answers "Connection closed"; here the
end of input waits for them (at most DRAIN_S), as `autodoc serve` does; a
request the client cancelled is not waited for (the SDK does not answer it).

Runs on: the event loop of `autodoc mcp`.
"""

from __future__ import annotations

import io
import logging
from collections import Counter
from typing import Any, BinaryIO

import anyio
import mcp_types as types
from mcp.server.stdio import stdio_server
from mcp.shared._context_streams import create_context_streams
from mcp.shared.message import SessionMessage

from .wire import refusal, string_arguments

log = logging.getLogger("autodoc.mcp")

DRAIN_S = 30.0  # after the end of input, how long the requests already read may take to answer


def rejection(exc: Exception) -> types.JSONRPCError | None:
    """The answer to a line the SDK could not read as a message (pure); None for what JSON-RPC
    never answers: a notification (no id), or a response of the client's (an answer to it
    would carry that id and read as the answer to the client's own request)."""
    errors: list[dict[str, Any]] = []
    try:
        errors = exc.errors()  # type: ignore[attr-defined]  # pydantic's ValidationError
    except Exception:
        pass
    if not errors or any(e.get("type") == "json_invalid" for e in errors):
        return types.JSONRPCError(
            jsonrpc="2.0", id=None, error=types.ErrorData(code=-32700, message="parse error: the line is not JSON")
        )
    message = next((e["input"] for e in errors if isinstance(e.get("input"), dict)), None)
    if not isinstance(message, dict):
        return types.JSONRPCError(
            jsonrpc="2.0",
            id=None,
            error=types.ErrorData(
                code=-32600, message="invalid request: a message is one JSON object (MCP has no batches)"
            ),
        )
    if "id" not in message or ("method" not in message and ("result" in message or "error" in message)):
        return None
    rid = message.get("id")
    rid = rid if isinstance(rid, (str, int)) and not isinstance(rid, bool) else None
    if message.get("jsonrpc") != "2.0":
        why = '"jsonrpc" must be "2.0"'
    elif not isinstance(message.get("method"), str):
        why = "a request names its method (a string)"
    elif "params" in message and not isinstance(message["params"], dict):
        return types.JSONRPCError(
            jsonrpc="2.0",
            id=rid,
            error=types.ErrorData(
                code=-32602, message="invalid params: params must be an object", data={"field": "params"}
            ),
        )
    else:
        why = "not a JSON-RPC request, notification or response MCP knows"
    return types.JSONRPCError(
        jsonrpc="2.0", id=rid, error=types.ErrorData(code=-32600, message=f"invalid request: {why}")
    )


def arguments_as_object(msg: types.JSONRPCRequest) -> types.JSONRPCError | None:
    """A tools/call's `arguments` sent as a JSON string: replaced (in place) by the object it
    holds (wire.py); the error to answer instead when it holds no object."""
    if string_arguments(msg.method, msg.params) is not False:
        return None
    return types.JSONRPCError.model_validate(refusal(msg.id))


async def serve(server: Any, options: Any, streams: tuple[BinaryIO, BinaryIO] | None = None) -> None:
    """Run the SDK's server on stdio (or on `streams`, the pipes fast.py serves it on), with the
    two guarantees above."""
    wrapped = [anyio.wrap_file(io.TextIOWrapper(s, encoding="utf-8", errors="replace")) for s in streams or ()]
    async with stdio_server(*wrapped) as (sdk_read, sdk_write):
        to_server, server_reads = create_context_streams[SessionMessage | Exception](0)
        server_writes, from_server = create_context_streams[SessionMessage](0)
        pending: Counter[str | int] = Counter()  # requests read and not yet answered (an id may repeat)
        answered = anyio.Event()

        def settled(rid: Any) -> None:
            nonlocal answered
            if pending[rid] > 0:
                pending[rid] -= 1
                if not pending[rid]:
                    del pending[rid]
            answered.set()
            answered = anyio.Event()

        async def inbound() -> None:
            async with to_server:
                async for item in sdk_read:
                    if isinstance(item, Exception):
                        log.info("a message that could not be read: %s", str(item).splitlines()[0])
                        if (answer := rejection(item)) is not None:
                            await sdk_write.send(SessionMessage(answer))
                        continue
                    msg = item.message
                    if isinstance(msg, types.JSONRPCRequest) and (bad := arguments_as_object(msg)) is not None:
                        await sdk_write.send(SessionMessage(bad))
                        continue
                    if isinstance(msg, types.JSONRPCRequest):
                        pending[msg.id] += 1
                    elif isinstance(msg, types.JSONRPCNotification) and msg.method == "notifications/cancelled":
                        settled((msg.params or {}).get("requestId"))  # the SDK never answers a cancelled request
                    await to_server.send(item)
                with anyio.move_on_after(DRAIN_S):  # end of input: the requests read get their answers
                    while pending:
                        await answered.wait()

        async def outbound() -> None:
            async with from_server:
                async for item in from_server:
                    await sdk_write.send(item)
                    if isinstance(item.message, (types.JSONRPCResponse, types.JSONRPCError)):
                        settled(item.message.id)

        async with anyio.create_task_group() as tg:
            tg.start_soon(inbound)
            async with anyio.create_task_group() as out:
                out.start_soon(outbound)
                try:
                    await server.run(server_reads, server_writes, options)
                finally:
                    await server_writes.aclose()  # outbound ends once it has passed on every answer
            tg.cancel_scope.cancel()
        await sdk_write.aclose()  # the SDK's stdout writer ends with it, and so does stdio_server
