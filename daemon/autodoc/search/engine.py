"""The search pipeline as five named stages, each a function:

    plan_search → run_legs → fuse → rerank → shape_answer (shape.py)

``plan_search`` parses the query and builds the filter (a `Plan`); ``run_legs`` runs the lexical
and semantic legs (concurrently when they can overlap) and the graph leg after them, putting
equal scores in content order (ties.py: chunk ids follow the store's history) (`Legs`);
``fuse`` fuses the legs' orders, boosts, caps and demotes (fusion.py); ``rerank`` reorders the
ranker's window (`Ranked`); ``shape_answer`` builds the search.query answer, each hit by `shape.hit`.
The state they pass along is in stages.py. What it reads, it reads through store/ (matches, hits)
on one snapshot; the steps between are the pure functions of fusion.py, ties.py and snippet.py.

Input: the search's read snapshot, the workspace, the user's query and
validated options. Output: the search.query answer (docs/dev/CONTRACTS.md).

Runs on: the caller's thread; the semantic leg's model and scan on `pool`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from ..config import LEG_DEPTH, LEXICAL_TOP, PER_DOCUMENT, RRF_K, SEMANTIC_TOP
from ..errors import InvalidParams, Unsupported
from ..store import hits as stored_hits
from ..store.filters import Filter, build_filter
from ..store.interface import Snapshot
from . import choice, evidence, passages, ties
from . import fusion as F
from .graph import run_graph
from .lexical import fuzzy, legproc
from .lexical.leg import LexicalResult, run_lexical
from .lexical.tokens import stem
from .options import SearchOptions
from .query import parse_query, resolve_facets
from .rerank import NO_RANKER_REASON
from .semantic.leg import NO_MODEL_REASON, TIER_INSTANT, Prepared, SemanticOutcome, instant_fusion
from .shape import browse_facets, shape_answer
from .stages import Context, Legs, Plan, PrepareSemantic, Ranked

__all__ = ["Context", "PrepareSemantic", "fuse", "plan_search", "rerank", "run_legs", "search"]

log = logging.getLogger("autodoc.search")


def search(ctx: Context, query: str, opts: SearchOptions) -> dict[str, Any]:
    """One search, stage by stage; a query of facets only lists files instead. The shown hits'
    rows are read once, between fusion and the ranker, for the ranker's passages and the answer."""
    plan = plan_search(ctx, query, opts)
    if plan.parsed.wordless:
        return browse_facets(ctx, plan)
    legs = run_legs(ctx, plan)
    fused, doc_of = fuse(ctx, plan, legs)
    rows = stored_hits.hit_rows(ctx.db, [f.chunk_id for f in fused[: plan.shown]])
    ranked = rerank(ctx, plan, legs, fused, doc_of, rows)
    if not legs.corrections:
        return shape_answer(ctx, plan, legs, ranked, rows)
    # the words the lexical leg searched instead of those no chunk held: the answer's evidence,
    # snippets and counts read them; it echoes the query as typed and says what was corrected
    fixed = replace(
        plan,
        query=fuzzy.corrected(plan.query, legs.corrections),
        parsed=replace(
            plan.parsed, terms=[replace(t, text=legs.corrections.get(t.text, t.text)) for t in plan.parsed.terms]
        ),
    )
    answer = shape_answer(ctx, fixed, legs, ranked, rows)
    answer["query"], answer["corrections"] = plan.query, legs.corrections
    return answer


# -- stage 1: plan --------------------------------------------------------------------------


def _check_fields(ctx: Context, opts: SearchOptions) -> None:
    """opts.facets / opts.facet_counts may name only facets: declared fields
    (with a schema) or fields some document has (without), and tag."""

    def check(name: str, fields: Any) -> None:
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


def facet_paths(
    db: Snapshot, ws_id: int, facets: str, known: set[str], kinds: dict[str, str] | None, limit: int
) -> set[str]:
    """The paths of the documents `field:value` words admit, as a query's facets do
    (document.find's `facets`)."""
    parsed = resolve_facets(parse_query(facets), known)
    if parsed.terms:
        words = " ".join(t.text for t in parsed.terms)
        raise InvalidParams("facets", f"{words!r}: not `field:value` words on a field of this workspace")
    filt = build_filter(
        ws_id, facets=parsed.facets, opt_facets={}, tags=(), paths=(), include_abstract=True, kinds=kinds
    )
    return {row[0] for row in stored_hits.matching_documents(db, ws_id, filt, limit)}


