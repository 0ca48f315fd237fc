"""RPC stage, the methods: the method table (api.py) as RPC handlers.

Input: a RequestContext and named params already checked against
schemas/<method>.params.json. Output: the Service's JSON-safe answer.

Runs on: the event loop; every Service call runs in a worker thread behind a
named capacity limiter (except a read known to be quick while the daemon is
idle, which runs on the loop: rpc/inline.py):
reads (search, read, links, backlinks, problems, status, list, changes) on
``app.readers`` and may be abandoned when cancelled; writes (workspace.add/remove/configure/section_size,
index runs, the live index) on the single-slot ``app.writer``. A write that
has started finishes and answers with its real result even when cancelled,
except an index run, which polls for cancellation between files (through its
progress callback) and then answers -32800.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from functools import partial
from typing import Any, Protocol

import anyio

from ..api import METHODS, Method
from ..readers.pool import NotInReader, ReaderGone, ReaderPool
from ..search.options import stages_of
from ..suggest import workspace_not_found
from .dispatch import CANCEL_METHOD, Handler, RequestContext
from .inline import InlineReads, read_kind
from .quick import LaneRead

log = logging.getLogger("autodoc.rpc")

PROGRESS_EVERY_S = 0.05


class App(Protocol):
    """What the methods need from the server that hosts them."""

    service: Any
    readers: anyio.CapacityLimiter
    writer: anyio.CapacityLimiter
    socket_path: Any
    watching: list[str]

    def request_shutdown(self, reason: str) -> None: ...

    def workspaces_changed(self) -> None: ...

    def run_in_loop(self, fn: Callable[..., Any], *args: Any) -> None: ...

    def broadcast(self, workspace: str, method: str, params: Any) -> None: ...


async def run_read(app: App, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    inline = _inline(app)
    if inline is None:
        return await anyio.to_thread.run_sync(partial(fn, *args, **kwargs), limiter=app.readers, abandon_on_cancel=True)
    inline.running += 1
    try:
        return await anyio.to_thread.run_sync(partial(fn, *args, **kwargs), limiter=app.readers, abandon_on_cancel=True)
    finally:
        inline.running -= 1


async def run_peer_read(app: App, ctx: RequestContext, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """run_read within the connection's own share of the readers (connection.py,
    "Fair shares"); or, for a read known to be quick when the daemon is idle,
    on the event loop itself (rpc/inline.py)."""
    inline = _inline(app)
    if inline is None:
        return await _peer_read(app, ctx, partial(fn, *args, **kwargs))
    kind = ctx.data.get("kind", ctx.method)
    here = inline.may_run(kind)  # asked before this read counts as running
    inline.running += 1
    try:
        if here:
            return inline.measured(kind, fn, *args, **kwargs)
        return await _peer_read(app, ctx, partial(inline.measured, kind, fn, *args, **kwargs))
    finally:
        inline.running -= 1


async def _peer_read(app: App, ctx: RequestContext, call: Callable[[], Any]) -> Any:
    share = getattr(ctx.peer, "reads", None)
    if share is None:
        return await anyio.to_thread.run_sync(call, limiter=app.readers, abandon_on_cancel=True)
    async with share:
        return await anyio.to_thread.run_sync(call, limiter=app.readers, abandon_on_cancel=True)


async def run_write(app: App, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Wait (cancellably) for the writer slot, then run to the end, shielded."""
    inline = _inline(app)
    if inline is not None:
        inline.running += 1
    try:
        async with app.writer:
            with anyio.CancelScope(shield=True):
                return await anyio.to_thread.run_sync(partial(fn, *args, **kwargs))
    finally:
        if inline is not None:
            inline.running -= 1


def _inline(app: App) -> InlineReads | None:
    return getattr(app, "inline", None)


def _pool(app: App) -> ReaderPool | None:
    return getattr(app, "pool", None)


async def run_pooled(app: App, ctx: RequestContext, m: Method, p: dict) -> Any:
    """A search in a reader process (rpc/pool.py) when its readers are up and the
    daemon is busy; inline when it is idle and the search known to be quick; else on
    a daemon thread, as without a pool (and when a reader dies under it)."""
    pool, inline = _pool(app), _inline(app)
    kind = ctx.data.get("kind", m.name)
    cancel = {"cancel": ctx.inflight.cancelled} if m.cancellable and ctx.inflight is not None else {}
    busy = inline is not None and (inline.running or inline.admitted > 1)
    if (inline is not None and inline.may_run(kind)) or stays_here(app, m, p, busy=busy):
        if busy and pool is not None:
            pool.want()
        return await run_peer_read(app, ctx, m.call, app.service, p, **cancel)
    share = getattr(ctx.peer, "reads", None)
    if inline is not None:
        inline.running += 1
    try:
        t0 = time.perf_counter()
        try:
            if share is None:
                result, cpu = await pool.call(m.name, p, ctx.inflight)
            else:
                async with share:
                    result, cpu = await pool.call(m.name, p, ctx.inflight)
        except NotInReader as exc:
            # routine (a base not shared yet, or outgrown): the daemon's own run shares it anew
            log.debug("%s: %s; running it in the daemon", m.name, exc)
            # off the loop: the cache's lock is held while a base is written, and the recheck
            # may count the store's chunks
            await anyio.to_thread.run_sync(_share_anew, app, pool, exc.key)
        except ReaderGone as exc:
            log.warning("%s: %s; running it in the daemon", m.name, exc)
        else:
            if inline is not None:
                inline.record(kind, cpu, time.perf_counter() - t0)
            return result
    finally:
        if inline is not None:
            inline.running -= 1
    return await run_peer_read(app, ctx, m.call, app.service, p, **cancel)


