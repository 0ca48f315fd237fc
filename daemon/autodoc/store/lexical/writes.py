"""A chunk's lexical row written and deleted, for the row modules that write chunks
(store/documents.py, store/workspaces.py), on either store, in the caller's transaction.

- SQLite: the FTS5 row (chunks_fts, the source of truth there) and its postings (postings.py);
- PostgreSQL (no FTS5, docs/dev/postgres.md section 2): the postings, from FTS5's own tokenizer over
  the same four strings, and the index's sizes and totals (store/pg/lexical.py) that FTS5 keeps itself,
  held by the transaction and sent at its commit (or before a statement that reads them).

Runs on: the writer, inside the caller's transaction.
"""

from __future__ import annotations

from ..interface import Snapshot
from ..pg import lexical as pg_lexical
from ..sql import POSTGRES, dialect
from . import postings


def insert(db: Snapshot, chunk_id: int, texts: tuple[str, str, str, str]) -> None:
    """The chunk's row: title, breadcrumb, meta and body as the index holds them (ftstext.fts_text)."""
    if dialect(db) == POSTGRES:  # postings and sizes together (store/pg/lexical.py add)
        postings.added(db, chunk_id, texts)
        return
    db.execute("INSERT INTO chunks_fts(rowid, title, breadcrumb, meta, body) VALUES (?,?,?,?,?)", (chunk_id, *texts))
    postings.added(db, chunk_id, texts)


def delete(db: Snapshot, chunk_ids: list[int]) -> None:
    """These chunks' rows (before the chunks themselves go: FTS5's table is an external-content one)."""
    if dialect(db) == POSTGRES:
        pg_lexical.removed(db, chunk_ids)
    else:
        for cid in chunk_ids:
            db.execute("DELETE FROM chunks_fts WHERE rowid=?", (cid,))
    postings.removed(db, chunk_ids)


def delete_workspace(db: Snapshot, workspace_id: int) -> None:
    """Every chunk row of a workspace (before its chunks go)."""
    if dialect(db) == POSTGRES:  # whose postings tables always exist: the chunk ids read once for both
        ids = [r[0] for r in db.execute("SELECT id FROM chunks WHERE workspace_id=?", (workspace_id,)).fetchall()]
        pg_lexical.removed(db, ids)
        postings.removed(db, ids)
        return
    db.execute("DELETE FROM chunks_fts WHERE rowid IN (SELECT id FROM chunks WHERE workspace_id=?)", (workspace_id,))
    postings.removed_workspace(db, workspace_id)
