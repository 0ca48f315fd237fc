"""The search pipeline: query → filter → legs (concurrently) → fusion → boosts
→ cap → demotion → rerank → answer. I/O lives in the legs and `_load`; the
steps between are the pure functions of fusion.py and snippet.py.

Input: a reader connection, the workspace, the user's query and validated
options. Output: the search.query answer (docs/dev/CONTRACTS.md).
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

import apsw

from ..config import PER_DOCUMENT, RRF_K, SEMANTIC_TOP
from ..errors import AutodocError, InvalidParams, Unsupported
from ..store.documents import Workspace
from . import fusion as F
from .counts import facet_counts
from .filters import Filter, build_filter
from .fts import build_match
from .graph import run_graph
from .lexical import run_lexical
from .options import SearchOptions
from .query import ParsedQuery, parse_query, resolve_facets
from .snippet import make_snippet, snippet_maker
from .tokens import stem, tokenize

log = logging.getLogger("autodoc.search")


@dataclass
class SemanticOutcome:
    """What the semantic leg did. hits is None when it could not run."""

    hits: list[F.LegHit] | None
    state: str  # ready | partial | switching | off | failed
    reason: str | None = None  # why it was skipped (or why coverage is partial)
    error: AutodocError | None = None  # raised instead when semantic was the only leg asked for
    model: str | None = None


class SemanticLeg(Protocol):
    def __call__(self, ws: Workspace, text: str, filt: Filter, top: int) -> SemanticOutcome: ...


@dataclass
class RankOutcome:
    scores: list[float] | None
    state: str  # ready | failed | off
    model: str | None
    error: str = ""


class RankFn(Protocol):
    def __call__(self, query: str, passages: list[str]) -> RankOutcome: ...


NO_MODEL_REASON = "no embedding model is configured for this workspace"
NO_RANKER_REASON = "no ranker is configured for this workspace"


@dataclass
class Context:
    db: apsw.Connection
    ws: Workspace
    known_fields: set[str]
    semantic: SemanticLeg | None = None
    rank: RankFn | None = None
    rank_model: str | None = None
    pool: Any = None  # an executor for the semantic leg; None runs it inline
    facet_kinds: dict[str, str] | None = None  # declared field -> comparison kind; None: no schema
    successors: Callable[[], tuple[dict[int, int], dict[int, str]]] | None = None  # cached _successors


def _check_fields(ctx: Context, opts: SearchOptions) -> None:
    """opts.facets / opts.facet_counts may name only facets: declared fields
    (with a schema) or fields some document has (without), and tag."""
    def check(name: str, fields) -> None:
        for f in fields:
            if f != "tag" and f not in ctx.known_fields:
                what = ("is not declared in the workspace schema (_schema/frontmatter.yaml)"
                        if ctx.facet_kinds is not None else "is not a field of any document in this workspace")
                raise InvalidParams(name.format(f), f"{f!r} {what}")
    check("opts.facets.{}", opts.facets)
    check("opts.facet_counts", opts.facet_counts)


def search(ctx: Context, query: str, opts: SearchOptions) -> dict[str, Any]:
    _check_fields(ctx, opts)
    parsed = resolve_facets(parse_query(query), ctx.known_fields)
    filt = build_filter(
        ctx.ws.id,
        facets=parsed.facets,
        opt_facets=opts.facets,
        tags=opts.tags,
        paths=opts.paths,
        include_abstract=opts.abstract_chunk,
        kinds=ctx.facet_kinds,
    )
    requested = list(opts.stages)
    if parsed.wordless:
        return _facet_browse(ctx, query, parsed, filt, opts, requested)

    skipped: dict[str, str] = {}
    performed: list[str] = []
    legs: dict[str, list[F.LegHit]] = {}
    lexical_match = None
    semantic_state = "off"

    want_lex = "lexical" in requested
    want_sem = "semantic" in requested
    sem_future = None
    if want_sem and ctx.semantic is not None and ctx.pool is not None and want_lex:
        # The semantic leg runs on its own thread and connection while the
        # lexical leg runs here; fusion depends only on each leg's order.
        sem_future = ctx.pool.submit(ctx.semantic, ctx.ws, parsed.text, filt, SEMANTIC_TOP)
    if want_lex:
        hits, lexical_match = run_lexical(ctx.db, ctx.ws.id, parsed.terms, filt, want=opts.limit)
        legs["lexical"] = hits
        performed.append("lexical")
    if want_sem:
        if sem_future is not None:
            outcome = sem_future.result()
        elif ctx.semantic is not None:
            outcome = ctx.semantic(ctx.ws, parsed.text, filt, SEMANTIC_TOP)
        else:
            outcome = SemanticOutcome(None, "off", NO_MODEL_REASON, None)
        semantic_state = outcome.state
        if outcome.hits is None:
            if not want_lex:  # semantic alone was asked for: never answer with words instead
                raise outcome.error or Unsupported(outcome.reason or NO_MODEL_REASON)
            skipped["semantic"] = outcome.reason or NO_MODEL_REASON
        else:
            legs["semantic"] = outcome.hits
            performed.append("semantic")
    if "graph" in requested:
        _graph_leg(ctx, opts, filt, legs, performed, skipped)

    fusion_opts = opts.fusion
    if fusion_opts.get("method") == "weighted":
        fused = F.fuse_weighted(
            legs,
            semantic_weight=fusion_opts.get("weights", {}).get("semantic", 0.6),
            lexical_weight=fusion_opts.get("weights", {}).get("lexical", 0.4),
            threshold=fusion_opts.get("threshold", 0.2),
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

    cands = _candidates(ctx.db, [f.chunk_id for f in fused])
    fused = [f for f in fused if f.chunk_id in cands]  # a chunk retired between the semantic leg and here
    doc_of = {cid: c[0] for cid, c in cands.items()}
    doc_path = {c[0]: c[1] for c in cands.values()}
    doc_tags = {c[0]: c[2] for c in cands.values()}
    qstems = {stem(w) for t in parsed.terms for w in re.findall(r"\w+", t.text)}
    tag_match = {d for d, tags in doc_tags.items()
                 if tags != "[]" and any(stem(t) in qstems or t in qstems for t in json.loads(tags))}
    inbound = _inbound(ctx.db, ctx.ws.id, {p: d for d, p in doc_path.items()})
    fused = F.apply_boosts(fused, doc_of=doc_of, tag_match=tag_match, inbound=inbound, max_score=max_score)
    fused = F.cap_per_document(fused, doc_of, PER_DOCUMENT)
    if opts.demote_superseded:
        successor, path_of = ctx.successors() if ctx.successors else _successors(ctx.db, ctx.ws.id)
        fused = F.demote_superseded(fused, doc_of, successor, path_of)
    shown = max(opts.limit, opts.window if "rerank" in requested and ctx.rank is not None else 0)
    rows = _load(ctx.db, [f.chunk_id for f in fused[:shown]])

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
                order = sorted(range(len(window)), key=lambda i: (-outcome.scores[i], window[i].chunk_id))
                fused = [window[i] for i in order] + fused[len(window):]
    else:
        rank["state"] = "skipped" if ctx.rank is not None else "off"

    page = fused[: opts.limit]
    snippet = snippet_maker(parsed.terms, tokenize)
    hits = [_hit(ctx.ws, rows[f.chunk_id], f, snippet(rows[f.chunk_id]["text"]), rank_scores.get(f.chunk_id))
            for f in page]
    if "graph" in requested:  # the graph leg's rank and link count, beside the others'
        for h, f in zip(hits, fused):
            h["scores"]["graph"], h["ranks"]["graph"] = f.scores.get("graph"), f.ranks.get("graph")
    counts = facet_counts(
        ctx.db, ctx.ws.id, opts.facet_counts, filt,
        match=build_match(parsed.terms, lexical_match) if "lexical" in performed and lexical_match else None,
        extra_docs={doc_of[f.chunk_id] for f in fused},
    ) if opts.facet_counts else {}
    sem_performed = "semantic" in performed
    mode_used = "hybrid" if ("lexical" in performed and sem_performed) else ("semantic" if sem_performed else "lexical")
    return {
        "workspace": ctx.ws.name,
        "query": query,
        "hits": hits,
        "mode_used": mode_used,
        "lexical_match": lexical_match,
        "semantic": semantic_state,
        "rank": rank,
        "stages": {"requested": requested, "performed": performed, "skipped": skipped},
        "facet_counts": counts,
    }


def _graph_leg(ctx: Context, opts: SearchOptions, filt: Filter, legs: dict[str, list[F.LegHit]],
               performed: list[str], skipped: dict[str, str]) -> None:
    """Stage "graph": one hop from the other legs' documents (search/graph.py)."""
    if opts.fusion.get("method") != "rrf":
        skipped["graph"] = (f"the graph leg fuses by rank only (fusion.method rrf); {opts.fusion.get('method')} "
                            "fusion has no place for it")
        return
    seed_hits = [h for name in ("lexical", "semantic") for h in legs.get(name, [])]
    if not seed_hits:
        skipped["graph"] = "the lexical and semantic legs found nothing to start from"
        return
    ids = sorted({h.chunk_id for h in seed_hits})
    doc_of = {cid: d for cid, d in ctx.db.execute(
        "SELECT id, document_id FROM chunks WHERE id IN (SELECT value FROM json_each(?))", (json.dumps(ids),))}
    # seeds in order of their best rank in either leg; each document's best chunk stands for it
    best: dict[int, tuple[int, int]] = {}
    for name in ("lexical", "semantic"):
        for rank, h in enumerate(legs.get(name, [])):
            d = doc_of.get(h.chunk_id)
            if d is not None and (d not in best or rank < best[d][0]):
                best[d] = (rank, h.chunk_id)
    seeds = sorted(best, key=lambda d: (best[d][0], d))
    found = run_graph(ctx.db, ctx.ws.id, seeds, {d: c for d, (_, c) in best.items()}, filt)
    if found:  # a leg that found nothing must not dilute relevance and compatibility
        legs["graph"] = found
    performed.append("graph")


