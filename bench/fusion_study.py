"""Fusion alternatives, measured on the product's own legs (no product code
changed): each query's lexical leg (`run_lexical`) and semantic leg (the
runtime's `leg`) are taken once, top 100 each, and fused here in several ways.
Documents are ranked by their best chunk; the product's RRF is reproduced
with its own `fuse_rrf` for the top-50 rows, so the first row should match
the Service's hybrid figure up to boosts and the per-document cap (which do
not change a best-chunk document ranking on SciFact: no tags, no links).

Variants:
* rrf-kK-topN: the product's chunk-level RRF, k = K, each leg cut at N.
* rrfw-kK-sW: the product's chunk-level RRF with per-leg weights (its
  `weights` option): Σ w_leg / (k + rank), lexical 1.0, semantic W, legs cut
  at 50 as the product does. W = 1.0 is `rrf-kK-top50`.
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


def collect_legs(
    store: Path, col: Collection, splits=("train", "test"), top: int = 100, query_limit: int | None = None
) -> dict[str, Any]:
    from autodoc.config import Settings, WorkspaceConfig
    from autodoc.search.lexical import run_lexical
    from autodoc.search.query import parse_query, resolve_facets
    from autodoc.service import Service
    from autodoc.store.filters import build_filter
    from autodoc.store.workspaces import get_workspace

    svc = Service(Settings.from_env(store=store), writer=False)
    legs: dict[str, dict[str, Any]] = {}
    try:
        db = svc.store.reader()
        ws = get_workspace(db, WORKSPACE)
        embedding = WorkspaceConfig.from_json(ws.config).embedding
        doc_of = {
            cid: path_doc(p)
            for cid, p in db.execute(
                "SELECT c.id, d.path FROM chunks c JOIN documents d ON d.id=c.document_id WHERE c.workspace_id=?",
                (ws.id,),
            )
        }
        filt = build_filter(ws.id, facets=[], opt_facets={}, tags=(), paths=(), include_abstract=True)
        tok = db.fts5_tokenizer("unicode61", ["remove_diacritics", "2"])
        for split in splits:
            if split not in col.qrels:
                continue
            for qid, text in col.split_queries(split)[:query_limit]:
                parsed = resolve_facets(parse_query(text), set())
                with db:
                    lex = run_lexical(db, ws.id, parsed.terms, filt, want=top, top=top).hits
                with db:
                    sem = svc.semantic.search(db, ws, embedding, parsed.text, filt, top)
                tm = token_match(tok, text)
                alt = db.execute(_ALT_SQL.format(limit=int(top)), (tm, ws.id)).fetchall() if tm else []
                legs[qid] = {
                    "lexical": [(h.chunk_id, h.score) for h in lex],
                    "semantic": [(h.chunk_id, h.score) for h in (sem.hits or [])],
                    "lexical_tokens": [(c, -sc) for c, sc in alt],
                }
    finally:
        svc.close()
    return {"legs": legs, "doc_of": doc_of}


# The lexical study's best variant on train (tokens-or-1111) as an alternative lexical leg.
_ALT_SQL = (
    "SELECT c.id, bm25(chunks_fts, 1.0, 1.0, 1.0, 1.0) AS s FROM chunks_fts JOIN chunks c ON c.id = chunks_fts.rowid "
    "WHERE chunks_fts MATCH ? AND c.workspace_id = ? ORDER BY s, c.id LIMIT {limit}"
)


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


def _rrf_product(legs, k, top, weights=None):
    from autodoc.search.fusion import LegHit, fuse_rrf

    cut = {n: [LegHit(c, s) for c, s in hs[:top]] for n, hs in _product_legs(legs).items()}
    return [f.chunk_id for f in fuse_rrf(cut, k=k, weights=weights)]


def _product_legs(legs):
    """The two legs the product fuses. `legs` also carries `lexical_tokens` (an alternative
    lexical leg for the *-tokens rows): passed to RRF it would be a third leg with weight 1."""
    return {"lexical": legs["lexical"], "semantic": legs["semantic"]}


def _rrf_doc(legs, doc_of, k, top):
    score: dict[str, float] = {}
    for _name, hs in _product_legs(legs).items():
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

    cut = {n: [LegHit(c, s) for c, s in hs[:top]] for n, hs in _product_legs(legs).items()}
    return [f.chunk_id for f in fuse_weighted(cut)]


# Weighted RRF grid (lexical weight 1.0; semantic weight below 1 leans on the
# stronger lexical leg, as the convex sweep did). W = 1.0 is the plain rrf-kK-top50 row.
RRFW_KS = (20, 40, 60)
RRFW_SEMANTIC = (0.5, 0.6, 0.7, 0.8, 0.9)


def rrfw_name(k: int, w: float) -> str:
    return f"rrfw-k{k}-s{w}"


def rrf_family(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The product-shaped RRF rows (chunk-level, legs at 50): plain k ∈ RRFW_KS and the weighted grid."""
    names = {f"rrf-k{k}-top50" for k in RRFW_KS} | {rrfw_name(k, w) for k in RRFW_KS for w in RRFW_SEMANTIC}
    return [r for r in rows if r["name"] in names]


