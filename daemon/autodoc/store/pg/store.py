"""The PostgreSQL store: StoreInterface (store/interface.py) over psycopg connections, the second
backend beside the SQLite file (docs/dev/postgres.md, sections 1, 4, 5, 7).

- `read()`: a read connection checked out for the read, one REPEATABLE READ, READ ONLY transaction
  (one snapshot, as a SQLite read transaction is); a read inside a read on the same thread joins it
  (a savepoint of the same snapshot). Connections go back to an idle list when the outermost read
  ends, so a daemon holds as many as it runs reads at once (plus up to IDLE_READERS kept open), not
  one per thread that ever read: four daemons stay well inside a server's max_connections.
- `write()`: the one writer connection under this process's re-entrant lock, one transaction (a
  savepoint when nested). Across daemons, writers are serialized by the `meta` row `generation`
  (store/documents.py next_generation) that every indexing transaction updates (section 6).
- `locked()`: the process's write lock and the writer connection, outside a transaction.
- `writable`: False when opened with writer=False, or when the role may not write (store/pg/roles.py):
  a reader role's daemon searches and reads, and indexing refuses with a clear error.

The schema (store/pg/schema.py) is migrated when a writer opens the store. Every connection's
search_path is the store's schema (`autodoc`, or the first of the target's own `search_path`
option), then `public` (where pgvector lives). `path` is the target with its password redacted:
what every message shows; a psycopg failure to connect is re-raised as the product's own error
naming that, never the password.

Runs on: any thread. A read holds its connection alone until it ends (another thread's reads take
another); writes go through the single writer connection under one re-entrant lock.
"""

from __future__ import annotations

import os
import re
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from ...config.pguri import MASK, redact
from ...errors import StoreReadOnly, StoreTooNew, StoreUnreachable, WorkspaceNotFound
from .hang import HangWatch, PgConnection
from .liveness import alive
from .reach import fix_for
from .roles import can_write
from .schema import MIGRATIONS, SCHEMA, migrate, schema_version
from .snapshot import DIALECT, PgSnapshot, prepare

# TCP keepalives both ways (section 5): a peer cut off by the network is noticed in ~6 s, so an
# indexer's lock is released and taken over within the 10 s. Unix sockets ignore them.
KEEPALIVES = {"keepalives": 1, "keepalives_idle": 3, "keepalives_interval": 1, "keepalives_count": 3}
SERVER_KEEPALIVES = ("tcp_keepalives_idle = 3", "tcp_keepalives_interval = 1", "tcp_keepalives_count = 3")
CONNECT_TIMEOUT_S = 10
# A read's statements and lock waits are bounded on the server (section 7b): a search, a read, a
# page of the in-memory vectors take milliseconds to a second or two even at 1M chunks; a read held
# 30 s is stuck, and its client is told so (-32012) rather than kept waiting. The writer is not
# bounded there: an index batch waits its turn behind other daemons' transactions (the generation
# row), and `store copy` builds an HNSW index for minutes. A hung server is store/pg/hang.py's.
# A target that sets either itself (`options=-c statement_timeout=…`) keeps its own.
READ_STATEMENT_TIMEOUT = "30s"
READ_LOCK_TIMEOUT = "10s"
# read connections kept open between reads: a daemon runs 8 reads at once (rpc/server.py READERS)
IDLE_READERS = 8

_SEARCH_PATH = re.compile(r"-c\s*search_path\s*=\s*([^\s,]+)")


def schema_of(options: str) -> str:
    """The AutoDoc schema a target names through its `options` (`-csearch_path=team,public`: team),
    else `autodoc`."""
    m = _SEARCH_PATH.search(options or "")
    return m.group(1).strip('"') if m else SCHEMA


