"""Vectors searched by PostgreSQL itself: pgvector's HNSW (docs/dev/postgres.md, section 3).

Where the `vector` extension exists (meta `vector_extension` names the schema it lives in), every
vector row carries `v`, the same float32 values as its `f32` bytes, and each (workspace, model)
whose vectors are written gets a partial expression index of its own:

    CREATE INDEX vectors_hnsw_<ws>_<fp hash> ON vectors
        USING hnsw ((v::public.vector(DIM)) public.vector_cosine_ops) WITH (m = 24, ef_construction = 100)
        WHERE workspace_id = <ws> AND model_fp = '<fp>'

`v` is untyped (a model's dimension is known at run time); the cast types it for the index. One
index per workspace and model, not per model: HNSW filters after it walks the graph, so a model
shared by several workspaces would hand one workspace's search the others' neighbours and leave
it short. The index is made with the model's first vectors (so a model filling behind the active
one is indexed row by row as it fills, and its activation costs nothing) and dropped with them.

A search asks the index for the nearest `k` texts with `hnsw.ef_search` at least `k`, joins them to
their chunks, and answers their float32 bytes: the caller rescores exactly
(search/semantic/store_side.py), so every cosine is the one the SQLite store's in-memory index
computes, and leaves out (asking `waiting`) the documents not every chunk of which has a vector
yet, as the in-memory index holds none of them.

Without the extension (or without the privilege to create the index) nothing here is used: the
store's vectors are searched in memory, loaded from the `f32` rows (search/semantic/vector_cache.py).

Runs on: the caller's thread, on the snapshot it passes (store.pg.snapshot.PgSnapshot).
"""

from __future__ import annotations

import hashlib
import logging
import re
import weakref
from collections.abc import Iterable, Sequence

import numpy as np

from ..interface import Snapshot

log = logging.getLogger(__name__)

ABSENT = "absent"
# pgvector's ceiling for hnsw.ef_search: a search never asks the index for more texts than this
EF_SEARCH_MAX = 1000
# The graph's build (python -m bench.pg_study hnsw; docs/benchmarks/postgres.md): on SciFact's 7,422
# real vectors and 300 test queries, pgvector's defaults (m 16, ef_construction 64) missed 14 / 34
# of the exact top-11 / top-51 at the ef_search a search uses (100 / 204); m 24, 100: 6 / 11; m 32,
# 200: 3 / 3. Inserted one row at a time (as the embed queue writes, in its transaction): 256, 106,
# 36 rows/s. The middle one: half the misses or fewer, still inserting faster than the embed queue
# makes vectors here (25-60 a second).
HNSW_M = 24
HNSW_EF_CONSTRUCTION = 100
# serialises index creation between daemons (one key of the single-bigint advisory lock space;
# the migration and indexer locks use the two-int4 space)
LOCK_INDEX = int.from_bytes(b"adochnsw", "big") & 0x7FFF_FFFF_FFFF_FFFF
_NAME = re.compile(r"^vectors_hnsw_(\d+)_[0-9a-f]+$")
_refused: set[tuple[int, str]] = set()  # (workspace, model) whose index this process may not make: asked once
# connection → its store's meta `vector_extension`: written once, by the first migration, and a
# connection serves one store for its life, so a search (every one asks) reads it once per connection
_extension: weakref.WeakKeyDictionary[Snapshot, str] = weakref.WeakKeyDictionary()


def extension(db: Snapshot) -> str | None:
    """The schema pgvector lives in, or None where the store was made without it."""
    value = _extension.get(db)
    if value is None:
        row = db.execute("SELECT value FROM meta WHERE key = 'vector_extension'").fetchone()
        if row is None:
            return None  # (not migrated yet: nothing to remember)
        value = _extension[db] = str(row[0])
    return None if value == ABSENT else value


def index_name(ws_id: int, fp: str) -> str:
    """The HNSW index of one workspace's vectors of one model (a fingerprint may be any text)."""
    return f"vectors_hnsw_{int(ws_id)}_{hashlib.sha1(fp.encode()).hexdigest()[:20]}"


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def literal(vec: np.ndarray) -> str:
    """pgvector's text form of a float32 vector; each value printed so that it parses back to the
    very same float32 (Python's shortest repr of the float64 that holds it exactly)."""
    return "[" + ",".join(repr(x) for x in np.asarray(vec, dtype=np.float32).tolist()) + "]"