def rrf_setting(name: str) -> dict[str, Any]:
    """The product's fusion option for a row of rrf_family."""
    parts = name.split("-")
    k = int(parts[1][1:])
    w = float(parts[2][1:]) if name.startswith("rrfw-") else 1.0
    return {"method": "rrf", "k": k, "weights": {"lexical": 1.0, "semantic": w}}


def variants(doc_of):
    v = []
    for k in (10, 20, 40, 60):
        v.append(
            (
                f"rrf-k{k}-top50",
                f"product chunk-level RRF, k {k}, legs cut at 50",
                lambda L, k=k: _docs(_rrf_product(L, k, 50), doc_of),
            )
        )
    for k in RRFW_KS:
        for w in RRFW_SEMANTIC:
            v.append(
                (
                    rrfw_name(k, w),
                    f"product chunk-level RRF, k {k}, weights lexical 1.0 / semantic {w}, legs cut at 50",
                    lambda L, k=k, w=w: _docs(_rrf_product(L, k, 50, {"lexical": 1.0, "semantic": w}), doc_of),
                )
            )
    for k in (20, 60):
        v.append(
            (
                f"rrf-k{k}-top100",
                f"chunk-level RRF, k {k}, legs cut at 100",
                lambda L, k=k: _docs(_rrf_product(L, k, 100), doc_of),
            )
        )
    for k in (10, 20, 60):
        v.append(
            (
                f"rrf-doc-k{k}-top100",
                f"RRF over documents (best chunk per leg), k {k}, legs at 100",
                lambda L, k=k: _rrf_doc(L, doc_of, k, 100)[:100],
            )
        )
    for a in (0.3, 0.4, 0.5, 0.6):
        v.append(
            (
                f"convex-{a}",
                f"min-max normalised {a}·cos + {1 - a:.1f}·bm25, legs at 100",
                lambda L, a=a: _docs(_convex(L, a, 100), doc_of),
            )
        )
    for a in (0.4, 0.5):
        v.append(
            (
                f"convex-{a}-top50",
                f"min-max normalised {a}·cos + {1 - a:.1f}·bm25, legs at 50 (the product's)",
                lambda L, a=a: _docs(_convex(L, a, 50), doc_of),
            )
        )

    def tokens(L):
        return {"lexical": L["lexical_tokens"], "semantic": L["semantic"]}

    for a in (0.4, 0.5):
        v.append(
            (
                f"convex-{a}-tokens",
                f"convex {a} as above, lexical leg = `tokens-or-1111` (lexical study), legs at 100",
                lambda L, a=a: _docs(_convex(tokens(L), a, 100), doc_of),
            )
        )
    v.append(
        (
            "rrf-k20-tokens",
            "chunk-level RRF k 20, lexical leg = `tokens-or-1111`, legs at 100",
            lambda L: _docs(_rrf_product(tokens(L), 20, 100), doc_of),
        )
    )
    v.append(
        (
            "weighted-top50",
            "product weighted sum 0.6·cos + 0.4·bm25/(bm25+1), threshold 0.2, legs at 50",
            lambda L: _docs(_weighted(L, 50), doc_of),
        )
    )
    v.append(("lexical-top100", "lexical leg alone, 100 chunks", lambda L: _docs([c for c, _ in L["lexical"]], doc_of)))
    v.append(
        ("semantic-top100", "semantic leg alone, 100 chunks", lambda L: _docs([c for c, _ in L["semantic"]], doc_of))
    )
    return v


