"""Vectors and which model serves them.

A vector is keyed by (workspace, model fingerprint, text hash), so identical
texts share one row and an unchanged text is never embedded twice. A chunk
is pending exactly when no vector exists for its key under the configured
model. `embed_state` names the model whose vectors serve searches.

One SQL text serves both stores (docs/dev/postgres.md, section 1) but for SQLite's
`INDEXED BY` hints (its planner otherwise picks the wide primary key; Postgres's chooses well)
and, on PostgreSQL with pgvector, the `v` column and the per-model HNSW index that let the store
search vectors itself (store/pg/vectors.py; `store_search` says whether it can).

Runs on: the caller's thread, on the connection it passes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from .interface import Snapshot
from .pg import vectors as pg
from .pg.vectors import EF_SEARCH_MAX
from .sql import POSTGRES, all_rows, dialect, in_ids, scalar
from .workspaces import chunk_count

__all__ = ["EF_SEARCH_MAX"]

PAGE_ROWS = 10_000  # rows of a PostgreSQL read of every vector fetched at once (the client holds a whole result)


@dataclass(frozen=True)
class ActiveModel:
    fingerprint: str
    config: dict[str, Any] | None
    name: str | None


def _hint(db: Snapshot, index: str) -> str:
    return "" if dialect(db) == POSTGRES else f" INDEXED BY {index}"


def active_model(db: Snapshot, ws_id: int) -> ActiveModel | None:
    row = db.execute(
        "SELECT active_fp, active_config, active_name FROM embed_state WHERE workspace_id=?", (ws_id,)
    ).fetchone()
    if not row or row[0] is None:
        return None
    return ActiveModel(fingerprint=row[0], config=json.loads(row[1]) if row[1] else None, name=row[2])


def activate(db: Snapshot, ws_id: int, fp: str, config: dict[str, Any], name: str) -> None:
    db.execute(
        "INSERT INTO embed_state(workspace_id, active_fp, active_config, active_name) VALUES (?,?,?,?) "
        "ON CONFLICT(workspace_id) DO UPDATE SET active_fp=excluded.active_fp, "
        "active_config=excluded.active_config, active_name=excluded.active_name",
        (ws_id, fp, json.dumps(config), name),
    )


def drop_other_models(db: Snapshot, ws_id: int, fp: str) -> None:
    db.execute("DELETE FROM vectors WHERE workspace_id=? AND model_fp != ?", (ws_id, fp))
    if dialect(db) == POSTGRES:
        pg.drop_indexes(db, ws_id, keep=fp)


def drop_model(db: Snapshot, ws_id: int, fp: str) -> None:
    """Delete one model's vectors (the instant tier's, once the model has filled)."""
    db.execute("DELETE FROM vectors WHERE workspace_id=? AND model_fp=?", (ws_id, fp))
    if dialect(db) == POSTGRES:
        pg.drop_indexes(db, ws_id, only=fp)


def coverage(db: Snapshot, ws_id: int, fp: str) -> tuple[int, int]:
    """(chunks with a vector for fp, chunks without)."""
    total = chunk_count(db, ws_id)
    done = scalar(
        db,
        f"SELECT COUNT(*) FROM chunks c WHERE c.workspace_id=? AND EXISTS (SELECT 1 FROM vectors v{_hint(db, 'vectors_keys')} "
        "WHERE v.workspace_id=c.workspace_id AND v.model_fp=? AND v.text_hash=c.text_hash)",
        (ws_id, fp),
    )
    return done, total - done


def pending_texts(db: Snapshot, ws_id: int, fp: str, limit: int) -> list[tuple[str, str]]:
    """(text hash, breadcrumb + newline + text) of texts without a vector for fp, in the order
    people search them: every document's first passage (its title and abstract) before any later
    one, and within each, the most recently changed document first (a file by its mtime, a
    session by when it was written), then the oldest chunk."""
    # every chunk of a group has the same breadcrumb and text (the hash is theirs): MIN picks any
    newline = "chr(10)" if dialect(db) == POSTGRES else "char(10)"
    return all_rows(
        db,
        f"""SELECT c.text_hash, MIN(c.breadcrumb || {newline} || c.text) FROM chunks c
           JOIN documents d ON d.id = c.document_id
           WHERE c.workspace_id=? AND NOT EXISTS (SELECT 1 FROM vectors v{_hint(db, "vectors_keys")} WHERE v.workspace_id=c.workspace_id
             AND v.model_fp=? AND v.text_hash=c.text_hash)
           GROUP BY c.text_hash
           ORDER BY MIN(CASE WHEN c.ordinal > 0 AND c.kind != 'abstract' THEN 1 ELSE 0 END),
                    MAX(CASE WHEN d.mtime_ns > 0 THEN d.mtime_ns ELSE CAST(d.indexed_at * 1e9 AS BIGINT) END) DESC,
                    MIN(c.id)
           LIMIT ?""",
        (ws_id, fp, limit),
    )


def still_pending(db: Snapshot, ws_id: int, fp: str, hashes: list[str]) -> set[str]:
    """Which of these text hashes some chunk still has, without a vector for fp."""
    among, arg = in_ids(db, "c.text_hash", hashes)
    return {
        h
        for (h,) in db.execute(
            f"""SELECT DISTINCT c.text_hash FROM chunks c{_hint(db, "chunks_by_hash")}
           WHERE c.workspace_id=? AND {among}
             AND NOT EXISTS (SELECT 1 FROM vectors v{_hint(db, "vectors_keys")} WHERE v.workspace_id=c.workspace_id
               AND v.model_fp=? AND v.text_hash=c.text_hash)""",
            (ws_id, arg, fp),
        )
    }


def workspace_exists(db: Snapshot, ws_id: int) -> bool:
    return db.execute("SELECT 1 FROM workspaces WHERE id=?", (ws_id,)).fetchone() is not None


def write_vectors(db: Snapshot, ws_id: int, fp: str, rows: list[tuple[str, bytes, bytes]]) -> None:
    """rows: (text hash, float32 bytes, sign-code bytes). On PostgreSQL with pgvector, also the
    vector column and the (workspace, model)'s HNSW index (store/pg/vectors.py)."""
    if dialect(db) == POSTGRES and (schema := pg.extension(db)) is not None:
        pg.write(db, schema, ws_id, fp, rows)
        return
    db.executemany(
        "INSERT INTO vectors(workspace_id, model_fp, text_hash, f32, bits) VALUES (?,?,?,?,?) "
        "ON CONFLICT(workspace_id, model_fp, text_hash) DO UPDATE SET f32=excluded.f32, bits=excluded.bits",
        [(ws_id, fp, h, f32, bits) for h, f32, bits in rows],
    )


