"""A SQLite store copied into a PostgreSQL store, table by table, the same ids (`autodoc store copy`).

What a team does once: the store a laptop built (documents, chunks, the lexical index, vectors) moved
to the shared database, rather than every file indexed and embedded again on the server. Each table
goes by one binary `COPY` in one transaction (a failure leaves the database as it was); then what has
no SQLite counterpart is derived:

- `links.id` is SQLite's hidden rowid (store/pg/schema.py), copied as such, so reads order alike;
- `vectors.v` (pgvector, when the database has it) is the row's own float32 bytes, and every
  (workspace, model) gets its HNSW index as the product makes it (store/pg/vectors.ensure_index),
  built once after the rows instead of row by row;
- `lexical_sizes` is FTS5's docsize record of each chunk (its tokens per column) and `lexical_stats`
  their totals: what store/pg/lexical.py keeps on a database where FTS5 is not (section 2);
- each identity's sequence continues after the source's highest id (SQLite's `sqlite_sequence` for
  the change cursor: a client synced to cursor N never sees N again);
- the postings tables are the same records on both stores (store/lexical/postings.py), copied as
  they are; a store whose postings are not complete yet is refused (its daemon builds them).

The target must be an empty AutoDoc schema (a new database, or a schema named by the connection
string's `options=-csearch_path=…`): copying over workspaces would mix two stores' ids. Tables are
ANALYZEd afterwards so the planner knows their sizes at once.

Runs on: the caller's thread (the CLI's main thread, a benchmark's), on a read snapshot of the source
file and the PostgreSQL store's writer connection.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import InvalidParams
from ..lexical import postings
from . import vectors as pg_vectors

# parents before children (foreign keys); `meta`, `lexical_*` and `indexer` are not copied as rows
TABLES = (
    "workspaces",
    "documents",
    "chunks",
    "facets",
    "links",
    "skipped",
    "changes",
    "vectors",
    "embed_state",
    "schemas",
    "session_events",
    "postings",
    "postings_delta",
    "postings_dead",
)
# meta rows that describe the database itself, not the store's contents
OWN_META = frozenset({"schema_version", "vector_extension"})
# the HNSW build's memory (per transaction): pgvector builds far slower once its graph outgrows it
BUILD_MEMORY = "1GB"
_FLUSH = 1 << 20
_HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack("!ii", 0, 0)
_NULL = struct.pack("!i", -1)
Progress = Callable[[str, int], None]


def _encoder(pg_type: str) -> Callable[[Any], bytes]:
    """A value in COPY's binary form for a column of this type (information_schema's data_type, or
    the udt name of a user-defined type)."""
    if pg_type == "bigint":
        return lambda v: struct.pack("!iq", 8, int(v))
    if pg_type == "integer":
        return lambda v: struct.pack("!ii", 4, int(v))
    if pg_type == "double precision":
        return lambda v: struct.pack("!id", 8, float(v))
    if pg_type in ("text", "bytea"):

        def raw(v: str | bytes) -> bytes:
            b = v.encode() if isinstance(v, str) else bytes(v)
            return struct.pack("!i", len(b)) + b

        return raw
    if pg_type == "vector":

        def vector(v: bytes) -> bytes:
            a = np.frombuffer(v, dtype="<f4")
            return struct.pack("!ihh", 4 + 4 * len(a), len(a), 0) + a.astype(">f4").tobytes()

        return vector
    raise InvalidParams("target", f"cannot copy a column of type {pg_type}")


def _rows(encoders: list[Callable[[Any], bytes]], rows: Iterable[tuple]) -> Iterator[bytes]:
    """COPY's binary stream of these rows, in pieces of about a megabyte."""
    count = struct.pack("!h", len(encoders))
    buf = bytearray(_HEADER)
    for row in rows:
        buf += count
        for enc, v in zip(encoders, row):
            buf += _NULL if v is None else enc(v)
        if len(buf) >= _FLUSH:
            yield bytes(buf)
            buf.clear()
    buf += struct.pack("!h", -1)
    yield bytes(buf)