class PgStore:
    """A store in a PostgreSQL database: the same rows as the SQLite file's, many daemons at once."""

    dialect = DIALECT

    def __init__(
        self,
        target: str,
        *,
        writer: bool = True,
        holder: dict[str, Any] | None = None,
        schema: str | None = None,
    ):
        self.target = target
        self.path = redact(target)
        self._holder = dict(holder or {})
        self._write_lock = threading.RLock()
        self._local = threading.local()
        self._idle: list[PgSnapshot] = []  # read connections no read holds now
        self._readers_lock = threading.Lock()
        self._closed = False
        self._db: PgSnapshot | None = None
        self._watch = HangWatch(target, _keepalives(target))  # a hung server's waits cut (store/pg/hang.py)
        first = self._connect("write" if writer else "read")
        try:
            self.schema = schema or schema_of(first.conn.info.get_parameters().get("options", ""))
            if writer:
                try:
                    migrate(first.conn, self.schema)
                except psycopg.errors.InsufficientPrivilege:
                    pass  # a role that may not migrate (a reader): a schema up to date is all it needs, said below
            self._set_search_path(first)
            self._check_schema(first)
            self.role = str(first.conn.info.user)
            # why writes are refused, said by StoreReadOnly (None: they are not)
            self._read_only: str | None = "it was opened read-only here"
            if writer and can_write(first.conn, self.schema):
                self._db, self._read_only = first, None
            else:
                if writer:
                    self._read_only = (
                        f"the role {self.role} may only read it: search and read, not index (connect as an "
                        "indexer role to index: README, For a team)"
                    )
                first.close()
        except BaseException:
            first.close()
            raise

    # -- connections -------------------------------------------------------------------------

    def _connect(self, role: str) -> PgSnapshot:
        """A new autocommit connection (transactions are explicit), named in pg_stat_activity."""
        name = f"autodoc {role} {socket.gethostname()}:{os.getpid()}"
        try:
            conn = PgConnection.connect(
                self.target,
                autocommit=True,
                connect_timeout=CONNECT_TIMEOUT_S,
                application_name=name[:63],
                **_keepalives(self.target),
            )
        except psycopg.Error as e:
            cause = _reason(e, self.target).removeprefix("connection is bad: ").removeprefix("connection failed: ")
            raise StoreUnreachable(
                f"cannot connect to the PostgreSQL store {self.path}: {cause}; fix: {fix_for(cause)}",
                {"store": self.path},
            ) from None
        conn.watch = self._watch
        prepare(conn)
        for setting in SERVER_KEEPALIVES:
            conn.execute(f"SET {setting}")
        return PgSnapshot(conn)

    def _set_search_path(self, snap: PgSnapshot) -> None:
        snap.conn.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(self.schema)))

    def _check_schema(self, snap: PgSnapshot) -> None:
        version = schema_version(snap.conn, self.schema)
        if version == 0:
            raise WorkspaceNotFound(
                f"no AutoDoc store in {self.path} (schema {self.schema}): index a workspace into it first"
            )
        if version > len(MIGRATIONS):
            raise StoreTooNew(
                f"the database's AutoDoc schema ({self.schema}) is version {version}, newer than this AutoDoc "
                f"understands ({len(MIGRATIONS)}); upgrade AutoDoc on this machine"
            )
        if version < len(MIGRATIONS):
            role = snap.conn.info.user
            raise StoreReadOnly(
                f"the database's AutoDoc schema ({self.schema}) is version {version}, older than this AutoDoc's "
                f"({len(MIGRATIONS)}), and the role {role} may not migrate it: run this AutoDoc once as the "
                "schema's owner (autodoc index), or an older AutoDoc here",
                {"store": self.path, "role": role},
            )

    def _open(self, role: str) -> PgSnapshot:
        snap = self._connect(role)
        try:
            self._set_search_path(snap)
        except BaseException:
            snap.close()
            raise
        return snap

    def _checkout(self) -> PgSnapshot:
        """An idle read connection, or a new one: each transaction on it is REPEATABLE READ, READ ONLY."""
        with self._readers_lock:
            while self._idle:
                snap = self._idle.pop()
                if not snap.conn.closed:
                    return snap
        snap = self._open("read")
        for setting, value in (("statement_timeout", READ_STATEMENT_TIMEOUT), ("lock_timeout", READ_LOCK_TIMEOUT)):
            if setting not in self.target.lower():
                snap.conn.execute(f"SET {setting} = '{value}'")
        snap.conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        snap.conn.read_only = True
        return snap

    def _drop_idle(self) -> None:
        with self._readers_lock:
            idle, self._idle = self._idle, []
        for snap in idle:
            _close_quietly(snap)

    def _checkin(self, snap: PgSnapshot) -> None:
        """Back to the idle list once its read is over (closed when the store is, or enough are idle)."""
        with self._readers_lock:
            if (
                not (self._closed or snap.conn.closed or snap.depth or snap.in_transaction)
                and len(self._idle) < IDLE_READERS
            ):
                self._idle.append(snap)
                return
        _close_quietly(snap)

    # -- StoreInterface ----------------------------------------------------------------------

    @property
    def writable(self) -> bool:
        return self._db is not None

    @contextmanager
    def read(self) -> Iterator[PgSnapshot]:
        """One read snapshot (nests: an inner read on this thread joins the outer one)."""
        held: PgSnapshot | None = getattr(self._local, "read", None)
        if held is not None:  # a read inside a read: a savepoint of the same snapshot
            with _translated(self), held:
                yield held
            return
        holder: list[PgSnapshot] = []

        def connection() -> PgSnapshot:
            if holder:  # the one that failed at BEGIN is closed; the idle ones went with it (a restart)
                holder.pop()
                self._drop_idle()
            holder.append(self._checkout())
            return holder[0]

        try:
            with _translated(self), ExitStack() as stack:
                snap = _entered(connection)
                self._local.read = snap
                stack.push(snap.__exit__)
                yield snap
        finally:
            self._local.read = None
            if holder:
                self._checkin(holder[0])

    def writer(self) -> PgSnapshot:
        """The writer connection, for a caller that holds `locked()`; connected again when the server
        ended the last one (a restart: the transaction it cut short was rolled back there)."""
        if self._db is None:
            raise StoreReadOnly(
                f"cannot write the store {self.path}: {self._read_only}", {"store": self.path, "role": self.role}
            )
        if self._db.conn.closed:
            with self._write_lock:
                if self._db.conn.closed:
                    self._db = self._open("write")
        return self._db

    def check_writable(self) -> None:
        self.writer()

    @contextmanager
    def locked(self) -> Iterator[PgSnapshot]:
        """The write lock without a transaction: for work that spans several. No BEGIN finds out
        that the server ended the idle writer (a restart): its socket does (store/pg/liveness.py),
        so a live index's first write after a restart is not the one that fails."""
        self.writer()  # a read-only store refuses before it waits for the lock
        with self._write_lock, _translated(self):
            db = self.writer()
            if not alive(db.conn):
                db = self.writer()  # the dead one is closed now: connected again
            yield db

    @contextmanager
    def write(self) -> Iterator[PgSnapshot]:
        """The write lock and one transaction (a savepoint when nested)."""
        self.writer()  # a read-only store refuses before it waits for the lock
        with self._write_lock, _translated(self), ExitStack() as stack:
            db = _entered(self.writer)
            stack.push(db.__exit__)
            yield db

    def set_holder(self, holder: dict[str, Any]) -> None:
        # who indexes is named by the indexer lock's row (store/pg/indexlock.py), not by a lease
        self._holder.update(holder)

    def close(self) -> None:
        with self._readers_lock:
            self._closed = True
        self._watch.close()
        self._drop_idle()
        if self._db is not None:
            with self._write_lock:
                _close_quietly(self._db)
                self._db = None