def run(
    col: Collection, collected: dict[str, Any], splits=("train", "test"), only: tuple[str, ...] = ()
) -> list[dict[str, Any]]:
    legs, doc_of = collected["legs"], collected["doc_of"]
    out = []
    for name, desc, fn in variants(doc_of):
        if only and not name.startswith(only):
            continue
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


# -- run the fusion study alone ----------------------------------------------------
#   python -m bench.fusion_study                        # every variant, table on stdout
#   python -m bench.fusion_study --only rrf --legs /tmp/scifact-legs.json
# The legs are collected once from the cached store (built by bench.quality) and can be
# kept in a JSON file outside the repository, so re-fusing costs seconds.


def _find_store(name: str) -> Path:
    from .common import cache_root

    found = sorted((cache_root() / "stores").glob(f"{name}-*/autodoc.db"))
    if len(found) != 1:
        raise SystemExit(f"expected one cached store for {name!r}, found {[str(f) for f in found]}; pass --store")
    return found[0]


def main(argv: list[str] | None = None) -> int:
    import argparse
    import json
    import time

    from .beir import load_collection
    from .common import DEFAULT_DATA, command_line, git_commit, log

    ap = argparse.ArgumentParser(
        prog="python -m bench.fusion_study",
        description="Fusion variants over the product's legs (choose on train, read test).",
    )
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA / "scifact")
    ap.add_argument("--store", type=Path, default=None, help="store (default the one cached store for the collection)")
    ap.add_argument(
        "--legs",
        type=Path,
        default=None,
        help="JSON file of collected legs: read when it exists, else collected and written there",
    )
    ap.add_argument("--only", default="", help="';'-separated name prefixes of the variants to run (default all)")
    ap.add_argument("--json", default="-", help="rows as JSON to this path, '-' for none")
    args = ap.parse_args(argv)

    col = load_collection(args.data)
    if args.legs and args.legs.exists():
        collected = json.loads(args.legs.read_text())
        collected["doc_of"] = {int(c): d for c, d in collected["doc_of"].items()}
        log(f"legs read from {args.legs} ({len(collected['legs'])} queries, collected {collected.get('meta')})")
    else:
        store = args.store or _find_store(col.name)
        t0 = time.time()
        log(f"collecting legs from {store}")
        collected = collect_legs(store, col)
        import autodoc

        collected["meta"] = {
            "store": str(store),
            "commit": git_commit(),
            "code": str(Path(autodoc.__file__).parent),
            "seconds": round(time.time() - t0, 1),
            "date": time.strftime("%Y-%m-%d %H:%M"),
        }
        log(f"collected {len(collected['legs'])} queries in {collected['meta']['seconds']} s")
        if args.legs:
            args.legs.write_text(json.dumps(collected))
    rows = run(col, collected, only=tuple(p for p in args.only.split(";") if p))
    print("| variant | train nDCG@10 | test nDCG@10 | test recall@100 | test MRR@10 |")
    print("|---|---|---|---|---|")
    for r in rows:
        tr, te = r.get("train", {}), r.get("test", {})
        print(
            f"| `{r['name']}` | {tr.get('nDCG@10', float('nan')):.4f} | {te.get('nDCG@10', float('nan')):.4f} | "
            f"{te.get('R@100', float('nan')):.4f} | {te.get('RR@10', float('nan')):.4f} |"
        )
    fam = [r for r in rrf_family(rows) if "train" in r]
    if fam:
        best = max(fam, key=lambda r: (r["train"]["nDCG@10"], r["name"]))
        print(
            f"\nRRF family (k {RRFW_KS}, semantic weight {RRFW_SEMANTIC} and 1.0, legs at 50): best on train "
            f"`{best['name']}` = {json.dumps(rrf_setting(best['name']))}, train nDCG@10 {best['train']['nDCG@10']:.4f}"
            f" → test {best.get('test', {}).get('nDCG@10', float('nan')):.4f}"
        )
    if args.json != "-":
        Path(args.json).write_text(
            json.dumps({"command": command_line(), "legs_meta": collected.get("meta"), "variants": rows}, indent=1)
        )
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
