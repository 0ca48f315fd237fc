"""Writing documents: one generation per change, in the caller's transaction.

Input: a parsed document and its chunks (from ingest). Output: rows in
documents / chunks / chunks_fts / facets / links, and a change-log entry.
Chunks whose text hash is unchanged keep their row (and so their vectors and
FTS entry); only their spans are updated when an edit above them moved them.

Runs on: the writer, inside the caller's transaction (reads for the index job on the same).
"""

from __future__ import annotations

import hashlib
import json
import time

from ..ingest.types import Chunk, ParsedDocument
from .changes import entry
from .facets import active_schema, write_facets
from .interface import Snapshot
from .lexical import fts5, ftstext
from .lexical import writes as lexical_rows
from .lexical.ftstext import fts_text
from .pg.notify import notify
from .sessions import NOT_SESSION, is_session_path
from .sql import all_rows, dialect, scalar
from .workspaces import Workspace

CHUNK_COLUMNS = (
    "document_id, workspace_id, generation, ordinal, kind, breadcrumb, text, "
    "byte_start, byte_end, line_start, line_end, text_hash, tokens"
)
# new chunks a statement: 13 values each stays under 999, the fewest parameters any SQLite allows
# (32,766 since 3.32; PostgreSQL 65,535); a document has ~16 chunks on average (bench corpora)
INSERT_ROWS = 76


def next_generation(db: Snapshot) -> int:
    """The next generation, taken by one statement that also locks the row until commit: on a
    shared PostgreSQL store that lock is what serializes the writers of every daemon (and, as the
    change log's cursor is taken after it, keeps cursor order commit order: docs/dev/postgres.md §6)."""
    return int(
        scalar(
            db,
            "UPDATE meta SET value = CAST(CAST(value AS BIGINT) + 1 AS TEXT) WHERE key='generation' RETURNING value",
        )
    )


def content_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def log_change(db: Snapshot, workspace: str, path: str, op: str, generation: int, old_path: str | None = None) -> dict:
    now = time.time()
    cursor = scalar(
        db,
        "INSERT INTO changes(workspace, path, op, generation, old_path, time) VALUES (?,?,?,?,?,?) RETURNING cursor",
        (workspace, path, op, generation, old_path, now),
    )
    if dialect(db) == "postgres":
        notify(db, cursor)  # every daemon sharing the store hears of it at commit (store/pg/notify.py)
    return entry(cursor, workspace, path, op, generation, old_path, now)


