"""RPC stage, one connection: bytes in → frames → dispatch → frames out.

Input: a byte stream (a Unix socket, or stdin/stdout). Output: the answers,
in the framing the peer used, plus server-to-client notifications.

Requests on one connection run concurrently, each in its own task under its
own cancel scope; ``$/cancelRequest`` cancels one, and a peer that goes away
cancels all of its own. A lone request for a quick read while the daemon is
idle is answered by the reader itself, or handed by it straight to a worker
thread that writes the answer (rpc/quick.py), with no task.
Outgoing messages go through one bounded outbox read by one writer task
(rpc/outbox.py), so frames never interleave; a notification that finds the
outbox full is dropped (changes can always be re-read with changes.since),
while the reader waits for room before taking more requests (a peer that
sends without reading its answers is slowed down, not buffered for).

Fair shares: a connection runs at most ``READS_PER_CONNECTION`` reads at
once (``reads``, taken before the server's shared reader slots). A client
that pipelines hundreds of searches, or sends them and never reads the
answers, then queues behind itself: the shared slots are granted first come,
first served, so without it such a client's backlog stood in front of every
other connection's next request (8 clients beside one such client saw a p99
of 9.6 s at 10k chunks, docs/benchmarks/concurrency.md).

Per-connection limits (PROTOCOL.md, "Limits"): at most
``MAX_INFLIGHT_REQUESTS`` requests and ``MAX_INFLIGHT_BYTES`` of frames in
flight; beyond either a request is not run and answers -32021. An id already
in flight on this connection (or twice in one batch) answers -32600: cancels
and progress tokens name requests by id, so two live requests may not share one.

Runs on: the event loop; nothing here blocks it (the outbox's lock, rpc/outbox.py, is
held by a worker thread for one non-blocking write at most).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc

from ..config import MAX_FRAME_BYTES
from ..errors import AutodocError, InternalError, InvalidRequest, Overloaded, ParseError
from .dispatch import (
    NOID,
    Dispatcher,
    InFlight,
    cancel_target,
    elements,
    encode_answer,
    envelope_error,
    error_response,
    id_key,
    parse_message,
    request_id_of,
    request_problem,
)
from .framing import NEWLINE, FrameDecoder, FrameError, encode_message
from .inline import InlineReads
from .outbox import Claim, Outbox
from .quick import HANDED_OFF, QuickLane
from .transport import read_fd

log = logging.getLogger("autodoc.rpc")

READ_SIZE = 256 * 1024
# Requests (batch elements count one each) running at once on one connection.
MAX_INFLIGHT_REQUESTS = 1024
# Bytes of the frames whose requests are still running on one connection: with
# MAX_FRAME_BYTES frames, what bounds the memory one peer can pin. A frame is
# always admitted when nothing else is in flight.
MAX_INFLIGHT_BYTES = 64 * 1024 * 1024
# Reads one connection runs at once: the cores' worth, so one client alone still
# uses the machine, and at least 2 so one slow read does not hold up the next.
READS_PER_CONNECTION = max(2, os.cpu_count() or 1)


@dataclass
class Subscription:
    """Which workspaces' changes this connection has asked to be pushed."""

    all: bool = False
    names: set[str] = field(default_factory=set)

    def wants(self, workspace: str) -> bool:
        return self.all or workspace in self.names

    @property
    def active(self) -> bool:
        return self.all or bool(self.names)

    def to_json(self) -> dict:
        return {"all": self.all, "workspaces": sorted(self.names)}


