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

Runs on: the index job's thread, on the dedicated autocommit connection it passes (not yet wired:
nothing outside store/pg/ imports this module).
"""

from __future__ import annotations

import json
import time
from typing import Any

import psycopg
from psycopg import sql

from ...errors import StoreLocked
from .schema import LOCK_CLASS, SCHEMA

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
                info = self.holder()
                raise StoreLocked(
                    f"workspace {self.workspace_id} is being indexed by another AutoDoc ({describe(info)}); "
                    "wait for it to finish, or stop it",
                    {"holder": info},
                )
            time.sleep(poll)

    def holder(self) -> dict[str, Any]:
        """Who holds the lock: the holder's own row (`row`) and Postgres's view of its session
        (`session`: backend pid, application_name, client address); empty when nobody does."""
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
