"""Stage 1, the lexical leg (I/O): FTS5 BM25 over chunks, top 50.

Column weights: title 3, breadcrumb 2, aliases+tags 2, body 1 — structure
outranks prose, as the spec asks, without burying a body-only match.
Words are ANDed first; when that finds fewer chunks than the caller asked for
(a question, a pasted sentence), the leg relaxes to any of the words with
stopwords dropped; the chunks that had every word stay on top, in their BM25
order, and the relaxed matches follow. The caller learns which ran.
"""

from __future__ import annotations

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
# leg ranks inside FTS5 first, over a window wider than it needs, and filters
# the window by workspace, facets and paths; only when the filter leaves too
# few and the window was full does it fall back to joining every match.
WINDOW_FACTOR = 4


def lexical_sql(filt: Filter) -> str:
    """Every match joined, then ranked: exact under any filter (the fallback)."""
    where = f" AND {filt.sql}" if filt.sql else ""
    return (
        f"SELECT c.id, {_BM25} AS s FROM chunks_fts JOIN chunks c ON c.id = chunks_fts.rowid "
        f"WHERE chunks_fts MATCH ? AND c.workspace_id = ?{where} ORDER BY s, c.id LIMIT ?"
    )


RANKED_SQL = f"SELECT rowid, {_BM25} AS s FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY s, rowid LIMIT ?"


def _ranked(db: apsw.Connection, match: str, workspace_id: int, filt: Filter, top: int) -> list[tuple[int, float]]:
    window = top * WINDOW_FACTOR
    ranked = db.execute(RANKED_SQL, (match, window)).fetchall()
    where = f" AND {filt.sql}" if filt.sql else ""
    keep: set[int] = set()
    for i in range(0, len(ranked), 500):
        part = [r[0] for r in ranked[i : i + 500]]
        keep.update(r[0] for r in db.execute(
            f"SELECT c.id FROM chunks c WHERE c.id IN ({','.join('?' * len(part))}) AND c.workspace_id = ?{where}",
            (*part, workspace_id, *filt.params)))
    rows = [(cid, s) for cid, s in ranked if cid in keep][:top]
    if len(rows) < top and len(ranked) == window:  # matches beyond the window might pass the filter
        return db.execute(lexical_sql(filt), (match, workspace_id, *filt.params, top)).fetchall()
    return rows


def run_lexical(
    db: apsw.Connection, workspace_id: int, terms: list[Term], filt: Filter, *, want: int, top: int = LEXICAL_TOP
) -> tuple[list[LegHit], str | None]:
    """Returns (hits best first with positive scores, "all" | "any" | None)."""
    match = build_match(terms, "all")
    if match is None:
        return [], None
    rows = _ranked(db, match, workspace_id, filt, top)
    used = "all"
    if len(rows) < want:
        relaxed = build_match(terms, "any")
        if relaxed and relaxed != match:
            more = _ranked(db, relaxed, workspace_id, filt, top)
            if len(more) > len(rows):
                strict = {cid for cid, _ in rows}
                rows = rows + [r for r in more if r[0] not in strict][: top - len(rows)]
                used = "any"
    return [LegHit(cid, round(-s, 6)) for cid, s in rows], used
