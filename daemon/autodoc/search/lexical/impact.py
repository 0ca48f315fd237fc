"""FTS5's ranking of an OR of single tokens, computed in numpy from the postings
index (store/lexical/postings.py) instead of by FTS5's bm25() over every matching row.

The arithmetic is fts5_aux.c's fts5Bm25Function, operation for operation (store/lexical/bm25.py):
avgdl = total tokens / rows (FTS5's averages record), per phrase
idf = log((N − n + 0.5) / (n + 0.5)) clamped to 1e-6 when ≤ 0 (n: the live
rows holding it, which is what FTS5's xQueryPhrase counts), per row
f = Σ over the phrase's instances of its column's weight (integer weights:
the sum is exact in any order), D = the row's tokens over every column, and
score = Σ in phrase order idf·(f·(k1+1)) / (f + k1·(1 − b + b·D/avgdl)),
returned negated, ties by rowid. Summed in the same order with the same
operations, the scores are FTS5's to the bit, so the rows and their order are.

The OR's top k is MaxScore, term at a time (`top`): the rarest terms are added
into partial scores by row id until the bounds of the rest (idf·(k1+1) each,
search/lexical/maxscore.py) sum below the k-th partial score θ; the rest are only
looked up (searchsorted on their sorted ids) for the candidates whose partial
score plus the rest's bounds still reach θ, θ rising and the candidates
thinning term by term; the survivors are scored again in phrase order. The
strict AND that the leg runs first is proved empty, or ranked when every term
is one token, from the same postings (`all_ranker`).

Runs on: the search's thread, on its snapshot.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import contextmanager

import numpy as np

from ...store.interface import Snapshot
from ...store.lexical import bm25, ftsterms, postings, postread
from ...store.lexical.matches import BM25_WEIGHTS
from . import maxscore

PRUNE_MIN = 20_000  # below this many postings in all, scoring them all is cheaper than the probe
ENABLED = True

Rows = list[tuple[int, float]]


def tokens_of(db: Snapshot, exprs: list[str]) -> list[str] | None:
    """Each expression's one token as FTS5 reads it; None when any is a phrase, a prefix or empty."""
    out = []
    for e in exprs:
        p = ftsterms.parse_expr(db, e)
        if p.prefix or len(p.tokens) != 1:
            return None
        out.append(p.tokens[0])
    return out


