"""Change notifications between daemons that share one PostgreSQL store (docs/dev/postgres.md, section 6).

The writing transaction calls `notify` once per change-log row it inserts (store/documents.py:
log_change): `pg_notify('autodoc_changes', '<cursor>')`, which Postgres delivers at commit, never
before the rows are visible. Every daemon keeps one `ChangeFeed`: a thread with an autocommit
connection that LISTENs and, on each wake-up (and on every (re)connect, when it may have missed
some), reads `changes` after the last cursor it handed on and hands the rows to its daemon, which
marks those documents dirty in its caches and tells its subscribers (peers.py: _changed_elsewhere).

The notification is only the wake-up: the change log is the truth, so a lost notification (a dropped
connection, a server restart) delays a daemon's view but never loses a change, and the payload is
read by nobody. Reading "after the last cursor" skips nothing because cursors are handed out in
commit order: a change row is inserted only after its transaction holds the `meta` row `generation`
(store/documents.py: next_generation, then log_change), so writers of every daemon are serialised
there and allocation order is commit order.

Vectors written by a daemon's embed queue make no change-log row: the writing transaction sends
`notify_vectors` (`v <workspace id> <document ids>`) instead, and the feed hands those to
`on_vectors`, so a daemon that searches vectors in its own memory (a store without pgvector,
docs/dev/postgres.md section 3) refreshes those documents. Such a notification lost while the feed
was cut off cannot be read back: after a reconnect the feed hands on None as well.

A workspace added, removed or configured makes no change-log row either (its documents' rows come
later, go with it, or stay as they are): the writing transaction sends `notify_workspace`
(`w <workspace id> added|removed|configured`) and the feed hands it to `on_workspace` (the
sender's own feed too: it is every daemon's one teller of workspace changes), and every daemon
drops what it keeps of that workspace (its vectors, its link name tables) rather than serve or index by what is gone, watches the
roots anew and tells its clients. Lost while the feed was cut off, it is not read back: the feed hands
on None after a reconnect, which forgets every workspace's name tables, and calls `on_listen` on
every connect (the first too: the daemon's view of the workspaces was read before the feed
listened), which reads the workspaces again. A daemon older than "added" ignores it (the payload is not one it knows) and learns of the
workspace at its next restart, as before.

A daemon also hears its own changes; peers.py drops those it already told (the cursors it emitted).
A feed whose cursor predates what the log has trimmed (a daemon cut off for longer than the log
keeps) hands on None: anything may have changed.

Runs on: `notify` on the writing thread, in its transaction; `ChangeFeed` on its own thread
(autodoc-changes), calling `deliver` there.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..changes import entry
from ..sql import POSTGRES

if TYPE_CHECKING:  # the type only: a SQLite daemon never loads psycopg
    import psycopg

log = logging.getLogger("autodoc.store.notify")

CHANNEL = "autodoc_changes"
PAGE = 1000  # change rows read per query while catching up
POLL = 0.25  # seconds between looks at the stop flag while nothing arrives
RETRY_MAX = 5.0  # the longest pause between reconnect attempts

# (changes in cursor order) or None ("anything may have changed": the log was trimmed past our cursor,
# or vector notifications may have been missed while the feed was cut off)
Deliver = Callable[[list[dict[str, Any]] | None], None]
OnVectors = Callable[[int, list[int] | None], None]  # (workspace id, its documents whose vectors changed, or None)
OnWorkspace = Callable[[int, str], None]  # (workspace id, "added" | "removed" | "configured")
WORKSPACE_EVENTS = ("added", "removed", "configured")
VECTORS_PAYLOAD_MAX = 7900  # pg_notify's payload must stay under 8000 bytes: past it, "any document"


def notify(db: Any, cursor: int) -> None:
    """In the writing transaction: wake every daemon's feed at commit (a Snapshot whose dialect is postgres)."""
    db.execute("SELECT pg_notify(?, ?)", (CHANNEL, str(cursor)))