def write(db: Snapshot, schema: str, ws_id: int, fp: str, rows: Sequence[tuple[str, bytes, bytes]]) -> None:
    """Insert or replace vector rows with their `v` (rows: text hash, float32 bytes, sign codes), and
    make the workspace's index for this model if it has none yet."""
    if not rows:
        return
    dim = len(rows[0][1]) // 4
    db.executemany(
        f"INSERT INTO vectors(workspace_id, model_fp, text_hash, f32, bits, v) "
        f"VALUES (?,?,?,?,?,?::{_ident(schema)}.vector) ON CONFLICT(workspace_id, model_fp, text_hash) "
        "DO UPDATE SET f32=excluded.f32, bits=excluded.bits, v=excluded.v",
        [(ws_id, fp, h, f32, bits, literal(np.frombuffer(f32, dtype="<f4"))) for h, f32, bits in rows],
    )
    ensure_index(db, schema, ws_id, fp, dim)


def has_index(db: Snapshot, ws_id: int, fp: str) -> bool:
    row = db.execute("SELECT to_regclass(?) IS NOT NULL", (index_name(ws_id, fp),)).fetchone()
    return bool(row and row[0])


def ensure_index(db: Snapshot, schema: str, ws_id: int, fp: str, dim: int) -> bool:
    """Make the HNSW index of (workspace, model) unless it exists; False when this role may not (it
    does not own the table): that workspace's vectors are then searched in memory."""
    if has_index(db, ws_id, fp):
        return True
    if (ws_id, fp) in _refused:
        return False
    ext = _ident(schema)
    try:
        with db:  # a savepoint: a refusal must not end the writer's transaction
            db.execute("SELECT pg_advisory_xact_lock(?)", (LOCK_INDEX,))
            _drop_orphans(db)
            db.execute(
                f"CREATE INDEX IF NOT EXISTS {_ident(index_name(ws_id, fp))} ON vectors "
                f"USING hnsw ((v::{ext}.vector({int(dim)})) {ext}.vector_cosine_ops) "
                f"WITH (m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION}) "
                f"WHERE workspace_id = {int(ws_id)} AND model_fp = {_string(fp)}"
            )
    except Exception as e:  # psycopg's InsufficientPrivilege, named loosely: this module imports no driver
        if type(e).__name__ != "InsufficientPrivilege":
            raise
        log.warning("no HNSW index for workspace %s (%s): %s; its vectors are searched in memory", ws_id, fp[:12], e)
        _refused.add((ws_id, fp))
        return False
    return True


def _all_indexes(db: Snapshot) -> list[str]:
    """The HNSW indexes of this store's schema (every workspace's)."""
    return [
        str(n)
        for (n,) in db.execute(
            "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() AND tablename = 'vectors'"
        )
        if _NAME.match(str(n))
    ]


def _indexes(db: Snapshot, ws_id: int) -> list[str]:
    """The HNSW indexes of a workspace's vectors in this store's schema."""
    return [n for n in _all_indexes(db) if (m := _NAME.match(n)) and int(m.group(1)) == ws_id]


def _drop_orphans(db: Snapshot) -> None:
    """The indexes of workspaces removed since (their rows went with them by the foreign key; an
    empty index is only clutter, swept when the next one is made)."""
    live = {int(i) for (i,) in db.execute("SELECT id FROM workspaces")}
    for name in _all_indexes(db):
        m = _NAME.match(name)
        if m and int(m.group(1)) not in live:
            db.execute(f"DROP INDEX IF EXISTS {_ident(name)}")


def drop_indexes(db: Snapshot, ws_id: int, *, only: str | None = None, keep: str | None = None) -> None:
    """Drop a workspace's HNSW indexes: the one of model `only`, or every one but model `keep`'s."""
    for name in _indexes(db, ws_id):
        if (only is not None and name != index_name(ws_id, only)) or (
            keep is not None and name == index_name(ws_id, keep)
        ):
            continue
        db.execute(f"DROP INDEX IF EXISTS {_ident(name)}")


