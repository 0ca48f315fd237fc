"""RPC stage, the methods: thin adapters from checked params to Service calls.

Input: a RequestContext and named params already checked against
schemas/<method>.params.json. Output: the Service's JSON-safe answer.

Every Service call runs in a worker thread behind a named capacity limiter:
reads (search, read, links, backlinks, problems, status, list, changes) on
``app.readers`` and may be abandoned when cancelled; writes (workspace.add/remove/configure/section_size,
index runs, the live index) on the single-slot ``app.writer``. A write that
has started finishes and answers with its real result even when cancelled,
except an index run, which polls for cancellation between files (through its
progress callback) and then answers -32800.
"""

from __future__ import annotations

import functools
import inspect
import time
from functools import partial
from typing import Any, Callable, Protocol

import anyio

from ..errors import WorkspaceNotFound
from .dispatch import CANCEL_METHOD, Handler, RequestContext

PROGRESS_EVERY_S = 0.05


class App(Protocol):
    """What the methods need from the server that hosts them."""

    service: Any
    readers: anyio.CapacityLimiter
    writer: anyio.CapacityLimiter
    socket_path: Any

    def request_shutdown(self, reason: str) -> None: ...

    def workspaces_changed(self) -> None: ...

    def run_in_loop(self, fn: Callable[..., Any], *args: Any) -> None: ...

    def broadcast(self, workspace: str, method: str, params: Any) -> None: ...


