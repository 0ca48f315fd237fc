"""Exact top-k of an OR of terms under FTS5's bm25, scoring fewer rows (MaxScore).

FTS5 ranks `a OR b OR …` by scoring every row that holds any term, and the
scoring, not the walk over the doclists, is most of its cost (a COUNT of the
same matches takes a tenth of the time). A term adds to a row's score at most
idf · (k1 + 1) (bm25's saturation: f·(k1+1)/(f + k1·(…)) < k1+1 whatever the
column weights), and its IDF depends only on how many rows hold it, never on
the query it sits in. So:

1. a probe ranks the rows of the rarest terms (a bounded number of matches):
   its k-th partial score θ is a floor under the answer's k-th full score
   (k rows score at least that much with every term counted);
2. the commonest terms whose bounds sum below θ are non-essential (N): a row
   holding only those cannot reach the top k;
3. the answer is the best k of `(E) NOT (N)` (rows with no N term: their
   score is all there is) and `(E) AND (N)` (every term of the row present,
   so FTS5's score is the full one), E being the rest. Both score only rows
   that hold an essential term.

The rows, their order and their scores equal the plain OR query's; the scores
of `(E) AND (N)` are summed by FTS5 in that expression's phrase order, so they
may differ from the plain query's in the last bits (≈1e-15), and two rows
whose scores differ by no more than that could swap (never seen in the test
over hundreds of claims). Ties keep the plain query's order: score, then rowid.
Every term's document count is known (fts5vocab for a word; FTS5's own count
for a phrase or a prefix, store/lexical/ftsterms.py), so every bound is finite; a
count that were unknown would make its term's bound infinite, i.e. essential.
Fewer than MIN_TERMS terms, or no floor, runs the plain query.

Runs on: the search's thread (pure: the queries go through the `run` it is given).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ...store.lexical import bm25

MIN_TERMS = 3  # below, the plain OR query is as cheap as the probe
PROBE_ROWS = 20  # the probe's budget: matches of its terms, × the k asked for
MIN_MATCHES = 20_000  # below (the rows the plain query scores, at most), its three queries cost more than they save
SLACK = 1e-9  # the bound's margin against rounding in FTS5's arithmetic
ENABLED = True

Rows = list[tuple[int, float]]  # (rowid, bm25), best first: bm25 is negative, lower is better
Run = Callable[[str, int], Rows]  # (MATCH expression, LIMIT) → rows, ORDER BY bm25, rowid


def upper_bound(rows: int, docs: int | None) -> float:
    """The most one term can add to a row's score; infinite when its document count is unknown."""
    if docs is None:
        return math.inf
    idf = bm25.idf(rows, docs) if rows > 0 else 0.0
    return max(idf, 1e-6) * (bm25.K1 + 1.0)  # (b does not enter the bound)


def probe_terms(bounds: list[float], docs: list[int], budget: int) -> list[int]:
    """The rarest terms whose matches fit the budget (at least the rarest one)."""
    picked: list[int] = []
    total = 0
    for i in sorted(range(len(bounds)), key=lambda i: (-bounds[i], i)):
        if picked and total + docs[i] > budget:
            break
        picked.append(i)
        total += docs[i]
    return sorted(picked)


def non_essential(bounds: list[float], floor: float) -> list[int]:
    """The commonest terms whose bounds sum below the floor (their rows alone cannot reach it)."""
    out: list[int] = []
    total = 0.0
    for i in sorted(range(len(bounds)), key=lambda i: (bounds[i], -i)):
        if (total + bounds[i]) * (1.0 + SLACK) >= floor:
            break
        out.append(i)
        total += bounds[i]
    return sorted(out)


def _or(exprs: list[str], idx: list[int]) -> str:
    return " OR ".join(exprs[i] for i in idx)


def top_any(run: Run, exprs: list[str], bounds: list[float], docs: list[int], limit: int) -> Rows:
    """The best `limit` rows of `exprs[0] OR exprs[1] OR …`, as FTS5's own ranking of it."""
    plain = " OR ".join(exprs)
    if not ENABLED or len(exprs) < MIN_TERMS or limit <= 0 or sum(docs) < MIN_MATCHES:
        return run(plain, limit)
    probe = probe_terms(bounds, docs, PROBE_ROWS * limit)
    if len(probe) == len(exprs):
        return run(plain, limit)
    found = run(_or(exprs, probe), limit)
    if len(found) < limit:
        return run(plain, limit)  # fewer than k rows hold the rare terms: no floor
    floor = -found[-1][1]
    rest = non_essential(bounds, floor)
    if not rest:
        return run(plain, limit)
    essential = [i for i in range(len(exprs)) if i not in set(rest)]
    e, n = _or(exprs, essential), _or(exprs, rest)
    rows = run(f"({e}) NOT ({n})", limit) + run(f"({e}) AND ({n})", limit)
    rows.sort(key=lambda r: (r[1], r[0]))
    return rows[:limit]
