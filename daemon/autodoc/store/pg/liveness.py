"""Is an idle PostgreSQL connection still alive? Asked before a store connection starts its next
transaction (store/pg/store.py), so that a server restarted, or a backend terminated, since the
connection's last use costs a reconnect instead of the next request's answer (docs/dev/postgres.md,
faults).

An idle connection has nothing to read: the server speaks only when asked. When the server ends the
session (a restart's fast shutdown, `pg_terminate_backend`, a crash) it sends a FATAL error and
closes the socket, so the socket turns readable. Reading that (libpq's consume_input, no round
trip: a `select` with a zero timeout when nothing is pending) makes libpq see the end and mark the
connection bad. The FATAL can arrive a moment before the end of the stream (libpq reads it as a
notice, and the connection still looks good), so once something was read the end is waited for,
briefly (_END_WAIT_S). A socket that then stays quiet (it was a notice, a parameter status) is
alive: what was read stays in libpq's buffer for the next statement, as it would have anyway.

A peer cut off by the network is not seen here (nothing arrives): the keepalives notice it
(store/pg/store.py: KEEPALIVES), and the statement fails as StoreUnreachable.

Runs on: the thread that owns the connection at the time (its reader thread, or the holder of the
store's write lock): reading a socket another thread waits on would steal that thread's answer.
"""

from __future__ import annotations

import select
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import psycopg

# FATAL message, then the end of the stream: two reads; a few more for notices queued before them
_READS = 8
_END_WAIT_S = 0.1  # after a message on an idle connection, how long to wait for the end of the stream


def alive(conn: psycopg.Connection) -> bool:
    """False when the server has ended this connection (it is then `closed`); True when it is in a
    transaction (in use: not ours to read) or nothing says it is gone."""
    import psycopg

    if conn.closed or conn.broken:
        return False
    if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        return True
    pgconn = conn.pgconn
    wait = 0.0
    for _ in range(_READS):
        try:
            readable, _, _ = select.select([pgconn.socket], [], [], wait)
        except (OSError, ValueError, psycopg.OperationalError):
            return False
        if not readable:
            return True
        # something came: a FATAL's end of stream follows it at once (the backend exits), so wait
        # that long for it; a harmless notice costs this wait, once
        wait = _END_WAIT_S
        try:
            pgconn.consume_input()
        except psycopg.OperationalError:
            return False
        if pgconn.status != psycopg.pq.ConnStatus.OK:
            return False
    return not conn.closed
