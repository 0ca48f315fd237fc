"""Stage 5 of a search, shape: the search.query answer built from the final order (engine.py),
each hit by one function (`hit`); and the answer of a query of facets only, which lists files.

Input: the stages' state (stages.py) and the shown hits' rows (store/hits.py hit_rows).
Output: the search.query answer (docs/dev/CONTRACTS.md).

Runs on: the caller's thread, reading the search's snapshot (facet counts, a facet listing).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..store import hits as stored_hits
from ..store.counts import facet_counts
from ..store.sessions import origin
from . import answerable as A
from . import evidence
from . import fusion as F
from .lexical.fts import build_match
from .lexical.tokens import tokenize
from .semantic.leg import TIER_INSTANT
from .snippet import make_snippet, snippet_maker
from .stages import Context, Legs, Plan, Ranked


def shape_answer(ctx: Context, plan: Plan, legs: Legs, ranked: Ranked, rows: dict[int, dict]) -> dict[str, Any]:
    """The search.query answer: the page's hits with their snippets and confidence, the weak ones
    held back (answerable.py: the floor), and the facet counts."""
    fused, requested, performed = ranked.fused, plan.requested, legs.performed
    page = fused[: plan.opts.limit]
    sem_performed = "semantic" in performed
    sigs = evidence.hit_signals(
        ctx.db,
        plan.query,
        page,
        rows,
        cosines_comparable=sem_performed and legs.semantic_tier != TIER_INSTANT,
        every_vector=legs.semantic_state == "ready",
        corrections=legs.corrections,
        workspace_id=ctx.ws.id,
    )
    raw = [A.probability(s) for s in sigs]
    found = A.answerable(sigs, raw)
    matched = A.words_matched(sigs)
    floor = plan.opts.min_confidence
    # a hit the graph leg (opt-in) brought is linked from the hits that matched: asked for, and
    # never padding by its own words or meaning
    linked = {i for i, f in enumerate(page) if f.ranks.get("graph") is not None}
    if "lexical" in performed:
        kept = [
            i
            for i, s in enumerate(sigs)
            if i in linked or not A.held_back(s, A.match_probability(s), floor, words_matched=matched)
        ]
    else:  # by meaning alone: no words to weigh
        kept = [i for i, s in enumerate(sigs) if i in linked or not A.held_back_by_meaning(s, floor)]
    shown = A.monotone([raw[i] for i in kept])
    page = [page[i] for i in kept]
    snippet = snippet_maker(plan.parsed.terms, tokenize)
    asked = sum(1 for s in requested if s in ("lexical", "semantic", "graph"))  # seed 001: over the legs requested
    hits = [
        hit(
            ctx.ws.name,
            rows[f.chunk_id],
            snippet(rows[f.chunk_id]["text"]),
            f,
            ranked.rank_scores.get(f.chunk_id),
            asked,
            conf,
        )
        for f, conf in zip(page, shown)
    ]
    lexical_match = leg_match = legs.lexical_match  # what the leg ran (the counts cover its matches)
    if lexical_match == "mixed" and all(f.chunk_id in legs.strict for f in page if f.ranks.get("lexical") is not None):
        lexical_match = "all"  # the answer's lexical hits all held every word: the relaxed ones stayed below
    if "graph" in requested:  # the graph leg's rank and link count, beside the others'
        for h, f in zip(hits, page):
            h["scores"]["graph"], h["ranks"]["graph"] = f.scores.get("graph"), f.ranks.get("graph")
    counts = (
        facet_counts(
            ctx.db,
            ctx.ws.id,
            plan.opts.facet_counts,
            plan.count_filt,
            match=(
                build_match(plan.parsed.terms, "all" if leg_match == "all" else "any")
                if "lexical" in performed and leg_match
                else None
            ),
            extra_docs={ranked.doc_of[f.chunk_id] for f in fused},
        )
        if plan.opts.facet_counts
        else {}
    )
    mode_used = "hybrid" if ("lexical" in performed and sem_performed) else ("semantic" if sem_performed else "lexical")
    return {
        "workspace": ctx.ws.name,
        "query": plan.query,
        "hits": hits,
        "answerable": found,
        "held_back": len(sigs) - len(kept),
        "mode_used": mode_used,
        "lexical_match": lexical_match,
        "semantic": legs.semantic_state,
        "semantic_tier": legs.semantic_tier,
        "rank": ranked.rank,
        "stages": {"requested": requested, "performed": performed, "skipped": legs.skipped},
        "facet_counts": counts,
    }


def hit(
    workspace: str,
    row: Mapping[str, Any],
    snippet: str,
    f: F.Fused | None = None,
    rank_score: float | None = None,
    asked: int = 0,
    confidence: float | None = None,
) -> dict[str, Any]:
    """One hit of the answer, from its chunk's row (store/hits.py hit_rows) and its place in the
    fused order; without one (a query of facets only) it is a file listed by a facet."""
    return {
        "workspace": workspace,
        "path": row["path"],
        "title": row["title"],
        "breadcrumb": row["breadcrumb"],
        "kind": row["kind"],
        "chunk_id": row["chunk_id"],
        "snippet": snippet,
        "byte_start": row["byte_start"],
        "byte_end": row["byte_end"],
        "line_start": row["line_start"],
        "line_end": row["line_end"],
        "relevance": None if f is None else f.relevance,
        "score": None if f is None else round(f.score, 8),
        "via": ["facet"] if f is None else list(f.via),
        "scores": {n: None if f is None else f.scores.get(n) for n in ("lexical", "semantic")},
        "ranks": {n: None if f is None else f.ranks.get(n) for n in ("lexical", "semantic")},
        "rank_score": None if rank_score is None else round(rank_score, 6),
        "compatibility": None if f is None else F.compatibility(f.ranks, asked),
        "confidence": confidence,
        "generation": row["generation"],
        "superseded_by": None if f is None else f.superseded_by,
        "tags": row["tags"],
        "origin": row["origin"],
    }


def browse_facets(ctx: Context, plan: Plan) -> dict[str, Any]:
    """A query of facets only: the matching files in path order, no ranking."""
    rows = stored_hits.matching_documents(ctx.db, ctx.ws.id, plan.filt, plan.opts.limit)
    first = stored_hits.chunk_texts(ctx.db, [r[6] for r in rows])
    hits = []
    for path, title, gen, tags, size, lines, cid in rows:
        row = {
            "path": path,
            "title": title,
            "breadcrumb": title,
            "kind": "document",
            "chunk_id": None,
            "byte_start": 0,
            "byte_end": size,
            "line_start": 1,
            "line_end": max(1, lines),
            "generation": gen,
            "tags": json.loads(tags),
            "origin": origin(path, title),
        }
        hits.append(hit(ctx.ws.name, row, make_snippet(first[cid], [], tokenize) if cid in first else ""))
    reason = "the query has only facets: matching files are listed in path order"
    requested = plan.requested
    counts = facet_counts(
        ctx.db, ctx.ws.id, plan.opts.facet_counts, plan.count_filt, match=None, extra_docs=set(), wordless=True
    )
    return {
        "workspace": ctx.ws.name,
        "query": plan.query,
        "hits": hits,
        "answerable": bool(hits),
        "held_back": 0,
        "mode_used": "facet",
        "lexical_match": None,
        "semantic": "off" if ctx.semantic is None else "ready",
        "semantic_tier": None,
        "rank": {"state": "skipped" if ctx.rank else "off", "model": ctx.rank_model, "error": ""},
        "stages": {"requested": requested, "performed": [], "skipped": dict.fromkeys(requested, reason)},
        "facet_counts": counts,
    }