def _candidates(db: apsw.Connection, ids: list[int]) -> dict[int, tuple[int, str, str]]:
    """chunk id → (document id, path, tags as JSON): all that boosts, the cap and
    demotion need, for every fused candidate; whole rows are read for the page only."""
    if not ids:
        return {}
    return {r[0]: r[1:] for r in db.execute(
        """SELECT c.id, c.document_id, d.path, d.tags FROM chunks c JOIN documents d ON d.id = c.document_id
           WHERE c.id IN (SELECT value FROM json_each(?))""", (json.dumps(ids),))}


def _load(db: apsw.Connection, ids: list[int]) -> dict[int, dict]:
    if not ids:
        return {}
    out: dict[int, dict] = {}
    tags: dict[int, list[str]] = {}
    for r in db.execute(
        """SELECT c.id, c.document_id, c.kind, c.breadcrumb, c.byte_start, c.byte_end, c.line_start,
           c.line_end, d.path, d.title, d.generation, d.tags, c.text
           FROM chunks c JOIN documents d ON d.id = c.document_id WHERE c.id IN (SELECT value FROM json_each(?))""",
        (json.dumps(ids),),
    ):
        t = tags.get(r[1])
        if t is None:
            t = tags[r[1]] = json.loads(r[11])
        out[r[0]] = {
            "chunk_id": r[0], "document_id": r[1], "kind": r[2], "breadcrumb": r[3],
            "byte_start": r[4], "byte_end": r[5], "line_start": r[6], "line_end": r[7], "path": r[8],
            "title": r[9], "generation": r[10], "tags": t, "text": r[12],
        }
    return out


