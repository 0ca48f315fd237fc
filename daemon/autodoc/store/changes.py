"""The change log: a monotonic cursor clients sync from.

Entries are trimmed only when they are BOTH older than 7 days AND beyond the
newest 100,000 — so a quiet week and a busy hour both keep enough history.
A client whose cursor predates what was trimmed must resync (CursorExpired).

Runs on: the caller's thread, on the connection it passes.
"""

from __future__ import annotations

import time

from ..errors import CursorExpired
from .interface import Snapshot
from .sessions import is_session_path, session_id_of
from .sql import scalar

# entries are trimmed only once they are both older than this and beyond the newest this many
CHANGELOG_KEEP_DAYS = 7
CHANGELOG_KEEP_ENTRIES = 100_000


def entry(cursor: int, workspace: str, path: str, op: str, generation: int, old_path: str | None, time: float) -> dict:
    """One change as clients see it; a session's (path `.session/<id>`) also names its session_id."""
    out = {
        "cursor": cursor,
        "workspace": workspace,
        "path": path,
        "op": op,
        "generation": generation,
        "old_path": old_path,
        "time": time,
    }
    if is_session_path(path):
        out["session_id"] = session_id_of(path)
    return out


def _row(r) -> dict:
    return entry(*r)


def head(db: Snapshot) -> int:
    return scalar(db, "SELECT COALESCE(MAX(cursor), 0) FROM changes") or _trimmed(db)


def _trimmed(db: Snapshot) -> int:
    return int(scalar(db, "SELECT value FROM meta WHERE key='changes_trimmed_through'"))


def since(db: Snapshot, workspace: str, cursor: int, limit: int) -> dict:
    """Entries after `cursor`. Cursor 0 (a client that never read any) starts from the oldest
    entry kept; a cursor some trimmed entries came after must resync (CursorExpired)."""
    if 0 < cursor < _trimmed(db):
        raise CursorExpired(
            f"cursor {cursor} is older than the retained change log (entries through {_trimmed(db)} were trimmed); "
            "resync: read the workspace afresh, then continue from next_cursor",
            {"oldest_cursor": _trimmed(db), "next_cursor": head(db)},
        )
    rows = db.execute(
        "SELECT cursor, workspace, path, op, generation, old_path, time FROM changes "
        "WHERE cursor > ? AND workspace = ? ORDER BY cursor LIMIT ?",
        (cursor, workspace, limit + 1),
    ).fetchall()
    more = len(rows) > limit
    rows = rows[:limit]
    # next_cursor advances past other workspaces' entries too, so polling stays cheap
    nxt = rows[-1][0] if more else max(cursor, head(db))
    return {"changes": [_row(r) for r in rows], "next_cursor": nxt, "has_more": more}


def trim(
    db: Snapshot,
    *,
    now: float | None = None,
    keep_days: float = CHANGELOG_KEEP_DAYS,
    keep_entries: int = CHANGELOG_KEEP_ENTRIES,
) -> int:
    """Delete entries past both limits; return how many. Caller holds the transaction."""
    now = time.time() if now is None else now
    newest = scalar(db, "SELECT COALESCE(MAX(cursor), 0) FROM changes")
    cutoff_cursor = newest - keep_entries
    cutoff_time = now - keep_days * 86400
    last = scalar(db, "SELECT MAX(cursor) FROM changes WHERE cursor <= ? AND time < ?", (cutoff_cursor, cutoff_time))
    if not last:
        return 0
    n = scalar(db, "SELECT COUNT(*) FROM changes WHERE cursor <= ? AND time < ?", (last, cutoff_time))
    db.execute("DELETE FROM changes WHERE cursor <= ?", (last,))
    db.execute("UPDATE meta SET value=? WHERE key='changes_trimmed_through'", (str(last),))
    return n