class Connection:
    def __init__(
        self,
        stream: anyio.abc.ByteStream,
        dispatcher: Dispatcher,
        *,
        name: str,
        max_frame_bytes: int = MAX_FRAME_BYTES,
        max_inflight: int = MAX_INFLIGHT_REQUESTS,
        max_inflight_bytes: int = MAX_INFLIGHT_BYTES,
        accepting: Callable[[], bool] = lambda: True,
        on_eof: Callable[[], None] | None = None,
        peer_gone: Callable[[], bool] = lambda: True,
        load: InlineReads | None = None,
        quick: QuickLane | None = None,
    ):
        self.stream = stream
        self.dispatcher = dispatcher
        self.name = name
        self.decoder = FrameDecoder(max_frame_bytes)
        self.subscription = Subscription()
        self.closed = False
        self._accepting = accepting
        self._on_eof = on_eof
        self._peer_gone = peer_gone
        self._load = load
        self._quick = quick
        self.outbox = Outbox(stream, lambda: self.cancel_all("disconnect"))
        self.read_fd = read_fd(stream)
        self.reading = True  # until the reader stops (EOF, a broken stream, shutdown)
        self._inflight: dict[str, InFlight] = {}
        self.max_inflight = max_inflight
        self.max_inflight_bytes = max_inflight_bytes
        self._running = 0  # requests and notifications admitted and not yet answered
        self._running_bytes = 0
        self.reads = anyio.CapacityLimiter(READS_PER_CONNECTION)
        self._read_scope: anyio.CancelScope | None = None
        self._scope = anyio.CancelScope()
        self._requests: anyio.abc.TaskGroup | None = None
        self._lanes = 0  # reads on worker threads (rpc/quick.py), answered by end_lane
        self._lanes_idle = anyio.Event()
        self.done = anyio.Event()

    @property
    def framing(self) -> str:
        return self.decoder.framing or NEWLINE

    @property
    def inflight_count(self) -> int:
        return len(self._inflight)

    # -- the connection's life -------------------------------------------------------

    async def run(self) -> None:
        try:
            with self._scope:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self.outbox.run)
                    async with anyio.create_task_group() as self._requests:
                        with anyio.CancelScope() as self._read_scope:
                            await self._read_loop(self._requests)
                        if not self.closed:
                            if self._on_eof is not None:
                                self._on_eof()
                            if self._peer_gone():
                                self.cancel_all("disconnect")
                        while self._lanes:
                            await self._lanes_idle.wait()  # reads on worker threads answer first
                    # Every request has answered: let the writer flush and stop.
                    self.outbox.close()
        finally:
            self.closed = True
            self.cancel_all("disconnect")
            self.outbox.close()
            self.outbox.end()
            with anyio.CancelScope(shield=True):
                try:
                    await self.stream.aclose()
                except Exception:
                    pass
            self.done.set()

    def stop_reading(self) -> None:
        """Shutdown: read no more; answer what is in flight, then close."""
        self.closed = True
        if self._read_scope is not None:
            self._read_scope.cancel()

    def kill(self) -> None:
        self.closed = True
        self._scope.cancel()

    async def _read_loop(self, requests: anyio.abc.TaskGroup) -> None:
        try:
            await self._read_frames(requests)
        finally:
            self.reading = False

    async def _read_frames(self, requests: anyio.abc.TaskGroup) -> None:
        while True:
            try:
                data = await self.stream.receive(READ_SIZE)
            except anyio.EndOfStream:
                break
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                self.outbox.broken = True
                self.cancel_all("disconnect")
                break
            items = self.decoder.feed(data)
            for i, item in enumerate(items):
                # the last frame read, with nothing more of the next one: the client waits for it
                alone = i == len(items) - 1 and not self.decoder.buffered
                await self._take_guarded(item, requests, alone)
        for item in self.decoder.feed_eof():
            await self._take_guarded(item, requests, False)

    async def _take_guarded(self, item: Any, requests: anyio.abc.TaskGroup, alone: bool) -> None:
        # An exception escaping here would end this connection's task group and,
        # through it, the listener's: one bad frame must cost at most its answer.
        try:
            await self._take(item, requests, alone)
        except Exception:
            log.exception("%s: a frame could not be handled", self.name)
            await self.send(error_response(InternalError("internal error"), None))

    async def _take(self, item: Any, requests: anyio.abc.TaskGroup, alone: bool) -> None:
        """Answer a framing problem, or start dispatching one frame. Errors
        found here are sent from the reader, so a full outbox pauses reading.
        ``alone``: no other frame of this connection waits to be read, so a quick
        read may be answered here (rpc/quick.py); frames pipelined behind one
        another go to tasks, to run side by side and to let other clients in
        between."""
        if isinstance(item, FrameError):
            cls = ParseError if item.code == ParseError.code else InvalidRequest
            await self.send(error_response(cls(item.message), None))
            return
        message, problem = parse_message(item.payload)
        if problem is None:
            problem = envelope_error(message)
        if problem is not None:
            await self.send(problem)
            return
        target = cancel_target(message)
        if target is not NOID:
            self.cancel_request(target)
            return
        if alone and self._quick is not None:
            self._quick.settle()
            answer = self._quick.answer(message, self) if not self._running and self._accepting() else None
            if answer is HANDED_OFF:
                return
            if answer is not None:
                self._running += 1
                self._answer(self.encode(answer))
                return
        size = len(item.payload)
        refused, registered, admitted = self._admit(message, size)
        if not admitted:
            # Nothing to run (every element malformed or refused): answer from the
            # reader, so a flood of such frames waits for outbox room instead of
            # piling up one task each.
            await self._handle(message, self._accepting(), refused, registered, 0, 0)
            return
        self._running += admitted
        self._running_bytes += size
        if self._load is not None:
            self._load.admitted += admitted
        requests.start_soon(self._handle, message, self._accepting(), refused, registered, admitted, size)

    def _admit(self, message: Any, size: int) -> tuple[dict[int, AutodocError], list[InFlight], int]:
        """Decide, element by element, what runs: (refusals by element index,
        the InFlights registered, how many elements run). Ids are registered
        before anything runs, so a $/cancelRequest right behind finds them."""
        refused: dict[int, AutodocError] = {}
        registered: list[InFlight] = []
        admitted = 0
        too_many_bytes = self._running_bytes > 0 and self._running_bytes + size > self.max_inflight_bytes
        for i, element in enumerate(elements(message)):
            if request_problem(element) is not None:
                continue  # the dispatcher answers -32600 in its place
            if too_many_bytes or self._running + admitted >= self.max_inflight:
                refused[i] = Overloaded(
                    "too many requests in flight on this connection; retry when some have answered",
                    {"max_requests": self.max_inflight, "max_bytes": self.max_inflight_bytes},
                )
                continue
            rid = request_id_of(element)
            if rid is not NOID:
                key = id_key(rid)
                if key in self._inflight:
                    refused[i] = InvalidRequest(
                        "invalid request: this id is already in use by a request in flight on this connection",
                        {"id": rid},
                    )
                    continue
                self._inflight[key] = inflight = InFlight(rid)
                registered.append(inflight)
            admitted += 1
        if refused:
            log.debug("%s: refused %d request(s) of a frame", self.name, len(refused))
        return refused, registered, admitted

    async def _handle(
        self,
        message: Any,
        accepting: bool,
        refused: dict[int, AutodocError],
        registered: list[InFlight],
        admitted: int,
        size: int,
    ) -> None:
        # A request counts as in flight until its answer is in the outbox: a peer
        # that does not read its answers cannot pile up finished requests either.
        try:
            response = await self._dispatch(message, accepting, refused, registered)
            if response is not None:
                await self.send(response, direct=admitted > 0)
        finally:
            self._running -= admitted
            self._running_bytes -= size
            if self._load is not None:
                self._load.admitted -= admitted

    async def _dispatch(
        self,
        message: Any,
        accepting: bool,
        refused: dict[int, AutodocError],
        registered: list[InFlight],
    ) -> Any:
        try:
            return await self.dispatcher.dispatch(message, self, admitted=accepting, refused=refused)
        except Exception:
            # The dispatcher answers every error itself; this is a bug in it, and
            # it must not take the connection (and the listener) down with it.
            log.exception("%s: dispatching a frame failed", self.name)
            answers = [error_response(InternalError("internal error"), inflight.id) for inflight in registered]
            if not answers:
                return None
            return answers if isinstance(message, list) else answers[0]
        finally:
            # Requests refused before they ran (invalid ones) never ended themselves.
            for inflight in registered:
                self.end_request(inflight.id, inflight)

    # -- what the dispatcher and the methods call ---------------------------------------------

    def inflight_for(self, request_id: Any) -> InFlight | None:
        return self._inflight.get(id_key(request_id))

    def end_request(self, request_id: Any, inflight: InFlight | None) -> None:
        key = id_key(request_id)
        if self._inflight.get(key) is inflight:
            del self._inflight[key]

    def cancel_request(self, request_id: Any) -> bool:
        inflight = self._inflight.get(id_key(request_id))
        if inflight is None:
            return False
        inflight.cancel("cancelled")
        return True

    def cancel_all(self, reason: str) -> None:
        for inflight in list(self._inflight.values()):
            inflight.cancel(reason)

    def encode(self, message: Any) -> bytes:
        """Thread-safe (worker threads encode their own answers, rpc/quick.py)."""
        return encode_answer(message, self.framing)

    async def send(self, message: Any, *, direct: bool = False) -> None:
        """Queue one message in the outbox (rpc/outbox.py). ``direct`` (an answer): written at
        once when the outbox is idle, one hop fewer through the writer task. Frames keep their
        order either way, and no sender ever waits for the peer to read, only for outbox room."""
        data = self.encode(message)
        if not (direct and self.outbox.write_or_queue_nowait(data)):
            await self.outbox.queue(data)

    async def _send_later(self, data: bytes) -> None:
        try:
            await self.outbox.queue(data)
        finally:
            self._running -= 1

    # -- the thread lane (rpc/quick.py): a read handed to a worker thread, no task -------------

    def begin_lane(self, rid: Any) -> InFlight:
        self._inflight[id_key(rid)] = inflight = InFlight(rid)
        if not self._lanes:
            self._lanes_idle = anyio.Event()
        self._lanes += 1
        self._running += 1
        return inflight

    def end_lane(self, rid: Any, inflight: InFlight, data: bytes, claim: Claim) -> None:
        """On the loop: a read begun by begin_lane is over; ``data``, its answer or the
        cancellation's, is written unless its worker thread claimed and wrote the answer."""
        self.end_request(rid, inflight)
        self._lanes -= 1
        if not self._lanes:
            self._lanes_idle.set()
        if self.outbox.claim(claim):
            self._answer(data)
        else:
            self._running -= 1  # its thread wrote it

    def _answer(self, data: bytes) -> None:
        """An answer counted in _running, from the reader or the loop: into the outbox now, or,
        the outbox being full (a peer not reading), from a task, as the usual path's would, and
        counted until then; the reader goes on either way."""
        if self.outbox.write_or_queue_nowait(data):
            self._running -= 1
            return
        requests = self._requests
        assert requests is not None, "an answer before the connection runs"
        try:
            requests.start_soon(self._send_later, data)
        except RuntimeError:
            self._running -= 1  # the connection is gone (killed): nobody to answer

    def notify_nowait(self, method: str, params: Any) -> bool:
        """Queue a notification; False if it was dropped (outbox full or closed)."""
        data = encode_message({"jsonrpc": "2.0", "method": method, "params": params}, self.framing)
        if self.outbox.queue_nowait(data):
            return True
        if not (self.outbox.broken or self.outbox.closed):
            log.warning("%s: outbox full, dropped a %s notification", self.name, method)
        return False
