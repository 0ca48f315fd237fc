"""FTS5's ranking of an OR of single tokens, computed in numpy from the postings
index (store/postings.py) instead of by FTS5's bm25() over every matching row.

The arithmetic is fts5_aux.c's fts5Bm25Function, operation for operation:
avgdl = total tokens / rows (FTS5's averages record), per phrase
idf = log((N − n + 0.5) / (n + 0.5)) clamped to 1e-6 when ≤ 0 (n: the live
rows holding it, which is what FTS5's xQueryPhrase counts), per row
f = Σ over the phrase's instances of its column's weight (integer weights:
the sum is exact in any order), D = the row's tokens over every column, and
score = Σ in phrase order idf·(f·(k1+1)) / (f + k1·(1 − b + b·D/avgdl)),
returned negated, ties by rowid. Summed in the same order with the same
operations, the scores are FTS5's to the bit, so the rows and their order are.

MaxScore's pruning (search/maxscore.py) applies as it does over FTS5: the
rarest terms' partial scores give a floor θ under the k-th score; the
commonest terms whose bounds sum below θ are only looked up (searchsorted on
their sorted ids) for the rows the other terms hold.

Runs on: the search's thread, on its snapshot.
"""

from __future__ import annotations

import math
from typing import Callable

import apsw
import numpy as np

from ..store import ftsterms, postings
from ..store.matches import BM25_WEIGHTS
from . import maxscore

K1, B = 1.2, 0.75  # fts5_aux.c
PROBE_ROWS = 20  # the probe's postings budget, × the k asked for
PRUNE_MIN = 20_000  # below this many postings in all, scoring them all is cheaper than the probe
ENABLED = True

Rows = list[tuple[int, float]]


def tokens_of(db: apsw.Connection, exprs: list[str]) -> list[str] | None:
    """Each expression's one token as FTS5 reads it; None when any is a phrase, a prefix or empty."""
    out = []
    for e in exprs:
        p = ftsterms.parse_expr(db, e)
        if p.prefix or len(p.tokens) != 1:
            return None
        out.append(p.tokens[0])
    return out


class Terms:
    """The query's phrases, each with its live postings: sorted ids and bm25 contributions."""

    def __init__(self, recs: list[np.ndarray], weights: tuple[float, ...], rows: int, tokens: int):
        avgdl = float(tokens) / float(rows)
        w = [float(x) for x in weights]
        self.ids: list[np.ndarray] = []
        self.contrib: list[np.ndarray] = []
        self.bound: list[float] = []
        for rec in recs:
            n = len(rec)
            idf = math.log((rows - n + 0.5) / (n + 0.5))
            if idf <= 0.0:
                idf = 1e-6
            tf = rec["tf"].astype(np.float64)
            f = tf[:, 0] * w[0] + tf[:, 1] * w[1] + tf[:, 2] * w[2] + tf[:, 3] * w[3]
            d = rec["d"].astype(np.float64)
            self.ids.append(rec["id"].astype(np.int64))
            self.contrib.append(idf * ((f * (K1 + 1.0)) / (f + K1 * (1 - B + B * d / avgdl))))
            self.bound.append(idf * (K1 + 1.0))

    def __len__(self) -> int:
        return len(self.ids)

    def score(self, essential: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """(rows holding an essential term, their full scores), summed in phrase order."""
        cand = np.unique(np.concatenate([self.ids[i] for i in essential])) if essential else np.empty(0, np.int64)
        s = np.zeros(len(cand))
        ess = set(essential)
        for i in range(len(self.ids)):
            ids = self.ids[i]
            if not len(ids) or not len(cand):
                continue
            if i in ess:
                s[np.searchsorted(cand, ids)] += self.contrib[i]
            else:
                pos = np.minimum(np.searchsorted(ids, cand), len(ids) - 1)
                hit = ids[pos] == cand
                s[hit] += self.contrib[i][pos[hit]]
        return cand, s


def best(cand: np.ndarray, s: np.ndarray, limit: int) -> Rows:
    """The best `limit` rows as FTS5 orders them: bm25 (= −score) ascending, then rowid."""
    k = min(limit, len(cand))
    if k <= 0:
        return []
    kth = np.partition(s, len(s) - k)[len(s) - k]
    sel = np.nonzero(s >= kth)[0]
    sel = sel[np.lexsort((cand[sel], -s[sel]))][:k]
    return [(int(cand[j]), -float(s[j])) for j in sel]


def top(terms: Terms, limit: int) -> Rows:
    m = len(terms)
    every = list(range(m))
    sizes = [len(x) for x in terms.ids]
    if limit <= 0:
        return []
    if m < maxscore.MIN_TERMS or sum(sizes) < PRUNE_MIN:
        return best(*terms.score(every), limit)
    probe = maxscore.probe_terms(terms.bound, sizes, PROBE_ROWS * limit)
    if len(probe) == m:
        return best(*terms.score(every), limit)
    cand = np.unique(np.concatenate([terms.ids[i] for i in probe]))
    if len(cand) < limit:
        return best(*terms.score(every), limit)  # fewer than k rows hold the rare terms: no floor
    part = np.zeros(len(cand))
    for i in probe:
        part[np.searchsorted(cand, terms.ids[i])] += terms.contrib[i]
    floor = float(np.partition(part, len(part) - limit)[len(part) - limit])
    rest = set(maxscore.non_essential(terms.bound, floor))
    return best(*terms.score([i for i in every if i not in rest]), limit)


def ranker(db: apsw.Connection, exprs: list[str], columns: tuple[float, ...] | None
           ) -> Callable[[str, int], Rows] | None:
    """A `rank` for store/matches.ranked_matches of `exprs[0] OR exprs[1] OR …`, or None when the
    postings cannot answer it (not built yet, or a term that is not one token): FTS5 then does."""
    if not ENABLED or not exprs or not postings.complete(db):
        return None
    toks = tokens_of(db, exprs)
    if toks is None:
        return None
    state = ftsterms.index_state(db)
    if state.rows <= 0:
        return None
    recs = postings.read_terms(db, toks, state.key)
    terms = Terms([recs[t] for t in toks], columns or BM25_WEIGHTS, state.rows, state.tokens)
    memo: dict[int, Rows] = {}

    def rank(match: str, limit: int) -> Rows:
        if limit not in memo:
            memo[limit] = top(terms, limit)
        return memo[limit]
    return rank
