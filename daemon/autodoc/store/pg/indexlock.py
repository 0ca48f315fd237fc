"""One indexer per workspace on a shared PostgreSQL store: a session-level advisory lock that names
its holder (docs/dev/postgres.md, section 5). The PostgreSQL counterpart of store/lease.py.

The lock is `pg_try_advisory_lock(LOCK_CLASS, workspace id)` on a connection the holder keeps for
the whole job; right after taking it, the holder writes who it is into the `indexer` row. A second
indexer is refused with StoreLocked naming the holder: the row's words (host, pid, socket) and what
Postgres itself knows of the session that holds the lock (its application_name and backend pid, from
pg_locks + pg_stat_activity), so the name is right even in the instant before the row is written.

Postgres ends a session whose client is gone (its socket closes when the process dies, even by
SIGKILL; across a network, TCP keepalives notice), and the lock goes with it: another indexer takes
over without anyone clearing a stale lease. The row a dead holder left is simply overwritten.

`IndexerLocks` is what the index job (index/job.py) holds around a whole-workspace run and, waiting
for it a while, around a live index's few paths: one dedicated connection per workspace being
indexed, held by the daemon (its threads share it).

Runs on: the index job's thread, on the dedicated autocommit connection it passes.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ...errors import StoreLocked
from ..sql import POSTGRES
from .liveness import alive
from .schema import LOCK_CLASS, SCHEMA

if TYPE_CHECKING:  # a SQLite daemon (psycopg is an optional extra) imports this module without it
    import psycopg

log = logging.getLogger("autodoc.store.indexlock")

# TCP keepalives (docs/dev/postgres.md, section 5): a holder cut off by the network is noticed in ~6 s,
# so its lock is taken over within the 10 s (a Unix socket ignores them)
KEEPALIVES: dict[str, Any] = {"keepalives": 1, "keepalives_idle": 3, "keepalives_interval": 1, "keepalives_count": 3}

_HOLDER_SESSION = """
SELECT a.pid, a.application_name, host(a.client_addr)
FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
  AND l.classid::bigint = %s AND l.objid::bigint = %s
"""


class IndexerLock:
    """The indexer lock of one workspace, taken on `conn` (autocommit, kept for the whole job)."""

    def __init__(self, conn: psycopg.Connection, workspace_id: int, *, schema: str = SCHEMA) -> None:
        if not conn.autocommit:
            # a session lock taken inside a transaction outlives it, but the holder row would not be
            # visible to others until that transaction commits
            raise RuntimeError("the indexer lock needs an autocommit connection of its own")
        self.conn = conn
        self.workspace_id = workspace_id
        self.schema = schema
        self.held = False

    def try_acquire(self, holder: dict[str, Any]) -> bool:
        """Take the lock if nobody holds it, and say who holds it now; False when another does."""
        from psycopg import sql

        got = self.conn.execute("SELECT pg_try_advisory_lock(%s, %s)", (LOCK_CLASS, self.workspace_id)).fetchone()
        if not (got and got[0]):
            return False
        self.held = True
        try:
            self.conn.execute(
                sql.SQL(
                    "INSERT INTO {}.indexer(workspace_id, holder, since) VALUES (%s, %s, %s) "
                    "ON CONFLICT(workspace_id) DO UPDATE SET holder = excluded.holder, since = excluded.since"
                ).format(sql.Identifier(self.schema)),
                (self.workspace_id, json.dumps(holder, sort_keys=True), time.time()),
            )
        except BaseException:
            # a role that may not write (a reader, store/pg/roles.py) must not keep the lock it took
            self.release()
            raise
        return True

    def acquire(self, holder: dict[str, Any], *, wait: float = 0.0, poll: float = 0.2) -> None:
        """Take the lock, waiting up to `wait` seconds for the holder to finish or die; else StoreLocked
        naming the holder."""
        deadline = time.monotonic() + wait
        while not self.try_acquire(holder):
            if time.monotonic() >= deadline:
                info, name = self.holder(), self.workspace_name()
                raise StoreLocked(
                    f"workspace {name} is being indexed by another AutoDoc ({describe(info)}); "
                    "wait for it to finish, or stop it",
                    {"holder": info, "workspace": name},
                )
            time.sleep(poll)

    def workspace_name(self) -> str:
        """The workspace's name, as a person knows it (its id when the row is gone)."""
        from psycopg import sql

        row = self.conn.execute(
            sql.SQL("SELECT name FROM {}.workspaces WHERE id = %s").format(sql.Identifier(self.schema)),
            (self.workspace_id,),
        ).fetchone()
        return str(row[0]) if row else f"#{self.workspace_id}"

    def holder(self) -> dict[str, Any]:
        """Who holds the lock: the holder's own row (`row`) and Postgres's view of its session
        (`session`: backend pid, application_name, client address); empty when nobody does."""
        from psycopg import sql

        out: dict[str, Any] = {}
        session = self.conn.execute(_HOLDER_SESSION, (LOCK_CLASS, self.workspace_id)).fetchone()
        if session is None:
            return out
        out["session"] = {"backend_pid": session[0], "application_name": session[1], "client_addr": session[2]}
        row = self.conn.execute(
            sql.SQL("SELECT holder, since FROM {}.indexer WHERE workspace_id = %s").format(sql.Identifier(self.schema)),
            (self.workspace_id,),
        ).fetchone()
        if row is not None:
            out["row"] = {**json.loads(row[0]), "since": row[1]}
        return out

    def release(self) -> None:
        if self.held:
            self.held = False
            self.conn.execute("SELECT pg_advisory_unlock(%s, %s)", (LOCK_CLASS, self.workspace_id))


