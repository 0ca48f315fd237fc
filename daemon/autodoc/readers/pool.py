"""The reader pool: searches run in reader processes (readers/reader.py),
one per core, so that several clients use several cores.

A search is 70-82 % Python under the GIL (docs/benchmarks/daemon_overhead.md):
in threads, 8 clients got 1.2-1.5x one client's requests/s on 2 cores. The
daemon process keeps the writer, the live index, the embed queue and every
connection; it hands a search's method and checked params to a free reader and
answers with what comes back (the same result or the same error: the reader
runs the same method table on a read-only Service of the same store).

Input: a read method and its params, from rpc/route.py. Output: its result,
or an AutodocError raised as the reader raised it.

When it runs, and when today's path stays:

- One reader per core by default (``AUTODOC_READERS``: ``auto``, a number, or
  ``0`` for none), see ``pool_size``.
- Started on demand: the first time a search arrives while another read or write
  is running (a lone client's searches never start it). Until its readers are up, and
  whenever none is, reads run on the daemon's threads as before; a quick read
  on an idle daemon still runs inline (rpc/inline.py) even with the pool up, and
  a lone search with both legs runs in the daemon, whose lexical helper overlaps
  them (search/lexical/legproc.py; readers have none: ``overlaps_in_daemon``).
- ``pooled`` rows of api.py's table only (search.query, search.similar); the other
  reads cost little and stay in the daemon.
- Memory: the daemon shares its vector bases with the readers
  (readers/shared_vectors.py: one copy in /dev/shm, mapped by every process);
  each reader keeps only its small delta. A reader with no base to borrow
  loads its own copy up to ``MAX_SHARED_ROWS`` chunks (≈ 300 MB of float16
  vectors at 384 dimensions); above that its call answers "not here"
  (NotShared) and the daemon runs it, loading and sharing the base as it
  does. Where nothing can be shared (no /dev/shm, or no room in it) only
  searches without a semantic stage go to the readers above
  ``MAX_SHARED_ROWS``; counted at the start and again after a write that
  changed vectors (at most every ``RECHECK_S``).
- A reader started after a base was shared hears of it at its start, with
  every document invalidated since (readers/invalidations.py), so it borrows like the others.

Correctness:

- Caches: the daemon's Service reports each invalidation of its own caches
  (``Service.on_invalidate``, after the write committed: a document's vectors,
  a workspace forgotten, a model's vectors dropped); each reader gets those made
  since its last call in the frame of its next call, ahead of the call, and a
  reader that holds calls gets them at once in a frame of their own (``_push``),
  so that a call queued behind another applies every write committed before it
  starts. Everything else a reader
  caches is keyed by the store's generation or FTS5's state (read from the
  call's own snapshot), so a save is searchable in a reader as soon as it is
  committed, as on a thread.
- A reader that dies (its socket closes) fails its call with ReaderGone; the
  caller runs that call on a daemon thread instead (reads are idempotent), so
  the client gets its answer, and a new reader is started. After
  ``MAX_DEATHS`` deaths within ``DEATH_WINDOW_S`` the pool stops and every
  read stays in the daemon. A cancelled call is answered at once; the reader
  is told (its search's ``cancel`` Event) and rejoins the free readers when it
  answers.
- Fairness: a connection's share of reads (connection.py) is taken before a
  reader; a call goes to the live reader with the fewest calls once one has a
  free slot (DEPTH: the call it runs and one queued), so two idle readers each
  get a call before either gets a second; calls waiting for a slot are served
  first come, first served.

Runs on: the event loop; ``invalidate`` from any thread (under a lock).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio

from ..api import METHODS
from ..config.settings import MAX_AUTO, reader_processes  # noqa: F401 (MAX_AUTO re-exported)
from ..rpc.route import NotInReader, ReaderGone
from ..search.options import stages_of
from ..store import workspaces as wsrows
from . import shared_vectors
from .channel import Reader
from .invalidations import SharedBases, compact_invalidations

if TYPE_CHECKING:
    from ..rpc.dispatch import InFlight

log = logging.getLogger("autodoc.rpc")

MAX_SHARED_ROWS = shared_vectors.PRIVATE_ROWS
RECHECK_S = 30.0  # at most this often, a write that changed vectors counts the store's chunks again
MAX_DEATHS = 5
DEATH_WINDOW_S = 60.0
MAX_INVALIDATIONS = 2000  # per reader, between two of its calls; more are compacted (compact_invalidations)
START_TIMEOUT_S = 60.0
# Calls a reader holds at once: the one it runs and one queued behind it (readers/reader.py reads
# frames on a thread of its own), so that a reader does not idle between two calls while the
# daemon's loop, busy with other frames, gets round to its reply and the next call. With one,
# readers idled ~30 % of the time under 8 clients (daemon_overhead.md, "Throughput with clients").
DEPTH = 2
DRAIN_S = 5.0  # at shutdown, how long the readers' running calls may take to answer


def pool_size() -> int:
    """How many readers (config/settings.py ``reader_processes``: ``AUTODOC_READERS``)."""
    return reader_processes()


class ReaderPool:
    def __init__(self, service: Any, size: int = 0):
        self.service = service
        self.size = size  # 0: no readers, every read stays in the daemon
        self.semantic = True  # whether searches with a semantic stage may go to the readers
        self.started = False  # run() was asked to start the readers
        self.stopped = False  # too many deaths, or shutdown: reads stay in the daemon
        self.readers: list[Reader] = []
        self.deaths: deque[float] = deque()
        self.calls = 0  # calls answered by a reader (tests and benchmarks read it)
        self._checked = 0.0  # when the store's size was last held against MAX_SHARED_ROWS
        self._workspace_ids: list[int] = []
        self._lock = threading.Lock()
        self._wanted = anyio.Event()
        self._bases = SharedBases()  # what a reader started later is told first (guarded by _lock)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._push_due = False  # a _push is scheduled on the loop (guarded by _lock)
        self._changed = anyio.Event()  # set (and replaced) when a slot frees, a reader comes or goes, or the pool stops
        service.on_invalidate = self.invalidate

    # -- routing ----------------------------------------------------------------------

    @property
    def ready(self) -> bool:
        return not self.stopped and any(r.alive for r in self.readers)

    def can_share(self) -> bool:
        """Whether vector bases can be shared with the readers here (/dev/shm: shared_vectors.py)."""
        return shared_vectors.available()

    def remove_stale_files(self) -> None:
        """Remove the shared vector files a killed daemon left in /dev/shm (blocking: a thread)."""
        shared_vectors.remove_stale()

    def want(self) -> None:
        """A read met another one: start the readers (once)."""
        if self.size and not self._wanted.is_set():
            self._wanted.set()

    def serves(self, method: str, params: Any) -> bool:
        m = METHODS.get(method)
        if not self.size or self.stopped or m is None or not m.pooled:
            return False
        if self.semantic:
            return True
        opts = params.get("opts") if isinstance(params, dict) else None
        stages = opts.get("stages") if isinstance(opts, dict) else None
        return method == "search.query" and isinstance(stages, list) and "semantic" not in stages

    def overlaps_in_daemon(self, method: str, params: dict) -> bool:
        """A search with both legs, while the daemon has nothing else to do, runs in the daemon:
        its lexical helper (search/lexical/legproc.py) runs the lexical leg beside the semantic one, where a
        reader runs one after the other (readers have no helper: they are the cores' processes).
        At 100k chunks a lone hybrid search took 27 ms in a reader against 17 ms in the daemon."""
        helper = getattr(self.service, "lexical_helper", None)
        if method != "search.query" or helper is None or not helper.usable:
            return False
        opts = params.get("opts")
        stages = stages_of(opts if isinstance(opts, dict) else {})
        return "lexical" in stages and "semantic" in stages

    def share_anew(self, key: tuple[int, str] | None) -> None:
        """After a reader's "not here" (on a worker thread): the daemon shares those vectors
        anew, and the pool looks again at whether semantic searches may go to the readers."""
        if key is not None:
            self.service.vectors.reshare(*key)
        self.recheck()

    def invalidate(self, *item: Any) -> None:
        """The daemon's Service changed its own caches (any thread): every reader hears it
        with its next call."""
        if item[0] == "vectors":
            self.recheck()
        with self._lock:
            self._bases.track(item)
            for r in self.readers:
                r.invalidations.append(item)
                if len(r.invalidations) > MAX_INVALIDATIONS:
                    r.invalidations = compact_invalidations(r.invalidations)
            # a reader holding calls hears of it now: one queued behind another starts later
            push = self._loop is not None and not self._push_due and any(r.waiting for r in self.readers)
            self._push_due = self._push_due or push
        if push:
            try:
                self._loop.call_soon_threadsafe(self._push)  # type: ignore[union-attr]
            except RuntimeError:  # the loop closed: the pool is gone
                pass

    def _push(self) -> None:
        """On the loop: the invalidations queued for each reader that holds calls, in a frame of
        their own, so that a call queued behind another applies every write committed before it
        starts (readers/reader.py applies them in the order they arrive, before each call)."""
        with self._lock:
            self._push_due = False
            out = []
            for r in self.readers:
                if r.alive and r.waiting and r.invalidations:
                    out.append((r, r.invalidations))
                    r.invalidations = []
        for r, todo in out:
            try:
                r.send(("inval", todo))
            except (ReaderGone, OSError):
                pass  # gone: its calls fail over to the daemon

    def recheck(self) -> None:
        """Whether semantic searches may go to the readers, at most every RECHECK_S: a store that
        grew past MAX_SHARED_ROWS with nothing shared keeps them in the daemon from then on (and
        one that shrank under it, or shares again, sends them again). After a write that changed
        vectors, and after a reader's "not here" (sharing may have failed on a quiet store)."""
        if not self.started or time.monotonic() - self._checked <= RECHECK_S:
            return
        self._checked = time.monotonic()
        was, self.semantic = self.semantic, self._semantic_fits()
        if was and not self.semantic:  # the readers' copies of the vectors go too
            with self._lock:
                for r in self.readers:
                    r.invalidations.extend(("forget", w) for w in self._workspace_ids)

    async def call(self, method: str, params: dict, inflight: InFlight | None) -> tuple[Any, float]:
        """(result, the reader's CPU seconds), or raises what the reader raised, or ReaderGone."""
        from ..errors import from_rpc

        reader = await self._least_busy()
        reader.seq += 1
        seq = reader.seq
        slot: list[Any] = [anyio.Event(), None]
        reader.waiting[seq] = slot
        with self._lock:
            todo, reader.invalidations = reader.invalidations, []
        try:
            reader.send(("call", seq, method, params, todo))
        except (ReaderGone, OSError):
            reader.waiting.pop(seq, None)
            raise ReaderGone("the reader exited") from None
        self.service.searches_elsewhere += 1  # the embed queue yields to it as to a search on a thread
        try:
            await slot[0].wait()
        except anyio.get_cancelled_exc_class():
            reason = inflight.reason if inflight is not None else "cancelled"
            log.debug("cancelling call %d in reader %d (%s)", seq, reader.proc.pid, reason)
            try:
                reader.send(("cancel", seq))
            except (ReaderGone, OSError):
                pass
            raise
        finally:
            self.service.searches_elsewhere -= 1
        reply = slot[1]
        if reply is None:
            raise ReaderGone("the reader exited while running the call")
        status, payload, cpu = reply
        if status == "retry":
            raise NotInReader(payload[0], tuple(payload[1]) if payload[1] else None)
        self.calls += 1
        if status == "ok":
            return payload, cpu
        raise from_rpc(payload)

    async def _least_busy(self) -> Reader:
        """The live reader with the fewest calls, once one has a free slot (DEPTH); callers that
        wait are woken in the order they came. ReaderGone when no reader lives (the daemon runs
        the call now, as for a death mid-call) or the pool stopped."""
        while True:
            if self.stopped:
                raise ReaderGone("the reader pool stopped")
            live = [r for r in self.readers if r.alive]
            if not live:
                raise ReaderGone("the reader exited")
            reader = min(live, key=lambda r: len(r.waiting))
            if len(reader.waiting) < DEPTH:
                return reader
            await self._changed.wait()

    def _wake(self) -> None:
        """Callers waiting for a slot look again."""
        changed, self._changed = self._changed, anyio.Event()
        changed.set()

    def _stop_routing(self) -> None:
        self.stopped = True
        self._wake()

    # -- running the readers ----------------------------------------------------------

    async def run(self) -> None:
        """Start the readers when first wanted, replace any that dies, and stop them at
        cancellation (the daemon's shutdown)."""
        if not self.size:
            return
        try:
            await self._wanted.wait()
            self.started = True
            self._loop = asyncio.get_running_loop()
            if shared_vectors.available():
                self.service.vectors.sharing = shared_vectors.Sharing(self.invalidate)
            self.semantic = await anyio.to_thread.run_sync(self._semantic_fits)
            self._checked = time.monotonic()
            async with anyio.create_task_group() as tg:
                for _ in range(self.size):
                    tg.start_soon(self._keep_one)
        except Exception:  # the pool failing must not end the daemon: reads stay on its threads
            log.exception("reader pool: stopped; reads stay in the daemon")
        finally:
            self._stop_routing()
            with anyio.CancelScope(shield=True):
                await self._drain()
                await self._stop_all()
            sharing, self.service.vectors.sharing = self.service.vectors.sharing, None
            if sharing is not None:
                sharing.close()

    def _semantic_fits(self) -> bool:
        sharing = self.service.vectors.sharing
        if sharing is not None and not sharing.failed:
            return True
        with self.service.store.read() as db:
            self._workspace_ids = [wsrows.get_workspace(db, n).id for n in wsrows.workspace_names(db)]
            rows = sum(wsrows.chunk_count(db, w) for w in self._workspace_ids)
        if rows > MAX_SHARED_ROWS:
            log.info("reader pool: %d chunks: semantic searches stay in the daemon (one copy of the vectors)", rows)
            return False
        return True

    async def _keep_one(self) -> None:
        while not self.stopped:
            try:
                reader = await self._spawn()
            except Exception as exc:
                log.error("reader pool: a reader could not start (%s); reads stay in the daemon", exc)
                self._stop_routing()
                return
            if self.stopped:  # the pool stopped while it started
                with anyio.CancelScope(shield=True):
                    await self._stop(reader)
                return
            self._wake()
            await reader.gone.wait()
            await self._drop(reader)
            if self.stopped:
                return
            now = time.monotonic()
            self.deaths.append(now)
            while self.deaths and now - self.deaths[0] > DEATH_WINDOW_S:
                self.deaths.popleft()
            if len(self.deaths) >= MAX_DEATHS:
                log.error(
                    "reader pool: %d readers died within %.0f s; reads stay in the daemon",
                    len(self.deaths),
                    DEATH_WINDOW_S,
                )
                self._stop_routing()
                return
            log.warning(
                "reader pool: reader %d exited (status %s); starting another", reader.proc.pid, reader.proc.poll()
            )

    async def _spawn(self) -> Reader:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            argv = [sys.executable, "-m", "autodoc.readers.reader", str(theirs.fileno()), str(os.getpid())]
            # On the loop's thread, not a worker thread: PR_SET_PDEATHSIG fires when the
            # *thread* that started the child ends, and anyio retires idle workers.
            proc = subprocess.Popen(
                argv, pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, close_fds=True
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        reader = Reader(proc)
        hello: list[Any] = []
        said = anyio.Event()

        def first_frame(msg: Any) -> None:
            hello.append(msg)
            said.set()

        reader.on_frame = first_frame
        try:
            await asyncio.get_running_loop().create_unix_connection(lambda: reader, sock=ours)
            reader.send(self.service.settings)
            with anyio.fail_after(START_TIMEOUT_S):
                async with anyio.create_task_group() as tg:

                    async def first(ev: anyio.Event) -> None:
                        await ev.wait()
                        tg.cancel_scope.cancel()

                    tg.start_soon(first, said)
                    tg.start_soon(first, reader.gone)
            if not hello or hello[0][0] != "ready":
                raise RuntimeError(f"the reader exited at start (status {proc.poll()})")
        except BaseException:
            if reader.transport is None:
                ours.close()
            with anyio.CancelScope(shield=True):  # reaped even when shutdown cancelled the start
                await self._stop(reader)
            raise
        reader.on_frame = partial(self._reply, reader)
        with self._lock:
            reader.invalidations = self._bases.seed()
            self.readers.append(reader)
        log.info("reader pool: reader %d ready", proc.pid)
        return reader

    def _reply(self, reader: Reader, msg: Any) -> None:
        status, seq, payload, cpu = msg
        slot = reader.waiting.pop(seq, None)
        if slot is not None:
            slot[1] = (status, payload, cpu)
            slot[0].set()
        if slot is not None:
            self._wake()  # its slot is free again, even if its caller left

    async def _drop(self, reader: Reader) -> None:
        """A reader's socket closed: its waiting call fails over, the process is reaped."""
        reader.alive = False
        with self._lock:
            if reader in self.readers:
                self.readers.remove(reader)
        for slot in reader.waiting.values():
            slot[0].set()  # reply None: ReaderGone
        reader.waiting.clear()
        self._wake()  # callers waiting for a slot look again (none may be left: the daemon runs theirs)
        with anyio.CancelScope(shield=True):
            await self._stop(reader)

    async def _stop(self, reader: Reader) -> None:
        reader.alive = False
        if reader.transport is not None:
            reader.transport.close()  # the reader sees EOF and exits
        proc = reader.proc

        def wait() -> None:
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

        await anyio.to_thread.run_sync(wait)

    async def _drain(self) -> None:
        """At shutdown: the calls readers are running get their answers (the server is still
        draining its requests), for up to DRAIN_S; what is left fails over to a daemon thread."""
        end = time.monotonic() + DRAIN_S
        while time.monotonic() < end and any(r.alive and r.waiting for r in list(self.readers)):
            await anyio.sleep(0.005)

    async def _stop_all(self) -> None:
        with self._lock:
            readers, self.readers = list(self.readers), []
        for r in readers:
            for slot in r.waiting.values():
                slot[0].set()  # reply None: ReaderGone, so the caller runs it on a daemon thread
            r.waiting.clear()
            await self._stop(r)