def write_document(
    db: Snapshot,
    ws: Workspace,
    path: str,
    *,
    data: bytes,
    doc: ParsedDocument,
    chunks: list[Chunk],
    mtime_ns: int,
    ctime_ns: int | None = None,
    inode: int | None = None,
    size: int | None = None,
    old_path: str | None = None,
    force: bool = False,
) -> dict | None:
    """Write a new generation of `path` (or its first). Returns the change, or
    None when the content is unchanged (its file's stat is still recorded).
    ctime_ns/inode: the rest of the file's change signal (None: not known); size: the file's own
    byte count, which the change signal compares (None: len(data); the indexed text differs from
    the file's bytes where a secret was masked or a bad byte replaced).
    Caller holds the transaction."""
    chash = content_hash(data)
    row = db.execute(
        "SELECT id, content_hash, tags, aliases, title FROM documents WHERE workspace_id=? AND path=?",
        (ws.id, path),
    ).fetchone()
    if row and row[1] == chash:
        if not force:
            touch_stat(db, ws.id, path, mtime_ns, ctime_ns, inode, size)
            return None
        old_sig = all_rows(
            db,
            "SELECT text_hash, kind, byte_start, byte_end, tokens FROM chunks WHERE document_id=? ORDER BY ordinal",
            (row[0],),
        )
        if old_sig == [(c.text_hash, c.kind, c.byte_start, c.byte_end, c.tokens) for c in chunks]:
            touch_stat(db, ws.id, path, mtime_ns, ctime_ns, inode, size)
            return None
    gen = next_generation(db)
    title = doc.title or path.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    line_count = data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)
    fields = (
        gen,
        chash,
        len(data) if size is None else size,
        mtime_ns,
        title,
        doc.status,
        json.dumps(doc.tags),
        json.dumps(doc.aliases),
        json.dumps(doc.frontmatter, default=str),
        json.dumps(doc.supersedes),
        json.dumps(doc.superseded_by),
        json.dumps([{"line": p.line, "message": p.message, "code": p.code} for p in doc.problems]),
        line_count,
        data,
        time.time(),
        ctime_ns,
        inode,
    )
    meta_text = ftstext.meta_text(doc.aliases, doc.tags, path)
    if row:
        doc_id = row[0]
        # a new title is in every chunk's FTS row too: kept chunks are re-indexed (they kept the old one)
        meta_changed = (json.loads(row[2]), json.loads(row[3]), row[4]) != (doc.tags, doc.aliases, title)
        db.execute(
            """UPDATE documents SET generation=?, content_hash=?, size=?, mtime_ns=?, title=?, status=?, tags=?,
               aliases=?, frontmatter=?, supersedes=?, superseded_by=?, problems=?, line_count=?, content=?, indexed_at=?,
               ctime_ns=?, inode=? WHERE id=?""",
            (*fields, doc_id),
        )
        op = "modify"
    else:
        doc_id = scalar(
            db,
            """INSERT INTO documents(generation, content_hash, size, mtime_ns, title, status, tags, aliases,
               frontmatter, supersedes, superseded_by, problems, line_count, content, indexed_at, ctime_ns, inode,
               workspace_id, path)
               VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) RETURNING id""",
            (*fields, ws.id, path),
        )
        meta_changed = False
        op = "rename" if old_path else "add"

    _write_chunks(db, ws, doc_id, gen, title, meta_text, chunks, refresh_fts=meta_changed)

    # facets typed by the workspace schema as last applied (store/facets.py), and its violations;
    # a session is no file of the workspace: its schema does not apply
    schema = None if is_session_path(path) else active_schema(db, ws.id)
    write_facets(db, ws.id, doc_id, doc.frontmatter, doc.tags, data, schema)
    db.execute("DELETE FROM links WHERE source_id=?", (doc_id,))
    db.executemany(
        "INSERT INTO links(source_id, workspace_id, target, kind, line, label, anchor) VALUES (?,?,?,?,?,?,?)",
        [(doc_id, ws.id, l.target, l.kind, l.line, l.label, l.anchor) for l in doc.links],
    )
    db.execute("DELETE FROM skipped WHERE workspace_id=? AND path=?", (ws.id, path))
    return log_change(db, ws.name, path, op, gen, old_path)


def _write_chunks(
    db: Snapshot,
    ws: Workspace,
    doc_id: int,
    gen: int,
    title: str,
    meta_text: str,
    chunks: list[Chunk],
    *,
    refresh_fts: bool,
) -> None:
    old: dict[str, list[tuple]] = {}
    for cid, text_hash, kind, ordinal, bs, be, ls, le, tokens in db.execute(
        "SELECT id, text_hash, kind, ordinal, byte_start, byte_end, line_start, line_end, tokens FROM chunks "
        "WHERE document_id=? ORDER BY ordinal",
        (doc_id,),
    ):
        old.setdefault(text_hash + kind, []).append((cid, ordinal, bs, be, ls, le, tokens))
    title_fts = fts_text(title)
    fresh: list[Chunk] = []  # the chunks no row holds yet: inserted together below
    for c in chunks:
        reuse = old.get(c.text_hash + c.kind)
        if reuse:
            cid, *place = reuse.pop(0)
            new_place = [c.ordinal, c.byte_start, c.byte_end, c.line_start, c.line_end, c.tokens]
            if place != new_place:  # tokens too: another tokenizer counts the same text differently
                db.execute(
                    "UPDATE chunks SET ordinal=?, byte_start=?, byte_end=?, line_start=?, line_end=?, tokens=? "
                    "WHERE id=?",
                    (*new_place, cid),
                )
            if refresh_fts:
                lexical_rows.delete(db, [cid])
                _insert_fts(db, cid, (title_fts, fts_text(c.breadcrumb), meta_text, fts_text(c.text)))
            continue
        fresh.append(c)
    for c, cid in zip(fresh, _insert_chunks(db, ws.id, doc_id, gen, fresh), strict=True):
        _insert_fts(db, cid, (title_fts, fts_text(c.breadcrumb), meta_text, fts_text(c.text)))
    stale = [r[0] for rows in old.values() for r in rows]
    lexical_rows.delete(db, stale)
    if stale:
        db.executemany("DELETE FROM chunks WHERE id=?", [(cid,) for cid in stale])