def _keepalives(target: str) -> dict[str, Any]:
    """The keepalive parameters, unless the target sets its own."""
    lowered = target.lower()
    return {k: v for k, v in KEEPALIVES.items() if k not in lowered}


def _reason(e: psycopg.Error, target: str) -> str:
    """psycopg's first line, with the password masked should libpq ever quote it."""
    text = (str(e).strip() or type(e).__name__).splitlines()[0]
    try:
        password = conninfo_to_dict(target).get("password")
    except psycopg.Error:
        password = None
    return text.replace(str(password), MASK) if password else text


@contextmanager
def _translated(store: PgStore) -> Iterator[None]:
    """A lost connection (server restart, network) as the product's error naming the store."""
    try:
        yield
    except (psycopg.errors.QueryCanceled, psycopg.errors.LockNotAvailable) as e:  # a read's bounds
        raise StoreUnreachable(
            f"the PostgreSQL store {store.path} did not answer in time: {_reason(e, store.target)}",
            {"store": store.path},
        ) from e
    except psycopg.OperationalError as e:
        raise StoreUnreachable(
            f"the PostgreSQL store {store.path} went away: {_reason(e, store.target)}", {"store": store.path}
        ) from e


def _entered(connection: Callable[[], PgSnapshot]) -> PgSnapshot:
    """`with snap:` entered on the connection `connection()` gives. A connection the server ended
    while it sat idle (a restart, an idle timeout) fails at that BEGIN, before anything was read or
    written: it is replaced once (`connection()` connects again when its last one is closed), so a
    restart costs the next request nothing. Within a transaction nothing is retried."""
    snap = connection()
    try:
        snap.__enter__()
    except psycopg.OperationalError:
        if snap.depth or getattr(snap.conn, "cut", False):  # cut: the server hangs, a new one would wait too
            raise
        _close_quietly(snap)
        snap = connection()
        snap.__enter__()
    return snap


def _close_quietly(snap: PgSnapshot) -> None:
    try:
        snap.close()
    except Exception:
        pass
