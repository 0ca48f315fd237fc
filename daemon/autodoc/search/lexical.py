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


def lexical_sql(filt: Filter) -> str:
    where = f" AND {filt.sql}" if filt.sql else ""
    return (
        f"SELECT c.id, {_BM25} AS s FROM chunks_fts JOIN chunks c ON c.id = chunks_fts.rowid "
        f"WHERE chunks_fts MATCH ? AND c.workspace_id = ?{where} ORDER BY s, c.id LIMIT ?"
    )


def run_lexical(
    db: apsw.Connection, workspace_id: int, terms: list[Term], filt: Filter, *, want: int, top: int = LEXICAL_TOP
) -> tuple[list[LegHit], str | None]:
    """Returns (hits best first with positive scores, "all" | "any" | None)."""
    sql = lexical_sql(filt)
    match = build_match(terms, "all")
    if match is None:
        return [], None
    rows = db.execute(sql, (match, workspace_id, *filt.params, top)).fetchall()
    used = "all"
    if len(rows) < want:
        relaxed = build_match(terms, "any")
        if relaxed and relaxed != match:
            more = db.execute(sql, (relaxed, workspace_id, *filt.params, top)).fetchall()
            if len(more) > len(rows):
                strict = {cid for cid, _ in rows}
                rows = rows + [r for r in more if r[0] not in strict][: top - len(rows)]
                used = "any"
    return [LegHit(cid, round(-s, 6)) for cid, s in rows], used
