"""Sessions in the store: which documents are sessions, their events' spans, their counts.

A session is stored as a document at the reserved path `.session/<session_id>`:
a hidden path, which the scanner never yields (ingest/scan.py skips every
hidden part), so no file on disk can be indexed under it and the index job's
disk diff leaves it alone (documents.file_states leaves sessions out). The
`session_events` table (migration 4) maps each event to the byte and line span
of its text in the session's rendered document; a chunk belongs to the event
whose span holds its first byte.

Runs on: the caller's thread, on the connection (snapshot or write transaction) it passes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .interface import Snapshot
from .sql import one

SESSION_PREFIX = ".session/"
# documents.path ranges over the UNIQUE(workspace_id, path) index: '0' is the character after '/'
SESSION_RANGE = "path >= '.session/' AND path < '.session0'"
NOT_SESSION = "NOT (" + SESSION_RANGE + ")"


def session_path(session_id: str) -> str:
    return SESSION_PREFIX + session_id


def is_session_path(path: str) -> bool:
    return path.startswith(SESSION_PREFIX)


def session_id_of(path: str) -> str:
    return path[len(SESSION_PREFIX) :]


@dataclass(frozen=True)
class StoredEvent:
    event_id: str
    ordinal: int
    kind: str
    time: str | None
    byte_start: int
    byte_end: int
    line_start: int
    line_end: int
    chunk_key: str  # what the event's chunks were cut from (ingest/session.py chunk_key)


def session_ids(db: Snapshot, ws_id: int) -> list[str]:
    return [
        session_id_of(p)
        for (p,) in db.execute(
            f"SELECT path FROM documents WHERE workspace_id=? AND {SESSION_RANGE} ORDER BY path", (ws_id,)
        )
    ]


def document_of(db: Snapshot, ws_id: int, session_id: str) -> tuple[int, str, bytes] | None:
    """(document id, title, rendered content) of a session, or None."""
    row = db.execute(
        "SELECT id, title, content FROM documents WHERE workspace_id=? AND path=?", (ws_id, session_path(session_id))
    ).fetchone()
    return None if row is None else (row[0], row[1], row[2])


def events_of(db: Snapshot, doc_id: int) -> list[StoredEvent]:
    return [
        StoredEvent(*r)
        for r in db.execute(
            "SELECT event_id, ordinal, kind, time, byte_start, byte_end, line_start, line_end, chunk_key "
            "FROM session_events WHERE document_id=? ORDER BY ordinal",
            (doc_id,),
        )
    ]


def write_events(db: Snapshot, doc_id: int, events: list[StoredEvent]) -> None:
    """Replace a session's event spans. Caller holds the transaction."""
    db.execute("DELETE FROM session_events WHERE document_id=?", (doc_id,))
    db.executemany(
        "INSERT INTO session_events(document_id, event_id, ordinal, kind, time, byte_start, byte_end, line_start, "
        "line_end, chunk_key) VALUES (?,?,?,?,?,?,?,?,?,?)",
        [
            (
                doc_id,
                e.event_id,
                e.ordinal,
                e.kind,
                e.time,
                e.byte_start,
                e.byte_end,
                e.line_start,
                e.line_end,
                e.chunk_key,
            )
            for e in events
        ],
    )


def chunks_of(db: Snapshot, doc_id: int) -> list[tuple]:
    """(ordinal, kind, breadcrumb, text, byte_start, byte_end, line_start, line_end, text_hash, tokens)
    of a session's chunks, in order."""
    return db.execute(
        "SELECT ordinal, kind, breadcrumb, text, byte_start, byte_end, line_start, line_end, text_hash, tokens "
        "FROM chunks WHERE document_id=? ORDER BY ordinal",
        (doc_id,),
    ).fetchall()


def document_counts(db: Snapshot, doc_id: int) -> tuple[int, int, int]:
    """(events, chunks, generation) of one session's document."""
    events, chunks, generation = one(
        db,
        "SELECT (SELECT COUNT(*) FROM session_events WHERE document_id=:d), "
        "(SELECT COUNT(*) FROM chunks WHERE document_id=:d), (SELECT generation FROM documents WHERE id=:d)",
        {"d": doc_id},
    )
    return events, chunks, generation


def listed(db: Snapshot, ws_id: int, after: str | None, limit: int) -> list[tuple]:
    """(session id, title, generation, events, chunks, first event time, last event time) of up to
    `limit` sessions whose id sorts after `after`, in id order (a range over the path index)."""
    low = session_path(after) if after is not None else SESSION_PREFIX
    return [
        (session_id_of(r[0]), *r[1:])
        for r in db.execute(
            f"""SELECT d.path, d.title, d.generation,
                   (SELECT COUNT(*) FROM session_events e WHERE e.document_id = d.id),
                   (SELECT COUNT(*) FROM chunks c WHERE c.document_id = d.id),
                   (SELECT MIN(time) FROM session_events e WHERE e.document_id = d.id),
                   (SELECT MAX(time) FROM session_events e WHERE e.document_id = d.id)
            FROM documents d WHERE d.workspace_id = ? AND d.{SESSION_RANGE} AND d.path > ?
            ORDER BY d.path LIMIT ?""",
            (ws_id, low, limit),
        )
    ]


def counts(db: Snapshot, ws_id: int) -> dict[str, int]:
    """{sessions, events, chunks} of a workspace."""
    sessions, chunks = one(
        db,
        f"SELECT COUNT(*), COALESCE(SUM((SELECT COUNT(*) FROM chunks c WHERE c.document_id = d.id)), 0) "
        f"FROM documents d WHERE d.workspace_id=? AND d.{SESSION_RANGE}",
        (ws_id,),
    )
    (events,) = one(
        db,
        f"SELECT COUNT(*) FROM session_events e JOIN documents d ON d.id = e.document_id "
        f"WHERE d.workspace_id=? AND d.{SESSION_RANGE}",
        (ws_id,),
    )
    return {"sessions": sessions, "events": events, "chunks": chunks}


def origin(path: str, title: str, event: tuple[str, str, str | None] | None = None) -> dict[str, Any]:
    """Where a hit comes from: a file, or a session and (for a chunk) its event (id, kind, time)."""
    if not is_session_path(path):
        return {"kind": "file", "path": path, "title": title}
    event_id, event_kind, time = event if event is not None else (None, None, None)
    return {
        "kind": "session",
        "session_id": session_id_of(path),
        "event_id": event_id,
        "event_kind": event_kind,
        "time": time,
        "title": title,
    }


def chunk_events(db: Snapshot, chunks: list[tuple[int, int, int]]) -> dict[int, tuple[str, str, str | None]]:
    """chunk id → (event id, event kind, time) for the (chunk id, document id, byte start) of session chunks."""
    out: dict[int, tuple[str, str, str | None]] = {}
    for cid, doc_id, byte_start in chunks:
        row = db.execute(
            "SELECT event_id, kind, time FROM session_events WHERE document_id=? AND byte_start<=? "
            "ORDER BY byte_start DESC LIMIT 1",
            (doc_id, byte_start),
        ).fetchone()
        if row is not None:
            out[cid] = (row[0], row[1], row[2])
    return out