def plan_search(ctx: Context, query: str, opts: SearchOptions) -> Plan:
    """The query parsed, its facets resolved, the filter built and each leg's depth chosen."""
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
    # Each leg reaches past what the page (or the ranker's window) shows: the per-document
    # cap comes after the legs, and a leg cut at a fixed 50 chunks left limit 200 and a
    # window of 100 with ≈ 57 candidates.
    shown = max(opts.limit, opts.window if "rerank" in requested and ctx.rank is not None else 0)
    lex_top, sem_top = max(LEXICAL_TOP, LEG_DEPTH * shown), max(SEMANTIC_TOP, LEG_DEPTH * shown)
    return Plan(query, parsed, opts, requested, filt, count_filt, shown, lex_top, sem_top)


# -- stage 2: legs --------------------------------------------------------------------------


def run_legs(ctx: Context, plan: Plan) -> Legs:
    """The lexical and semantic legs (overlapping when both run), then the graph leg from their
    documents; each leg's equal scores in content order, its candidates' facts read."""
    legs = Legs()
    want_lex = "lexical" in plan.requested
    want_sem = "semantic" in plan.requested
    planned: Prepared | SemanticOutcome = SemanticOutcome(None, "off", NO_MODEL_REASON, None)
    if want_sem and ctx.semantic is not None:
        planned = ctx.semantic(plan.filt)  # what it reads, it reads from this search's snapshot
    ready = planned if isinstance(planned, Prepared) else None
    weigh = ready is not None or "graph" in plan.requested  # weighed when fused with another leg
    sem_top = plan.sem_top + 1  # one past: ties at the cut
    # The two legs overlap; fusion depends only on each leg's order.
    # Beside a semantic leg this size the lexical leg goes to the helper process (in a thread the
    # two would not overlap: the GIL; search/lexical/legproc.py), and the semantic leg runs here meanwhile.
    # Else the semantic leg runs on a leg thread and the lexical leg here.
    sent: Callable[[], LexicalResult | None] | None = None
    sem_future = None
    early: dict[int, stored_hits.Candidate] = {}  # candidate rows read while the helper works
    sem_done: SemanticOutcome | None = None
    if ready is not None and ctx.pool is not None and want_lex:
        if ctx.lexical_helper is not None and len(ready.vectors) >= legproc.MIN_CHUNKS:
            sent = ctx.lexical_helper.submit(
                ctx.ws.id, plan.parsed.terms, plan.filt, want=plan.opts.limit, top=plan.lex_top, weigh=weigh
            )
        if sent is not None:
            try:
                sem_done = ready.run(plan.parsed.text, sem_top)
                if sem_done.hits:
                    early = stored_hits.candidates(ctx.db, sorted({h.chunk_id for h in sem_done.hits}))
            except BaseException:
                sent()  # its answer read, the helper serves the next search
                raise
        else:
            sem_future = ctx.pool.submit(ready.run, plan.parsed.text, sem_top)

    if want_lex:
        _lexical_leg(ctx, plan, legs, weigh, sent)
        legs.performed.append("lexical")
    if want_sem:
        if sem_done is not None:
            outcome = sem_done
        elif sem_future is not None:
            outcome = sem_future.result()
        elif isinstance(planned, Prepared):
            outcome = planned.run(plan.parsed.text, sem_top)
        else:
            outcome = planned
        _semantic_leg(ctx, plan, legs, outcome, ready, want_lex)
    _order_legs(ctx, plan, legs, early)
    return legs


def _lexical_leg(
    ctx: Context, plan: Plan, legs: Legs, weigh: bool, sent: Callable[[], LexicalResult | None] | None = None
) -> None:
    """Stage "lexical" (search/lexical/leg.py), or the helper process's answer to it when it was sent."""
    lex = sent() if sent is not None else None
    if lex is None:  # no helper, or it is busy, starting or gone
        lex = run_lexical(
            ctx.db, ctx.ws.id, plan.parsed.terms, plan.filt, want=plan.opts.limit, top=plan.lex_top, weigh=weigh
        )
    legs.hits["lexical"], legs.lexical_match, legs.strict = lex.hits, lex.match, lex.strict
    legs.corrections = lex.corrections