def indexed_from(db: Any, workspace_id: int) -> str | None:
    """The host that last held the workspace's indexer lock (its `indexer` row), on a store
    Snapshot; None when no run has taken it yet."""
    row = db.execute("SELECT holder FROM indexer WHERE workspace_id = ?", (workspace_id,)).fetchone()
    if row is None:
        return None
    host = json.loads(row[0]).get("host")
    return str(host) if host is not None else None


def describe(info: dict[str, Any]) -> str:
    """A holder in a few words: what its row says (host, pid, socket), else its session's name."""
    row = info.get("row") or {}
    session = info.get("session") or {}
    parts = [f"{k} {row[k]}" for k in ("host", "pid", "socket") if row.get(k) is not None]
    if not parts and session.get("application_name"):
        parts.append(str(session["application_name"]))
    if session.get("backend_pid") is not None:
        parts.append(f"backend pid {session['backend_pid']}")
    return ", ".join(parts) or "unknown holder"


class IndexerLocks:
    """The indexer locks one process holds on a PostgreSQL store (store/pg/store.py: PgStore), for the
    index job (index/job.py). Held by the process, not a thread: while this daemon holds a workspace,
    its other threads' runs and live saves of it go on (they are serialised among themselves by the
    daemon's own writer slot and write lock, as on SQLite) instead of being refused by their own
    session; another daemon is refused, or waits with `wait`, naming this one. Each held workspace has
    its own autocommit connection, closed when the last holder in the process lets go."""

    def __init__(self, connect: Callable[[], psycopg.Connection], schema: str, holder: Callable[[], dict[str, Any]]):
        self._connect = connect
        self.schema = schema
        self._holder = holder
        self._lock = threading.Lock()
        self._held: dict[int, _Held] = {}

    @contextmanager
    def hold(self, workspace_id: int, *, wait: float = 0.0) -> Iterator[None]:
        with self._lock:
            held = self._held.setdefault(workspace_id, _Held())
        with held.mutex:  # one thread takes the lock; the others join the hold once it is taken
            if held.depth == 0:
                conn = self._connect()
                try:
                    lock = IndexerLock(conn, workspace_id, schema=self.schema)
                    lock.acquire(self._holder(), wait=wait)
                except BaseException:
                    conn.close()
                    raise
                held.lock = lock
            held.depth += 1
        try:
            yield
        finally:
            with held.mutex:
                held.depth -= 1
                if held.depth == 0 and held.lock is not None:
                    lock, held.lock = held.lock, None
                    try:
                        lock.release()
                    except Exception:  # the connection is gone, and the lock with it
                        log.debug("indexer lock release failed", exc_info=True)
                    finally:
                        lock.conn.close()

    def check(self, workspace_id: int) -> None:
        """Before each batch of a job holding `workspace_id`: its lock's session still there. A server
        restart or pg_terminate_backend ends that session, and the lock with it, while the job sits
        between two batches; writing on would let another daemon index the workspace at the same time.
        A lost lock is taken again on a new connection; StoreLocked (nothing of the batch written) when
        another daemon took it meanwhile, StoreUnreachable while the server is down."""
        with self._lock:
            held = self._held.get(workspace_id)
        if held is None:
            return
        with held.mutex:
            if held.depth == 0 or (held.lock is not None and alive(held.lock.conn)):
                return
            if held.lock is not None:
                held.lock.conn.close()
                held.lock = None
            log.warning("workspace %d: the indexer lock's session ended; taking the lock again", workspace_id)
            conn = self._connect()
            try:
                lock = IndexerLock(conn, workspace_id, schema=self.schema)
                lock.acquire(self._holder())
            except BaseException:
                conn.close()
                raise
            held.lock = lock


