"""Fusion and post-fusion adjustments (pure).

Input: each leg's ordered candidate list (chunk ids, best first, with the
leg's raw score). Output: one ordered list of Fused records. The order is a
pure function of the legs' orders: ties are broken by chunk id, so the same
legs give the same answer whatever order the legs finished in.

Steps, in the order the design gives (docs/architecture.md): RRF (the spec's k = 60; the default 10) or weighted sum → tag boost
(×1.2) → inbound-link authority boost → relevance → per-document cap (later
passages of a document discounted) → superseded demotion.

Runs on: any thread (pure: no I/O, no shared state).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ..config import LINK_BOOST, PER_DOCUMENT, RRF_K, TAG_BOOST


@dataclass(frozen=True)
class LegHit:
    chunk_id: int
    score: float  # the leg's own score (BM25 as positive "higher is better", cosine)
    weight: float = 1.0  # how much of its rank share the hit earns (the lexical leg's coverage)


@dataclass
class Fused:
    chunk_id: int
    score: float
    ranks: dict[str, int | None]  # 0-based per leg, None when the leg missed it
    scores: dict[str, float | None]
    relevance: float = 0.0
    superseded_by: str | None = None
    via: list[str] = field(default_factory=list)


def fuse_rrf(
    legs: Mapping[str, Sequence[LegHit]],
    *,
    k: int = RRF_K,
    weights: Mapping[str, float] | None = None,
) -> list[Fused]:
    """Reciprocal rank fusion: Σ w_leg · w_hit / (k + rank), rank 1-based; w_hit is
    the hit's own weight (1 but for the lexical leg's coverage)."""
    names = sorted(legs)
    fused: dict[int, Fused] = {}
    for name in names:
        w = 1.0 if weights is None else float(weights.get(name, 1.0))
        for rank, hit in enumerate(legs[name]):
            f = fused.get(hit.chunk_id)
            if f is None:  # every field positional, via filled as the legs come (in name order)
                f = fused[hit.chunk_id] = Fused(
                    hit.chunk_id, 0.0, dict.fromkeys(names), dict.fromkeys(names), 0.0, None, []
                )
            elif f.ranks[name] is not None:  # a leg listing a chunk twice counts once
                continue
            f.ranks[name] = rank
            f.scores[name] = hit.score
            f.score += w * hit.weight / (k + rank + 1)
            f.via.append(name)
    out = list(fused.values())
    out.sort(key=lambda f: (-f.score, f.chunk_id))
    return out


def rrf_max(
    active_legs: int, k: int = RRF_K, weights: Mapping[str, float] | None = None, legs: Iterable[str] = ()
) -> float:
    """The unboosted score of a chunk ranked #1 by every active leg."""
    if weights:
        return sum(float(weights.get(n, 1.0)) for n in legs) / (k + 1)
    return active_legs / (k + 1)


# Seed 000 (the weighted-sum ADR) weighs a normalised ts_rank that "rarely goes
# above ~0.3 even for a strong match", so that a lexical-only hit (0.4 · 0.3 =
# 0.12) stays under the 0.2 threshold. Raw BM25 through s/(s+1) reads 0.8–0.93
# and let lexical-only hits through on their own; BM25 is therefore scaled to
# the leg's best hit of the query and capped at that strong-match ceiling.
LEXICAL_CEILING = 0.3


def bm25_unit(score: float, best: float) -> float:
    """BM25 (≥ 0, unbounded) → [0, LEXICAL_CEILING]: its share of the leg's best score of this query."""
    if score <= 0 or best <= 0:
        return 0.0
    return LEXICAL_CEILING * min(1.0, score / best)


