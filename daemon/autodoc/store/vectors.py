"""Vectors and which model serves them.

A vector is keyed by (workspace, model fingerprint, text hash), so identical
texts share one row and an unchanged text is never embedded twice. A chunk
is pending exactly when no vector exists for its key under the configured
model. `embed_state` names the model whose vectors serve searches.

Runs on: the caller's thread, on the connection it passes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .interface import Snapshot
from .sql import all_rows, scalar
from .workspaces import chunk_count


@dataclass(frozen=True)
class ActiveModel:
    fingerprint: str
    config: dict[str, Any] | None
    name: str | None


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


def drop_model(db: Snapshot, ws_id: int, fp: str) -> None:
    """Delete one model's vectors (the instant tier's, once the model has filled)."""
    db.execute("DELETE FROM vectors WHERE workspace_id=? AND model_fp=?", (ws_id, fp))


def coverage(db: Snapshot, ws_id: int, fp: str) -> tuple[int, int]:
    """(chunks with a vector for fp, chunks without)."""
    total = chunk_count(db, ws_id)
    done = scalar(
        db,
        "SELECT COUNT(*) FROM chunks c WHERE c.workspace_id=? AND EXISTS (SELECT 1 FROM vectors v INDEXED BY vectors_keys "
        "WHERE v.workspace_id=c.workspace_id AND v.model_fp=? AND v.text_hash=c.text_hash)",
        (ws_id, fp),
    )
    return done, total - done


def pending_texts(db: Snapshot, ws_id: int, fp: str, limit: int) -> list[tuple[str, str]]:
    """(text hash, breadcrumb + newline + text) of texts without a vector for fp, in the order
    people search them: every document's first passage (its title and abstract) before any later
    one, and within each, the most recently changed document first (a file by its mtime, a
    session by when it was written), then the oldest chunk."""
    return all_rows(
        db,
        """SELECT c.text_hash, MIN(c.breadcrumb || char(10) || c.text) FROM chunks c
           JOIN documents d ON d.id = c.document_id
           WHERE c.workspace_id=? AND NOT EXISTS (SELECT 1 FROM vectors v INDEXED BY vectors_keys WHERE v.workspace_id=c.workspace_id
             AND v.model_fp=? AND v.text_hash=c.text_hash)
           GROUP BY c.text_hash
           ORDER BY MIN(c.ordinal > 0 AND c.kind != 'abstract'),
                    MAX(CASE WHEN d.mtime_ns > 0 THEN d.mtime_ns ELSE CAST(d.indexed_at * 1e9 AS INTEGER) END) DESC,
                    MIN(c.id)
           LIMIT ?""",
        (ws_id, fp, limit),
    )


def still_pending(db: Snapshot, ws_id: int, fp: str, hashes: list[str]) -> set[str]:
    """Which of these text hashes some chunk still has, without a vector for fp."""
    return {
        h
        for (h,) in db.execute(
            """SELECT DISTINCT c.text_hash FROM chunks c INDEXED BY chunks_by_hash
           WHERE c.workspace_id=? AND c.text_hash IN (SELECT value FROM json_each(?))
             AND NOT EXISTS (SELECT 1 FROM vectors v INDEXED BY vectors_keys WHERE v.workspace_id=c.workspace_id
               AND v.model_fp=? AND v.text_hash=c.text_hash)""",
            (ws_id, json.dumps(hashes), fp),
        )
    }


def workspace_exists(db: Snapshot, ws_id: int) -> bool:
    return db.execute("SELECT 1 FROM workspaces WHERE id=?", (ws_id,)).fetchone() is not None


def write_vectors(db: Snapshot, ws_id: int, fp: str, rows: list[tuple[str, bytes, bytes]]) -> None:
    """rows: (text hash, float32 bytes, sign-code bytes)."""
    db.executemany(
        "INSERT OR REPLACE INTO vectors(workspace_id, model_fp, text_hash, f32, bits) VALUES (?,?,?,?,?)",
        [(ws_id, fp, h, f32, bits) for h, f32, bits in rows],
    )


def documents_with_texts(db: Snapshot, ws_id: int, hashes: list[str]) -> list[int]:
    return [
        d
        for (d,) in db.execute(
            "SELECT DISTINCT document_id FROM chunks WHERE workspace_id=? AND text_hash IN (SELECT value FROM json_each(?))",
            (ws_id, json.dumps(hashes)),
        )
    ]


def complete_vectors(
    db: Snapshot, ws_id: int, fp: str, doc_ids: list[int] | None
) -> Iterator[tuple[int, int, bytes, bytes]]:
    """(chunk id, document id, f32, bits) of the documents whose every chunk has a
    vector for fp (all of them, or those of doc_ids), by chunk id."""
    scope = ""
    params: list[Any] = [fp, ws_id]
    if doc_ids is not None:
        scope = " AND c.document_id IN (SELECT value FROM json_each(?))"
        params.append(json.dumps(doc_ids))
    params += [ws_id, fp]
    return db.execute(
        f"""SELECT c.id, c.document_id, v.f32, v.bits FROM chunks c
            JOIN vectors v ON v.workspace_id=c.workspace_id AND v.model_fp=? AND v.text_hash=c.text_hash
            WHERE c.workspace_id=?{scope} AND c.document_id NOT IN (
              SELECT c2.document_id FROM chunks c2 WHERE c2.workspace_id=? AND NOT EXISTS (
                SELECT 1 FROM vectors v2 INDEXED BY vectors_keys WHERE v2.workspace_id=c2.workspace_id AND v2.model_fp=?
                AND v2.text_hash=c2.text_hash))
            ORDER BY c.id""",
        params,
    )


def document_vectors(db: Snapshot, ws_id: int, fp: str, doc_id: int) -> list[tuple[int, int, bytes]]:
    """(chunk id, tokens, f32) of one document's chunks that have a vector for fp, by chunk id."""
    return all_rows(
        db,
        """SELECT c.id, c.tokens, v.f32 FROM chunks c
           JOIN vectors v ON v.workspace_id=c.workspace_id AND v.model_fp=? AND v.text_hash=c.text_hash
           WHERE c.workspace_id=? AND c.document_id=? ORDER BY c.id""",
        (fp, ws_id, doc_id),
    )