def documents_with_texts(db: Snapshot, ws_id: int, hashes: list[str]) -> list[int]:
    among, arg = in_ids(db, "text_hash", hashes)
    return [
        d
        for (d,) in db.execute(
            f"SELECT DISTINCT document_id FROM chunks WHERE workspace_id=? AND {among}",
            (ws_id, arg),
        )
    ]


def _complete(db: Snapshot, scope: str) -> str:
    """(chunk id, document id, f32, bits) of the chunks of documents whose every chunk has a vector;
    parameters: fp, workspace, the scope's, workspace, fp."""
    return f"""SELECT c.id, c.document_id, v.f32, v.bits FROM chunks c
            JOIN vectors v ON v.workspace_id=c.workspace_id AND v.model_fp=? AND v.text_hash=c.text_hash
            WHERE c.workspace_id=?{scope} AND c.document_id NOT IN (
              SELECT c2.document_id FROM chunks c2 WHERE c2.workspace_id=? AND NOT EXISTS (
                SELECT 1 FROM vectors v2{_hint(db, "vectors_keys")} WHERE v2.workspace_id=c2.workspace_id AND v2.model_fp=?
                AND v2.text_hash=c2.text_hash))
            ORDER BY c.id"""


def complete_vectors(
    db: Snapshot, ws_id: int, fp: str, doc_ids: list[int] | None
) -> Iterator[tuple[int, int, bytes, bytes]]:
    """(chunk id, document id, f32, bits) of the documents whose every chunk has a
    vector for fp (all of them, or those of doc_ids), by chunk id."""
    if doc_ids is not None:
        among, arg = in_ids(db, "c.document_id", doc_ids)
        return iter(db.execute(_complete(db, f" AND {among}"), [fp, ws_id, arg, ws_id, fp]))
    if dialect(db) != POSTGRES:
        return iter(db.execute(_complete(db, ""), [fp, ws_id, ws_id, fp]))
    return _pages(db, ws_id, fp)