def _insert_chunks(db: Snapshot, ws_id: int, doc_id: int, gen: int, chunks: list[Chunk]) -> list[int]:
    """The chunks' new rows, INSERT_ROWS a statement (on PostgreSQL each statement is a round trip: one
    a chunk was 3.8 s of a 22 s index run, docs/benchmarks/pg_scale.md); their ids in `chunks`' order.
    Neither database promises RETURNING's rows in VALUES order, so ids are matched by ordinal (the
    chunk's place in its document: one each)."""
    ids: dict[int, int] = {}
    for start in range(0, len(chunks), INSERT_ROWS):
        part = chunks[start : start + INSERT_ROWS]
        rows = ",".join(["(?,?,?,?,?,?,?,?,?,?,?,?,?)"] * len(part))
        args = [
            v
            for c in part
            for v in (doc_id, ws_id, gen, c.ordinal, c.kind, c.breadcrumb, c.text, c.byte_start, c.byte_end)
            + (c.line_start, c.line_end, c.text_hash, c.tokens)
        ]
        sql = f"INSERT INTO chunks({CHUNK_COLUMNS}) VALUES {rows} RETURNING ordinal, id"
        ids.update((int(o), int(i)) for o, i in db.execute(sql, args).fetchall())
    assert len(ids) == len(chunks), "two new chunks of one document share an ordinal"
    return [ids[c.ordinal] for c in chunks]


def _insert_fts(db: Snapshot, cid: int, texts: tuple[str, str, str, str]) -> None:
    """The chunk's lexical row (FTS5 and postings, or postings alone: store/lexical/writes.py), in the same
    transaction."""
    lexical_rows.insert(db, cid, texts)


def delete_document(db: Snapshot, ws: Workspace, path: str) -> dict | None:
    row = db.execute("SELECT id FROM documents WHERE workspace_id=? AND path=?", (ws.id, path)).fetchone()
    if not row:
        return None
    doc_id = row[0]
    gone = [r[0] for r in all_rows(db, "SELECT id FROM chunks WHERE document_id=?", (doc_id,))]
    lexical_rows.delete(db, gone)
    db.execute("DELETE FROM documents WHERE id=?", (doc_id,))  # chunks, facets, links cascade
    gen = next_generation(db)
    return log_change(db, ws.name, path, "delete", gen)


def rename_document(db: Snapshot, ws: Workspace, old: str, new: str) -> dict | None:
    """A move with the same content keeps its rows (and vectors): only the path changes."""
    row = db.execute("SELECT id FROM documents WHERE workspace_id=? AND path=?", (ws.id, old)).fetchone()
    if not row:
        return None
    # a document the move replaces: its chunks' FTS rows (and postings) go with it, not only its chunks
    gone = [
        r[0]
        for r in all_rows(
            db,
            "SELECT c.id FROM chunks c JOIN documents d ON d.id = c.document_id WHERE d.workspace_id=? AND d.path=?",
            (ws.id, new),
        )
    ]
    lexical_rows.delete(db, gone)
    db.execute("DELETE FROM documents WHERE workspace_id=? AND path=?", (ws.id, new))
    gen = next_generation(db)
    db.execute("UPDATE documents SET path=?, generation=? WHERE id=?", (new, gen, row[0]))
    _refresh_fts(db, row[0], new)  # the path's words are in every chunk's FTS row
    return log_change(db, ws.name, new, "rename", gen, old)