def _columns(conn: Any, table: str) -> list[tuple[str, str]]:
    """The target table's columns in order: (name, type)."""
    return [
        (str(n), str(u if t == "USER-DEFINED" else t))
        for n, t, u in conn.execute(
            "SELECT column_name, data_type, udt_name FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND table_name = %s ORDER BY ordinal_position",
            (table,),
        ).fetchall()
    ]


def _source_columns(src: Any, table: str) -> set[str]:
    return {str(r[1]) for r in src.execute(f"PRAGMA table_info({table})")}


def _select(src: Any, table: str, cols: list[tuple[str, str]]) -> str:
    """The source's SELECT of the target's columns: what SQLite keeps under another name, said."""
    have = _source_columns(src, table)
    exprs = []
    for name, _ in cols:
        if table == "links" and name == "id":
            exprs.append("rowid")
        elif table == "vectors" and name == "v":
            exprs.append("f32")
        elif name in have:
            exprs.append(name)
        else:
            raise InvalidParams(
                "source",
                f"the store has no {table}.{name}: open it once with this AutoDoc (which migrates it), then copy",
            )
    order = " ORDER BY rowid" if table in ("links", "chunks", "documents", "changes") else ""
    return f"SELECT {', '.join(exprs)} FROM {table}{order}"


def _copy(conn: Any, table: str, cols: list[tuple[str, str]], rows: Iterable[tuple], progress: Progress | None) -> int:
    n = 0

    def counted() -> Iterator[tuple]:
        nonlocal n
        for r in rows:
            n += 1
            if progress is not None and n % 100_000 == 0:
                progress(table, n)
            yield r

    names = ", ".join(f'"{c}"' for c, _ in cols)
    with conn.cursor().copy(f"COPY {table} ({names}) FROM STDIN (FORMAT BINARY)") as cp:
        for piece in _rows([_encoder(t) for _, t in cols], counted()):
            cp.write(piece)
    if progress is not None:
        progress(table, n)
    return n


def _docsizes(src: Any) -> Iterator[tuple[int, ...]]:
    """FTS5's docsize rows as (chunk, tokens of each of the four columns): varints, one per column."""
    for chunk, blob in src.execute("SELECT id, sz FROM chunks_fts_docsize ORDER BY id"):
        sizes = postings._sizes(blob)[:4]  # the varint reading the postings index does
        yield (int(chunk), *(sizes + [0, 0, 0, 0])[:4])


def _reset_sequences(conn: Any, src: Any) -> None:
    """Every identity of the copied tables continues after the source's highest value."""
    seqs = dict(src.execute("SELECT name, seq FROM sqlite_sequence")) if _has_table(src, "sqlite_sequence") else {}
    for table, column in conn.execute(
        "SELECT table_name, column_name FROM information_schema.columns "
        "WHERE table_schema = current_schema() AND is_identity = 'YES'"
    ).fetchall():
        top = conn.execute(f'SELECT COALESCE(MAX("{column}"), 0) FROM {table}').fetchone()[0]
        top = max(int(top), int(seqs.get(table) or 0))
        if top > 0:
            conn.execute("SELECT setval(pg_get_serial_sequence(%s, %s), %s)", (table, column, top))


def _has_table(src: Any, name: str) -> bool:
    return src.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (name,)).fetchone() is not None


def copy_store(
    source: Path,
    target: str,
    *,
    progress: Progress | None = None,
    build_memory: str | None = BUILD_MEMORY,
) -> dict[str, Any]:
    """Copy the SQLite store file `source` into the PostgreSQL store at `target` (made, or migrated,
    here; it must hold no workspace yet). Returns what was copied: rows per table, HNSW indexes made,
    seconds per step."""
    from ..db import open_reader
    from ..lexical import postings
    from ..migrations import MIGRATIONS, schema_version
    from .store import PgStore

    src = open_reader(Path(source))
    try:
        if schema_version(src) < len(MIGRATIONS):
            raise InvalidParams(
                "source",
                f"the store {source} is of an older schema: open it once with this AutoDoc (any command "
                "migrates it), then copy",
            )
        dst = PgStore(target)
        try:
            return _copy_all(src, dst, source, progress, build_memory, postings.COMPLETE)
        finally:
            dst.close()
    finally:
        src.close()