def notify_vectors(db: Any, workspace_id: int, documents: list[int] | None) -> None:
    """In the transaction that writes a workspace's vectors: wake the other daemons' feeds at commit."""
    payload = f"v {workspace_id}"
    if documents is not None:
        full = payload + "".join(f" {d}" for d in documents)
        payload = full if len(full) <= VECTORS_PAYLOAD_MAX else payload
    db.execute("SELECT pg_notify(?, ?)", (CHANNEL, payload))


def notify_workspace(db: Any, workspace_id: int, event: str) -> None:
    """In the transaction that adds, removes or configures a workspace: every daemon's feed hears it at commit."""
    assert event in WORKSPACE_EVENTS, event
    db.execute("SELECT pg_notify(?, ?)", (CHANNEL, f"w {workspace_id} {event}"))


def parse_workspace(payload: str) -> tuple[int, str] | None:
    """(workspace id, event) of a `notify_workspace` payload; None for any other payload."""
    parts = payload.split()
    if len(parts) != 3 or parts[0] != "w" or not parts[1].isdigit() or parts[2] not in WORKSPACE_EVENTS:
        return None
    return int(parts[1]), parts[2]


def parse_vectors(payload: str) -> tuple[int, list[int] | None] | None:
    """(workspace id, documents or None) of a `notify_vectors` payload; None for any other payload."""
    parts = payload.split()
    if len(parts) < 2 or parts[0] != "v" or not all(p.isdigit() for p in parts[1:]):
        return None
    return int(parts[1]), [int(p) for p in parts[2:]] or None


def head(conn: psycopg.Connection, schema: str) -> int:
    """The newest cursor in the log (0 when empty)."""
    row = conn.execute(f'SELECT COALESCE(MAX(cursor), 0) FROM "{schema}".changes').fetchone()
    return int(row[0]) if row else 0


def read_after(conn: psycopg.Connection, schema: str, cursor: int, limit: int = PAGE) -> list[dict[str, Any]]:
    """Change rows after `cursor`, every workspace's, in cursor order."""
    rows = conn.execute(
        f'SELECT cursor, workspace, path, op, generation, old_path, time FROM "{schema}".changes '
        "WHERE cursor > %s ORDER BY cursor LIMIT %s",
        (cursor, limit),
    ).fetchall()
    return [entry(*r) for r in rows]


def trimmed_through(conn: psycopg.Connection, schema: str) -> int:
    row = conn.execute(f"SELECT value FROM \"{schema}\".meta WHERE key = 'changes_trimmed_through'").fetchone()
    return int(row[0]) if row else 0