async def run_read(app: App, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    return await anyio.to_thread.run_sync(partial(fn, *args, **kwargs), limiter=app.readers, abandon_on_cancel=True)


async def run_write(app: App, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Wait (cancellably) for the writer slot, then run to the end, shielded."""
    async with app.writer:
        with anyio.CancelScope(shield=True):
            return await anyio.to_thread.run_sync(partial(fn, *args, **kwargs))


@functools.lru_cache(maxsize=64)
def _accepts_cached(fn: Any, name: str) -> bool:
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _accepts(method: Any, name: str) -> bool:
    return _accepts_cached(getattr(method, "__func__", method), name)


class Methods:
    def __init__(self, app: App):
        self.app = app
        self.service = app.service

    def handlers(self) -> dict[str, Handler]:
        return {
            "server.info": self.server_info,
            "server.shutdown": self.server_shutdown,
            "workspace.add": self.workspace_add,
            "workspace.remove": self.workspace_remove,
            "workspace.list": self.workspace_list,
            "workspace.configure": self.workspace_configure,
            "workspace.section_size": self.workspace_section_size,
            "workspace.status": self.workspace_status,
            "workspace.tags": self.workspace_tags,
            "workspace.reindex": self.workspace_reindex,
            "workspace.index": self.workspace_index,
            "search.query": self.search_query,
            "document.read": self.document_read,
            "document.links": self.document_links,
            "document.backlinks": self.document_backlinks,
            "document.problems": self.document_problems,
            "changes.since": self.changes_since,
            "changes.subscribe": self.changes_subscribe,
            "changes.unsubscribe": self.changes_unsubscribe,
            CANCEL_METHOD: self.cancel_request,
        }

    # -- server -----------------------------------------------------------------

    async def server_info(self, ctx: RequestContext, p: dict) -> dict:
        info = dict(await run_read(self.app, self.service.info))
        info["socket"] = str(self.app.socket_path) if self.app.socket_path else None
        info["watching"] = list(getattr(self.app, "watching", []))
        return info

    async def server_shutdown(self, ctx: RequestContext, p: dict) -> dict:
        self.app.request_shutdown("server.shutdown was called")
        return {"shutting_down": True}

    # -- workspaces ---------------------------------------------------------------

    def _announce(self, workspace: str, op: str, config: dict | None) -> None:
        """Tell subscribed clients a workspace came, went or changed its
        configuration, so an open picker can re-run its query."""
        self.app.broadcast(workspace, "workspace.changed", {"workspace": workspace, "op": op, "config": config})

    async def workspace_add(self, ctx: RequestContext, p: dict) -> dict:
        result = await run_write(self.app, self.service.workspace_add, p["name"], p["root"], p.get("config"))
        self.app.workspaces_changed()
        self._announce(result["name"], "added", result["config"])
        return result

    async def workspace_remove(self, ctx: RequestContext, p: dict) -> dict:
        result = await run_write(self.app, self.service.workspace_remove, p["name"])
        self.app.workspaces_changed()
        self._announce(result["removed"], "removed", None)
        return result

    async def workspace_list(self, ctx: RequestContext, p: dict) -> dict:
        return await run_read(self.app, self.service.workspace_list)

    async def workspace_configure(self, ctx: RequestContext, p: dict) -> dict:
        result = await run_write(self.app, self.service.workspace_configure, p["workspace"], p["options"])
        self._announce(result["name"], "configured", result["config"])
        return result

    async def workspace_section_size(self, ctx: RequestContext, p: dict) -> dict:
        result = await run_write(self.app, self.service.workspace_section_size, p["workspace"], p["tokens"])
        self._announce(result["name"], "configured", result["config"])
        return result

    async def workspace_status(self, ctx: RequestContext, p: dict) -> dict:
        return await run_read(self.app, self.service.workspace_status, p["workspace"])

    async def workspace_tags(self, ctx: RequestContext, p: dict) -> dict:
        return await run_read(self.app, self.service.workspace_tags, p["workspace"], p.get("prefix"),
                              p.get("limit", 1000))

    async def workspace_reindex(self, ctx: RequestContext, p: dict) -> dict:
        return await self._index(ctx, p["workspace"], full=True)

    async def workspace_index(self, ctx: RequestContext, p: dict) -> dict:
        return await self._index(ctx, p["workspace"], full=False)

    async def _index(self, ctx: RequestContext, workspace: str, *, full: bool) -> dict:
        progress = self._progress(ctx, workspace)
        async with self.app.writer:
            # Not shielded and not abandoned: a cancel reaches the run through
            # its progress callback, which raises between files.
            return await anyio.to_thread.run_sync(
                partial(self.service.index, workspace, full=full, progress=progress)
            )

    def _progress(self, ctx: RequestContext, workspace: str) -> Callable[[int, int, str], None]:
        """A progress callback for Service.index (called from the index thread):
        checks for cancellation, and sends $/progress at most every 50 ms (the
        first and the last always)."""
        inflight = ctx.inflight
        token = None if ctx.is_notification else ctx.id
        last = [0.0]

        def progress(done: int, total: int, message: str = "") -> None:
            if inflight is not None and inflight.cancelled.is_set():
                raise inflight.error()
            if token is None:
                return
            now = time.monotonic()
            if done not in (0, total) and now - last[0] < PROGRESS_EVERY_S:
                return
            last[0] = now
            params = {"token": token, "workspace": workspace, "done": int(done), "total": int(total),
                      "message": str(message or "")}
            self.app.run_in_loop(ctx.peer.notify_nowait, "$/progress", params)

        return progress

    # -- search and documents ---------------------------------------------------------

    async def search_query(self, ctx: RequestContext, p: dict) -> dict:
        extra = {}
        if ctx.inflight is not None and _accepts(self.service.search, "cancel"):
            # The search thread is abandoned when cancelled; this flag lets it
            # stop its own work (a rerank, say) instead of finishing unseen.
            extra["cancel"] = ctx.inflight.cancelled
        return await run_read(self.app, self.service.search, p["workspace"], p["query"], p.get("opts"), **extra)

    async def document_read(self, ctx: RequestContext, p: dict) -> dict:
        return await run_read(self.app, self.service.document_read, p["workspace"], p["path"], p.get("opts"))

    async def document_links(self, ctx: RequestContext, p: dict) -> dict:
        return await run_read(self.app, self.service.document_links, p["workspace"], p["path"])

    async def document_backlinks(self, ctx: RequestContext, p: dict) -> dict:
        return await run_read(self.app, self.service.document_backlinks, p["workspace"], p["path"])

    async def document_problems(self, ctx: RequestContext, p: dict) -> dict:
        return await run_read(self.app, self.service.document_problems, p["workspace"], p.get("path"))

    # -- changes ----------------------------------------------------------------------

    async def changes_since(self, ctx: RequestContext, p: dict) -> dict:
        return await run_read(
            self.app, self.service.changes_since, p["workspace"], p["cursor"], p.get("limit", 1000)
        )

    async def changes_subscribe(self, ctx: RequestContext, p: dict) -> dict:
        name = p.get("workspace")
        sub = ctx.peer.subscription
        if name is None:
            sub.all = True
        else:
            listed = await run_read(self.app, self.service.workspace_list)
            if name not in {w["name"] for w in listed["workspaces"]}:
                raise WorkspaceNotFound(f"no workspace named {name!r}", {"workspace": name})
            sub.names.add(name)
        return sub.to_json()

    async def changes_unsubscribe(self, ctx: RequestContext, p: dict) -> dict:
        sub = ctx.peer.subscription
        sub.all = False
        sub.names.clear()
        return sub.to_json()

    async def cancel_request(self, ctx: RequestContext, p: dict) -> None:
        # Usually handled by the connection as soon as the frame is read; this
        # path answers the rare client that sends it as a request.
        ctx.peer.cancel_request(p["id"])
        return None

