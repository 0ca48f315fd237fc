"""The search pipeline: query → filter → legs (concurrently) → fusion → boosts
→ cap → demotion → rerank → answer. What it reads, it reads through store/
(matches, hits) on one snapshot; the steps between are the pure functions of
fusion.py and snippet.py. Equal scores are put in content order (ties.py) in
each leg, after fusion and after the ranker: chunk ids follow the store's history.

Input: the search's read snapshot, the workspace, the user's query and
validated options. Output: the search.query answer (docs/dev/CONTRACTS.md).

Runs on: the caller's thread; the semantic leg's model and scan on `pool`.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import apsw

from ..config import LEG_DEPTH, LEXICAL_TOP, PER_DOCUMENT, RRF_K, SEMANTIC_TOP
from ..errors import InvalidParams, Unsupported
from ..store import hits as stored_hits
from ..store.counts import facet_counts
from ..store.filters import Filter, build_filter
from ..store.sessions import origin
from ..store.workspaces import Workspace
from . import fusion as F
from . import legproc, ties
from .fts import build_match
from .graph import run_graph
from .lexical import run_lexical
from .options import SearchOptions
from .query import ParsedQuery, parse_query, resolve_facets
from .rerank import NO_RANKER_REASON, RankFn
from .semantic import NO_MODEL_REASON, TIER_INSTANT, Prepared, SemanticOutcome, instant_fusion
from .snippet import make_snippet, snippet_maker
from .tokens import stem, tokenize

log = logging.getLogger("autodoc.search")


# the semantic leg bound to this search's snapshot and workspace: prepare(filter)
PrepareSemantic = Callable[[Filter], Prepared | SemanticOutcome]


@dataclass
class Context:
    db: apsw.Connection  # the search's one read snapshot
    ws: Workspace
    known_fields: set[str]
    semantic: PrepareSemantic | None = None
    rank: RankFn | None = None
    rank_model: str | None = None
    pool: Any = None  # an executor for the semantic leg's model and scan; None runs them inline
    lexical_helper: Any = None  # a LexicalHelper (search/legproc.py): the lexical leg in a process; None: here
    facet_kinds: dict[str, str] | None = None  # declared field -> comparison kind; None: no schema
    successors: Callable[[], tuple[dict[int, int], dict[int, str]]] | None = None  # cached per generation


def _check_fields(ctx: Context, opts: SearchOptions) -> None:
    """opts.facets / opts.facet_counts may name only facets: declared fields
    (with a schema) or fields some document has (without), and tag."""

    def check(name: str, fields) -> None:
        for f in fields:
            if f != "tag" and f not in ctx.known_fields:
                what = (
                    "is not declared in the workspace schema (_schema/frontmatter.yaml)"
                    if ctx.facet_kinds is not None
                    else "is not a field of any document in this workspace"
                )
                raise InvalidParams(name.format(f), f"{f!r} {what}")

    check("opts.facets.{}", opts.facets)
    check("opts.facet_counts", opts.facet_counts)


def search(ctx: Context, query: str, opts: SearchOptions) -> dict[str, Any]:
    _check_fields(ctx, opts)
    parsed = resolve_facets(parse_query(query), ctx.known_fields)

    def filter_after(after: str | None) -> Filter:
        return build_filter(
            ctx.ws.id,
            facets=parsed.facets,
            opt_facets=opts.facets,
            tags=opts.tags,
            paths=opts.paths,
            include_abstract=opts.abstract_chunk,
            kinds=ctx.facet_kinds,
            scope=opts.scope,
            after=after,
        )

    filt = filter_after(opts.after)
    # `after` pages through the matching set; the facet counts describe the whole set on every page
    count_filt = filt if opts.after is None else filter_after(None)
    requested = list(opts.stages)
    if parsed.wordless:
        return _facet_browse(ctx, query, parsed, filt, opts, requested, count_filt)

    skipped: dict[str, str] = {}
    performed: list[str] = []
    # Each leg reaches past what the page (or the ranker's window) shows: the per-document
    # cap comes after the legs, and a leg cut at a fixed 50 chunks left limit 200 and a
    # window of 100 with ≈ 57 candidates.
    shown = max(opts.limit, opts.window if "rerank" in requested and ctx.rank is not None else 0)
    lex_top, sem_top = max(LEXICAL_TOP, LEG_DEPTH * shown), max(SEMANTIC_TOP, LEG_DEPTH * shown)
    strict: set[int] = set()
    legs: dict[str, list[F.LegHit]] = {}
    lexical_match = None
    semantic_state = "off"
    semantic_tier = None

    want_lex = "lexical" in requested
    want_sem = "semantic" in requested
    planned: Prepared | SemanticOutcome = SemanticOutcome(None, "off", NO_MODEL_REASON, None)
    if want_sem and ctx.semantic is not None:
        planned = ctx.semantic(filt)  # what it reads, it reads from this search's snapshot
    # The two legs overlap; fusion depends only on each leg's order.
    overlap = isinstance(planned, Prepared) and ctx.pool is not None and want_lex
    weigh = isinstance(planned, Prepared) or "graph" in requested  # weighed when fused with another leg
    # Beside a semantic leg this size the lexical leg goes to the helper process (in a thread the
    # two would not overlap: the GIL; search/legproc.py), and the semantic leg runs here meanwhile.
    # Else the semantic leg runs on a leg thread and the lexical leg here.
    sent = None
    if overlap and ctx.lexical_helper is not None and len(planned.vectors) >= legproc.MIN_CHUNKS:
        sent = ctx.lexical_helper.submit(ctx.ws.id, parsed.terms, filt, want=opts.limit, top=lex_top, weigh=weigh)
    sem_future = None
    early: dict[int, stored_hits.Candidate] = {}  # candidate rows read while the helper works
    sem_done: SemanticOutcome | None = None
    if sent is not None:
        try:
            sem_done = planned.run(parsed.text, sem_top + 1)  # one past: ties at the cut
            if sem_done.hits:
                early = stored_hits.candidates(ctx.db, sorted({h.chunk_id for h in sem_done.hits}))
        except BaseException:
            sent()  # its answer read, the helper serves the next search
            raise
    elif overlap:
        sem_future = ctx.pool.submit(planned.run, parsed.text, sem_top + 1)

    def lexical(weigh: bool, sent=None) -> None:
        nonlocal lexical_match, strict
        lex = sent() if sent is not None else None
        if lex is None:  # no helper, or it is busy, starting or gone
            lex = run_lexical(ctx.db, ctx.ws.id, parsed.terms, filt, want=opts.limit, top=lex_top, weigh=weigh)
        legs["lexical"], lexical_match, strict = lex.hits, lex.match, lex.strict

    if want_lex:
        lexical(weigh, sent)
        performed.append("lexical")
    if want_sem:
        if sem_done is not None:
            outcome = sem_done
        elif sem_future is not None:
            outcome = sem_future.result()
        elif isinstance(planned, Prepared):
            outcome = planned.run(parsed.text, sem_top + 1)
        else:
            outcome = planned
        semantic_state = outcome.state
        semantic_tier = outcome.tier
        if outcome.hits is None:
            if not want_lex:  # semantic alone was asked for: never answer with words instead
                raise outcome.error or Unsupported(outcome.reason or NO_MODEL_REASON)
            skipped["semantic"] = outcome.reason or NO_MODEL_REASON
            if isinstance(planned, Prepared) and "graph" not in requested:
                lexical(False)  # weighed for a fusion that will not happen: answer as lexical alone
        else:
            hits, fetched = outcome.hits, sem_top + 1
            while ties.run_reaches_end(hits, sem_top, fetched) and isinstance(planned, Prepared):
                fetched *= 4  # identical texts share a vector: a run of equal cosines may go on past the fetch
                hits = planned.run(parsed.text, fetched).hits or hits
            legs["semantic"] = hits
            performed.append("semantic")
    # Equal scores in content order, not chunk ids' (history): within each leg, as a tie's rank feeds
    # fusion. The keys (path, ordinal) come with the facts fusion's later steps read for every hit.
    cands = early | stored_hits.candidates(
        ctx.db, sorted({h.chunk_id for hits in legs.values() for h in hits if h.chunk_id not in early})
    )
    keys = ties.TieKeys(lambda ids: {c: (cands[c].path, cands[c].ordinal) for c in ids if c in cands})
    if "semantic" in legs:
        legs["semantic"] = ties.cut_leg(legs["semantic"], sem_top, keys)
    legs = ties.order_legs(legs, keys, {"lexical": lambda h: h.chunk_id in strict})
    if "graph" in requested:
        _graph_leg(ctx, opts, filt, legs, performed, skipped, keys)
        cands.update(
            stored_hits.candidates(ctx.db, [h.chunk_id for h in legs.get("graph", []) if h.chunk_id not in cands])
        )

    if set(legs) == {"lexical"}:  # nothing to weigh a lexical hit against: BM25's own order stands
        legs["lexical"] = [F.LegHit(h.chunk_id, h.score) for h in legs["lexical"]]
    fusion_opts = opts.fusion
    if semantic_tier == TIER_INSTANT and "semantic" in legs:  # a weaker leg weighs less (semantic.py)
        fusion_opts = instant_fusion(fusion_opts)
    if fusion_opts.get("method") == "weighted":
        fused = F.fuse_weighted(
            legs,
            semantic_weight=fusion_opts.get("weights", {}).get("semantic", 0.6),
            lexical_weight=fusion_opts.get("weights", {}).get("lexical", 0.4),
            # the instant tier's cosines are not on the scale the threshold was set for
            threshold=0.0 if semantic_tier == TIER_INSTANT else fusion_opts.get("threshold", 0.2),
        )
        max_score = sum({"semantic": 0.6, "lexical": 0.4}.get(n, 0) for n in legs) or 1.0
    elif fusion_opts.get("method") == "convex":
        weights = {**F.CONVEX_WEIGHTS, **fusion_opts.get("weights", {})}
        fused = F.fuse_convex(legs, weights=weights)
        max_score = sum(weights.get(n, 0.0) for n in legs) or 1.0
    else:
        k = fusion_opts.get("k", RRF_K)
        weights = dict(fusion_opts.get("weights") or {})
        if "graph" in legs:  # neighbours found through a seed never outweigh the leg that found the seed
            weights["graph"] = min(weights.get(n, 1.0) for n in legs if n != "graph")
        fused = F.fuse_rrf(legs, k=k, weights=weights)
        max_score = F.rrf_max(len(legs), k, weights, legs.keys())

    fused = [f for f in fused if f.chunk_id in cands]  # a chunk retired since the vector cache saw it
    doc_of = {cid: c.document_id for cid, c in cands.items()}
    doc_path = {c.document_id: c.path for c in cands.values()}
    doc_tags = {c.document_id: c.tags for c in cands.values()}
    qstems = {stem(w) for t in parsed.terms for w in re.findall(r"\w+", t.text)}
    tag_match = {d for d, tags in doc_tags.items() if any(stem(t) in qstems or t in qstems for t in tags)}
    inbound = stored_hits.inbound_links(ctx.db, ctx.ws.id, {p: d for d, p in doc_path.items()})
    fused = F.apply_boosts(fused, doc_of=doc_of, tag_match=tag_match, inbound=inbound, max_score=max_score)
    fused = ties.order_fused(fused, keys)
    fused = F.cap_per_document(fused, doc_of, PER_DOCUMENT)
    if opts.demote_superseded:
        successor, path_of = ctx.successors() if ctx.successors else stored_hits.successors(ctx.db, ctx.ws.id)
        fused = F.demote_superseded(fused, doc_of, successor, path_of)
    rows = stored_hits.hit_rows(ctx.db, [f.chunk_id for f in fused[:shown]])

    rank = {"state": "off", "model": ctx.rank_model, "error": ""}
    rank_scores: dict[int, float] = {}
    if "rerank" in requested:
        if ctx.rank is None:
            skipped["rerank"] = NO_RANKER_REASON
        elif not fused:
            skipped["rerank"] = "nothing was found to rank"
            rank["state"] = "ready"
        else:
            window = fused[: opts.window]
            passages = [rows[f.chunk_id]["breadcrumb"] + "\n" + rows[f.chunk_id]["text"] for f in window]
            outcome = ctx.rank(parsed.text, passages)
            rank = {"state": outcome.state, "model": outcome.model, "error": outcome.error}
            if outcome.scores is None:
                skipped["rerank"] = outcome.error or "the ranker did not answer"
            else:
                performed.append("rerank")
                for f, s in zip(window, outcome.scores):
                    rank_scores[f.chunk_id] = float(s)
                    f.via.append("rank")
                by_id = {f.chunk_id: f for f in window}
                order = ties.ordered_scores([(f.chunk_id, float(s)) for f, s in zip(window, outcome.scores)], keys)
                fused = [by_id[c] for c in order] + fused[len(window) :]
    else:
        rank["state"] = "skipped" if ctx.rank is not None else "off"

    page = fused[: opts.limit]
    snippet = snippet_maker(parsed.terms, tokenize)
    asked = sum(1 for s in requested if s in ("lexical", "semantic", "graph"))  # seed 001: over the legs requested
    hits = [
        _hit(ctx.ws, rows[f.chunk_id], f, snippet(rows[f.chunk_id]["text"]), rank_scores.get(f.chunk_id), asked)
        for f in page
    ]
    leg_match = lexical_match  # what the leg ran (the counts cover its matches), before the page is read
    if lexical_match == "mixed" and all(f.chunk_id in strict for f in page if f.ranks.get("lexical") is not None):
        lexical_match = "all"  # the answer's lexical hits all held every word: the relaxed ones stayed below
    if "graph" in requested:  # the graph leg's rank and link count, beside the others'
        for h, f in zip(hits, fused):
            h["scores"]["graph"], h["ranks"]["graph"] = f.scores.get("graph"), f.ranks.get("graph")
    counts = (
        facet_counts(
            ctx.db,
            ctx.ws.id,
            opts.facet_counts,
            count_filt,
            match=(
                build_match(parsed.terms, "all" if leg_match == "all" else "any")
                if "lexical" in performed and leg_match
                else None
            ),
            extra_docs={doc_of[f.chunk_id] for f in fused},
        )
        if opts.facet_counts
        else {}
    )
    sem_performed = "semantic" in performed
    mode_used = "hybrid" if ("lexical" in performed and sem_performed) else ("semantic" if sem_performed else "lexical")
    return {
        "workspace": ctx.ws.name,
        "query": query,
        "hits": hits,
        "mode_used": mode_used,
        "lexical_match": lexical_match,
        "semantic": semantic_state,
        "semantic_tier": semantic_tier,
        "rank": rank,
        "stages": {"requested": requested, "performed": performed, "skipped": skipped},
        "facet_counts": counts,
    }


def _graph_leg(
    ctx: Context,
    opts: SearchOptions,
    filt: Filter,
    legs: dict[str, list[F.LegHit]],
    performed: list[str],
    skipped: dict[str, str],
    keys: ties.TieKeys,
) -> None:
    """Stage "graph": one hop from the other legs' documents (search/graph.py)."""
    if opts.fusion.get("method") != "rrf":
        skipped["graph"] = (
            f"the graph leg fuses by rank only (fusion.method rrf); {opts.fusion.get('method')} "
            "fusion has no place for it"
        )
        return
    seed_hits = [h for name in ("lexical", "semantic") for h in legs.get(name, [])]
    if not seed_hits:
        skipped["graph"] = "the lexical and semantic legs found nothing to start from"
        return
    doc_of = stored_hits.chunk_documents(ctx.db, sorted({h.chunk_id for h in seed_hits}))
    # seeds in order of their best rank in either leg; each document's best chunk stands for it
    best: dict[int, tuple[int, int]] = {}
    for name in ("lexical", "semantic"):
        for rank, h in enumerate(legs.get(name, [])):
            d = doc_of.get(h.chunk_id)
            if d is not None and (d not in best or rank < best[d][0]):
                best[d] = (rank, h.chunk_id)
    keys.need(c for _, c in best.values())  # seeds of equal rank (one per leg) in content order
    seeds = sorted(best, key=lambda d: (best[d][0], keys(best[d][1])))
    found = run_graph(ctx.db, ctx.ws.id, seeds, {d: c for d, (_, c) in best.items()}, filt)
    if found:  # a leg that found nothing must not dilute relevance and compatibility
        legs["graph"] = found
    performed.append("graph")