def _texts(db: apsw.Connection, ids: list[int]) -> dict[int, str]:
    if not ids:
        return {}
    return dict(db.execute("SELECT id, text FROM chunks WHERE id IN (SELECT value FROM json_each(?))",
                           (json.dumps(ids),)))


def _inbound(db: apsw.Connection, workspace_id: int, path_to_doc: dict[str, int]) -> dict[int, int]:
    """Distinct documents linking (wiki or markdown) to each candidate document."""
    if not path_to_doc:
        return {}
    paths = list(path_to_doc)
    out: dict[int, int] = {}
    for i in range(0, len(paths), 500):
        part = paths[i : i + 500]
        marks = ",".join("?" * len(part))
        for target, n in db.execute(
            f"""SELECT l.target_path, COUNT(DISTINCT l.source_id) FROM links l JOIN documents s ON s.id = l.source_id
                WHERE l.workspace_id=? AND l.kind IN ('wiki','markdown') AND l.target_path IN ({marks})
                AND s.path != l.target_path GROUP BY l.target_path""",
            (workspace_id, *part),
        ):
            out[path_to_doc[target]] = n
    return out


def _successors(db: apsw.Connection, workspace_id: int) -> tuple[dict[int, int], dict[int, str]]:
    """Direct successor of each document (superseded_by, or the reverse of supersedes)."""
    rows = db.execute(
        """SELECT s.id, s.path, l.kind, t.id, t.path FROM links l
           JOIN documents s ON s.id = l.source_id
           JOIN documents t ON t.workspace_id = l.workspace_id AND t.path = l.target_path
           WHERE l.workspace_id=? AND l.kind IN ('supersedes','superseded_by') AND s.id != t.id""",
        (workspace_id,),
    ).fetchall()
    successor: dict[int, int] = {}
    path_of: dict[int, str] = {}
    for sid, spath, kind, tid, tpath in sorted(rows):
        path_of[sid], path_of[tid] = spath, tpath
        if kind == "superseded_by":
            successor.setdefault(sid, tid)
        else:
            successor.setdefault(tid, sid)
    return successor, path_of


