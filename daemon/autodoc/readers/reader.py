"""A reader process: read methods on a read-only Service, for the daemon's
reader pool (readers/pool.py).

Input: frames on the socket the daemon handed over (fd in argv): first the
daemon's Settings, then ``call`` frames (a sequence number, a read method,
its checked params, and the cache invalidations the daemon's writes made since
this reader's last call), ``inval`` frames (more of them, sent while this reader
holds calls), ``cancel`` frames (a sequence number). Output: one
``ok`` or ``err`` frame per call, with the CPU seconds it took, or ``retry``
when it needs vectors it may not copy and the daemon has not shared
(readers/shared_vectors.py): the daemon then runs the call itself.

Why a process: a search is 70-82 % Python under the GIL (daemon_overhead.md),
so threads cannot use the second core; processes can.

- Caches stay right because every invalidation the daemon's Service made
  (vectors of these documents changed, a workspace forgotten, a model's
  vectors dropped, a vector base shared) reaches this reader in the frame of the next call it runs,
  before that call; the rest of the readers' caches are keyed by the store's
  generation or FTS5's state, read from the call's own snapshot.
- A call runs on the main thread; a second thread only reads frames, so a
  cancel reaches a running search (its ``cancel`` Event), a call may wait
  queued behind the running one (readers/pool.py, DEPTH; one cancelled while it
  waits is not run), and the daemon's writes to this socket never block on a
  busy reader.
- The process runs under SCHED_BATCH where Linux has it (``_batch_policy``).
- The reader ends when the socket closes (the daemon is gone or dropped it),
  and with the daemon itself (PR_SET_PDEATHSIG on Linux).

    python -m autodoc.readers.reader FD

Runs on: its own process: the main thread runs calls, one thread reads frames.
"""

from __future__ import annotations

import ctypes
import logging
import os
import pickle
import queue
import signal
import socket
import struct
import sys
import threading
import time
from typing import Any

from ..api import METHODS
from ..config.logs import configure_logging
from ..errors import AutodocError, InternalError, RequestCancelled
from ..search.semantic.vector_cache import NotShared
from .shared_vectors import PRIVATE_ROWS

log = logging.getLogger("autodoc.reader")

_LEN = struct.Struct("!I")


def send_frame(sock: socket.socket, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    sock.sendall(_LEN.pack(len(data)) + data)


def recv_frame(sock: socket.socket) -> Any:
    """The next frame, or None at EOF."""
    head = _recv_exactly(sock, _LEN.size)
    if head is None:
        return None
    body = _recv_exactly(sock, _LEN.unpack(head)[0])
    return None if body is None else pickle.loads(body)


def _recv_exactly(sock: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        part = sock.recv(n - len(buf))
        if not part:
            return None
        buf += part
    return bytes(buf)


def apply_invalidations(service: Any, items: list[tuple]) -> None:
    """What the daemon's Service told its own caches, told to this one's."""
    for kind, *args in items:
        if kind == "vectors":
            service.vectors.mark_dirty(args[0], args[1])
            service.embed_queue.changed(args[0])
        elif kind == "forget":
            service.vectors.forget(args[0])
            service.embed_queue.changed(args[0])
        elif kind == "model":
            service.vectors.forget_model(args[0], args[1])
        elif kind == "base":
            service.vectors.offer(args[0], args[1], args[2], args[3])


def run_call(service: Any, method: str, params: dict, cancel: threading.Event) -> tuple:
    m = METHODS[method]
    assert m.call is not None, f"{method} is not a read a reader runs"
    c0 = time.thread_time()
    try:
        if m.cancellable:
            result = m.call(service, params, cancel=cancel)
        else:
            result = m.call(service, params)
        return ("ok", result, time.thread_time() - c0)
    except AutodocError as exc:
        return ("err", exc.to_rpc(), time.thread_time() - c0)
    except NotShared as exc:  # the daemon runs it (readers/pool.py, NotInReader)
        return ("retry", (str(exc), list(exc.key)), time.thread_time() - c0)
    except Exception:  # the daemon answers -32603; the traceback stays in this log
        log.exception("%s failed in a reader process", method)
        return ("err", InternalError("internal error").to_rpc(), time.thread_time() - c0)


def serve(sock: socket.socket) -> int:
    from ..service import Service  # only the reader process needs the whole pipeline

    settings = recv_frame(sock)
    if settings is None:
        return 0
    os.environ["AUTODOC_READERS"] = "0"  # a reader is one of the processes: no lexical helper of its own
    service = Service(settings, writer=False, feed=False)  # the daemon's feed reaches it as invalidations
    service.vectors.private_rows = PRIVATE_ROWS  # above it, only a base the daemon shared
    inbox: queue.Queue[Any] = queue.Queue()
    cancels: dict[int, threading.Event] = {}
    arrived: list[tuple] = []  # invalidations in the order their frames came, applied before each call
    lock = threading.Lock()

    def read_frames() -> None:
        while True:
            try:
                msg = recv_frame(sock)
            except OSError:
                msg = None
            if msg is None:
                inbox.put(None)
                return
            if msg[0] == "cancel":
                with lock:
                    ev = cancels.get(msg[1])
                if ev is not None:
                    ev.set()
                continue
            if msg[0] == "inval":
                with lock:
                    arrived.extend(msg[1])
                continue
            with lock:
                cancels[msg[1]] = threading.Event()
                arrived.extend(msg[4])
            inbox.put(msg)

    threading.Thread(target=read_frames, name="autodoc-reader-frames", daemon=True).start()
    send_frame(sock, ("ready", os.getpid()))
    try:
        while (msg := inbox.get()) is not None:
            _, seq, method, params, _ = msg
            # every invalidation that has arrived, this call's and any since (each names a write
            # that committed before it was sent, so before this call's snapshot opens)
            with lock:
                todo = arrived[:]
                arrived.clear()
            apply_invalidations(service, todo)
            with lock:
                cancel = cancels[seq]
            if cancel.is_set():  # cancelled while queued behind another call (readers/pool.py, DEPTH)
                out = ("err", RequestCancelled("cancelled before it ran").to_rpc(), 0.0)
            else:
                out = run_call(service, method, params, cancel)
            with lock:
                cancels.pop(seq, None)
            try:
                send_frame(sock, (out[0], seq, out[1], out[2]))
            except OSError:
                break  # the daemon is gone
    finally:
        service.close()
    return 0


def _batch_policy() -> None:
    """SCHED_BATCH: a reader woken by the daemon's call frame no longer preempts the daemon on
    its core (Linux: batch tasks do not preempt on wake-up; they run on an idle core, or at the
    next tick). The daemon's loop is what feeds both readers and answers every client: preempted
    mid-write, it left the other reader and the clients waiting (daemon_overhead.md, "Throughput
    with clients").
    Needs no privilege; where the platform has no such policy, nothing changes."""
    if hasattr(os, "sched_setscheduler") and hasattr(os, "SCHED_BATCH"):
        try:
            os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
        except OSError:
            pass


def _die_with_parent() -> None:
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    configure_logging()
    _die_with_parent()
    parent = int(argv[1]) if len(argv) > 1 else None
    if parent is not None and os.getppid() != parent:
        return 0  # the daemon died before PR_SET_PDEATHSIG took hold
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the daemon's Ctrl-C is the daemon's to handle
    _batch_policy()
    sock = socket.socket(fileno=int(argv[0]))
    try:
        return serve(sock)
    finally:
        sock.close()


if __name__ == "__main__":
    sys.exit(main())