def _copy_all(
    src: Any, dst: Any, source: Path, progress: Progress | None, build_memory: str | None, complete: str
) -> dict[str, Any]:
    out: dict[str, Any] = {"source": str(source), "target": dst.path, "rows": {}, "seconds": {}}
    src.execute("BEGIN")  # one snapshot of the file, however long the copy takes
    try:
        built = src.execute("SELECT value FROM meta WHERE key = 'postings_built'").fetchone()
        if built is None or built[0] != complete:
            raise InvalidParams(
                "source",
                f"the store {source} is still building its lexical index (postings): let its daemon finish "
                "(autodoc workspace status shows it idle), then copy",
            )
        with dst.write() as db:
            conn = db.conn
            if conn.execute("SELECT EXISTS (SELECT 1 FROM workspaces)").fetchone()[0]:
                raise InvalidParams(
                    "target",
                    f"the store {dst.path} already holds workspaces: copy into an empty schema (a new database, "
                    "or another schema: options=-csearch_path=NAME in the connection string)",
                )
            ext = pg_vectors.extension(db)
            for table in TABLES:
                t0 = time.monotonic()
                cols = [(c, t) for c, t in _columns(conn, table) if ext or c != "v"]
                out["rows"][table] = _copy(conn, table, cols, src.execute(_select(src, table, cols)), progress)
                out["seconds"][table] = round(time.monotonic() - t0, 2)
            t0 = time.monotonic()
            n = _copy(
                conn,
                "lexical_sizes",
                _columns(conn, "lexical_sizes"),
                _docsizes(src),
                progress,
            )
            conn.execute(
                "UPDATE lexical_stats SET chunks = s.n, t0 = s.a, t1 = s.b, t2 = s.c, t3 = s.d, version = version + 1 "
                "FROM (SELECT COUNT(*) n, COALESCE(SUM(t0), 0) a, COALESCE(SUM(t1), 0) b, COALESCE(SUM(t2), 0) c, "
                "COALESCE(SUM(t3), 0) d FROM lexical_sizes) s WHERE id = 1"
            )
            out["rows"]["lexical_sizes"] = n
            out["seconds"]["lexical_sizes"] = round(time.monotonic() - t0, 2)
            for key, value in src.execute("SELECT key, value FROM meta"):
                if key not in OWN_META:
                    conn.execute(
                        "INSERT INTO meta(key, value) VALUES (%s, %s) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                        (key, value),
                    )
            _reset_sequences(conn, src)
            out["hnsw"] = []
            if ext:
                if build_memory:
                    conn.execute("SELECT set_config('maintenance_work_mem', %s, true)", (build_memory,))
                for ws_id, name, fp, nbytes in src.execute(
                    "SELECT v.workspace_id, w.name, v.model_fp, MIN(LENGTH(v.f32)) FROM vectors v"
                    " JOIN workspaces w ON w.id = v.workspace_id GROUP BY v.workspace_id, w.name, v.model_fp"
                ).fetchall():
                    t0 = time.monotonic()
                    if progress is not None:
                        progress(f"hnsw {name}", 0)
                    made = pg_vectors.ensure_index(db, ext, int(ws_id), str(fp), int(nbytes) // 4)
                    out["hnsw"].append(
                        {
                            "workspace": str(name),
                            "model": str(fp),
                            "made": made,
                            "seconds": round(time.monotonic() - t0, 1),
                        }
                    )
    finally:
        src.execute("ROLLBACK")
    t0 = time.monotonic()
    with dst.locked() as db:  # outside a transaction: ANALYZE of many tables in one go
        for table in (*TABLES, "lexical_sizes"):
            db.conn.execute(f"ANALYZE {table}")
    out["seconds"]["analyze"] = round(time.monotonic() - t0, 2)
    return out
