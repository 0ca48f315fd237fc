"""A PostgreSQL server that hangs: no answer, no closed socket (docs/dev/postgres.md, section 7b).

A stopped or wedged server (SIGSTOP, a frozen VM, a storage stall) leaves its sockets open: the
kernel accepts connections, acknowledges what is sent and answers TCP keepalives, so neither
keepalives nor the server's own `statement_timeout` (it runs nothing) ends a request waiting on
it. psycopg's sync calls wait without a limit. And a limit on each wait alone cannot tell a hung
server from a long statement on a live one (an HNSW index built in `store copy` takes minutes).

So the wait is watched, not timed: every statement's wait on a store connection is registered
here (`PgConnection.wait`); one thread per store looks once a second, and when a wait has had no
answer for HANG_S it asks the server something on a new connection (`PROBE_S` to connect and
answer `SELECT 1`). A server that answers is alive, its statement merely slow (it goes on; reads
are bounded by `statement_timeout` on the server). One that does not is hung: every wait older than
HANG_S is cut (its socket shut down, so libpq sees the connection end), and the caller gets
`StoreUnreachable` (-32012) naming the store, as when the server is down. A hung server costs a
request about HANG_S + PROBE_S + 1 s (~9 s), instead of forever.

Runs on: the thread `autodoc-pg-hang` (one per store, started at the first watched wait); the
callers' threads register and end their waits.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from typing import Any

import psycopg

log = logging.getLogger("autodoc.store.pg.hang")

HANG_S = 5.0  # a wait this long with no answer has the server probed
PROBE_S = 3  # the probe's connect_timeout, and its SELECT's limit (libpq's least is 2)
LOOK_S = 1.0  # how often the watch looks at the waits


class PgConnection(psycopg.Connection):
    """A psycopg connection whose waits a `HangWatch` watches (`watch` set after connecting)."""

    watch: HangWatch | None = None
    cut = False  # the watch hung up on it: the server stopped answering

    def wait(self, gen: Any, interval: float = 0.1, timeout: float | None = None) -> Any:
        watch = self.watch
        if watch is None or timeout is not None:  # a wait with its own limit (notifies) is not a hang
            return super().wait(gen, interval, timeout)
        key = watch.enter(self)
        try:
            return super().wait(gen, interval, timeout)
        except psycopg.OperationalError:
            if self.cut:
                raise psycopg.OperationalError(
                    f"the server stopped answering (nothing for {HANG_S:.0f} s, and a new connection was not "
                    f"answered in {PROBE_S} s): it is hung or cut off"
                ) from None
            raise
        finally:
            watch.leave(key)


class HangWatch:
    """The waits of one store's connections, and the thread that cuts them when the server hangs."""

    def __init__(self, target: str, connect_kwargs: dict[str, Any]):
        self._target = target
        self._kwargs = connect_kwargs  # keepalives etc., as the store's own connections have them
        self._lock = threading.Lock()
        self._waits: dict[int, tuple[float, PgConnection]] = {}
        self._next = 0
        self._thread: threading.Thread | None = None
        self._closed = False

    def enter(self, conn: PgConnection) -> int:
        with self._lock:
            self._next += 1
            self._waits[self._next] = (time.monotonic(), conn)
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(target=self._run, name="autodoc-pg-hang", daemon=True)
                self._thread.start()
            return self._next

    def leave(self, key: int) -> None:
        with self._lock:
            self._waits.pop(key, None)

    def close(self) -> None:
        with self._lock:
            self._closed = True

    def _run(self) -> None:
        answered = 0.0  # when the server last answered a probe: a long statement is not probed each second
        while True:
            time.sleep(LOOK_S)
            with self._lock:
                if self._closed:
                    return
                now = time.monotonic()
                old = [conn for since, conn in self._waits.values() if now - since >= HANG_S]
            if not old or now - answered < HANG_S:
                continue
            if self._answers():
                answered = time.monotonic()
                continue
            log.warning("the PostgreSQL server does not answer: cutting %d waiting request(s)", len(old))
            for conn in old:
                _hang_up(conn)

    def _answers(self) -> bool:
        """Whether the server answers a new connection's `SELECT 1` within PROBE_S."""
        try:
            with psycopg.connect(
                self._target,
                autocommit=True,
                connect_timeout=PROBE_S,
                application_name="autodoc probe",
                options=f"-c statement_timeout={PROBE_S * 1000}",
                **self._kwargs,
            ) as conn:
                conn.execute("SELECT 1")
            return True
        except psycopg.errors.QueryCanceled:
            return False
        except psycopg.OperationalError as e:
            # refused outright (down, max_connections, a password): it answered; the waits end by themselves
            return "timeout" not in str(e).lower()


def _hang_up(conn: PgConnection) -> None:
    """Shut the connection's socket down under its waiting thread: libpq reads the end of it."""
    conn.cut = True
    try:
        fd = conn.pgconn.socket
        dup = socket.socket(fileno=socket.dup(fd))  # the socket is shared: shutting the copy down ends both
        try:
            dup.shutdown(socket.SHUT_RDWR)
        finally:
            dup.close()
    except (OSError, psycopg.Error):
        pass  # closed meanwhile: nothing waits on it
