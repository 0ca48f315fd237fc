"""Equal scores in content order: the order among hits that score alike is a
function of what the store holds, not of its history (issue 16).

The legs and fusion break ties by chunk id, and chunk ids follow the store's
history: a rename keeps its rows, an edit writes new ones, a run a SIGKILL cut
short and resumed writes them in another order. So two stores of the same files
could answer tied hits in different orders. Here each run of equal scores is
re-sorted by (document path, chunk ordinal in the document): the same in every
store of the same files, and what a reader expects (the earlier file, then the
earlier section). It is applied within each leg before fusion (a tie's rank
feeds RRF), to the fused order and to the ranker's order. Only runs of equal
neighbours move, so whatever else a leg orders by (the lexical leg's strict
matches first) stands. Equal means equal as the answer reports it: the legs'
scores are rounded to 6 places already, fused scores are compared at the 8 the
answer shows, the ranker's at its 6.

The keys cost no query of their own: the engine reads every leg hit's document
path and ordinal with what fusion's boosts and the per-document cap need
(store/hits.candidates), once, before the legs are put in order. TieKeys asks
its lookup only for the chunks that tie (most legs have none).

Runs on: the search's thread (pure; the key lookup is the caller's function).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import TypeVar

from .fusion import Fused, LegHit

T = TypeVar("T")
Key = tuple
Lookup = Callable[[list[int]], Mapping[int, Key]]

FUSED_PLACES = 8  # the precision of a hit's "score" (engine.py)
RANK_PLACES = 6  # the precision of a hit's "rank_score"
_ABSENT = "\U0010ffff"  # a chunk retired since a leg found it sorts after every path


class TieKeys:
    """chunk id → (path, ordinal, chunk id), read in batches through `lookup` and kept."""

    def __init__(self, lookup: Lookup):
        self._lookup = lookup
        self._keys: dict[int, Key] = {}
        self.queries = 0

    def need(self, ids: Iterable[int]) -> None:
        missing = sorted({i for i in ids if i not in self._keys})
        if missing:
            self.queries += 1
            found = self._lookup(missing)
            for cid in missing:
                k = found.get(cid)
                self._keys[cid] = (_ABSENT, 0, cid) if k is None else (*k, cid)

    def __call__(self, cid: int) -> Key:
        if cid not in self._keys:
            self.need([cid])
        return self._keys[cid]


def _runs(scores: Sequence[Hashable]) -> list[tuple[int, int]]:
    """[start, end) of every run of two or more equal neighbours."""
    out, start = [], 0
    for i in range(1, len(scores) + 1):
        if i == len(scores) or scores[i] != scores[start]:
            if i - start > 1:
                out.append((start, i))
            start = i
    return out


def _reorder(
    items: list[T],
    scores: Sequence[Hashable],
    ids: Callable[[T], int],
    key: Callable[[int], Key],
    keys: TieKeys | None = None,
) -> list[T]:
    runs = _runs(scores)
    if not runs:
        return items
    if keys is not None:
        keys.need(ids(items[i]) for a, b in runs for i in range(a, b))
    out = list(items)
    for a, b in runs:
        out[a:b] = sorted(out[a:b], key=lambda x: key(ids(x)))
    return out


def order_leg(
    hits: list[LegHit], key: Callable[[int], Key], group: Callable[[LegHit], Hashable] | None = None
) -> list[LegHit]:
    """A leg's hits with each run of equal scores (within one `group`) in key order."""
    scores = [(group(h), h.score) if group else h.score for h in hits]
    return _reorder(hits, scores, lambda h: h.chunk_id, key)


def cut_leg(hits: list[LegHit], top: int, key: Callable[[int], Key]) -> list[LegHit]:
    """A leg fetched past `top`, cut to it; a run of equal scores straddling the cut keeps its
    first members in key order (the vector scan orders ties by chunk id, i.e. by history;
    store/matches.content_cut does the same for the lexical leg)."""
    if len(hits) <= top:
        return hits
    edge = hits[top - 1].score
    if hits[top].score != edge:
        return hits[:top]
    first = next(i for i, h in enumerate(hits) if h.score == edge)
    run = sorted((h for h in hits[first:] if h.score == edge), key=lambda h: key(h.chunk_id))
    return hits[:first] + run[: top - first]


def run_reaches_end(hits: list[LegHit], top: int, fetched: int) -> bool:
    """Whether the run of equal scores at the cut may go on past the `fetched` hits in hand."""
    return len(hits) >= fetched > top and hits[-1].score == hits[top - 1].score


def tied_ids(
    legs: Mapping[str, list[LegHit]], groups: Mapping[str, Callable[[LegHit], Hashable]] | None = None
) -> set[int]:
    """The chunks of every leg that tie with a neighbour: what order_leg will look up."""
    out: set[int] = set()
    for name, hits in legs.items():
        g = (groups or {}).get(name)
        scores = [(g(h), h.score) if g else h.score for h in hits]
        out.update(hits[i].chunk_id for a, b in _runs(scores) for i in range(a, b))
    return out


def order_legs(
    legs: dict[str, list[LegHit]], keys: TieKeys, groups: Mapping[str, Callable[[LegHit], Hashable]] | None = None
) -> dict[str, list[LegHit]]:
    """Every leg's ties in key order, their keys read in one batch."""
    keys.need(tied_ids(legs, groups))
    return {name: order_leg(hits, keys, (groups or {}).get(name)) for name, hits in legs.items()}


def order_fused(fused: list[Fused], keys: TieKeys) -> list[Fused]:
    """The fused list (sorted by score) with each run of equal scores in key order."""
    return _reorder(fused, [round(f.score, FUSED_PLACES) for f in fused], lambda f: f.chunk_id, keys, keys)


def ordered_scores(pairs: Sequence[tuple[int, float]], keys: TieKeys) -> list[int]:
    """Chunk ids by score (best first), equal scores in key order: the ranker's order."""
    ranked = sorted(pairs, key=lambda p: -round(p[1], RANK_PLACES))
    ranked = _reorder(ranked, [round(s, RANK_PLACES) for _, s in ranked], lambda p: p[0], keys, keys)
    return [cid for cid, _ in ranked]
