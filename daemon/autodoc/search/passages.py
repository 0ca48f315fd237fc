"""The leading document's passages scored whole: every passage of the document fusion put first,
not only those the legs brought back, ordered by what it says to this query (pure scoring, and
the one read that feeds it).

The legs rank passages of the whole workspace, each to its depth (LEXICAL_TOP, SEMANTIC_TOP): in a
long page (a 1,400-line proposal, a 1,200-line operator guide) the section that answers can be
neither leg's among the first fifty of all, while the page's overview and table of contents are.
Then a choice among the candidates (choice.py) cannot reach it. Within one document the question
is easier: which of these few dozen passages says what was asked. Each passage is scored by its
cosine to the query (the stored vector, the semantic leg's query vector) and by BM25 over the
query's informative words (inverse chunk frequencies of the workspace, as evidence.py counts
them; term frequencies and lengths from the passage's own text and breadcrumb), each scaled to
0..1 within the document (min to max: the document's own scale, so neither signal's spread
decides), averaged with equal weights (no weight was fitted), and discounted for navigation as
choice.py does. The best leads; the next best follow it while they score at least FOLLOW_SHARE
of the best, up to SHOWN in all (what one passage a document shows of the leading document:
choice.follow, search/compact.py).

Measured on the answer-span questions (bench/answers.py; tune part, offline replay of every
passage of the answer's document): the answering passage is the best of its document by cosine
alone for 32 of 48, by BM25 alone 35, by the two averaged 37, and among those shown (the rule
above) for 46, at 2.5 passages a question; docs/benchmarks/answers.md has the figures through
the product.

Input: the fused order, the query's informative words with their chunk counts, the query vector.
Output: the leading document's passages in the order to show them.

Runs on: the search's thread, on its read snapshot (one document's rows and vectors).
"""

from __future__ import annotations

import math
import threading
from collections import Counter, OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..store import hits as stored_hits
from ..store import vectors as stored_vectors
from ..store.filters import Filter
from ..store.interface import Snapshot
from ..store.lexical.bm25 import K1, B  # the lexical leg's constants
from ..store.lexical.ftstext import fts_text
from .choice import LEAD_NAV, NAV_KEEP, navigational
from .lexical.tokens import stem_counts

MIN_PASSAGES = 3  # fewer, and min-max scaling turns a hair's difference into the whole range
MAX_PASSAGES = 400  # more (a long session's events), and the document keeps fusion's choice: a search reads no more
SHOWN = 3  # passages of the leading document shown at most (the per-document cap, PER_DOCUMENT)
FOLLOW_SHARE = 0.6  # a later passage is shown while it scores this share of the best
# what the legs' ranking among all passages adds to a passage's score within its document (0..1):
# their first of the document leads where the document's own scores are close
FUSED_BONUS = 0.25


@dataclass(frozen=True)
class Passage:
    chunk_id: int
    cosine: float | None  # None: no vector (pending), or no semantic leg
    lexical: float  # BM25 over the query's words, 0 when it holds none
    nav: float  # choice.navigational


def bm25(counts: Sequence[Counter[str]], weights: dict[str, float]) -> list[float]:
    """Each passage's BM25 over the query's stems (`weights`: stem → inverse chunk frequency), its
    length against the document's mean passage."""
    lengths = [sum(c.values()) for c in counts]
    mean = (sum(lengths) / len(lengths)) if lengths else 0.0
    out = []
    for c, n in zip(counts, lengths):
        norm = K1 * (1 - B + B * (n / mean if mean else 1.0))
        out.append(sum(w * c[s] * (K1 + 1) / (c[s] + norm) for s, w in weights.items() if c[s]))
    return out


def _scaled(xs: list[float]) -> list[float]:
    lo, hi = min(xs), max(xs)
    return [(x - lo) / (hi - lo) if hi > lo else 0.0 for x in xs]


