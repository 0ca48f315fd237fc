"""The lexical leg: FTS5 BM25 over chunks (store/matches.py), top 50.

Words are ANDed first; when that finds fewer chunks than the caller asked for
(a question, a pasted sentence), the leg relaxes to any of the words with
stopwords dropped; the chunks that had every word stay on top, in their BM25
order, and the relaxed matches follow. The caller learns which ran.

Runs on: the search's thread, on its snapshot.
"""

from __future__ import annotations

import apsw

from ..config import LEXICAL_TOP
from ..store.filters import Filter
from ..store.matches import ranked_matches, sole_workspace
from .fts import build_match
from .fusion import LegHit
from .query import Term


def run_lexical(
    db: apsw.Connection, workspace_id: int, terms: list[Term], filt: Filter, *, want: int, top: int = LEXICAL_TOP
) -> tuple[list[LegHit], str | None]:
    """Returns (hits best first with positive scores, "all" | "any" | None)."""
    match = build_match(terms, "all")
    if match is None:
        return [], None
    unfiltered = filt.empty and sole_workspace(db, workspace_id)
    rows = ranked_matches(db, match, workspace_id, filt, top, unfiltered)
    used = "all"
    if len(rows) < want:
        relaxed = build_match(terms, "any")
        if relaxed and relaxed != match:
            more = ranked_matches(db, relaxed, workspace_id, filt, top, unfiltered)
            if len(more) > len(rows):
                strict = {cid for cid, _ in rows}
                rows = rows + [r for r in more if r[0] not in strict][: top - len(rows)]
                used = "any"
    return [LegHit(cid, round(-s, 6)) for cid, s in rows], used
