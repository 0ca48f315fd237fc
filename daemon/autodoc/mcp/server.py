"""The MCP server: the SDK's low-level Server with AutoDoc's tools and
resources, served on stdio (what agent clients start) or streamable HTTP on
a localhost port (`--http 127.0.0.1:PORT`, path /mcp).

A tool's failure is the tool's answer (isError, with a message that says what
to send instead and `did_you_mean` where a name was guessed), never a
protocol error: a model reads the one and not the other.

Runs on: the event loop of `autodoc mcp` (anyio); store work on worker threads.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any, BinaryIO

import anyio
import mcp_types as types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.subscriptions import ListenHandler
from mcp.shared.exceptions import MCPError

from .. import __version__
from ..config import Settings
from ..errors import AutodocError, DocumentNotFound, PathOutsideWorkspace, WorkspaceNotFound
from . import resources, stdio, tools
from .backend import Backend, ToolError
from .handshake import INSTRUCTIONS, TITLE
from .specs import TOOLS

log = logging.getLogger("autodoc.mcp")

RESOURCE_NOT_FOUND = -32002  # MCP's code for a resource that does not exist
_HOSTPORT = re.compile(r"^(?:(?P<host>\[[^\]]+\]|[^:]+):)?(?P<port>\d{1,5})$")


def build(backend: Backend, feed: resources.ChangeFeed) -> Server[Any]:
    """The SDK server with every handler bound to one backend and one change feed."""

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool.model_validate(t) for t in TOOLS])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        try:
            data, text = await tools.call_tool(backend, params.name, params.arguments)
        except ToolError as e:
            return _error({"error": e.message, **e.data})
        except AutodocError as e:
            extra = (
                {k: v for k, v in (e.data or {}).items() if k in ("did_you_mean", "next_cursor", "field")}
                if isinstance(e.data, dict)
                else {}
            )
            message, field = e.message, extra.get("field")
            if isinstance(field, str) and field.startswith("opts."):  # the daemon's name; the tool's is bare
                extra["field"] = field[len("opts.") :]
                message = message.replace(field, extra["field"], 1)
            return _error({"error": message, **extra})
        except Exception as e:  # a bug: the model gets one line, the log the traceback
            log.exception("tool %s failed", params.name)
            return _error({"error": f"internal error in {params.name}: {type(e).__name__}: {e}"})
        return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=data)

    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        return await resources.list_resources(backend, getattr(params, "cursor", None))

    async def list_templates(ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
        return resources.templates()

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        try:
            return await resources.read_resource(backend, str(params.uri))
        except (DocumentNotFound, WorkspaceNotFound, PathOutsideWorkspace) as e:
            raise MCPError(RESOURCE_NOT_FOUND, e.message, {"uri": str(params.uri)}) from None

    async def subscribe(ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
        feed.subscribe(ctx.session, str(params.uri))
        return types.EmptyResult()

    async def unsubscribe(ctx: Any, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        feed.unsubscribe(ctx.session, str(params.uri))
        return types.EmptyResult()

    return Server(
        "autodoc",
        version=__version__,
        title=TITLE,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
        on_subscribe_resource=subscribe,
        on_unsubscribe_resource=unsubscribe,
        on_subscriptions_listen=ListenHandler(feed.bus),
    )


def _error(payload: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(text=json.dumps(payload, ensure_ascii=False))],
        structured_content=payload,
        is_error=True,
    )


@asynccontextmanager
async def _serving(settings: Settings, spawn: bool) -> AsyncIterator[Server[Any]]:
    backend = Backend(settings, spawn=spawn)
    feed = resources.ChangeFeed(backend)
    try:
        async with anyio.create_task_group() as tg:
            await tg.start(feed.run)
            try:
                yield build(backend, feed)
            finally:
                tg.cancel_scope.cancel()
    finally:
        await anyio.to_thread.run_sync(backend.close)


async def serve_stdio(settings: Settings, spawn: bool, streams: tuple[BinaryIO, BinaryIO] | None = None) -> None:
    async with _serving(settings, spawn) as server:
        options = server.create_initialization_options(NotificationOptions(resources_changed=True))
        await stdio.serve(server, options, streams)


async def serve_http(settings: Settings, spawn: bool, host: str, port: int) -> None:
    import uvicorn

    from .wire import lenient

    async with _serving(settings, spawn) as server:
        app = lenient(server.streamable_http_app(host=host))  # string arguments read as their object
        config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
        log.info("MCP over streamable HTTP on http://%s:%d/mcp", host, port)
        await uvicorn.Server(config).serve()


def parse_http(text: str) -> tuple[str, int] | None:
    """'127.0.0.1:8765', 'localhost:8765' or '8765' → (host, port); only loopback hosts."""
    m = _HOSTPORT.match(text.strip())
    if not m or not 0 < int(m.group("port")) < 65536:
        return None
    host = (m.group("host") or "127.0.0.1").strip("[]")
    return host, int(m.group("port"))


LOOPBACK = ("127.0.0.1", "localhost", "::1")


def run(settings: Settings, *, http: str | None = None, spawn: bool = False) -> int:
    """`autodoc mcp`: serve until the client goes away (stdio) or a signal (HTTP); the exit status."""
    if http is not None:
        hp = parse_http(http)
        if hp is None or hp[0] not in LOOPBACK:
            print(
                f"autodoc: --http wants a loopback HOST:PORT such as 127.0.0.1:8765, not {http!r} "
                "(the server has no authentication, so it listens on this machine only)",
                file=sys.stderr,
            )
            return 2
        anyio.run(partial(serve_http, settings, spawn, *hp))
        return 0
    anyio.run(partial(serve_stdio, settings, spawn))
    return 0