def nearest(
    db: Snapshot, schema: str, ws_id: int, fp: str, q: np.ndarray, k: int, allowed: Iterable[int] | None = None
) -> tuple[list[tuple[int, str, float, int]], int]:
    """The chunks holding the `k` texts nearest `q` by the index (among `allowed` chunk ids when
    given), nearest first: ([(chunk id, text hash, the index's cosine distance, document id)], how
    many texts the index answered). Documents still waiting for a vector are not left out here: the
    caller asks `waiting` about the few candidates it reads (a check of every candidate's document
    probed ~1,000 vector keys a search and doubled the statement, docs/dev/postgres.md 7c). The
    vectors themselves stay in the database (`rows`: only those the caller rescores travel)."""
    ext = _ident(schema)
    dim = int(np.asarray(q).shape[0])
    db.execute("SELECT set_config('hnsw.ef_search', ?, true)", (str(min(EF_SEARCH_MAX, max(40, k))),))
    scope, args = "", []
    if allowed is not None:
        scope, args = " AND c.id = ANY(?)", [list(allowed)]
    distance = f"v::{ext}.vector({dim}) OPERATOR({ext}.<=>) ?::{ext}.vector({dim})"
    text = literal(q)
    rows = db.execute(
        f"""WITH near AS MATERIALIZED (
              SELECT text_hash, {distance} AS d FROM vectors WHERE workspace_id = ? AND model_fp = ?
              ORDER BY {distance} LIMIT ?)
            SELECT c.id, near.text_hash, near.d, c.document_id FROM near
            LEFT JOIN chunks c ON c.workspace_id = ? AND c.text_hash = near.text_hash{scope}
            ORDER BY near.d, c.id""",
        [text, ws_id, fp, text, k, ws_id, *args],
    ).fetchall()
    answered = len({r[1] for r in rows})
    return [(int(r[0]), str(r[1]), float(r[2]), int(r[3])) for r in rows if r[0] is not None], answered


def waiting(db: Snapshot, ws_id: int, fp: str, doc_ids: Iterable[int]) -> set[int]:
    """Those of these documents with a chunk that has no vector for fp yet (a search leaves them
    out, as the in-memory index holds only complete documents)."""
    return {
        int(d)
        for (d,) in db.execute(
            "SELECT DISTINCT c2.document_id FROM chunks c2 WHERE c2.workspace_id = ? AND c2.document_id = ANY(?) "
            "AND NOT EXISTS (SELECT 1 FROM vectors v2 WHERE v2.workspace_id = c2.workspace_id "
            "AND v2.model_fp = ? AND v2.text_hash = c2.text_hash)",
            (ws_id, list(doc_ids), fp),
        )
    }


def rows(db: Snapshot, ws_id: int, fp: str, hashes: Iterable[str]) -> dict[str, tuple[bytes, bytes]]:
    """text hash → (f32, bits) of these texts' vectors."""
    return {
        str(h): (bytes(f), bytes(b))
        for h, f, b in db.execute(
            "SELECT text_hash, f32, bits FROM vectors WHERE workspace_id = ? AND model_fp = ? AND text_hash = ANY(?)",
            (ws_id, fp, list(hashes)),
        )
    }


def plan(db: Snapshot, schema: str, ws_id: int, fp: str, q: np.ndarray, k: int) -> list[str]:
    """EXPLAIN of the index's part of `nearest` (what tests and `doctor` look at)."""
    ext = _ident(schema)
    dim = int(np.asarray(q).shape[0])
    return [
        str(r[0])
        for r in db.execute(
            f"EXPLAIN SELECT text_hash FROM vectors WHERE workspace_id = ? AND model_fp = ? "
            f"ORDER BY v::{ext}.vector({dim}) OPERATOR({ext}.<=>) ?::{ext}.vector({dim}) LIMIT ?",
            (ws_id, fp, literal(q), k),
        )
    ]
