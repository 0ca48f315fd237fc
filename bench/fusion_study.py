"""Fusion alternatives, measured on the product's own legs (no product code
changed): each query's lexical leg (`run_lexical`) and semantic leg (the
runtime's `leg`) are taken once, top 100 each, and fused here in several ways.
Documents are ranked by their best chunk; the product's RRF is reproduced
with its own `fuse_rrf` for the top-50 rows, so the first row should match
the Service's hybrid figure up to boosts and the per-document cap (which do
not change a best-chunk document ranking on SciFact: no tags, no links).

Variants:
* rrf-kK-topN: the product's chunk-level RRF, k = K, each leg cut at N.
* rrf-doc-kK: RRF over documents (each leg's chunks collapsed to their
  document's best rank first), so a document found lexically through one chunk
  and semantically through another gets both legs' credit.
* convex-a: min-max normalised scores, a·cos + (1 − a)·bm25, per chunk.
* weighted: the product's weighted sum (0.6·cos + 0.4·bm25/(bm25+1), ≥ 0.2).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .beir import WORKSPACE, Collection, path_doc
from .evaluate import evaluate


def collect_legs(store: Path, col: Collection, splits=("train", "test"), top: int = 100,
                 query_limit: int | None = None) -> dict[str, Any]:
    from autodoc.config import Settings
    from autodoc.search.filters import build_filter
    from autodoc.search.lexical import run_lexical
    from autodoc.search.query import parse_query, resolve_facets
    from autodoc.service import Service

    svc = Service(Settings.from_env(store=store), writer=False)
    legs: dict[str, dict[str, Any]] = {}
    try:
        db = svc._reader()
        ws = svc._ws(WORKSPACE)
        doc_of = {cid: path_doc(p) for cid, p in db.execute(
            "SELECT c.id, d.path FROM chunks c JOIN documents d ON d.id=c.document_id WHERE c.workspace_id=?",
            (ws.id,))}
        filt = build_filter(ws.id, facets=[], opt_facets={}, tags=(), paths=(), include_abstract=True)
        tok = db.fts5_tokenizer("unicode61", ["remove_diacritics", "2"])
        for split in splits:
            if split not in col.qrels:
                continue
            for qid, text in col.split_queries(split)[:query_limit]:
                parsed = resolve_facets(parse_query(text), set())
                with db:
                    lex, _ = run_lexical(db, ws.id, parsed.terms, filt, want=top, top=top)
                sem = svc.semantic.leg(ws, parsed.text, filt, top)
                tm = token_match(tok, text)
                alt = db.execute(_ALT_SQL.format(limit=int(top)), (tm, ws.id)).fetchall() if tm else []
                legs[qid] = {"lexical": [(h.chunk_id, h.score) for h in lex],
                             "semantic": [(h.chunk_id, h.score) for h in (sem.hits or [])],
                             "lexical_tokens": [(c, -sc) for c, sc in alt]}
    finally:
        svc.close()
    return {"legs": legs, "doc_of": doc_of}


# The lexical study's best variant on train (tokens-or-1111) as an alternative lexical leg.
_ALT_SQL = ("SELECT c.id, bm25(chunks_fts, 1.0, 1.0, 1.0, 1.0) AS s FROM chunks_fts JOIN chunks c ON c.id = chunks_fts.rowid "
            "WHERE chunks_fts MATCH ? AND c.workspace_id = ? ORDER BY s, c.id LIMIT {limit}")


def token_match(tok, text: str) -> str | None:
    import apsw

    from .lexical_study import LUCENE_STOPWORDS

    toks: list[str] = []
    for _, _, t in tok(text.encode("utf-8"), apsw.FTS5_TOKENIZE_QUERY, None):
        if t not in LUCENE_STOPWORDS and t not in toks:
            toks.append(t)
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in toks) or None


def _docs(chunk_order: list[int], doc_of: dict[int, str], n: int = 100) -> list[str]:
    out, seen = [], set()
    for c in chunk_order:
        d = doc_of[c]
        if d not in seen:
            seen.add(d)
            out.append(d)
            if len(out) >= n:
                break
    return out


def _rrf_product(legs, k, top):
    from autodoc.search.fusion import LegHit, fuse_rrf

    cut = {n: [LegHit(c, s) for c, s in hs[:top]] for n, hs in legs.items()}
    return [f.chunk_id for f in fuse_rrf(cut, k=k)]


def _rrf_doc(legs, doc_of, k, top):
    score: dict[str, float] = {}
    for name, hs in legs.items():
        seen = []
        for c, _ in hs[:top]:
            d = doc_of[c]
            if d not in seen:
                seen.append(d)
        for r, d in enumerate(seen):
            score[d] = score.get(d, 0.0) + 1.0 / (k + r + 1)
    return sorted(score, key=lambda d: (-score[d], d))


def _convex(legs, a, top):
    def norm(hs):
        if not hs:
            return {}
        xs = [s for _, s in hs]
        lo, hi = min(xs), max(xs)
        return {c: ((s - lo) / (hi - lo) if hi > lo else 1.0) for c, s in hs}

    L, S = norm(legs["lexical"][:top]), norm(legs["semantic"][:top])
    score = {c: a * S.get(c, 0.0) + (1 - a) * L.get(c, 0.0) for c in set(L) | set(S)}
    return sorted(score, key=lambda c: (-score[c], c))


def _weighted(legs, top):
    from autodoc.search.fusion import LegHit, fuse_weighted

    cut = {n: [LegHit(c, s) for c, s in hs[:top]] for n, hs in legs.items()}
    return [f.chunk_id for f in fuse_weighted(cut)]


def variants(doc_of):
    v = []
    for k in (10, 20, 40, 60):
        v.append((f"rrf-k{k}-top50", f"product chunk-level RRF, k {k}, legs cut at 50",
                  lambda L, k=k: _docs(_rrf_product(L, k, 50), doc_of)))
    for k in (20, 60):
        v.append((f"rrf-k{k}-top100", f"chunk-level RRF, k {k}, legs cut at 100",
                  lambda L, k=k: _docs(_rrf_product(L, k, 100), doc_of)))
    for k in (10, 20, 60):
        v.append((f"rrf-doc-k{k}-top100", f"RRF over documents (best chunk per leg), k {k}, legs at 100",
                  lambda L, k=k: _rrf_doc(L, doc_of, k, 100)[:100]))
    for a in (0.3, 0.4, 0.5, 0.6):
        v.append((f"convex-{a}", f"min-max normalised {a}·cos + {1 - a:.1f}·bm25, legs at 100",
                  lambda L, a=a: _docs(_convex(L, a, 100), doc_of)))
    for a in (0.4, 0.5):
        v.append((f"convex-{a}-top50", f"min-max normalised {a}·cos + {1 - a:.1f}·bm25, legs at 50 (the product's)",
                  lambda L, a=a: _docs(_convex(L, a, 50), doc_of)))
    def tokens(L):
        return {"lexical": L["lexical_tokens"], "semantic": L["semantic"]}

    for a in (0.4, 0.5):
        v.append((f"convex-{a}-tokens", f"convex {a} as above, lexical leg = `tokens-or-1111` (lexical study), legs at 100",
                  lambda L, a=a: _docs(_convex(tokens(L), a, 100), doc_of)))
    v.append(("rrf-k20-tokens", "chunk-level RRF k 20, lexical leg = `tokens-or-1111`, legs at 100",
              lambda L: _docs(_rrf_product(tokens(L), 20, 100), doc_of)))
    v.append(("weighted-top50", "product weighted sum 0.6·cos + 0.4·bm25/(bm25+1), threshold 0.2, legs at 50",
              lambda L: _docs(_weighted(L, 50), doc_of)))
    v.append(("lexical-top100", "lexical leg alone, 100 chunks", lambda L: _docs([c for c, _ in L["lexical"]], doc_of)))
    v.append(("semantic-top100", "semantic leg alone, 100 chunks", lambda L: _docs([c for c, _ in L["semantic"]], doc_of)))
    return v


def run(col: Collection, collected: dict[str, Any], splits=("train", "test")) -> list[dict[str, Any]]:
    legs, doc_of = collected["legs"], collected["doc_of"]
    out = []
    for name, desc, fn in variants(doc_of):
        row: dict[str, Any] = {"name": name, "description": desc}
        for split in splits:
            if split not in col.qrels:
                continue
            qids = [q for q, _ in col.split_queries(split) if q in legs]
            if not qids:
                continue
            runs = {q: fn(legs[q]) for q in qids}
            row[split] = {k: round(v, 4) for k, v in evaluate(runs, {q: col.qrels[split][q] for q in qids}).items()}
        out.append(row)
    return out
