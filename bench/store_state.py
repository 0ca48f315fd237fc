"""What a store holds, read straight from its SQLite file: invariants and a comparable dump.

Used by bench/crash.py (after every SIGKILL) and by the tests that compare a
store with a fresh index of the same folder. Read-only: the file is opened
read-only with apsw (a WAL store is still recovered by SQLite on open, as any reader would).

`problems(path)` lists broken promises: integrity_check, rows from a generation
after their document's or the store's, rows without a document (chunks, facets,
links, FTS entries), chunks without an FTS entry, vectors without a workspace.
`dump(path, workspace)` is everything an index derives from a folder, without
ids, times or generations: two stores with equal dumps answer alike.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import apsw  # the daemon's SQLite: the stdlib's may be too old for the FTS5 options the store uses


def _open(path: Path) -> apsw.Connection:
    db = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    db.setbusytimeout(30_000)
    return db


def problems(path: Path) -> list[str]:
    out: list[str] = []
    db = _open(path)
    try:
        check = [r[0] for r in db.execute("PRAGMA integrity_check")]
        if check != ["ok"]:
            out.append(f"integrity_check: {check[:5]}")
        queries = {
            # a chunk keeps the generation it was first written in while its text stays
            "chunks from a generation after their document's": "SELECT count(*) FROM chunks c JOIN documents d ON d.id=c.document_id WHERE c.generation > d.generation",
            "documents from a generation after the store's": "SELECT count(*) FROM documents WHERE generation > (SELECT CAST(value AS INTEGER) FROM meta "
            "WHERE key='generation')",
            "chunks without a document": "SELECT count(*) FROM chunks WHERE document_id NOT IN (SELECT id FROM documents)",
            "facets without a document": "SELECT count(*) FROM facets WHERE document_id NOT IN (SELECT id FROM documents)",
            "links without a document": "SELECT count(*) FROM links WHERE source_id NOT IN (SELECT id FROM documents)",
            "FTS entries without a chunk": "SELECT count(*) FROM chunks_fts_docsize WHERE id NOT IN (SELECT id FROM chunks)",
            "chunks without an FTS entry": "SELECT count(*) FROM chunks WHERE id NOT IN (SELECT id FROM chunks_fts_docsize)",
            "documents without a workspace": "SELECT count(*) FROM documents WHERE workspace_id NOT IN (SELECT id FROM workspaces)",
            "vectors without a workspace": "SELECT count(*) FROM vectors WHERE workspace_id NOT IN (SELECT id FROM workspaces)",
        }
        for what, sql in queries.items():
            n = db.execute(sql).fetchone()[0]
            if n:
                out.append(f"{n} {what}")
    finally:
        db.close()
    return out


def cached_vectors(path: Path) -> int:
    """Vectors whose text no chunk has any more: the content-addressed cache keeps
    them on purpose (a reverted edit or a rename back is not embedded again)."""
    db = _open(path)
    try:
        return db.execute(
            "SELECT count(*) FROM vectors v WHERE NOT EXISTS (SELECT 1 FROM chunks c WHERE "
            "c.workspace_id=v.workspace_id AND c.text_hash=v.text_hash)"
        ).fetchone()[0]
    finally:
        db.close()


def dump(path: Path, workspace: str) -> dict[str, Any]:
    db = _open(path)
    try:
        row = db.execute("SELECT id FROM workspaces WHERE name=?", (workspace,)).fetchone()
        if row is None:
            return {}
        ws = row[0]
        docs = db.execute(
            "SELECT path, content_hash, size, title, status, tags, aliases, frontmatter, supersedes, superseded_by, "
            "problems, schema_problems, line_count FROM documents WHERE workspace_id=? ORDER BY path",
            (ws,),
        ).fetchall()
        chunks = db.execute(
            "SELECT d.path, c.ordinal, c.kind, c.breadcrumb, c.text_hash, c.byte_start, c.byte_end, c.line_start, "
            "c.line_end, c.tokens FROM chunks c JOIN documents d ON d.id=c.document_id WHERE c.workspace_id=? "
            "ORDER BY d.path, c.ordinal",
            (ws,),
        ).fetchall()
        facets = db.execute(
            "SELECT d.path, f.field, f.value, f.num, f.date FROM facets f JOIN documents d ON d.id=f.document_id "
            "WHERE f.workspace_id=? ORDER BY 1, 2, 3, 4, 5",
            (ws,),
        ).fetchall()
        links = db.execute(
            "SELECT d.path, l.target, l.kind, l.line, l.label, l.anchor, l.target_path FROM links l "
            "JOIN documents d ON d.id=l.source_id WHERE l.workspace_id=? ORDER BY 1, 2, 3, 4, 5, 6, 7",
            (ws,),
        ).fetchall()
        skipped = db.execute("SELECT path, reason FROM skipped WHERE workspace_id=? ORDER BY path", (ws,)).fetchall()
        return {"documents": docs, "chunks": chunks, "facets": facets, "links": links, "skipped": skipped}
    finally:
        db.close()


def differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """What differs between two dumps, one line per table (counts, then the first differing row)."""
    out = []
    for table in sorted(set(a) | set(b)):
        x, y = a.get(table, []), b.get(table, [])
        if x != y:
            first = next((f"{p!r} != {q!r}" for p, q in zip(x, y) if p != q), "one is a prefix of the other")
            out.append(f"{table}: {len(x)} vs {len(y)} rows; first difference {first[:300]}")
    return out


def bm25(path: Path, workspace: str, query: str) -> dict[tuple[str, int], float]:
    """The raw FTS5 BM25 score (the lexical leg's column weights) of every chunk matching any
    word of query, by (document path, ordinal): what the lexical ranking is a function of,
    but for the order among equal scores."""
    words = " OR ".join(f'"{w}"' for w in query.split())
    db = _open(path)
    try:
        rows = db.execute(
            "SELECT d.path, c.ordinal, bm25(chunks_fts, 3.0, 2.0, 2.0, 1.0) FROM chunks_fts "
            "JOIN chunks c ON c.id=chunks_fts.rowid JOIN documents d ON d.id=c.document_id "
            "JOIN workspaces w ON w.id=d.workspace_id WHERE w.name=? AND chunks_fts MATCH ?",
            (workspace, words),
        ).fetchall()
        return {(p, o): s for p, o, s in rows}
    finally:
        db.close()
