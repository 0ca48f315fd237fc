"""Stage 1, the lexical leg (I/O): FTS5 BM25 over chunks, top 50.

Column weights: title 3, breadcrumb 2, aliases+tags 2, body 1 — structure
outranks prose, as the spec asks, without burying a body-only match.
Words are ANDed first; when that finds fewer chunks than the caller asked for
(a question, a pasted sentence), the leg relaxes to any of the words with
stopwords dropped; the chunks that had every word stay on top, in their BM25
order, and the relaxed matches follow. The caller learns which ran.
"""

from __future__ import annotations

import json

import apsw

from ..config import LEXICAL_TOP
from .filters import Filter
from .fts import build_match
from .fusion import LegHit
from .query import Term

BM25_WEIGHTS = (3.0, 2.0, 2.0, 1.0)
_BM25 = "bm25(chunks_fts, {}, {}, {}, {})".format(*BM25_WEIGHTS)


# FTS5 ranks its matches fastest on its own; joining every match to `chunks`
# before the ORDER BY doubled the leg's time (docs/benchmarks/speed.md). So the
# leg ranks inside FTS5 first and keeps the rows that pass the filter. When the
# store holds one workspace and nothing else filters, every FTS5 row passes and
# the ranked rows are the answer as they are. Otherwise the window over FTS5's
# ranking widens (×4) while the filter leaves too few, and past a limit the leg
# falls back to joining every match (exact under any filter).
WINDOW_FACTOR = 4
WINDOW_STEPS = 2  # windows of top, 4·top, 16·top, then the fallback


def lexical_sql(filt: Filter) -> str:
    """Every match joined, then ranked: exact under any filter (the fallback)."""
    where = f" AND {filt.sql}" if filt.sql else ""
    return (
        f"SELECT c.id, {_BM25} AS s FROM chunks_fts JOIN chunks c ON c.id = chunks_fts.rowid "
        f"WHERE chunks_fts MATCH ? AND c.workspace_id = ?{where} ORDER BY s, c.id LIMIT ?"
    )


RANKED_SQL = f"SELECT rowid, {_BM25} AS s FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY s, rowid LIMIT ?"


def _keep_sql(filt: Filter) -> str:
    # one statement text whatever the window's size, so SQLite's statement cache serves it
    where = f" AND {filt.sql}" if filt.sql else ""
    return f"SELECT c.id FROM chunks c WHERE c.id IN (SELECT value FROM json_each(?)) AND c.workspace_id = ?{where}"


def _ranked(db: apsw.Connection, match: str, workspace_id: int, filt: Filter, top: int,
            unfiltered: bool) -> list[tuple[int, float]]:
    if unfiltered:
        return db.execute(RANKED_SQL, (match, top)).fetchall()
    window = top
    for _ in range(WINDOW_STEPS + 1):
        ranked = db.execute(RANKED_SQL, (match, window)).fetchall()
        keep = {r[0] for r in db.execute(
            _keep_sql(filt), (json.dumps([r[0] for r in ranked]), workspace_id, *filt.params))}
        rows = [(cid, s) for cid, s in ranked if cid in keep][:top]
        if len(rows) >= top or len(ranked) < window:  # enough, or FTS5 had no more matches
            return rows
        window *= WINDOW_FACTOR
    return db.execute(lexical_sql(filt), (match, workspace_id, *filt.params, top)).fetchall()


def sole_workspace(db: apsw.Connection, workspace_id: int) -> bool:
    """True when every chunk in the store belongs to this workspace."""
    return db.execute("SELECT COUNT(*) = 1 AND MIN(id) = ? FROM workspaces", (workspace_id,)).fetchone()[0] == 1


def run_lexical(
    db: apsw.Connection, workspace_id: int, terms: list[Term], filt: Filter, *, want: int, top: int = LEXICAL_TOP
) -> tuple[list[LegHit], str | None]:
    """Returns (hits best first with positive scores, "all" | "any" | None)."""
    match = build_match(terms, "all")
    if match is None:
        return [], None
    unfiltered = filt.empty and sole_workspace(db, workspace_id)
    rows = _ranked(db, match, workspace_id, filt, top, unfiltered)
    used = "all"
    if len(rows) < want:
        relaxed = build_match(terms, "any")
        if relaxed and relaxed != match:
            more = _ranked(db, relaxed, workspace_id, filt, top, unfiltered)
            if len(more) > len(rows):
                strict = {cid for cid, _ in rows}
                rows = rows + [r for r in more if r[0] not in strict][: top - len(rows)]
                used = "any"
    return [LegHit(cid, round(-s, 6)) for cid, s in rows], used