class _Held:
    def __init__(self) -> None:
        self.mutex = threading.Lock()
        self.depth = 0
        self.lock: IndexerLock | None = None


def indexer_locks(store: Any) -> IndexerLocks | None:
    """The indexer locks of a PostgreSQL store; None for a SQLite store, whose lease already makes its
    holder the one writer (and so the one indexer) of every workspace in it."""
    if getattr(store, "dialect", None) != POSTGRES:
        return None
    host = socket.gethostname()

    def holder() -> dict[str, Any]:
        return {**getattr(store, "_holder", {}), "host": host, "pid": os.getpid()}

    return IndexerLocks(lambda: dedicated(store, "index"), store.schema, holder)


def dedicated(store: Any, role: str) -> psycopg.Connection:
    """A connection of its own to a PgStore's database, autocommit, named `autodoc <role> host:pid` in
    pg_stat_activity, with the store's keepalives (a holder cut off is noticed in seconds)."""
    import psycopg

    from .hang import PgConnection
    from .store import CONNECT_TIMEOUT_S, SERVER_KEEPALIVES

    target: str = store.target
    keepalives = {k: v for k, v in KEEPALIVES.items() if k not in target.lower()}  # unless the target sets its own
    name = f"autodoc {role} {socket.gethostname()}:{os.getpid()}"
    try:
        conn = PgConnection.connect(
            target, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S, application_name=name[:63], **keepalives
        )
        conn.watch = getattr(store, "_watch", None)  # a hung server's waits cut (store/pg/hang.py)
    except psycopg.Error as e:  # the product's error, naming the store without its password
        from ...errors import StoreUnreachable
        from .reach import cause_of

        raise StoreUnreachable(
            f"cannot connect to the PostgreSQL store {store.path}: {cause_of(target, e)}", {"store": store.path}
        ) from None

    for setting in SERVER_KEEPALIVES:  # the server notices a holder cut off by the network as soon
        conn.execute(f"SET {setting}")
    return conn


# pg_try_advisory_lock(EMBED_CLASS, workspace id): who embeds a workspace's pending chunks now
EMBED_CLASS = int.from_bytes(b"adem", "big")


class EmbedClaims:
    """Which workspaces this daemon embeds on a shared PostgreSQL store (docs/dev/postgres.md, section
    5): one daemon at a time fills a workspace's vectors, so two never embed the same texts. A claim is
    a session-level advisory lock on one connection of the daemon's own, taken before a step and kept
    while the workspace has pending chunks; released when its queue settles, and by Postgres when the
    daemon dies, whereupon another daemon's next step claims it. Runs on: the embed queue's thread."""

    def __init__(self, connect: Callable[[], psycopg.Connection]):
        self._connect = connect
        self._conn: psycopg.Connection | None = None
        self._held: set[int] = set()
        self._lock = threading.Lock()

    def claim(self, workspace_id: int) -> bool:
        """True when this daemon embeds the workspace (now, or already); False when another does."""
        with self._lock:
            if self._conn is not None and not alive(self._conn):  # a restart ended the session, and its claims
                self._conn.close()
            if workspace_id in self._held and self._conn is not None and not self._conn.closed:
                return True
            if self._conn is None or self._conn.closed or self._conn.broken:
                self._conn = self._connect()  # a new session: whatever the old one held went with it
                self._held.clear()
            got = self._conn.execute("SELECT pg_try_advisory_lock(%s, %s)", (EMBED_CLASS, workspace_id)).fetchone()
            if got and got[0]:
                self._held.add(workspace_id)
                return True
            return False

    def release(self, workspace_id: int) -> None:
        with self._lock:
            if workspace_id in self._held and self._conn is not None:
                self._held.discard(workspace_id)
                try:
                    self._conn.execute("SELECT pg_advisory_unlock(%s, %s)", (EMBED_CLASS, workspace_id))
                except Exception:  # the session is gone, and its locks with it
                    log.debug("embed claim release failed", exc_info=True)

    def close(self) -> None:
        with self._lock:
            self._held.clear()
            if self._conn is not None:
                self._conn.close()
                self._conn = None


def embed_claims(store: Any) -> EmbedClaims | None:
    """The embed claims of a PostgreSQL store; None for a SQLite store (its one writer embeds all)."""
    if getattr(store, "dialect", None) != POSTGRES:
        return None
    return EmbedClaims(lambda: dedicated(store, "embed"))
