"""The lexical index's own statistics on the PostgreSQL store, which has no FTS5 (docs/dev/postgres.md,
section 2): what FTS5 keeps beside its doclists and the SQLite store reads from it.

- `lexical_sizes`: each indexed chunk's tokens per column (title, breadcrumb, meta, body): FTS5's
  docsize record, so a chunk's removal can take its tokens out of the totals;
- `lexical_stats`: the one row of the index's totals (chunks, tokens per column): FTS5's averages
  record, the N and the average length of its bm25. `version` goes up with every write to the index
  and `born` is drawn when the row is made, so (born, version) names one state of one database's
  index, as FTS5's structure record does (readers' caches are keyed by it).

The postings themselves (`postings`, `postings_delta`, `postings_dead`) are the SQLite store's
tables and records (store/lexical/postings.py), written by the same code; a term's document count
is derived from them (store/lexical/postread.live_counts), never kept apart. The tables are made
by store/pg/schema.py.

Runs on: the caller's thread, inside the writing transaction (added, removed) or on a read
snapshot (state, near).
"""

from __future__ import annotations

from ..interface import Snapshot
from ..sql import in_ids, one


def state(db: Snapshot) -> tuple[int, int, tuple]:
    """(chunks, tokens over every column, a key naming this state of the index and of its postings'
    maintenance: store/lexical/postread.cache_key's on SQLite): one read."""
    chunks, tokens, version, born, gen = one(
        db,
        "SELECT chunks, t0 + t1 + t2 + t3, version, born, (SELECT value FROM meta WHERE key = 'postings_gen') "
        "FROM lexical_stats WHERE id = 1",
    )
    return int(chunks), int(tokens), ("postgres", born, int(version), gen or "0")


def added(db: Snapshot, chunk_id: int, sizes: list[int]) -> None:
    """A chunk's lexical row was written with these column sizes (tokens): FTS5's docsize and averages."""
    db.execute(
        "WITH s AS (INSERT INTO lexical_sizes(chunk, t0, t1, t2, t3) VALUES (?,?,?,?,?)) "
        "UPDATE lexical_stats SET chunks = chunks + 1, t0 = t0 + ?, t1 = t1 + ?, t2 = t2 + ?, t3 = t3 + ?, "
        "version = version + 1 WHERE id = 1",
        (chunk_id, *sizes, *sizes),
    )


def add_delta(db: Snapshot, chunk_id: int, d: int, terms: dict[str, list[int]]) -> None:
    """A chunk's postings delta rows (store/lexical/postings.py: token → its count per column), in one
    statement: arrays unnested, where SQLite takes a row at a time."""
    if not terms:
        return
    counts = list(zip(*terms.values()))
    db.execute(
        "INSERT INTO postings_delta(term, chunk, d, t0, t1, t2, t3) SELECT t, ?, ?, a, b, c, e FROM "
        "unnest(?::text[], ?::integer[], ?::integer[], ?::integer[], ?::integer[]) AS u(t, a, b, c, e) "
        "ON CONFLICT(term, chunk) DO UPDATE SET d = excluded.d, t0 = excluded.t0, t1 = excluded.t1, "
        "t2 = excluded.t2, t3 = excluded.t3",
        (chunk_id, d, list(terms), *(list(c) for c in counts)),
    )


def removed(db: Snapshot, chunk_ids: list[int]) -> None:
    """These chunks' lexical rows are gone: their sizes leave the totals."""
    if not chunk_ids:
        return
    cond, arg = in_ids(db, "chunk", chunk_ids)
    n, t0, t1, t2, t3 = one(
        db,
        f"WITH gone AS (DELETE FROM lexical_sizes WHERE {cond} RETURNING t0, t1, t2, t3) "
        "SELECT COUNT(*), COALESCE(SUM(t0), 0), COALESCE(SUM(t1), 0), COALESCE(SUM(t2), 0), COALESCE(SUM(t3), 0) "
        "FROM gone",
        (arg,),
    )
    if n:
        db.execute(
            "UPDATE lexical_stats SET chunks = chunks - ?, t0 = t0 - ?, t1 = t1 - ?, t2 = t2 - ?, t3 = t3 - ?, "
            "version = version + 1 WHERE id = 1",
            (int(n), int(t0), int(t1), int(t2), int(t3)),
        )


# The fuzzy fallback's range of stored tokens (store/lexical/vocab.py), in term order as SQLite's
# index walk gives it, so that LIMIT keeps the same terms on both stores.
NEAR_SQL = (
    "SELECT term FROM (SELECT DISTINCT term FROM postings WHERE term >= ?1 AND term < ?2 "
    "AND length(term) BETWEEN ?3 AND ?4 ORDER BY term LIMIT ?5) a UNION "
    "SELECT DISTINCT term FROM postings_delta WHERE term >= ?1 AND term < ?2 AND length(term) BETWEEN ?3 AND ?4 "
    "ORDER BY term"
)