def fuse_weighted(
    legs: Mapping[str, Sequence[LegHit]],
    *,
    semantic_weight: float = 0.6,
    lexical_weight: float = 0.4,
    threshold: float = 0.2,
) -> list[Fused]:
    """Weighted sum 0.6·cosine + 0.4·(0.3·bm25/best bm25); hits under the threshold dropped
    when the semantic leg ran (the threshold keeps a hybrid's lexical-only hits out; a search
    with no semantic leg has nothing else to offer, so it keeps them all, in BM25's order)."""
    names = sorted(legs)
    fused: dict[int, Fused] = {}
    wmap = {"semantic": semantic_weight, "lexical": lexical_weight}
    for name in names:
        best = max((h.score for h in legs[name]), default=0.0)
        for rank, hit in enumerate(legs[name]):
            f = fused.setdefault(hit.chunk_id, Fused(hit.chunk_id, 0.0, dict.fromkeys(names), dict.fromkeys(names)))
            if f.ranks[name] is not None:
                continue
            f.ranks[name] = rank
            f.scores[name] = hit.score
            unit = bm25_unit(hit.score, best) if name == "lexical" else max(0.0, hit.score)
            f.score += wmap.get(name, 0.0) * unit
    out = [f for f in fused.values() if "semantic" not in legs or f.score >= threshold]
    for f in out:
        f.via = [n for n in names if f.ranks[n] is not None]
    out.sort(key=lambda f: (-f.score, f.chunk_id))
    return out


CONVEX_WEIGHTS = {"semantic": 0.4, "lexical": 0.6}  # chosen on SciFact's train queries (quality.md)


def fuse_convex(legs: Mapping[str, Sequence[LegHit]], *, weights: Mapping[str, float] | None = None) -> list[Fused]:
    """Convex combination of min-max normalised leg scores: Σ w_leg · (s − min)/(max − min).

    Each leg's scores are scaled over the list it returned, so BM25's open
    range and cosine's [-1, 1] meet on [0, 1]; a leg that missed a chunk adds 0.
    Unlike RRF it keeps how far ahead a hit is, which measured better on SciFact.
    """
    w = dict(CONVEX_WEIGHTS) if weights is None else {**CONVEX_WEIGHTS, **weights}
    names = sorted(legs)
    fused: dict[int, Fused] = {}
    for name in names:
        hits = legs[name]
        if not hits:
            continue
        scores = [h.score for h in hits]
        lo, hi = min(scores), max(scores)
        for rank, hit in enumerate(hits):
            f = fused.setdefault(hit.chunk_id, Fused(hit.chunk_id, 0.0, dict.fromkeys(names), dict.fromkeys(names)))
            if f.ranks[name] is not None:
                continue
            f.ranks[name] = rank
            f.scores[name] = hit.score
            unit = (hit.score - lo) / (hi - lo) if hi > lo else 1.0
            f.score += float(w.get(name, 0.0)) * unit
    out = list(fused.values())
    for f in out:
        f.via = [n for n in names if f.ranks[n] is not None]
    out.sort(key=lambda f: (-f.score, f.chunk_id))
    return out


def compatibility(ranks: Mapping[str, int | None], active: int) -> float:
    """0.6·agreement + 0.4·position, the compatibility score: a deterministic signal, not a probability.

    agreement = fraction of the legs the search asked for (`active`, seed 001:
    requested, whether or not they found anything) that found the hit;
    position = mean of 1/(1+rank) over those legs, rank 0-based.
    """
    found = [r for r in ranks.values() if r is not None]
    if not found or active <= 0:
        return 0.0
    agreement = len(found) / active
    position = sum(1.0 / (1 + r) for r in found) / len(found)
    return round(0.6 * agreement + 0.4 * position, 6)


def link_multiplier(inbound: int, boost: float | None = None) -> float:
    """Authority boost: × (1 + boost · log2(1 + inbound links)).

    Logarithmic so a hub note linked from 100 places gains ×1.67, not ×11:
    authority should break ties between comparable hits, not bury relevance.
    """
    return 1.0 + (LINK_BOOST if boost is None else boost) * math.log2(1 + max(0, inbound))


