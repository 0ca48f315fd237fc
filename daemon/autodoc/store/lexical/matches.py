"""FTS5 matches ranked by BM25, within a candidate filter.

Column weights: title 3, breadcrumb 2, aliases+tags 2, body 1: structure
outranks prose without burying a body-only match.

FTS5 ranks its matches fastest on its own; joining every match to `chunks`
before the ORDER BY doubled the leg's time (docs/benchmarks/speed.md). So a
match is ranked inside FTS5 first and the rows that pass the filter are kept.
When the store holds one workspace and nothing else filters, every FTS5 row
passes and the ranked rows are the answer as they are. Otherwise the window
over FTS5's ranking widens (×4) while the filter leaves too few, and past a
limit the query falls back to joining every match (exact under any filter).

Runs on: the caller's thread, on the read snapshot it passes.
"""

from __future__ import annotations

from collections.abc import Callable

from ..filters import Filter
from ..hits import candidates
from ..interface import Snapshot
from ..sql import POSTGRES, all_rows, dialect, in_ids, scalar
from . import bm25, ftsterms

BM25_WEIGHTS = (3.0, 2.0, 2.0, 1.0)
# A lexical-only search weighs the columns alike: seed 001 rejects a global title > body weight,
# and on SciFact's long claims the 3/2/2/1 leg alone read below a plain BM25 (quality.md). In the
# hybrid the title weight measured better (the coverage weight discounts title-only matches).
EQUAL_WEIGHTS = (1.0, 1.0, 1.0, 1.0)
WINDOW_FACTOR = 4
WINDOW_STEPS = 2  # windows of top, 4·top, 16·top, then the fallback


def _bm25(columns: tuple[float, ...] | None = None) -> str:
    return "bm25(chunks_fts, {}, {}, {}, {})".format(*(columns or BM25_WEIGHTS))


def ranked_sql(columns: tuple[float, ...] | None = None) -> str:
    return f"SELECT rowid, {_bm25(columns)} AS s FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY s, rowid LIMIT ?"


def lexical_sql(filt: Filter, columns: tuple[float, ...] | None = None) -> str:
    """Every match joined, then ranked: exact under any filter (the fallback)."""
    where = f" AND {filt.sql}" if filt.sql else ""
    return (
        f"SELECT c.id, {_bm25(columns)} AS s FROM chunks_fts JOIN chunks c ON c.id = chunks_fts.rowid "
        f"WHERE chunks_fts MATCH ? AND c.workspace_id = ?{where} ORDER BY s, c.id LIMIT ?"
    )


def _keep_sql(db: Snapshot, filt: Filter) -> str:
    # one statement text whatever the window's size, so SQLite's statement cache serves it
    where = f" AND {filt.sql}" if filt.sql else ""
    return f"SELECT c.id FROM chunks c WHERE {in_ids(db, 'c.id', [])[0]} AND c.workspace_id = ?{where}"


def ranked(db: Snapshot, match: str, limit: int, columns: tuple[float, ...] | None = None) -> list[tuple[int, float]]:
    """FTS5's own ranking of a MATCH: (rowid, bm25) best first, ties by rowid, at most `limit`
    (on PostgreSQL, the same computed from the postings: store/lexical/bm25.py)."""
    if dialect(db) == POSTGRES:
        return bm25.ranked(db, match, limit, columns or BM25_WEIGHTS)
    return all_rows(db, ranked_sql(columns), (match, limit))


Rank = Callable[[str, int], list[tuple[int, float]]]


def ranked_matches(
    db: Snapshot,
    match: str,
    workspace_id: int,
    filt: Filter,
    top: int,
    unfiltered: bool,
    columns: tuple[float, ...] | None = None,
    rank: Rank | None = None,
) -> list[tuple[int, float]]:
    """(chunk id, bm25) best first (bm25 is negative: lower is better), at most `top`.
    `rank` stands in for FTS5's ranking of `match` (search/lexical/maxscore.py: the same rows, cheaper)."""
    rank = rank or (lambda m, n: ranked(db, m, n, columns))
    if unfiltered:
        return content_cut(db, lambda n: rank(match, n), top)
    return content_cut(db, lambda n: _filtered(db, rank, match, workspace_id, filt, n, columns), top)