def _semantic_leg(
    ctx: Context, plan: Plan, legs: Legs, outcome: SemanticOutcome, ready: Prepared | None, want_lex: bool
) -> None:
    """Stage "semantic" from the leg's outcome (search/semantic/leg.py): its hits, or why it was skipped."""
    legs.semantic_state = outcome.state
    legs.semantic_tier = outcome.tier
    legs.query_vector, legs.model_fp = outcome.query_vector, outcome.model_fp
    if outcome.hits is None:
        if not want_lex:  # semantic alone was asked for: never answer with words instead
            raise outcome.error or Unsupported(outcome.reason or NO_MODEL_REASON)
        legs.skipped["semantic"] = outcome.reason or NO_MODEL_REASON
        if ready is not None and "graph" not in plan.requested:
            _lexical_leg(ctx, plan, legs, False)  # weighed for a fusion that will not happen: answer as lexical alone
        return
    hits, fetched = outcome.hits, plan.sem_top + 1
    while ties.run_reaches_end(hits, plan.sem_top, fetched) and ready is not None:
        fetched *= 4  # identical texts share a vector: a run of equal cosines may go on past the fetch
        hits = ready.run(plan.parsed.text, fetched).hits or hits
    legs.hits["semantic"] = hits
    legs.performed.append("semantic")


def _order_legs(ctx: Context, plan: Plan, legs: Legs, early: dict[int, stored_hits.Candidate]) -> None:
    """Equal scores in content order, not chunk ids' (history): within each leg, as a tie's rank feeds
    fusion. The keys (path, ordinal) come with the facts fusion's later steps read for every hit."""
    cands = legs.cands = early | stored_hits.candidates(
        ctx.db, sorted({h.chunk_id for hits in legs.hits.values() for h in hits if h.chunk_id not in early})
    )
    keys = legs.keys = ties.TieKeys(lambda ids: {c: (cands[c].path, cands[c].ordinal) for c in ids if c in cands})
    if "semantic" in legs.hits:
        legs.hits["semantic"] = ties.cut_leg(legs.hits["semantic"], plan.sem_top, keys)
    strict = legs.strict
    legs.hits = ties.order_legs(legs.hits, keys, {"lexical": lambda h: h.chunk_id in strict})
    if "graph" in plan.requested:
        _graph_leg(ctx, plan, legs, keys)
        cands.update(
            stored_hits.candidates(ctx.db, [h.chunk_id for h in legs.hits.get("graph", []) if h.chunk_id not in cands])
        )


def _graph_leg(ctx: Context, plan: Plan, legs: Legs, keys: ties.TieKeys) -> None:
    """Stage "graph": one hop from the other legs' documents (search/graph.py)."""
    method = plan.opts.fusion.get("method")
    if method != "rrf":
        legs.skipped["graph"] = (
            f"the graph leg fuses by rank only (fusion.method rrf); {method} fusion has no place for it"
        )
        return
    seed_hits = [h for name in ("lexical", "semantic") for h in legs.hits.get(name, [])]
    if not seed_hits:
        legs.skipped["graph"] = "the lexical and semantic legs found nothing to start from"
        return
    doc_of = stored_hits.chunk_documents(ctx.db, sorted({h.chunk_id for h in seed_hits}))
    # seeds in order of their best rank in either leg; each document's best chunk stands for it
    best: dict[int, tuple[int, int]] = {}
    for name in ("lexical", "semantic"):
        for rank, h in enumerate(legs.hits.get(name, [])):
            d = doc_of.get(h.chunk_id)
            if d is not None and (d not in best or rank < best[d][0]):
                best[d] = (rank, h.chunk_id)
    keys.need(c for _, c in best.values())  # seeds of equal rank (one per leg) in content order
    seeds = sorted(best, key=lambda d: (best[d][0], keys(best[d][1])))
    found = run_graph(ctx.db, ctx.ws.id, seeds, {d: c for d, (_, c) in best.items()}, plan.filt)
    if found:  # a leg that found nothing must not dilute relevance and compatibility
        legs.hits["graph"] = found
    legs.performed.append("graph")


# -- stage 3: fuse --------------------------------------------------------------------------


