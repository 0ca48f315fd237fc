"""RPC stage, the quick lane: a lone request for a quick read, answered by the
connection's reader as soon as the frame is parsed.

A request otherwise gets a task of its own, jsonrpcserver's dispatch, a cancel
scope and the method's routing: about eight turns of the event loop and a few
hundred Python calls around a read that may itself take 1–2 ms
(docs/benchmarks/daemon_overhead.md). When rpc/inline.py's rule would run the
read on the event loop anyway (the daemon idle, the read's kind known to be
quick), none of that buys anything: nothing else can run while it does, and a
read on the loop cannot be cancelled mid-run either. So the reader binds the
params, runs the read and hands the answer straight back.

What stays the same as on the usual path: the params' binding and schema check
(the same -32602 naming the field), the errors and their codes, the result
check under AUTODOC_CHECK_RESULTS, and the inline rule's bookkeeping (each run
is recorded, so a read that turns slow leaves the lane). What goes: the task,
jsonrpcserver, and the cancel scope (nothing could cancel a run on the loop).

The thread lane, for the same lone request when its read is not known to be
quick and the idle daemon would run it on a thread of its own (not in a reader
process, readers/pool.py): the reader binds the params and hands the read straight
to a worker thread, which runs it, checks and encodes the answer, and writes it
itself when the connection's outbox is idle (rpc/outbox.py; else the loop does).
It holds what the usual path would hold while it runs: the read's id (so
$/cancelRequest finds it, and a cancel answers at once while the thread is
abandoned, as the usual path's is), the connection's share of the readers and a
reader slot, the inline rule's counters, until the loop runs the read's finish
(or the connection's next frame does, settle(): a client with its answer may
ask again first). What goes: the task, jsonrpcserver,
anyio's hand-off and the turns of the loop between them (about 0.5 ms of a
search's round trip at 100k chunks, docs/benchmarks/daemon_overhead.md).

Input: one parsed message. Output: its answer, HANDED_OFF (a worker thread
answers it), or None when it is not for the lane (a batch, a notification, a
write, a method with its own handler, a busy daemon, a kind not known to be
quick with no thread free or meant for a reader process, bytes waiting on any
connection): the usual path then answers it.

Why the last: the lane answers a request before the loop reads the next one, so a
burst of clients, each request answered alone, would always find the daemon
idle and be served one by one on the loop's one core; with bytes waiting, the
requests go to tasks, are admitted together, and reach the reader processes
and threads as before.

Runs on: the event loop; the thread lane's reads on its worker threads.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections import deque
from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

import anyio

from ..errors import AutodocError, InternalError
from . import schemas
from .dispatch import check_result, error_for, error_response, request_problem
from .inline import InlineReads, read_kind
from .outbox import Claim

log = logging.getLogger("autodoc.rpc")

HANDED_OFF: Any = object()
WORKERS = 4  # handed-off reads at once; more (abandoned ones still running) go the usual way


class LaneRead(NamedTuple):
    call: Callable[..., Any]  # the method's call on bound params
    cancellable: bool  # takes cancel=, a threading.Event set when the request is cancelled
    here: Callable[[dict], bool]  # an idle daemon runs it itself, not in a reader process


class QuickLane:
    def __init__(
        self,
        reads: dict[str, LaneRead],
        inline: InlineReads,
        readers: anyio.CapacityLimiter,
        *,
        check_results: bool = False,
        input_waiting: Callable[[], bool] = lambda: False,
    ):
        self.reads = reads  # plain reads only
        self.inline = inline
        self.check_results = check_results
        self.input_waiting = input_waiting  # another request is on its way (the server polls its connections)
        self.readers = readers  # the daemon's reader slots, which the thread lane's reads take
        self.workers = _Workers(WORKERS)
        self._settle: deque[Callable[[], None]] = deque()  # finishes of reads answered by their thread

    def settle(self) -> None:
        """On the loop, before a lane decision: finish the reads whose threads are done (their
        client may have its answer and be asking again before the loop's turn has run them)."""
        while self._settle:
            self._settle.popleft()()

    def answer(self, message: Any, conn: Any) -> Any:
        inline = self.inline
        if inline.running or inline.admitted or not isinstance(message, dict):
            return None
        if "id" not in message or request_problem(message) is not None:
            return None  # the usual path says what is wrong (a method that is not a string…)
        read = self.reads.get(message["method"])
        if read is None:
            return None
        name, rid = message["method"], message["id"]
        # as jsonrpcserver hands params to the usual path: absent, [] and {} alike
        raw = message.get("params") or {}
        try:
            kind = read_kind(name, raw)  # the kind of the bound params too: decided before binding
            quick = inline.may_run(kind)
            if not quick and self.workers.full:
                return None
            if self.input_waiting():
                return None
            params = schemas.bind_params(name, raw)
            if not quick and not read.here(params):
                return None
        except Exception as exc:
            return error_response(error_for(exc, name, "%s: the quick lane failed before the call"), rid)
        if not quick:
            return self._hand_off(conn, name, rid, kind, read, params)
        with inline.serving:
            return self._run(name, rid, kind, read.call, params, {})

    def _run(self, name: str, rid: Any, kind: Any, call: Callable[..., Any], params: dict, kwargs: dict) -> dict:
        try:
            result = self.inline.measured(kind, call, params, **kwargs)
        except Exception as exc:
            return error_response(error_for(exc, name), rid)
        if self.check_results:
            try:
                check_result(name, result)
            except AutodocError as exc:
                return error_response(exc, rid)
        return {"jsonrpc": "2.0", "result": result, "id": rid}

    def _hand_off(self, conn: Any, name: str, rid: Any, kind: Any, read: LaneRead, params: dict) -> Any:
        """Start the read on a worker thread, which writes its answer (or the loop does, or
        the cancellation's as soon as the request is cancelled). None: no slot free."""
        borrower, share, readers, inline = object(), conn.reads, self.readers, self.inline
        try:
            self.workers.ready()  # a thread that cannot start fails here, before anything is held
        except RuntimeError:
            log.warning("no worker thread for %s; it goes the usual way", name, exc_info=True)
            return None
        try:
            share.acquire_on_behalf_of_nowait(borrower)
        except anyio.WouldBlock:
            return None
        try:
            readers.acquire_on_behalf_of_nowait(borrower)
        except anyio.WouldBlock:
            share.release_on_behalf_of(borrower)
            return None
        loop = asyncio.get_running_loop()
        inflight = conn.begin_lane(rid)
        inline.serving.begin()  # ended in finish()
        claim, outbox = Claim(), conn.outbox
        done = False

        # on the loop: the read is over, or cancelled. Its slots and counters go back here, even
        # when the answer must still wait for outbox room (_send_later): the read no longer runs
        def finish(data: bytes) -> None:
            nonlocal done
            outbox.flush_tail()  # of an answer the worker wrote in part
            if done:
                return
            done = True
            inflight.on_cancel = None
            readers.release_on_behalf_of(borrower)
            share.release_on_behalf_of(borrower)
            inline.serving.end()
            conn.end_lane(rid, inflight, data, claim)

        def work() -> None:  # on a worker thread
            try:
                data = conn.encode(self._run(name, rid, kind, read.call, params, kwargs))
            except BaseException:
                log.exception("%s: the thread lane failed", name)
                data = conn.encode(error_response(InternalError("internal error"), rid))
            # The client may send its next request before the loop has run this read's finish: the
            # loop's next lane decision settles it first (else it would find the daemon busy). The
            # claim says who writes the answer: this thread, when the outbox is idle (the client has
            # it without a turn of the loop), or the loop's finish, whichever claims it first.
            done_now = partial(finish, data)
            self._settle.append(done_now)
            try:
                outbox.write_from_thread(data, claim)
            except Exception:
                log.exception("%s: the thread could not write its answer; the loop does", name)
            try:
                loop.call_soon_threadsafe(done_now)
            except RuntimeError:
                pass  # the loop is closed: the daemon stopped while the read ran

        inflight.on_cancel = lambda: finish(conn.encode(error_response(inflight.error(), rid)))
        kwargs = {"cancel": inflight.cancelled} if read.cancellable else {}
        self.workers.submit(work, loop)
        return HANDED_OFF


class _Workers:
    """Daemon threads for handed-off reads, kept while idle: a hand-off costs one
    queue put and the worker's wake-up, not a thread's start."""

    def __init__(self, most: int):
        self.most = most
        self.busy = 0  # counted on the loop
        self._threads = 0
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()

    @property
    def full(self) -> bool:
        return self.busy >= self.most

    def ready(self) -> None:
        """A thread free for one more job (started if need be; RuntimeError if it cannot be)."""
        if self._threads <= self.busy:
            threading.Thread(target=self._serve, name="autodoc-lane", daemon=True).start()
            self._threads += 1

    def submit(self, job: Callable[[], None], loop: asyncio.AbstractEventLoop) -> None:
        """After ready(): never fails."""
        self.busy += 1
        # put at the end of the loop's turn, not in its middle: the worker, woken at once, would
        # only wait for the GIL while the loop finishes the turn
        loop.call_soon(self._jobs.put, (job, loop))

    def _serve(self) -> None:
        while True:
            job, loop = self._jobs.get()
            try:
                job()
            except BaseException:
                log.exception("a thread lane job failed")  # the thread serves on
            finally:
                try:
                    loop.call_soon_threadsafe(self._done)
                except RuntimeError:
                    pass  # the loop is closed: the daemon stopped while the read ran

    def _done(self) -> None:
        self.busy -= 1
