"""RPC stage, the route: where each call runs, decided in one place from the method's
own row in api.py's table (its ``write``, ``progress``, ``pooled``, ``cancellable`` and
``own`` fields).

The places a call can run, and who picks them:

- the writer slot (``write``): one worker thread at a time, behind ``writer``; shielded,
  so a write that started answers with its real result even when cancelled. An index
  run (``progress``) is not shielded: a cancel reaches it through its progress callback.
- a reader process (``pooled``, readers/pool.py, the ``Offload`` handed in): a search,
  once the daemon is busy and the pool up; back on a daemon thread when the reader
  cannot (NotInReader) or dies (ReaderGone).
- the event loop itself: a read whose kind is known to be quick while the daemon is
  idle (rpc/inline.py's rule), and the quick lane's reads (rpc/quick.py, ``lane_reads``).
- a worker thread behind ``readers`` and the connection's share of them: every other
  read, abandoned when cancelled (a ``cancellable`` one also gets its ``cancel`` Event).

Every read and write counts itself in ``InlineReads.running`` while it runs or waits
(``inline.counting``), so that nothing runs on the loop while it does.

Input: a method's row, its request context and its bound params. Output: the call's
result, or what it raised.

Runs on: the event loop; the calls on the threads and processes named above.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from ..api import METHODS, Method
from .inline import InlineReads, read_kind
from .quick import LaneRead

if TYPE_CHECKING:
    from .dispatch import InFlight, RequestContext

log = logging.getLogger("autodoc.rpc")

Progress = Callable[[int, int, str], None]


class ReaderGone(Exception):
    """The reader running a call exited before answering it."""


class NotInReader(ReaderGone):
    """The reader cannot run this call without a private copy of vectors it may not
    make (readers/shared_vectors.py; search/semantic/vector_cache.py NotShared): the daemon runs
    it, as for a dead reader, and shares anew the vectors ``key`` (workspace id,
    fingerprint) names."""

    def __init__(self, message: str, key: tuple[int, str] | None):
        super().__init__(message)
        self.key = key


class Offload(Protocol):
    """Processes that may run a read instead of the daemon (readers/pool.py ReaderPool)."""

    @property
    def ready(self) -> bool: ...

    def want(self) -> None: ...

    def serves(self, method: str, params: Any) -> bool: ...

    def overlaps_in_daemon(self, method: str, params: dict) -> bool: ...

    def share_anew(self, key: tuple[int, str] | None) -> None: ...

    async def call(self, method: str, params: dict, inflight: InFlight | None) -> tuple[Any, float]: ...


class Router:
    def __init__(
        self,
        service: Any,
        *,
        readers: anyio.CapacityLimiter,
        writer: anyio.CapacityLimiter,
        inline: InlineReads | None = None,
        pool: Offload | None = None,
    ):
        self.service = service
        self.readers = readers  # the daemon's worker threads for reads
        self.writer = writer  # the one writer slot
        self.inline = inline  # quick reads on the loop while nothing else runs (rpc/inline.py)
        self.pool = pool  # the reader processes (readers/pool.py)
        self.counting: contextlib.AbstractContextManager[Any] = (
            inline.counting if inline is not None else contextlib.nullcontext()
        )

    # -- the one decision ----------------------------------------------------------------

    async def run(self, m: Method, ctx: RequestContext, p: dict, progress: Progress | None = None) -> Any:
        """Run a row's call where its policy says (the module's docstring)."""
        call = m.call
        assert call is not None, f"{m.name} needs a handler of its own"
        if m.progress:
            return await self.write_unshielded(partial(call, self.service, p, progress=progress))
        ctx.data["kind"] = read_kind(m.name, p)
        if m.write:
            return await self.write(call, self.service, p)
        if m.pooled and self.pool is not None and self.pool.serves(m.name, p):
            return await self.pooled(ctx, m, p)
        if m.cancellable and ctx.inflight is not None:
            # The thread is abandoned when cancelled; this flag lets it stop
            # its own work (a rerank, say) instead of finishing unseen.
            return await self.peer_read(ctx, call, self.service, p, cancel=ctx.inflight.cancelled)
        return await self.peer_read(ctx, call, self.service, p)

    def lane_reads(self) -> dict[str, LaneRead]:
        """The reads the quick lane (rpc/quick.py) may answer: the plain reads (api.py
        ``Method.plain_read``: no writer slot, no progress, no handler of their own)."""
        return {
            name: LaneRead(partial(m.call, self.service), m.cancellable, partial(self.stays_here, m, busy=False))
            for name, m in METHODS.items()
            if m.call is not None and m.plain_read
        }

    # -- where a call runs -----------------------------------------------------------------

    async def read(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """On a worker thread behind the readers, abandoned when cancelled."""
        with self.counting:
            return await anyio.to_thread.run_sync(
                partial(fn, *args, **kwargs), limiter=self.readers, abandon_on_cancel=True
            )

    async def peer_read(self, ctx: RequestContext, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``read`` within the connection's own share of the readers (connection.py,
        "Fair shares"); or, for a read known to be quick when the daemon is idle, on the
        event loop itself (rpc/inline.py)."""
        inline = self.inline
        if inline is None:
            return await self._on_thread(ctx, partial(fn, *args, **kwargs))
        kind = ctx.data.get("kind", ctx.method)
        here = inline.may_run(kind)  # asked before this read counts as running
        with self.counting:
            if here:
                return inline.measured(kind, fn, *args, **kwargs)
            return await self._on_thread(ctx, partial(inline.measured, kind, fn, *args, **kwargs))

    async def _on_thread(self, ctx: RequestContext, call: Callable[[], Any]) -> Any:
        share = getattr(ctx.peer, "reads", None)
        if share is None:
            return await anyio.to_thread.run_sync(call, limiter=self.readers, abandon_on_cancel=True)
        async with share:
            return await anyio.to_thread.run_sync(call, limiter=self.readers, abandon_on_cancel=True)

    async def write(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Wait (cancellably) for the writer slot, then run to the end, shielded."""
        with self.counting:
            async with self.writer:
                with anyio.CancelScope(shield=True):
                    return await anyio.to_thread.run_sync(partial(fn, *args, **kwargs))

    async def write_unshielded(self, call: Callable[[], Any]) -> Any:
        """The writer slot for an index run: not shielded and not abandoned, a cancel
        reaches the run through its progress callback, which raises between files."""
        with self.counting:
            async with self.writer:
                return await anyio.to_thread.run_sync(call)

    async def pooled(self, ctx: RequestContext, m: Method, p: dict) -> Any:
        """A search in a reader process when its readers are up and the daemon is busy;
        inline when it is idle and the search known to be quick; else on a daemon thread,
        as without a pool (and when a reader dies under it)."""
        pool, inline = self.pool, self.inline
        assert pool is not None and m.call is not None
        kind = ctx.data.get("kind", m.name)
        cancel = {"cancel": ctx.inflight.cancelled} if m.cancellable and ctx.inflight is not None else {}
        busy = inline is not None and (bool(inline.running) or inline.admitted > 1)
        if (inline is not None and inline.may_run(kind)) or self.stays_here(m, p, busy=busy):
            if busy:
                pool.want()
            return await self.peer_read(ctx, m.call, self.service, p, **cancel)
        share = getattr(ctx.peer, "reads", None)
        with self.counting:
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
                await anyio.to_thread.run_sync(pool.share_anew, exc.key)
            except ReaderGone as exc:
                log.warning("%s: %s; running it in the daemon", m.name, exc)
            else:
                if inline is not None:
                    inline.record(kind, cpu, time.perf_counter() - t0)
                return result
        return await self.peer_read(ctx, m.call, self.service, p, **cancel)

    def stays_here(self, m: Method, p: dict, *, busy: bool) -> bool:
        """Whether the daemon runs this read itself rather than in a reader process: no pool
        up, not a pooled method, or (the daemon otherwise idle) a search whose legs it overlaps."""
        pool = self.pool
        return (
            pool is None
            or not m.pooled
            or not pool.ready
            or not pool.serves(m.name, p)
            or (not busy and pool.overlaps_in_daemon(m.name, p))
        )