def fuse(ctx: Context, plan: Plan, legs: Legs) -> tuple[list[F.Fused], dict[int, int]]:
    """The legs fused (a pure function of their orders), boosted, ties in content order, capped per
    document and superseded documents demoted; with each candidate's document id."""
    hits = legs.hits
    if set(hits) == {"lexical"}:  # nothing to weigh a lexical hit against: BM25's own order stands
        hits = {"lexical": [F.LegHit(h.chunk_id, h.score) for h in hits["lexical"]]}
    fusion_opts = plan.opts.fusion
    if legs.semantic_tier == TIER_INSTANT and "semantic" in hits:  # a weaker leg weighs less (semantic.py)
        fusion_opts = instant_fusion(fusion_opts)
    fused, max_score = _fuse_legs(hits, fusion_opts, legs.semantic_tier)

    cands = legs.cands
    fused = [f for f in fused if f.chunk_id in cands]  # a chunk retired since the vector cache saw it
    doc_of = {cid: c.document_id for cid, c in cands.items()}
    doc_path = {c.document_id: c.path for c in cands.values()}
    doc_tags = {c.document_id: c.tags for c in cands.values()}
    qstems = {stem(w) for t in plan.parsed.terms for w in re.findall(r"\w+", t.text)}
    tag_match = {d for d, tags in doc_tags.items() if any(stem(t) in qstems or t in qstems for t in tags)}
    inbound = stored_hits.inbound_links(ctx.db, ctx.ws.id, {p: d for d, p in doc_path.items()})
    fused = F.apply_boosts(fused, doc_of=doc_of, tag_match=tag_match, inbound=inbound, max_score=max_score)
    assert legs.keys is not None  # set by run_legs
    fused = ties.order_fused(fused, legs.keys)
    fused = _choose_passages(ctx, plan, fused, doc_of)
    fused, ahead = _lead_document(ctx, plan, legs, fused, doc_of)
    # the leading document's passages to show are named before the cap: fused fourth of their
    # document (or not found by a leg at all), the cap would drop them
    fused = F.cap_per_document(fused, doc_of, PER_DOCUMENT, keep=set(ahead))
    if plan.opts.demote_superseded:
        successor, path_of = ctx.successors() if ctx.successors else stored_hits.successors(ctx.db, ctx.ws.id)
        fused = F.demote_superseded(fused, doc_of, successor, path_of)
    if plan.opts.per_document and fused and ahead and doc_of[fused[0].chunk_id] == doc_of[ahead[0]]:
        fused = choice.follow(fused, ahead[1:], doc_of)  # one passage a document: they follow its first
    return fused, doc_of


def _lead_document(
    ctx: Context, plan: Plan, legs: Legs, fused: list[F.Fused], doc_of: dict[int, int]
) -> tuple[list[F.Fused], list[int]]:
    """The leading document's passages scored whole (search/passages.py), the best first in the
    leading place and the others it shows right behind; with the chunk ids shown, in order. A
    passage no leg brought back joins the candidates with its own cosine. Only where words were
    searched and fused (a leg alone keeps its order) and on a first page (a cursor's page is
    ordered by what the first showed)."""
    if len(fused) < 2 or len(fused[0].ranks) < 2 or plan.opts.after:
        return fused, []
    lead = doc_of[fused[0].chunk_id]
    searched = fuzzy.corrected(plan.parsed.text, legs.corrections) if legs.corrections else plan.parsed.text
    stems, counts, total, _ = evidence.query_counts(ctx.db, searched, ctx.ws.id)
    weights = passages.idf({s: counts.get(s, 0) for s in stems}, total)
    scored = passages.read(ctx.db, ctx.ws.id, lead, plan.filt, weights, legs.query_vector, legs.model_fp)
    if len(scored) < passages.MIN_PASSAGES:  # two passages: scaling within the document decides on a hair
        return fused, []
    places = [i for i, f in enumerate(fused) if doc_of[f.chunk_id] == lead]  # the document's, in fused order
    mine = [fused[i] for i in places]
    ids = passages.shown(passages.order(scored, [f.chunk_id for f in mine]), {p.chunk_id: p.nav for p in scored})
    by_id = {f.chunk_id: f for f in fused}
    new = [c for c in ids if c not in by_id]
    if new:
        legs.cands.update(stored_hits.candidates(ctx.db, new))
        doc_of.update({c: legs.cands[c].document_id for c in new if c in legs.cands})
    cos = {p.chunk_id: p.cosine for p in scored}
    floor, low = min(f.score for f in mine), min(f.relevance for f in mine)
    head: list[F.Fused] = []
    for c in ids:
        if c not in doc_of:  # retired since the read
            continue
        f = by_id.get(c) or F.Fused(
            c,
            floor,
            dict.fromkeys(fused[0].ranks),
            # no leg found it: its legs' scores stay null; its cosine within the document is what
            # the confidence model reads (evidence.py)
            {"semantic": None, "lexical": None, "within": cos[c]},
            relevance=low,
            via=["document"],
        )
        head.append(f)
    if not head:
        return fused, []
    # the document's places in the order, and the scores fusion gave them, stay; the passages
    # shown take its first places, its other candidates the rest (a new passage's place is the
    # last candidate's: the per-document cap drops that one)
    shown = {f.chunk_id for f in head}
    ordered = head + [fused[i] for i in places if fused[i].chunk_id not in shown]
    out = list(fused)
    for slot, f in zip(places, ordered):
        out[slot] = replace(f, score=fused[slot].score, relevance=fused[slot].relevance)
    extra = ordered[len(places) :]  # more passages shown than the document had candidates
    return out + extra, [f.chunk_id for f in head]