# A leg's scores are compared at the precision its hits carry (search/lexical/leg.py rounds them so).
TIE_PLACES = 6


def content_cut(db: Snapshot, fetch: Callable[[int], list[tuple[int, float]]], top: int) -> list[tuple[int, float]]:
    """fetch(top), except that a run of equal scores straddling the cut keeps its members
    first in content order (document path, chunk ordinal), as search/ties.py orders them:
    FTS5 orders ties by rowid, and rowids follow the store's history (issue 16)."""
    n = top + 1
    while True:
        rows = fetch(n)
        if len(rows) <= top:
            return rows
        edge = round(rows[top - 1][1], TIE_PLACES)
        if round(rows[top][1], TIE_PLACES) != edge:
            return rows[:top]
        if len(rows) < n or round(rows[-1][1], TIE_PLACES) != edge:
            break  # the whole run is in hand
        n *= 4
    first = next(i for i, r in enumerate(rows) if round(r[1], TIE_PLACES) == edge)
    run = [r for r in rows[first:] if round(r[1], TIE_PLACES) == edge]
    found = candidates(db, [r[0] for r in run])
    run.sort(key=lambda r: ((found[r[0]].path, found[r[0]].ordinal) if r[0] in found else ("\U0010ffff", 0), r[0]))
    return rows[:first] + run[: top - first]


def _filtered(
    db: Snapshot,
    rank: Rank,
    match: str,
    workspace_id: int,
    filt: Filter,
    top: int,
    columns: tuple[float, ...] | None,
) -> list[tuple[int, float]]:
    window = top
    for _ in range(WINDOW_STEPS + 1):
        ranked_rows = rank(match, window)
        rows = _kept(db, ranked_rows, workspace_id, filt)[:top]
        if len(rows) >= top or len(ranked_rows) < window:  # enough, or FTS5 had no more matches
            return rows
        window *= WINDOW_FACTOR
    if dialect(db) == POSTGRES:  # every match ranked already (bm25.py), and kept when it passes
        return _kept(db, ranked(db, match, 1 << 62, columns), workspace_id, filt)[:top]
    return all_rows(db, lexical_sql(filt, columns), (match, workspace_id, *filt.params, top))


def _kept(
    db: Snapshot, ranked_rows: list[tuple[int, float]], workspace_id: int, filt: Filter
) -> list[tuple[int, float]]:
    """The ranked rows of this workspace that pass the filter, in their order."""
    ids = in_ids(db, "c.id", [r[0] for r in ranked_rows])[1]
    keep = {r[0] for r in db.execute(_keep_sql(db, filt), (ids, workspace_id, *filt.params)).fetchall()}
    return [(cid, s) for cid, s in ranked_rows if cid in keep]


def sole_workspace(db: Snapshot, workspace_id: int) -> bool:
    """True when every chunk in the store belongs to this workspace."""
    return scalar(db, "SELECT COUNT(*) = 1 AND MIN(id) = ? FROM workspaces", (workspace_id,)) == 1


# Which chunks hold a term, in one pass over its doclist: the coverage weight reads it when the query's
# words have few matches altogether (search/lexical/leg.py), cheaper then than tokenizing the hits.
MATCHING_SQL = "SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ?"


def matching_rowids(db: Snapshot, match: str) -> list[int]:
    if dialect(db) == POSTGRES:
        return bm25.matching(db, match)
    return [r[0] for r in db.execute(MATCHING_SQL, (match,)).fetchall()]


def matching_chunks(db: Snapshot, match: str) -> tuple[str, object]:
    """`SELECT c.document_id FROM … c WHERE <the chunks matching>` and the value its one `?` takes:
    a caller appends its own `AND …` conditions on `c` (store/counts.py)."""
    if dialect(db) == POSTGRES:
        cond, ids = in_ids(db, "c.id", bm25.matching(db, match))
        return f"SELECT c.document_id FROM chunks c WHERE {cond}", ids
    return (
        "SELECT c.document_id FROM chunks_fts JOIN chunks c ON c.id = chunks_fts.rowid WHERE chunks_fts MATCH ?",
        match,
    )


# How many chunks the store holds: FTS5's own count (store/lexical/ftsterms.py), one read instead of a
# COUNT(*) over every chunk on each search (the coverage weight's IDF and compact's word weights).
chunk_total = ftsterms.chunk_total
