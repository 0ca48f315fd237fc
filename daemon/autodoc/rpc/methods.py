"""RPC stage, the methods: the method table (api.py) as RPC handlers.

Input: a RequestContext and named params already checked against
schemas/<method>.params.json. Output: the Service's JSON-safe answer.

Each row's handler is the same: route the call (rpc/route.py decides, from the
row, where it runs: the writer slot, a reader process, the event loop or a
worker thread), then, for a row with ``announce``, tell the workspace's
subscribers (on a shared PostgreSQL store the change feed tells them instead,
peers.py). Only the rows marked ``own`` (the process, the connection) have a
handler of their own here. An index run's progress callback checks for
cancellation between files (then answers -32800) and sends ``$/progress``.

Runs on: the event loop (the calls where rpc/route.py puts them).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

from ..api import METHODS, Method
from ..suggest import workspace_not_found
from .dispatch import CANCEL_METHOD, Handler, RequestContext
from .route import Router

log = logging.getLogger("autodoc.rpc")

PROGRESS_EVERY_S = 0.05


class App(Protocol):
    """What the methods need from the server that hosts them."""

    service: Any
    socket_path: Any
    watching: list[str]

    def request_shutdown(self, reason: str) -> None: ...

    def workspaces_changed(self) -> None: ...

    def run_in_loop(self, fn: Callable[..., Any], *args: Any) -> None: ...

    def broadcast(self, workspace: str, method: str, params: Any) -> None: ...


class Methods:
    def __init__(self, app: App, route: Router):
        self.app = app
        self.route = route
        self.service = app.service
        # a shared PostgreSQL store's change feed tells this daemon's subscribers of every workspace
        # change, its own too, once whatever order two daemons' changes land in (peers.py); telling
        # here as well would double it. Without a feed (SQLite) the method is the teller.
        self._announces = not getattr(getattr(self.service, "peers", None), "tells_workspaces", False)

    def _own(self) -> dict[str, Handler]:
        """The handlers of the rows marked ``own`` (about the process or the connection)."""
        return {
            "server.info": self.server_info,
            "server.shutdown": self.server_shutdown,
            "changes.subscribe": self.changes_subscribe,
            "changes.unsubscribe": self.changes_unsubscribe,
            CANCEL_METHOD: self.cancel_request,
        }

    def handlers(self) -> dict[str, Handler]:
        own = self._own()
        assert set(own) == {m.name for m in METHODS.values() if m.own}, "an own row without its handler"
        return {name: own[name] if m.own else self._handler(m) for name, m in METHODS.items()}

    def _handler(self, m: Method) -> Handler:
        route = self.route.run

        async def handle(ctx: RequestContext, p: dict) -> Any:
            progress = self._progress(ctx, p["workspace"]) if m.progress else None
            result = await route(m, ctx, p, progress)
            if m.announce is not None and self._announces:
                announce(self.app, m.announce, result)
            return result

        return handle

    # -- server -----------------------------------------------------------------

    async def server_info(self, ctx: RequestContext, p: dict) -> dict:
        info = dict(await self.route.peer_read(ctx, self.service.info))
        info["socket"] = str(self.app.socket_path) if self.app.socket_path else None
        info["watching"] = list(self.app.watching)
        return info

    async def server_shutdown(self, ctx: RequestContext, p: dict) -> dict:
        self.app.request_shutdown("server.shutdown was called")
        return {"shutting_down": True}

    # -- workspaces ---------------------------------------------------------------

    def _progress(self, ctx: RequestContext, workspace: str) -> Callable[[int, int, str], None]:
        """A progress callback for an index run (called from its thread):
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
            params = {
                "token": token,
                "workspace": workspace,
                "done": int(done),
                "total": int(total),
                "message": str(message or ""),
            }
            self.app.run_in_loop(ctx.peer.notify_nowait, "$/progress", params)

        return progress

    # -- changes ----------------------------------------------------------------------

    async def changes_subscribe(self, ctx: RequestContext, p: dict) -> dict:
        name = p.get("workspace")
        sub = ctx.peer.subscription
        if name is None:
            sub.all = True
        else:
            listed = await self.route.read(self.service.workspace_list)
            if name not in {w["name"] for w in listed["workspaces"]}:
                raise workspace_not_found(name, [w["name"] for w in listed["workspaces"]])
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


def announce(app: App, op: str, result: dict) -> None:
    """Tell subscribed clients a workspace came, went or changed its configuration or its root, so an
    open picker can re-run its query and a client showing the root shows the new one: after a
    `workspace.*` method here (its answer), or, on a shared PostgreSQL store, when the change feed
    read what any daemon sharing it changed, this one included (peers.py)."""
    if op in ("added", "removed", "configured"):  # configured: its `markdown` option may watch other folders
        app.workspaces_changed()
    workspace = result["removed"] if op == "removed" else result["name"]
    config, root = (None, None) if op == "removed" else (result["config"], result["root"])
    params = {"workspace": workspace, "op": op, "config": config, "root": root}
    app.broadcast(workspace, "workspace.changed", params)