def _choose_passages(ctx: Context, plan: Plan, fused: list[F.Fused], doc_of: dict[int, int]) -> list[F.Fused]:
    """Each shown document led by navigation (a table of contents, a list of links) gets its passages
    re-slotted so that the one that answers leads (choice.py). Only the documents the page (or the
    ranker's window) can reach are looked at, and first only their best passage's text: the rest of a
    document's passages are read when that one is navigation (most are not: a search reads a few rows)."""
    docs: dict[int, list[int]] = {}
    for f in fused:
        d = doc_of[f.chunk_id]
        if d not in docs:
            if len(docs) == plan.shown:
                continue
            docs[d] = []
        docs[d].append(f.chunk_id)
    several = [ids for ids in docs.values() if len(ids) > 1]
    if not several:
        return fused
    heads = stored_hits.chunk_heads(ctx.db, [ids[0] for ids in several])
    nav = {c: choice.navigational(t, b) for c, (b, t) in heads.items()}
    rest = [c for ids in several if nav.get(ids[0]) for c in ids[1:]]
    if not rest:
        return fused
    nav.update({c: choice.navigational(t, b) for c, (b, t) in stored_hits.chunk_heads(ctx.db, rest).items()})
    return choice.choose(fused, doc_of, nav)


def _fuse_legs(
    legs: Mapping[str, list[F.LegHit]], fusion_opts: Mapping[str, Any], semantic_tier: str | None
) -> tuple[list[F.Fused], float]:
    """The legs fused by the method fusion_opts names, with the highest score it can give."""
    if fusion_opts.get("method") == "weighted":
        fused = F.fuse_weighted(
            legs,
            semantic_weight=fusion_opts.get("weights", {}).get("semantic", 0.6),
            lexical_weight=fusion_opts.get("weights", {}).get("lexical", 0.4),
            # the instant tier's cosines are not on the scale the threshold was set for
            threshold=0.0 if semantic_tier == TIER_INSTANT else fusion_opts.get("threshold", 0.2),
        )
        return fused, sum({"semantic": 0.6, "lexical": 0.4}.get(n, 0) for n in legs) or 1.0
    if fusion_opts.get("method") == "convex":
        weights = {**F.CONVEX_WEIGHTS, **fusion_opts.get("weights", {})}
        return F.fuse_convex(legs, weights=weights), sum(weights.get(n, 0.0) for n in legs) or 1.0
    k = fusion_opts.get("k", RRF_K)
    weights = dict(fusion_opts.get("weights") or {})
    if "graph" in legs:  # neighbours found through a seed never outweigh the leg that found the seed
        weights["graph"] = min(weights.get(n, 1.0) for n in legs if n != "graph")
    return F.fuse_rrf(legs, k=k, weights=weights), F.rrf_max(len(legs), k, weights, legs.keys())


# -- stage 4: rerank ------------------------------------------------------------------------


def rerank(
    ctx: Context, plan: Plan, legs: Legs, fused: list[F.Fused], doc_of: dict[int, int], rows: dict[int, dict]
) -> Ranked:
    """Stage "rerank": the ranker's window reordered by its scores (equal scores in content order)."""
    ranked = Ranked(fused, doc_of, {"state": "off", "model": ctx.rank_model, "error": ""})
    if "rerank" not in plan.requested:
        ranked.rank["state"] = "skipped" if ctx.rank is not None else "off"
        return ranked
    if ctx.rank is None:
        legs.skipped["rerank"] = NO_RANKER_REASON
        return ranked
    if not fused:
        legs.skipped["rerank"] = "nothing was found to rank"
        ranked.rank["state"] = "ready"
        return ranked
    window = fused[: plan.opts.window]
    passages = [rows[f.chunk_id]["breadcrumb"] + "\n" + rows[f.chunk_id]["text"] for f in window]
    outcome = ctx.rank(plan.parsed.text, passages)
    ranked.rank = {"state": outcome.state, "model": outcome.model, "error": outcome.error}
    if outcome.scores is None:
        legs.skipped["rerank"] = outcome.error or "the ranker did not answer"
        return ranked
    legs.performed.append("rerank")
    for f, s in zip(window, outcome.scores):
        ranked.rank_scores[f.chunk_id] = float(s)
        f.via.append("rank")
    by_id = {f.chunk_id: f for f in window}
    assert legs.keys is not None  # set by run_legs
    order = ties.ordered_scores([(f.chunk_id, float(s)) for f, s in zip(window, outcome.scores)], legs.keys)
    ranked.fused = [by_id[c] for c in order] + fused[len(window) :]
    return ranked