def _hit(ws: Workspace, row: dict, f: F.Fused, snippet: str, rank_score: float | None, asked: int) -> dict[str, Any]:
    return {
        "workspace": ws.name,
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
        "relevance": f.relevance,
        "score": round(f.score, 8),
        "via": list(f.via),
        "scores": {n: f.scores.get(n) for n in ("lexical", "semantic")},
        "ranks": {n: f.ranks.get(n) for n in ("lexical", "semantic")},
        "rank_score": None if rank_score is None else round(rank_score, 6),
        "compatibility": F.compatibility(f.ranks, asked),
        "generation": row["generation"],
        "superseded_by": f.superseded_by,
        "tags": row["tags"],
        "origin": row["origin"],
    }


def _facet_browse(
    ctx: Context,
    query: str,
    parsed: ParsedQuery,
    filt: Filter,
    opts: SearchOptions,
    requested: list[str],
    count_filt: Filter,
) -> dict[str, Any]:
    """A query of facets only: the matching files in path order, no ranking."""
    rows = stored_hits.matching_documents(ctx.db, ctx.ws.id, filt, opts.limit)
    first = stored_hits.chunk_texts(ctx.db, [r[6] for r in rows])
    hits = []
    for path, title, gen, tags, size, lines, cid in rows:
        hits.append(
            {
                "workspace": ctx.ws.name,
                "path": path,
                "title": title,
                "breadcrumb": title,
                "kind": "document",
                "chunk_id": None,
                "snippet": make_snippet(first[cid], [], tokenize) if cid in first else "",
                "byte_start": 0,
                "byte_end": size,
                "line_start": 1,
                "line_end": max(1, lines),
                "relevance": None,
                "score": None,
                "via": ["facet"],
                "scores": {"lexical": None, "semantic": None},
                "ranks": {"lexical": None, "semantic": None},
                "rank_score": None,
                "compatibility": None,
                "generation": gen,
                "superseded_by": None,
                "tags": json.loads(tags),
                "origin": origin(path, title),
            }
        )
    reason = "the query has only facets: matching files are listed in path order"
    counts = facet_counts(ctx.db, ctx.ws.id, opts.facet_counts, count_filt, match=None, extra_docs=set(), wordless=True)
    return {
        "workspace": ctx.ws.name,
        "query": query,
        "hits": hits,
        "mode_used": "facet",
        "lexical_match": None,
        "semantic": "off" if ctx.semantic is None else "ready",
        "semantic_tier": None,
        "rank": {"state": "skipped" if ctx.rank else "off", "model": ctx.rank_model, "error": ""},
        "stages": {"requested": requested, "performed": [], "skipped": dict.fromkeys(requested, reason)},
        "facet_counts": counts,
    }