class ChangeFeed:
    """One daemon's LISTEN connection, on a thread of its own, handing on every change committed
    after `cursor` (default: the log's head when the feed first connects) exactly once, in order."""

    def __init__(
        self,
        connect: Callable[[], psycopg.Connection],
        schema: str,
        deliver: Deliver,
        *,
        cursor: int | None = None,
        poll: float = POLL,
        on_vectors: OnVectors | None = None,
        on_workspace: OnWorkspace | None = None,
        on_listen: Callable[[], None] | None = None,
    ) -> None:
        self._connect = connect  # a new autocommit connection each call
        self.schema = schema
        self._deliver = deliver
        self._on_vectors = on_vectors
        self._on_workspace = on_workspace
        # called on each (re)connect once LISTENing: what a notification would have said (workspaces
        # added, removed or configured meanwhile) is read from the store instead
        self._on_listen = on_listen
        self.cursor = cursor
        self._poll = poll
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.connected = threading.Event()  # set while LISTENing (tests wait on it)
        self.connects = 0  # how many times it has (re)connected
        self.backend_pid: int | None = None  # the server process of the LISTEN session

    def start(self) -> ChangeFeed:
        self._thread = threading.Thread(target=self._run, name="autodoc-changes", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def _run(self) -> None:
        pause = 0.1
        while not self._stop.is_set():
            try:
                with self._connect() as conn:
                    self._listen(conn)
                pause = 0.1
            except Exception as e:  # the server restarted, the connection dropped, or the daemon could not
                # take the changes (its own read failed): reconnect, then read them again from the cursor
                self.connected.clear()
                if self._stop.is_set():
                    break
                log.warning("change feed: %s; reconnecting in %.1f s", _one_line(e.__cause__ or e), pause)
                self._stop.wait(pause)
                pause = min(RETRY_MAX, pause * 2)

    def _listen(self, conn: psycopg.Connection) -> None:
        conn.execute(f"LISTEN {CHANNEL}")
        self.backend_pid = conn.info.backend_pid
        # LISTEN first, then read: a change committed in between is both read and notified (read twice
        # is harmless: the cursor skips it), never neither
        if self.cursor is None:
            self.cursor = head(conn, self.schema)
        self.connects += 1
        self._catch_up(conn)
        if self.connects > 1 and self._on_vectors is not None:
            self._hand_on(None)  # vector notifications sent while the feed was cut off are lost
        if self._on_listen is not None:
            self._on_listen()  # a failure (the store's read) is a reconnect, as a hand-on's is
        self.connected.set()
        while not self._stop.is_set():
            notes = list(conn.notifies(timeout=self._poll, stop_after=1))
            if notes:
                notes += conn.notifies(timeout=0.0)  # drain what is queued: one read covers them all
                self._catch_up(conn)
                for note in notes:
                    got = parse_vectors(note.payload)
                    if got is not None and self._on_vectors is not None:
                        try:
                            self._on_vectors(*got)
                        except Exception:
                            log.exception("change feed: handing on vectors failed")
                    event = parse_workspace(note.payload)
                    if event is not None and self._on_workspace is not None:
                        try:
                            self._on_workspace(*event)
                        except Exception:
                            log.exception("change feed: handing on a workspace's change failed")
            elif conn.closed or conn.broken:
                raise ConnectionError("the change feed's connection closed")

    def _catch_up(self, conn: psycopg.Connection) -> None:
        assert self.cursor is not None
        if 0 < self.cursor < trimmed_through(conn, self.schema):
            log.warning("change feed: the log was trimmed past cursor %d; every cache is stale", self.cursor)
            now = head(conn, self.schema)
            self._hand_on(None)
            self.cursor = now
            return
        while True:
            rows = read_after(conn, self.schema, self.cursor)
            if rows:
                self._hand_on(rows)
                self.cursor = rows[-1]["cursor"]  # only once handed on: a failed hand-on is read again
            if len(rows) < PAGE:
                return

    def _hand_on(self, rows: list[dict[str, Any]] | None) -> None:
        try:
            self._deliver(rows)
        except Exception as e:
            log.debug("change feed: handing on changes failed", exc_info=True)
            raise HandOnFailed("the daemon could not take the changes") from e


class HandOnFailed(Exception):
    """The daemon's handler failed (its store read, say): the feed reads the same changes again later."""


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"


def follow(
    store: Any,
    deliver: Deliver,
    on_vectors: OnVectors | None = None,
    on_workspace: OnWorkspace | None = None,
    on_listen: Callable[[], None] | None = None,
) -> ChangeFeed | None:
    """Start the change feed of a PostgreSQL store (store/pg/store.py: PgStore), from the log's head now;
    None for a SQLite store, where this process is the one writer and tells its own listeners."""
    if getattr(store, "dialect", None) != POSTGRES:
        return None
    from ..changes import head as log_head
    from .indexlock import dedicated

    with store.read() as db:  # from now: whatever commits while the feed connects is read too
        cursor = log_head(db)
    feed = ChangeFeed(
        lambda: dedicated(store, "listen"),
        store.schema,
        deliver,
        cursor=cursor,
        on_vectors=on_vectors,
        on_workspace=on_workspace,
        on_listen=on_listen,
    )
    return feed.start()