def order(passages: Sequence[Passage], fused: Sequence[int] = ()) -> list[tuple[int, float]]:
    """(chunk id, score) of every passage, best first: the mean of its cosine and its BM25, each
    scaled within the document (a signal no passage has is left out; a passage without a vector
    counts as the document's lowest cosine), plus FUSED_BONUS / (1 + its place) for the passages
    fusion brought back (`fused`, in fused order: the legs ranked them among all passages), times
    the navigation discount. Equal scores keep document order."""
    if not passages:
        return []
    signals = []
    cos = [p.cosine for p in passages]
    if any(c is not None for c in cos):
        low = min(c for c in cos if c is not None)
        signals.append(_scaled([low if c is None else c for c in cos]))
    lex = [p.lexical for p in passages]
    if any(lex):
        signals.append(_scaled(lex))
    n = len(signals) or 1
    place = {c: i for i, c in enumerate(fused)}
    score = [
        (sum(s[i] for s in signals) / n + (FUSED_BONUS / (1 + place[p.chunk_id]) if p.chunk_id in place else 0.0))
        * (1.0 - (1.0 - NAV_KEEP) * p.nav)
        for i, p in enumerate(passages)
    ]
    ranked = sorted(range(len(passages)), key=lambda i: -score[i])
    return [(passages[i].chunk_id, score[i]) for i in ranked]


def shown(ranked: list[tuple[int, float]], nav: dict[int, float]) -> list[int]:
    """The passages to show, in order: the best, then those at least FOLLOW_SHARE of it that are
    not navigation, SHOWN at most."""
    if not ranked:
        return []
    best = ranked[0][1]
    out = [ranked[0][0]]
    for cid, s in ranked[1:]:
        if len(out) == SHOWN or s < FOLLOW_SHARE * best:
            break
        if nav.get(cid, 0.0) < LEAD_NAV:
            out.append(cid)
    return out


def read(
    db: Snapshot,
    workspace_id: int,
    doc_id: int,
    filt: Filter,
    weights: dict[str, float],
    query_vector: np.ndarray | None,
    model_fp: str | None,
) -> list[Passage]:
    """Every passage of one document the filter admits, scored (its cosine where it has a vector)."""
    rows = stored_hits.document_passages(db, workspace_id, doc_id, filt, MAX_PASSAGES + 1)
    if not rows or len(rows) > MAX_PASSAGES:
        return []
    cos: dict[int, float] = {}
    if query_vector is not None and model_fp:
        q = np.asarray(query_vector, dtype=np.float32)
        for cid, _tokens, f32 in stored_vectors.document_vectors(db, workspace_id, model_fp, doc_id):
            v = np.frombuffer(f32, dtype=np.float32)
            if v.shape == q.shape:
                cos[cid] = float(v @ q)
    facts = [_facts(cid, b, t) for cid, b, t in rows]
    lexical = bm25([c for c, _ in facts], weights) if weights else [0.0] * len(rows)
    return [Passage(cid, cos.get(cid), lex, nav) for (cid, _, _), lex, (_, nav) in zip(rows, lexical, facts)]


_facts_lock = threading.Lock()
_facts_cache: OrderedDict[tuple[int, int], tuple[Counter[str], float]] = OrderedDict()
FACTS_CACHED = 20_000  # passages' stems and navigation kept: the leading document is often the last one's


def _facts(chunk_id: int, breadcrumb: str, text: str) -> tuple[Counter[str], float]:
    """A passage's stem counts and navigational score, which do not depend on the query: kept by
    chunk id and text (an id a store reuses for other text is another key)."""
    key = (chunk_id, hash((breadcrumb, text)))
    with _facts_lock:
        got = _facts_cache.get(key)
        if got is not None:
            _facts_cache.move_to_end(key)
            return got
    got = (stem_counts(fts_text(breadcrumb + "\n" + text)), navigational(text, breadcrumb))
    with _facts_lock:
        _facts_cache[key] = got
        while len(_facts_cache) > FACTS_CACHED:
            _facts_cache.popitem(last=False)
    return got


def idf(counts: dict[str, int], total: int) -> dict[str, float]:
    """BM25's inverse document frequency of each stem over `total` chunks (the lexical leg's)."""
    return {s: math.log(1 + (total - n + 0.5) / (n + 0.5)) for s, n in counts.items() if n}