def _hit(ws: Workspace, row: dict, f: F.Fused, snippet: str, rank_score: float | None) -> dict[str, Any]:
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
        "compatibility": f.compatibility,
        "generation": row["generation"],
        "superseded_by": f.superseded_by,
        "tags": row["tags"],
    }


def _facet_browse(ctx: Context, query: str, parsed: ParsedQuery, filt: Filter, opts: SearchOptions,
                  requested: list[str]) -> dict[str, Any]:
    """A query of facets only: the matching files in path order, no ranking."""
    where = f" AND {filt.sql}" if filt.sql else ""
    rows = ctx.db.execute(
        f"""SELECT d.path, d.title, d.generation, d.tags, d.size, d.line_count, MIN(c.id)
            FROM chunks c JOIN documents d ON d.id = c.document_id
            WHERE c.workspace_id = ?{where} GROUP BY d.id ORDER BY d.path LIMIT ?""",
        (ctx.ws.id, *filt.params, opts.limit),
    ).fetchall()
    first = _texts(ctx.db, [r[6] for r in rows])
    hits = []
    for path, title, gen, tags, size, lines, cid in rows:
        hits.append({
            "workspace": ctx.ws.name, "path": path, "title": title, "breadcrumb": title, "kind": "document",
            "chunk_id": None, "snippet": make_snippet(first[cid], [], tokenize) if cid in first else "",
            "byte_start": 0, "byte_end": size, "line_start": 1, "line_end": max(1, lines),
            "relevance": None, "score": None, "via": ["facet"],
            "scores": {"lexical": None, "semantic": None}, "ranks": {"lexical": None, "semantic": None},
            "rank_score": None, "compatibility": None, "generation": gen, "superseded_by": None,
            "tags": json.loads(tags),
        })
    reason = "the query has only facets: matching files are listed in path order"
    counts = facet_counts(ctx.db, ctx.ws.id, opts.facet_counts, filt, match=None, extra_docs=set(), wordless=True)
    return {
        "workspace": ctx.ws.name, "query": query, "hits": hits, "mode_used": "facet", "lexical_match": None,
        "semantic": "off" if ctx.semantic is None else "ready",
        "rank": {"state": "skipped" if ctx.rank else "off", "model": ctx.rank_model, "error": ""},
        "stages": {"requested": requested, "performed": [], "skipped": {s: reason for s in requested}},
        "facet_counts": counts,
    }