def _pages(db: Snapshot, ws_id: int, fp: str) -> Iterator[tuple[int, int, bytes, bytes]]:
    """Every complete row, PAGE_ROWS at a time by chunk id: psycopg holds a statement's whole
    result in memory (1.6 GB of rows at 1M chunks), where SQLite steps through its rows. The
    documents still waiting for a vector are read once (few), not by every page."""
    waiting = {
        int(d)
        for (d,) in db.execute(
            "SELECT DISTINCT c2.document_id FROM chunks c2 WHERE c2.workspace_id=? AND NOT EXISTS ("
            "SELECT 1 FROM vectors v2 WHERE v2.workspace_id=c2.workspace_id AND v2.model_fp=? "
            "AND v2.text_hash=c2.text_hash)",
            (ws_id, fp),
        )
    }
    after = -1
    while True:
        page = db.execute(
            """SELECT c.id, c.document_id, v.f32, v.bits FROM chunks c
               JOIN vectors v ON v.workspace_id=c.workspace_id AND v.model_fp=? AND v.text_hash=c.text_hash
               WHERE c.workspace_id=? AND c.id > ? ORDER BY c.id LIMIT ?""",
            (fp, ws_id, after, PAGE_ROWS),
        ).fetchall()
        yield from ((r[0], r[1], r[2], r[3]) for r in page if r[1] not in waiting)
        if len(page) < PAGE_ROWS:
            return
        after = page[-1][0]


def chunk_vectors(db: Snapshot, ws_id: int, fp: str, chunk_ids: Iterable[int]) -> list[tuple[int, bytes, bytes]]:
    """(chunk id, f32, bits) of these chunks, where their document has every vector for fp."""
    among, arg = in_ids(db, "c.id", list(chunk_ids))
    return [
        (int(r[0]), bytes(r[2]), bytes(r[3]))
        for r in db.execute(_complete(db, f" AND {among}"), [fp, ws_id, arg, ws_id, fp])
    ]


def document_vectors(db: Snapshot, ws_id: int, fp: str, doc_id: int) -> list[tuple[int, int, bytes]]:
    """(chunk id, tokens, f32) of one document's chunks that have a vector for fp, by chunk id."""
    return all_rows(
        db,
        """SELECT c.id, c.tokens, v.f32 FROM chunks c
           JOIN vectors v ON v.workspace_id=c.workspace_id AND v.model_fp=? AND v.text_hash=c.text_hash
           WHERE c.workspace_id=? AND c.document_id=? ORDER BY c.id""",
        (fp, ws_id, doc_id),
    )


def store_search(db: Snapshot, ws_id: int, fp: str) -> str | None:
    """Whether the store searches this workspace's vectors of fp itself: the schema pgvector lives
    in when it does (PostgreSQL with the extension and the HNSW index), None when they are searched
    in memory (SQLite; or PostgreSQL without either)."""
    if dialect(db) != POSTGRES:
        return None
    schema = pg.extension(db)
    return schema if schema is not None and pg.has_index(db, ws_id, fp) else None


def nearest(
    db: Snapshot, schema: str, ws_id: int, fp: str, q: np.ndarray, k: int, allowed: list[int] | None
) -> tuple[list[tuple[int, str, float, int]], int]:
    """The store's nearest k texts to q, as their chunks' (id, text hash, the index's cosine
    distance, document id), nearest first, and how many texts the index answered; documents still
    waiting for a vector included (`waiting` says which; store/pg/vectors.py: nearest)."""
    return pg.nearest(db, schema, ws_id, fp, q, k, allowed)


def waiting(db: Snapshot, ws_id: int, fp: str, doc_ids: Iterable[int]) -> set[int]:
    """Those of these documents not every chunk of which has a vector for fp yet."""
    return pg.waiting(db, ws_id, fp, doc_ids)


def text_vectors(db: Snapshot, ws_id: int, fp: str, hashes: Iterable[str]) -> dict[str, tuple[bytes, bytes]]:
    """text hash → (f32, bits) of these texts' vectors for fp."""
    return pg.rows(db, ws_id, fp, hashes)