class Terms:
    """The query's phrases, each with its live postings: sorted ids, and bm25 contributions computed
    for the rows asked (a pruned term's for the candidates it holds, not its every posting)."""

    def __init__(
        self, recs: list[np.ndarray], weights: tuple[float, ...], rows: int, tokens: int, docs: list[int] | None = None
    ):
        """`docs`: each phrase's live row count when `recs` are not its every record (the AND's rows)."""
        self.avgdl = float(tokens) / float(rows)
        self.w = np.array([float(x) for x in weights])
        self.recs = recs
        self.ids: list[np.ndarray] = [rec["id"].astype(np.int64) for rec in recs]
        self.idf = [bm25.idf(rows, len(rec) if docs is None else docs[k]) for k, rec in enumerate(recs)]
        self.bound = [idf * (bm25.K1 + 1.0) for idf in self.idf]

    def __len__(self) -> int:
        return len(self.ids)

    def contrib(self, i: int, at: np.ndarray | None = None) -> np.ndarray:
        """Phrase i's bm25 term for its postings (or those at `at`), as fts5Bm25Function computes it."""
        rec = self.recs[i] if at is None else self.recs[i][at]
        return bm25.weight(self.idf[i], rec["tf"], rec["d"], self.w, self.avgdl)

    def score(self, essential: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """(rows holding an essential term, their full scores), summed in phrase order."""
        cand = union([self.ids[i] for i in essential])
        s = np.zeros(len(cand))
        ess = set(essential)
        for i in range(len(self.ids)):
            ids = self.ids[i]
            if not len(ids) or not len(cand):
                continue
            if i in ess:
                s[np.searchsorted(cand, ids)] += self.contrib(i)
            else:
                pos = np.minimum(np.searchsorted(ids, cand), len(ids) - 1)
                hit = ids[pos] == cand
                s[hit] += self.contrib(i, pos[hit])
        return cand, s


def union(arrays: list[np.ndarray]) -> np.ndarray:
    """The sorted distinct ids of sorted arrays (np.unique hashes first: several times slower here)."""
    if not arrays:
        return np.empty(0, np.int64)
    a = np.concatenate(arrays)
    a.sort()
    if len(a) < 2:
        return a
    keep = np.empty(len(a), bool)
    keep[0] = True
    np.not_equal(a[1:], a[:-1], out=keep[1:])
    return a[keep]


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
    """The best `limit` rows of the OR, exactly as FTS5 ranks them, scoring few of them (MaxScore,
    term at a time): the terms are added rarest first into partial scores until the bounds of the
    rest sum below the k-th partial score θ (a row holding none of the added terms cannot reach
    the top k); the rest are then looked up only for the rows whose partial score plus the rest's
    bounds still reach θ, θ rising and the rows thinning as each term is added. The rows left are
    scored again in phrase order, the sum FTS5 computes, so the scores are its to the bit."""
    m = len(terms)
    every = list(range(m))
    sizes = [len(x) for x in terms.ids]
    if limit <= 0:
        return []
    if m < maxscore.MIN_TERMS or sum(sizes) < PRUNE_MIN or not (terms.w > 0).all():
        return best(*terms.score(every), limit)  # (a zero weight could score a row 0: "held" needs > 0)
    order = sorted(every, key=lambda i: (-terms.bound[i], i))  # rarest first
    rest = [0.0] * (m + 1)  # rest[j]: the most the terms order[j:] add to a row
    for j in range(m - 1, -1, -1):
        rest[j] = rest[j + 1] + terms.bound[order[j]]
    span = 1 + max((int(x[-1]) for x in terms.ids if len(x)), default=0)
    acc = np.zeros(span)  # partial scores by row id (summed rarest first: a bound, not the answer)
    parts: list[np.ndarray] = []
    contribs: dict[int, np.ndarray] = {}
    held, floor, j = 0, 0.0, 0
    while j < m:
        i = order[j]
        ids = terms.ids[i]
        if len(ids):
            c = contribs[i] = terms.contrib(i)
            before = acc[ids]
            acc[ids] = before + c
            new = ids[before == 0.0]  # every contribution is > 0: a row at 0 is new to the candidates
            parts.append(new)
            held += len(new)
        j += 1
        # θ ≤ what the added terms can sum to: no use computing it before that exceeds the rest
        if j < m and held >= limit and rest[j] * (1.0 + SLACK) < rest[0] - rest[j]:
            cand = np.concatenate(parts)
            parts = [cand]
            floor = float(np.partition(acc[cand], held - limit)[held - limit])
            if rest[j] * (1.0 + SLACK) < floor:
                break
    cand = np.concatenate(parts) if parts else np.empty(0, np.int64)
    if j == m:  # every term added: every row that holds one is a candidate
        if len(cand) > DENSE_ROWS:
            return best(*_dense(terms, contribs, span, cand), limit)
        cand.sort()
        return best(cand, _exact(terms, cand, contribs), limit)
    return best(*_looked_up(terms, order[j:], rest[j:], acc, cand, floor, contribs, limit), limit)


def _looked_up(
    terms: Terms,
    later: list[int],
    rest: list[float],
    acc: np.ndarray,
    cand: np.ndarray,
    floor: float,
    contribs: dict[int, np.ndarray],
    limit: int,
) -> tuple[np.ndarray, np.ndarray]:
    """The rows that can still reach the top k (sorted) and their exact scores: the `later` terms
    (rest[j]: the bounds of later[j:] summed) only looked up for the candidates, which thin as
    each term's bound leaves the rest and the k-th partial score θ (`floor`) rises."""
    for jj, i in enumerate(later):
        cand = cand[(acc[cand] + rest[jj]) * (1.0 + SLACK) >= floor]
        ids = terms.ids[i]
        if len(ids) and len(cand):
            pos = np.minimum(np.searchsorted(ids, cand), len(ids) - 1)
            hit = ids[pos] == cand
            acc[cand[hit]] += terms.contrib(i, pos[hit])
        if len(cand) > limit:
            floor = max(floor, float(np.partition(acc[cand], len(cand) - limit)[len(cand) - limit]))
    cand = cand[acc[cand] * (1.0 + SLACK) >= floor]
    cand.sort()
    return cand, _exact(terms, cand, contribs)


DENSE_ROWS = 20_000  # candidates above which their exact scores are summed into a dense array
SLACK = 1e-9  # the bounds' margin against rounding (partial sums in another order than FTS5's)


def _exact(terms: Terms, cand: np.ndarray, contribs: dict[int, np.ndarray]) -> np.ndarray:
    """The candidates' (sorted ids) scores summed in phrase order, as fts5Bm25Function sums them."""
    s = np.zeros(len(cand))
    for i in range(len(terms)):
        ids = terms.ids[i]
        if not len(ids) or not len(cand):
            continue
        pos = np.minimum(np.searchsorted(ids, cand), len(ids) - 1)
        hit = ids[pos] == cand
        s[hit] += contribs[i][pos[hit]] if i in contribs else terms.contrib(i, pos[hit])
    return s


def _dense(terms: Terms, contribs: dict[int, np.ndarray], span: int, cand: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the candidates sorted, their scores): every term's contributions added in phrase order
    into an array by row id (each row's sum in FTS5's order), for many candidates."""
    acc = np.zeros(span)
    for i in range(len(terms)):
        if len(terms.ids[i]):
            acc[terms.ids[i]] += contribs[i] if i in contribs else terms.contrib(i)
    cand = np.sort(cand)
    return cand, acc[cand]


def ranker(db: Snapshot, exprs: list[str], columns: tuple[float, ...] | None) -> Callable[[str, int], Rows] | None:
    """A `rank` for store/matches.ranked_matches of `exprs[0] OR exprs[1] OR …`, or None when the
    postings cannot answer it (not built yet, or a term that is not one token): FTS5 then does."""
    weights = columns or BM25_WEIGHTS
    if not ENABLED or not exprs or any(w != int(w) for w in weights):
        return None  # (a fractional weight's sum would depend on the order FTS5 adds the instances in)
    complete, state, key = snapshot(db)
    if not complete:
        return None
    toks = tokens_of(db, exprs)
    if toks is None or state.rows <= 0:
        return None
    recs = _read(db, toks, key)
    terms = Terms([recs[t] for t in toks], weights, state.rows, state.tokens)
    memo: dict[int, Rows] = {}

    def rank(match: str, limit: int) -> Rows:
        if limit not in memo:
            memo[limit] = top(terms, limit)
        return memo[limit]

    return rank


_local = threading.local()


@contextmanager
def one_search():
    """Within it, a word's records are read once on this thread: a search reads a word for its AND
    check, its OR ranking and its hits' coverage (search/lexical/leg.py); and the snapshot's index
    state once (`snapshot`). Nothing outlives it."""
    _local.read, _local.snap = {}, None
    try:
        yield
    finally:
        _local.read = _local.snap = None


def snapshot(db: Snapshot) -> tuple[bool, ftsterms.IndexState, tuple]:
    """(postings complete, FTS5's index state, the postings caches' key) of this snapshot: three
    reads (≈ 0.1 ms each) a search's AND check, OR ranking and coverage each asked for."""
    kept = getattr(_local, "snap", None)
    if kept is not None and kept[0] is db:
        return kept[1]
    state = ftsterms.index_state(db)
    out = (postings.complete(db), state, postread.cache_key(db, state.key))
    if getattr(_local, "read", None) is not None:  # inside one_search
        _local.snap = (db, out)
    return out


def _read(db: Snapshot, toks: list[str], key: tuple) -> dict[str, np.ndarray]:
    """postread.read_terms, once per word within one_search."""
    kept = getattr(_local, "read", None)
    if kept is None:
        return postread.read_terms(db, toks, key)
    out = {t: kept[(key, t)] for t in toks if (key, t) in kept}
    missing = [t for t in toks if t not in out]
    if missing:
        got = postread.read_terms(db, missing, key)
        out.update(got)
        kept.update(((key, t), rec) for t, rec in got.items())
    return out


def held(db: Snapshot, exprs: list[str], chunk_ids: list[int]) -> dict[str, tuple[str, dict[int, int]]] | None:
    """expression → (its token, {chunk id: the token's count in the body column} for those of these
    chunks that hold it in any column), from the postings: the records this search's ranking read,
    else those in the segments holding these chunks. None when the postings cannot say (FTS5's
    tokenizer then does)."""
    if not ENABLED or not exprs:
        return None
    complete, _, key = snapshot(db)
    toks = tokens_of(db, exprs) if complete else None
    if toks is None:
        return None
    want = np.array(sorted(set(chunk_ids)), np.int64)
    kept = getattr(_local, "read", None) or {}
    out: dict[str, tuple[str, dict[int, int]]] = {}
    for e, t in zip(exprs, toks):
        rec = kept.get((key, t))
        if rec is None:
            rec = postread.read_at(db, t, want, key) if len(want) else np.empty(0, postings.NARROW)
        ids = rec["id"].astype(np.int64)
        if not len(ids) or not len(want):
            out[e] = (t, {})
            continue
        pos = np.minimum(np.searchsorted(ids, want), len(ids) - 1)
        hit = ids[pos] == want
        out[e] = (t, dict(zip(want[hit].tolist(), rec["tf"][pos[hit], postings.BODY].tolist())))
    return out


AND_BUDGET = 200_000  # postings read whole at most to prove an AND empty; past it FTS5 answers it
AT_IDS = 512  # common ids from which a word is checked in the segments holding them only
EMPTY = "empty"


def none_holds_all(db: Snapshot, exprs: list[str]) -> bool:
    """True when the postings show that no chunk holds every one of these terms (the AND query
    would find nothing). A sentence's AND is empty nearly always, and FTS5 walks every word's
    doclist to say so."""
    return all_ranker(db, exprs, None) is EMPTY


def all_ranker(db: Snapshot, exprs: list[str], columns: tuple[float, ...] | None):
    """For `exprs[0] AND exprs[1] AND …`: EMPTY when the postings show no chunk holds every term; a
    `rank` like ranker's (FTS5's ranking of the AND, to the bit) when every term is one token; else
    None (FTS5 answers). The rarest token first, stopping as soon as the common ids run out; once
    few ids are left, a word is read only in the segments holding them (a stopword's few segments,
    not its whole list). A phrase's tokens must each be held (a necessary condition), a prefix
    constrains nothing."""
    weights = columns or BM25_WEIGHTS
    if not ENABLED or len(exprs) < 2:
        return None
    complete, state, key = snapshot(db)
    if not complete:
        return None
    need: list[str] = []
    exact = all(w == int(w) for w in weights)
    for e in exprs:
        p = ftsterms.parse_expr(db, e)
        exact = exact and len(p.tokens) == 1 and not p.prefix
        if not p.prefix:
            need += p.tokens
    if not need:
        return None
    docs = ftsterms.token_docs(db, need, state)  # an order and a budget (cached per state)
    common: np.ndarray | None = None
    read = 0
    got: dict[str, tuple[np.ndarray, bool]] = {}  # token → its records read, whether all of them
    for t in sorted(dict.fromkeys(need), key=lambda t: docs[t]):
        if common is not None and len(common) <= AT_IDS:
            rec, whole = postread.read_at(db, t, common, key), False
        elif read + docs[t] > AND_BUDGET:
            return None
        else:
            rec, whole = _read(db, [t], key)[t], True
            read += len(rec)
        got[t] = (rec, whole)
        ids = rec["id"].astype(np.int64)
        if common is None:
            common = ids
        elif len(ids):
            pos = np.minimum(np.searchsorted(ids, common), len(ids) - 1)
            common = common[ids[pos] == common]
        else:
            common = ids
        if not len(common):
            return EMPTY
    if not exact or state.rows <= 0 or common is None:  # (need is not empty: common was set)
        return None
    recs, counts = [], []
    for t in need:  # one token per expression, in the AND's phrase order
        rec, whole = got[t]
        recs.append(rec[np.searchsorted(rec["id"].astype(np.int64), common)])
        counts.append(len(rec) if whole else postread.live_count(db, t, key))
    terms = Terms(recs, weights, state.rows, state.tokens, counts)
    s = np.zeros(len(common))
    for i in range(len(terms)):  # every row holds every phrase: its sum in phrase order is FTS5's
        s += terms.contrib(i)
    return lambda match, limit: best(common, s, limit)