def apply_boosts(
    fused: list[Fused],
    *,
    doc_of: Mapping[int, int],
    tag_match: set[int],
    inbound: Mapping[int, int],
    max_score: float,
    tag_boost: float | None = None,
    link_boost: float | None = None,
) -> list[Fused]:
    """Tag (×1.2 when a document tag matches a query word) and link boosts, then relevance."""
    tag_boost = TAG_BOOST if tag_boost is None else tag_boost
    for f in fused:
        d = doc_of[f.chunk_id]
        if d in tag_match:
            f.score *= tag_boost
        f.score *= link_multiplier(inbound.get(d, 0), link_boost)
        f.relevance = round(min(1.0, f.score / max_score), 6) if max_score > 0 else 0.0
    fused.sort(key=lambda f: (-f.score, f.chunk_id))
    return fused


# A document's n-th passage (in fused order) scores × LATER_PASSAGE^(n−1): it stays on the page
# only when it beats another document's best passage by that much. A page of 10 hits then shows
# more documents; the documents' order (by their best passage) cannot change. SciFact train,
# documents in a 10-hit page: nDCG@10 0.7297 → 0.7341; known items unchanged (quality.md).
# Only when legs were fused: one leg alone keeps its own order (the lexical leg's puts the chunks
# holding every word first, which `lexical_match: "mixed"` promises).
LATER_PASSAGE = 0.5


def cap_per_document(
    fused: list[Fused],
    doc_of: Mapping[int, int],
    cap: int = PER_DOCUMENT,
    later: float | None = None,
    keep: Collection[int] = (),
) -> list[Fused]:
    """At most `cap` passages a document, its later ones discounted (LATER_PASSAGE) when more than
    one leg found the hits; the passages `keep` names stay whatever the cap (the leading document's
    passages to show: search/passages.py). The sort is stable: equal scores
    keep their content order (search/ties.py)."""
    later = LATER_PASSAGE if later is None else later
    if fused and len(fused[0].ranks) < 2:  # the legs fused (every record names them all)
        later = 1.0
    seen: dict[int, int] = {}
    out = []
    for f in fused:
        d = doc_of[f.chunk_id]
        n = seen.get(d, 0)
        if n < cap or f.chunk_id in keep:
            seen[d] = n + 1
            if n and later != 1.0:
                f.score *= later**n
                f.relevance = round(f.relevance * later**n, 6)
            out.append(f)
    out.sort(key=lambda f: -f.score)
    return out


def demote_superseded(
    fused: list[Fused],
    doc_of: Mapping[int, int],
    successor: Mapping[int, int],
    path_of: Mapping[int, str],
) -> list[Fused]:
    """Move a superseded document's hits directly below its successor's hits.

    `successor` maps a document to the document that directly supersedes it.
    Only applies when the successor (or a later one in its chain) is also in
    the results; the hit is annotated with its *direct* successor's path. A
    chain A → B → C ends with C's hits, then B's, then A's.
    """
    present = {doc_of[f.chunk_id] for f in fused}

    def anchor(d: int) -> int | None:
        # the nearest present document later in the chain; cycles are cut
        seen = {d}
        cur = successor.get(d)
        while cur is not None and cur not in seen:
            if cur in present:
                return cur
            seen.add(cur)
            cur = successor.get(cur)
        return None

    moved: dict[int, list[Fused]] = {}
    kept: list[Fused] = []
    for f in fused:
        d = doc_of[f.chunk_id]
        a = anchor(d)
        if a is None:
            kept.append(f)
        else:
            f.superseded_by = path_of.get(successor[d])
            moved.setdefault(a, []).append(f)
    if not moved:
        return fused

    out: list[Fused] = []

    def follow(d: int) -> None:
        # d's hits are placed; its superseded documents follow, oldest last
        group = moved.pop(d, [])
        out.extend(group)
        for child in dict.fromkeys(doc_of[f.chunk_id] for f in group):
            follow(child)

    last_index = {doc_of[f.chunk_id]: i for i, f in enumerate(kept)}
    for i, f in enumerate(kept):
        out.append(f)
        d = doc_of[f.chunk_id]
        if last_index[d] == i:
            follow(d)
    if len(out) < len(fused):  # a supersede cycle anchored nothing: keep its hits, in order
        placed = {f.chunk_id for f in out}
        out.extend(f for f in fused if f.chunk_id not in placed)
    return out
