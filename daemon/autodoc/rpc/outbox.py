"""RPC stage, frames out: one connection's outbox and its writer.

Input: encoded frames (answers, notifications, errors), from the event loop or,
for an answer of the thread lane (rpc/quick.py), from the worker thread that
ran the read. Output: the same frames on the stream, each whole and never
interleaved with another.

- One bounded outbox read by one writer task. A frame finding the outbox empty
  and no write under way is written at once, as far as the stream takes it
  without waiting; the rest is queued in the same step, so frames keep their
  order and no sender waits for the peer to read, only for outbox room.
- A worker thread may write an answer itself on the same terms (nothing queued,
  nothing being written), so its client has the answer without a turn of the
  loop in between (docs/benchmarks/daemon_overhead.md). What the stream does not
  take of it waits in ``_tail``, which the writer writes before any later frame.
  The worker decides and writes under ``_lock``, which it only tries (never
  waits for) and holds for one non-blocking write; the loop takes it around its
  own direct writes, the writer's start and end of a frame, and closing. Frames
  the loop only queues (``queue``, ``queue_nowait``) change ``queued`` without it:
  the loop is the only writer of those fields, and a frame queued just after a
  worker's check is written after that worker's answer and tail.
- ``claim``: a request's answer is written once. The thread lane's answer and a
  cancellation's race for it; the first to claim it under the lock writes it.

Runs on: the event loop; ``write_from_thread`` on a worker thread.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import anyio
import anyio.abc

from .transport import nowait_writer

log = logging.getLogger("autodoc.rpc")

OUTBOX_SIZE = 1024
_GONE = (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError)


class Claim:
    """Whether one request's answer has been written (or is on its way): see Outbox.claim."""

    __slots__ = ("taken",)

    def __init__(self) -> None:
        self.taken = False


class Outbox:
    def __init__(self, stream: anyio.abc.ByteStream, on_gone: Callable[[], None]):
        self.stream = stream
        self._on_gone = on_gone  # the peer went away while we wrote: cancel what it asked
        self._write_nowait = nowait_writer(stream)
        self._send, self._recv = anyio.create_memory_object_stream[bytes](OUTBOX_SIZE)
        self._lock = threading.Lock()
        self.queued = 0  # frames in the outbox not yet written
        self.writing = False  # the writer task is writing one
        self.broken = False
        self._tail = b""  # the rest of an answer a worker thread wrote in part
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def _idle(self) -> bool:
        return not (self.queued or self.writing or self.broken or self._tail or self._closed)

    async def run(self) -> None:
        """The writer task: until the outbox is closed and empty."""
        async with self._recv:
            async for data in self._recv:
                try:
                    if not self.broken:
                        with self._lock:
                            self.writing = True
                            tail, self._tail = self._tail, b""
                        if tail:
                            await self.stream.send(tail)
                        if data:
                            await self.stream.send(data)
                except _GONE:
                    self.gone()
                finally:
                    with self._lock:
                        self.writing = False
                        self.queued -= 1

    def close(self) -> None:
        """No more frames: the writer flushes what is queued (a tail first) and stops."""
        self.flush_tail()
        with self._lock:
            self._closed = True
        self._send.close()

    def end(self) -> None:
        """The stream is about to close: no worker thread may write to it any more."""
        with self._lock:
            self.broken = True

    def gone(self) -> None:
        self.broken = True
        log.debug("the peer went away while we wrote")
        self._on_gone()

    def write_or_queue_nowait(self, data: bytes) -> bool:
        """Write what the stream takes at once when idle (the usual case) and queue the rest in
        the same step (a notification queued between a frame's two parts would be written into
        its middle); else queue it if the outbox has room. False: the outbox is full, nothing
        was written."""
        gone = False
        with self._lock:
            if self._write_nowait is not None and self._idle():
                try:
                    sent = self._write_nowait(data)
                except _GONE:
                    sent, gone = len(data), True
                if sent == len(data):
                    data = b""
                else:
                    data = data[sent:]  # the outbox is empty (nothing queued): it has room for the rest
            if data:
                try:
                    self._send.send_nowait(data)
                except anyio.WouldBlock:
                    return False
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    return True  # closing: nobody left to answer
                self.queued += 1
        if gone:
            self.gone()  # outside the lock: cancelling answers what was in flight, through here
        return True

    def queue_nowait(self, data: bytes) -> bool:
        """Queue a frame behind the others; False when the outbox is full or closed."""
        if self.broken:
            return False
        try:
            self._send.send_nowait(data)
        except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
            return False
        self.queued += 1
        return True

    async def queue(self, data: bytes) -> None:
        """Queue a frame, waiting for outbox room."""
        self.queued += 1
        try:
            await self._send.send(data)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            self.queued -= 1

    def claim(self, claim: Claim) -> bool:
        """Take the right to write one request's answer; False: already taken."""
        with self._lock:
            if claim.taken:
                return False
            claim.taken = True
            return True

    def write_from_thread(self, data: bytes, claim: Claim) -> bool:
        """From a worker thread: write an answer at once when the outbox is idle. True: written
        (what the stream did not take is the tail; call flush_tail on the loop), or the answer was
        claimed before (a cancellation's was written). False: nothing written, the loop writes it."""
        write = self._write_nowait
        if write is None or not self._lock.acquire(blocking=False):
            return False
        try:
            if claim.taken:
                return True
            if not self._idle():
                return False
            try:
                sent = write(data)
            except _GONE:
                return False  # the loop finds the peer gone when it writes
            if not sent:
                return False
            claim.taken = True
            self._tail = data[sent:]
            return True
        finally:
            self._lock.release()

    def flush_tail(self) -> None:
        """On the loop: wake the writer for a tail a worker thread left, if nothing else will."""
        with self._lock:
            if not self._tail or self.queued or self.writing:
                return
            try:
                self._send.send_nowait(b"")  # the writer writes the tail ahead of this empty frame
            except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
                return
            self.queued += 1