def _refresh_fts(db: Snapshot, doc_id: int, path: str) -> None:
    """Write the document's chunks' FTS rows again (and their postings), from the stored text."""
    ids = [cid for (cid,) in all_rows(db, "SELECT id FROM chunks WHERE document_id=? ORDER BY ordinal", (doc_id,))]
    texts = fts5.indexed_texts(db, ids)  # from the stored rows, the path already the new one
    lexical_rows.delete(db, ids)
    for cid in ids:
        title, crumb, meta, body = texts[cid]
        _insert_fts(db, cid, (title, crumb, meta, body))


def record_skip(db: Snapshot, ws: Workspace, path: str, reason: str) -> None:
    db.execute(
        "INSERT INTO skipped(workspace_id, path, reason) VALUES (?,?,?) "
        "ON CONFLICT(workspace_id, path) DO UPDATE SET reason=excluded.reason",
        (ws.id, path, reason),
    )


def clear_skips_except(db: Snapshot, ws: Workspace, keep: set[str]) -> None:
    """Forget the skip records of files that are no longer skipped."""
    for (p,) in all_rows(db, "SELECT path FROM skipped WHERE workspace_id=?", (ws.id,)):
        if p not in keep:
            db.execute("DELETE FROM skipped WHERE workspace_id=? AND path=?", (ws.id, p))


# -- what the index job compares the disk with -----------------------------------------


FileState = tuple[str, int, int, int | None, int | None]


def file_states(db: Snapshot, ws_id: int) -> dict[str, FileState]:
    """path → (content hash, size, mtime_ns, ctime_ns, inode) of every indexed file (ctime_ns and
    inode None when not known; sessions are not on disk: the disk diff must never see them, or it
    would delete them)."""
    return {
        r[0]: r[1:]
        for r in db.execute(
            "SELECT path, content_hash, size, mtime_ns, ctime_ns, inode FROM documents "
            f"WHERE workspace_id=? AND {NOT_SESSION}",
            (ws_id,),
        )
    }


def paths_under(db: Snapshot, ws_id: int, folders: list[str]) -> list[str]:
    """The indexed files under these folders (relative paths; a byte-order range, so no LIKE
    wildcard in a folder's name matters): what a folder that reappeared must be checked against."""
    out: list[str] = []
    for folder in folders:
        out += [
            r[0]
            for r in db.execute(
                f"SELECT path FROM documents WHERE workspace_id=? AND path >= ? AND path < ? AND {NOT_SESSION}",
                (ws_id, folder + "/", folder + "0"),  # "0" is the byte after "/"
            )
        ]
    return out


def stored_hash(db: Snapshot, ws_id: int, path: str) -> str | None:
    row = db.execute("SELECT content_hash FROM documents WHERE workspace_id=? AND path=?", (ws_id, path)).fetchone()
    return None if row is None else row[0]


def names_of(db: Snapshot, ws_id: int, path: str) -> tuple[str, list, dict] | None:
    """(title, aliases, frontmatter): what links resolve against."""
    row = db.execute(
        "SELECT title, aliases, frontmatter FROM documents WHERE workspace_id=? AND path=?", (ws_id, path)
    ).fetchone()
    return None if row is None else (row[0], json.loads(row[1]), json.loads(row[2]))


def touch_stat(
    db: Snapshot,
    ws_id: int,
    path: str,
    mtime_ns: int,
    ctime_ns: int | None,
    inode: int | None,
    size: int | None = None,
) -> None:
    """A file whose stat changed but not its bytes: only its change signal is stored (its size
    too when given: a store written before sizes were the file's own held the indexed text's)."""
    db.execute(
        "UPDATE documents SET mtime_ns=?, ctime_ns=?, inode=?, size=coalesce(?, size) WHERE workspace_id=? AND path=? "
        "AND (mtime_ns, ctime_ns, inode, size) IS DISTINCT FROM (?, ?, ?, coalesce(?, size))",
        (mtime_ns, ctime_ns, inode, size, ws_id, path, mtime_ns, ctime_ns, inode, size),
    )
