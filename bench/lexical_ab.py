"""The lexical leg of sentence queries (whole SciFact claims) with a git ref's
search/impact.py and store/postings.py (the "base", e.g. main) against the
working tree's, interleaved query by query in one process on one store: the
OR's ranking alone (top 50), the leg (`run_lexical`, weighed as in a hybrid
search) and the hybrid `Service.search` (lexical + semantic, query vectors
cached), with whether the base's and the tree's answers are equal (ranking to
the bit; the leg's hits and weights; the hybrid's hits and scores).

Usage: python -m bench.lexical_ab --store /tmp/x/speed-1000000/store/autodoc.db [--ref main] [--queries 100]
(the store as bench/lexical_speed.py's copies: never a cached store, which a newer schema would migrate)

Runs on: the benchmark's main thread.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from .common import DEFAULT_DATA, machine_note, summary_ms
from .speed import WORKSPACE, interleaved, query_sets, ratio


def _base(ref: str, tmp: Path):
    """The ref's impact and postings modules, loaded beside the tree's (the base's reads its own postings)."""
    import autodoc.search.impact as tree

    def load(name: str, path: str):
        text = subprocess.run(["git", "show", f"{ref}:{path}"], capture_output=True, text=True, check=True).stdout
        f = tmp / (name.rsplit(".", 1)[1] + ".py")
        f.write_text(text)
        spec = importlib.util.spec_from_file_location(name, f)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        return mod

    posts = load("autodoc.store.postings_base", "daemon/autodoc/store/postings.py")
    impact = load("autodoc.search.impact_base", "daemon/autodoc/search/impact.py")
    impact.postings = posts
    if not hasattr(impact, "postread"):
        impact.postread = posts
    impact.EMPTY = tree.EMPTY
    impact.one_search = getattr(impact, "one_search", tree.one_search)
    if not hasattr(impact, "all_ranker"):  # before: the AND only proved empty, else FTS5's
        impact.all_ranker = lambda db, ex, col: impact.EMPTY if impact.none_holds_all(db, ex) else None
    return impact


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.lexical_ab", description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", type=Path, required=True)
    ap.add_argument("--ref", default="main")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA / "scifact")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)

    from autodoc.config import Settings
    from autodoc.search import impact as tree
    from autodoc.search import lexical
    from autodoc.search.fts import coverage_terms
    from autodoc.search.query import parse_query, resolve_facets
    from autodoc.service import Service
    from autodoc.store.db import open_reader
    from autodoc.store.filters import build_filter

    with tempfile.TemporaryDirectory() as tmp:
        base = _base(args.ref, Path(tmp))
    db = open_reader(args.store)
    svc = Service(Settings.from_env(store=args.store), writer=False)
    qs = query_sets(args.data, args.queries)["claims"]
    terms = {q: resolve_facets(parse_query(q), set()).terms for q in qs}
    exprs = {q: [e for e, _ in coverage_terms(terms[q])] for q in qs}
    ws = db.execute("SELECT id FROM workspaces WHERE name=?", (WORKSPACE,)).fetchone()[0]
    filt = build_filter(ws, facets=[], opt_facets={}, tags=(), paths=(), include_abstract=True)

    def with_impact(mod, fn):
        def run(q):
            lexical.impact = mod
            try:
                return fn(q)
            finally:
                lexical.impact = tree

        return run

    def rank(mod):
        def run(q):
            r = mod.ranker(db, exprs[q], None)
            return r and r(" OR ".join(exprs[q]), 50)

        return run

    def leg(q):
        return [(h.chunk_id, h.score, h.weight) for h in lexical.run_lexical(db, ws, terms[q], filt, want=10).hits]

    def hybrid(q):
        ans = svc.search(WORKSPACE, q, {"stages": ["lexical", "semantic"], "limit": 10})
        return [(h["chunk_id"], h["score"]) for h in ans["hits"]]

    fns = {
        "rank_base": rank(base),
        "rank": rank(tree),
        "leg_base": with_impact(base, leg),
        "leg": leg,
        "hybrid_base": with_impact(base, hybrid),
        "hybrid": hybrid,
    }
    same = {k: sum(fns[f"{k}_base"](q) == fns[k](q) for q in qs) for k in ("rank", "leg", "hybrid")}  # and warm-up
    t = interleaved(qs, fns)
    s = {k: summary_ms(v) for k, v in t.items()}
    out = {
        "store": str(args.store),
        "ref": args.ref,
        "queries": len(qs),
        "equal": same,
        "timings": s,
        "ratios": {k: ratio(s[k], s[f"{k}_base"]) for k in ("rank", "leg", "hybrid")},
        "machine": machine_note(),
    }
    for k in ("rank", "leg", "hybrid"):
        print(
            f"{k}: base {s[k + '_base']['p50']:.2f} / {s[k + '_base']['p95']:.2f} ms, tree {s[k]['p50']:.2f} / "
            f"{s[k]['p95']:.2f} ms (p50 / p95); ratio p50 {out['ratios'][k]['p50']} p95 {out['ratios'][k]['p95']}; "
            f"equal {same[k]}/{len(qs)}"
        )
    print(json.dumps(out["machine"]))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    svc.close()
    db.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