def _share_anew(app: App, pool: ReaderPool, key: tuple[int, str] | None) -> None:
    """After a reader's "not here": the daemon shares those vectors anew, and the pool looks
    again at whether semantic searches may go to the readers."""
    if key is not None:
        app.service.vectors.reshare(*key)
    pool.recheck()


def stays_here(app: App, m: Method, p: dict, *, busy: bool) -> bool:
    """Whether the daemon runs this read itself rather than in a reader process: no pool
    up, not a pooled method, or (the daemon otherwise idle) a search whose legs it overlaps."""
    pool = _pool(app)
    return pool is None or not pool.ready or not pool.serves(m.name, p) or (not busy and _overlaps_here(app, m, p))


def _overlaps_here(app: App, m: Method, p: dict) -> bool:
    """A search with both legs, while the daemon has nothing else to do, runs in the daemon:
    its lexical helper (search/legproc.py) runs the lexical leg beside the semantic one, where a
    reader runs one after the other (readers have no helper: they are the cores' processes).
    At 100k chunks a lone hybrid search took 27 ms in a reader against 17 ms in the daemon."""
    helper = getattr(app.service, "lexical_helper", None)
    if m.name != "search.query" or helper is None or not helper.usable:
        return False
    opts = p.get("opts")
    stages = stages_of(opts if isinstance(opts, dict) else {})
    return "lexical" in stages and "semantic" in stages


# what a client subscribed to the workspace hears after each workspace write
_ANNOUNCE = {
    "workspace.add": "added",
    "workspace.remove": "removed",
    "workspace.configure": "configured",
    "workspace.section_size": "configured",
}


class Methods:
    def __init__(self, app: App):
        self.app = app
        self.service = app.service

    def _special(self) -> dict[str, Handler]:
        """The methods with a handler of their own (about the process or the connection)."""
        return {
            "server.info": self.server_info,
            "server.shutdown": self.server_shutdown,
            "changes.subscribe": self.changes_subscribe,
            "changes.unsubscribe": self.changes_unsubscribe,
            CANCEL_METHOD: self.cancel_request,
        }

    def handlers(self) -> dict[str, Handler]:
        special = self._special()
        return {name: special.get(name) or self._handler(m) for name, m in METHODS.items()}

    def quick_reads(self) -> dict[str, LaneRead]:
        """The reads the quick lane (rpc/quick.py) may answer: those whose handler only
        routes the call (no writer slot, no progress, no connection state)."""
        special = self._special()
        return {
            name: LaneRead(partial(m.call, self.service), m.cancellable, partial(stays_here, self.app, m, busy=False))
            for name, m in METHODS.items()
            if m.call is not None and not m.write and not m.progress and name not in special
        }

    def _handler(self, m: Method) -> Handler:
        assert m.call is not None, f"{m.name} needs a handler of its own"
        call = m.call

        async def handle(ctx: RequestContext, p: dict) -> Any:
            if m.progress:
                return await self._run_with_progress(ctx, call, p)
            ctx.data["kind"] = read_kind(m.name, p)
            if m.write:
                result = await run_write(self.app, call, self.service, p)
            elif _pool(self.app) is not None and _pool(self.app).serves(m.name, p):
                result = await run_pooled(self.app, ctx, m, p)
            elif m.cancellable and ctx.inflight is not None:
                # The thread is abandoned when cancelled; this flag lets it stop
                # its own work (a rerank, say) instead of finishing unseen.
                result = await run_peer_read(self.app, ctx, call, self.service, p, cancel=ctx.inflight.cancelled)
            else:
                result = await run_peer_read(self.app, ctx, call, self.service, p)
            if m.name in _ANNOUNCE:
                self._announce(m.name, result)
            return result

        return handle

    # -- server -----------------------------------------------------------------

    async def server_info(self, ctx: RequestContext, p: dict) -> dict:
        info = dict(await run_peer_read(self.app, ctx, self.service.info))
        info["socket"] = str(self.app.socket_path) if self.app.socket_path else None
        info["watching"] = list(self.app.watching)
        return info

    async def server_shutdown(self, ctx: RequestContext, p: dict) -> dict:
        self.app.request_shutdown("server.shutdown was called")
        return {"shutting_down": True}

    # -- workspaces ---------------------------------------------------------------

    def _announce(self, method: str, result: dict) -> None:
        """Tell subscribed clients a workspace came, went or changed its
        configuration, so an open picker can re-run its query."""
        op = _ANNOUNCE[method]
        if op in ("added", "removed"):
            self.app.workspaces_changed()
        workspace = result["removed"] if op == "removed" else result["name"]
        config = None if op == "removed" else result["config"]
        self.app.broadcast(workspace, "workspace.changed", {"workspace": workspace, "op": op, "config": config})

    async def _run_with_progress(self, ctx: RequestContext, call: Any, p: dict) -> dict:
        progress = self._progress(ctx, p["workspace"])
        inline = _inline(self.app)
        if inline is not None:
            inline.running += 1
        try:
            async with self.app.writer:
                # Not shielded and not abandoned: a cancel reaches the run through
                # its progress callback, which raises between files.
                return await anyio.to_thread.run_sync(partial(call, self.service, p, progress=progress))
        finally:
            if inline is not None:
                inline.running -= 1

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
            listed = await run_read(self.app, self.service.workspace_list)
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
