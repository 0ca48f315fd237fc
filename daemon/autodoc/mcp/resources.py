"""Documents as MCP resources (`autodoc://<workspace>/<path>`), and the store's
change feed as resource-updated notifications.

A client subscribes the handshake way (`resources/subscribe`, 2025 protocol
versions) or the listen way (`subscriptions/listen`, 2026-07-28); either way
a change to a document (changes.changed from the daemon, or a write in this
process) reaches the clients subscribed to its URI, and an added, deleted
or renamed document tells listeners the resource list changed. Nothing else
of the daemon's traffic ($/progress, embedding.progress) is forwarded.

Runs on: the MCP server's event loop; in-process writes report from worker threads.
"""

from __future__ import annotations

import json
import logging
from typing import Any
from urllib.parse import quote, unquote

import anyio
import anyio.abc
import anyio.from_thread
import anyio.lowlevel
import mcp_types as types
from mcp.server.subscriptions import InMemorySubscriptionBus
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ResourcesListChanged, ResourceUpdated

from ..connect import daemon_socket
from ..errors import DocumentNotFound
from .backend import BROWSE_LIMIT, Backend

log = logging.getLogger("autodoc.mcp")

SCHEME = "autodoc://"
INVALID_PARAMS = -32602
RETRY_S = 2.0


def uri(workspace: str, path: str) -> str:
    return f"{SCHEME}{workspace}/{quote(path, safe='/')}"


def parse_uri(text: str) -> tuple[str, str]:
    if not text.startswith(SCHEME) or "/" not in text[len(SCHEME) :]:
        raise DocumentNotFound(f"{text} is not a document URI: autodoc://<workspace>/<path>", {"uri": text})
    ws, _, path = text[len(SCHEME) :].partition("/")
    return ws, unquote(path)


async def list_resources(b: Backend, cursor: str | None = None, page: int = BROWSE_LIMIT) -> types.ListResourcesResult:
    """Every workspace's documents, a page (one search.query answer, at most BROWSE_LIMIT) at a
    time: the cursor names the workspace and the last path listed."""
    names = await b.workspaces()
    start, after = 0, None
    if cursor:
        try:
            ws, after = json.loads(cursor)
            start = names.index(ws)
        except (ValueError, TypeError):
            raise MCPError(INVALID_PARAMS, "cursor must be the nextCursor of the previous page") from None
    out = []
    for ws in names[start:]:
        docs = await b.documents(ws, limit=page, after=after)
        after = None
        for d in docs:
            out.append(
                types.Resource(
                    uri=uri(ws, d["path"]),
                    name=f"{ws}:{d['path']}",
                    title=d["title"],
                    mime_type="text/markdown",
                    size=d["byte_end"],
                )
            )
        if len(docs) == page:  # maybe more behind it
            return types.ListResourcesResult(resources=out, ttl_ms=0, next_cursor=json.dumps([ws, docs[-1]["path"]]))
    return types.ListResourcesResult(resources=out, ttl_ms=0)


def templates() -> types.ListResourceTemplatesResult:
    return types.ListResourceTemplatesResult(
        resource_templates=[
            types.ResourceTemplate(
                name="document",
                uri_template=SCHEME + "{workspace}/{+path}",
                mime_type="text/markdown",
                description="A Markdown document of a workspace, by its path relative to the workspace root.",
            )
        ],
        ttl_ms=0,
    )


async def read_resource(b: Backend, text: str) -> types.ReadResourceResult:
    ws, path = parse_uri(text)
    doc = await b.call("document.read", [ws, path])
    return types.ReadResourceResult(
        contents=[types.TextResourceContents(uri=text, mime_type="text/markdown", text=doc["text"])], ttl_ms=0
    )


class ChangeFeed:
    """The store's changes, fanned out to subscribed MCP clients."""

    def __init__(self, backend: Backend):
        self.backend = backend
        self.bus = InMemorySubscriptionBus()
        # handshake-era connection → (a session to send on, the URIs it subscribed to); a session
        # is a per-request proxy, its connection is what lasts
        self._legacy: dict[Any, tuple[Any, set[str]]] = {}
        self._token: Any = None

    def subscribe(self, session: Any, text: str) -> None:
        key = getattr(session, "_connection", session)
        self._legacy.setdefault(key, (session, set()))[1].add(text)

    def unsubscribe(self, session: Any, text: str) -> None:
        self._legacy.get(getattr(session, "_connection", session), (None, set()))[1].discard(text)

    async def publish(self, workspace: str, changes: list[dict[str, Any]]) -> None:
        listed = False
        for c in changes:
            uris = [uri(workspace, c["path"])] + ([uri(workspace, c["old_path"])] if c.get("old_path") else [])
            for u in uris:
                await self.bus.publish(ResourceUpdated(uri=u))
                for key, (session, subs) in list(self._legacy.items()):
                    if u in subs:
                        try:
                            await session.send_resource_updated(u)
                        except Exception:  # the client left: forget it
                            self._legacy.pop(key, None)
            listed = listed or c["op"] in ("add", "delete", "rename")
        if listed:
            await self.bus.publish(ResourcesListChanged())

    def _from_thread(self, workspace: str, changes: list[dict[str, Any]]) -> None:
        """An in-process write's changes (on the writer's worker thread)."""
        if self._token is None:
            return
        try:
            anyio.from_thread.run(self.publish, workspace, changes, token=self._token)
        except Exception:  # the loop is closing: nobody is left to tell
            log.debug("could not publish changes", exc_info=True)

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Follow the daemon's changes while one serves the store (in-process writes report
        themselves); reconnect when it comes back."""
        self._token = anyio.lowlevel.current_token()
        self.backend.on_local_changes(self._from_thread)
        task_status.started()
        from autodoc_client import Client, Notification

        while True:
            sock = await anyio.to_thread.run_sync(daemon_socket, self.backend.settings)
            if sock is None:
                await anyio.sleep(RETRY_S)
                continue
            try:
                send, recv = anyio.create_memory_object_stream[Notification](1000)

                def handler(note: Notification) -> None:
                    if note.method == "changes.changed":
                        try:
                            send.send_nowait(note)
                        except anyio.WouldBlock:  # best-effort, as the daemon's own pushes are
                            pass

                async with await Client.connect_socket(sock) as client:
                    client.on_notification(handler)
                    await client.call("changes.subscribe", [None])
                    log.info("following the daemon's changes on %s", sock)
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(self._forward, recv)
                        await client.listen()
                        tg.cancel_scope.cancel()
            except OSError as e:
                log.debug("the change feed lost the daemon: %s", e)
            except Exception:
                log.warning("the change feed failed; retrying", exc_info=True)
            await anyio.sleep(RETRY_S)

    async def _forward(self, recv: Any) -> None:
        async for note in recv:
            p = note.params or {}
            await self.publish(p.get("workspace", ""), p.get("changes") or [])
