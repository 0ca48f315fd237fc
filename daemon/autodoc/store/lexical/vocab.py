"""The index's vocabulary near a word, for the lexical leg's fuzzy fallback (search/lexical/fuzzy.py):
the stored tokens that share the word's first letters and are within a few letters of its length.

Read from the postings index's term column (an index range scan that reads no postings: the
`postings_by_term` index covers it), the delta's terms beside it; a store whose postings are not
complete reads fts5vocab instead, over the tokens sharing the word's first two letters (fts5vocab
counts each term's doclist as it goes, so its range is kept narrow). Either way the read is bounded
by the range, never the whole vocabulary.

Runs on: the search's thread, on its snapshot.
"""

from __future__ import annotations

from ..interface import Snapshot
from ..sql import POSTGRES, dialect
from . import postings
from .bm25 import prefix_range
from .ftsterms import VOCAB_SQL

MAX_TERMS = 20_000  # tokens read per word at most: a bound at any store size
# The range in the postings, in term order on both stores (SQLite's index walk gives that order
# anyway; PostgreSQL needs the ORDER BY), so that LIMIT keeps the same terms on both.
NEAR_SQL = (
    "SELECT term FROM (SELECT DISTINCT term FROM postings WHERE term >= ?1 AND term < ?2 "
    "AND length(term) BETWEEN ?3 AND ?4 ORDER BY term LIMIT ?5) a UNION "
    "SELECT DISTINCT term FROM postings_delta WHERE term >= ?1 AND term < ?2 AND length(term) BETWEEN ?3 AND ?4 "
    "ORDER BY term"
)


def near(db: Snapshot, token: str, slack: int) -> list[str]:
    """Stored tokens whose length is within `slack` of `token`'s, the token itself excluded: every
    one sharing its first two letters, and those sharing its first letter as far as MAX_TERMS
    reaches (a typo in the first two letters is found while that letter's range fits the bound).
    Without complete postings, fts5vocab's, over the first two letters only."""
    lo, hi = len(token) - slack, len(token) + slack
    if dialect(db) == POSTGRES or (postings.has_tables(db) and postings.complete(db)):
        sql = NEAR_SQL
        prefixes = [token[:2], token[:1]] if len(token) > 1 else [token[:1]]
    else:
        db.execute(VOCAB_SQL)
        sql = (
            "SELECT term FROM temp.chunks_vocab WHERE term >= ?1 AND term < ?2 "
            "AND length(term) BETWEEN ?3 AND ?4 LIMIT ?5"
        )
        prefixes = [token[:2]]
    out: dict[str, None] = {}
    for prefix in prefixes:
        for (t,) in db.execute(sql, (*prefix_range(prefix), lo, hi, MAX_TERMS)).fetchall():
            out[str(t)] = None
    out.pop(token, None)
    return list(out)
