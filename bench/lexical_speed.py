"""The lexical leg on sentence-length queries (whole SciFact claims), before and
after issue 19's changes, interleaved query by query in one run on copies of
the cached speed stores with their postings index built (bench/speed.py builds
the stores; `--prepare` copies them and builds the postings, the cache is
never written):

- raw FTS5: today's relaxed query, `… MATCH 'a OR b OR …' ORDER BY bm25, rowid LIMIT 50`;
- MaxScore: search/maxscore.py's exact top 50 of the same OR (and whether it equals the raw query's);
- the postings index: search/impact.py's top 50 of the same OR from store/postings.py (and whether it equals the raw query's to the bit);
- the leg (`run_lexical`, weighed as in a hybrid search) as it was (the plain OR query, the coverage
  weight read from every word's whole doclist and a COUNT(*) of the chunks) and as it is;
- the hybrid `Service.search` (lexical + semantic, query vector cached) with the leg as it was and is.

Usage: python -m bench.lexical_speed --prepare --sizes 100000,1000000 --copies /tmp/x
       python -m bench.lexical_speed --sizes 100000,1000000 --copies /tmp/x [--daemon] [--queries 100]
       (then delete /tmp/x: the 1M copy is 7 GB)

Runs on: the benchmark's main thread.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from .common import DEFAULT_DATA, RESULTS, cache_root, command_line, git_commit, machine_note, summary_ms
from .speed import WORKSPACE, interleaved, query_sets, ratio


def prepare(size: int, cache: Path, dest: Path) -> dict[str, Any]:
    """A copy of the cached speed store and its corpus under `dest` (the cache is never written), its
    workspace pointed at the copied corpus, migrated, its postings built from scratch, timed and sized."""
    import apsw

    from autodoc.store import postings
    from autodoc.store.migrations import migrate

    src = find_store(size, cache)
    if src is None:
        raise SystemExit(f"no complete speed store of {size} chunks in {cache}/stores")
    meta = json.loads((src.parent / "bench-meta.json").read_text())
    out = dest / f"speed-{size}"
    if out.exists():
        shutil.rmtree(out)
    (out / "store").mkdir(parents=True)
    shutil.copy2(src, out / "store" / "autodoc.db")
    corpus = Path(meta.get("corpus") or cache / f"speed-corpus-{size}")
    shutil.copytree(corpus, out / "corpus")
    db = apsw.Connection(str(out / "store" / "autodoc.db"))
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("UPDATE workspaces SET root=?", (str(out / "corpus"),))
    migrate(db)
    with db:  # from scratch, whatever an earlier run left
        db.execute(
            "DELETE FROM postings; DELETE FROM postings_delta; DELETE FROM postings_dead; "
            "UPDATE meta SET value='0' WHERE key='postings_built'"
        )
    t0 = time.monotonic()
    postings.build_all(db)
    seconds = time.monotonic() - t0
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    size_b = db.execute("SELECT SUM(pgsize) FROM dbstat WHERE name LIKE 'postings%'").fetchone()[0]
    n, data = db.execute("SELECT COUNT(*), SUM(LENGTH(data)) FROM postings").fetchone()
    db.close()
    info = {
        "chunks": size,
        "build_seconds": round(seconds, 1),
        "postings_rows": n,
        "postings_bytes": data,
        "on_disk_mb": round(size_b / 2**20, 1),
        "store_mb": round((out / "store" / "autodoc.db").stat().st_size / 2**20, 1),
        "command": command_line(),
        "commit": git_commit(),
    }
    meta.update(corpus=str(out / "corpus"), complete=True, postings=info)
    (out / "store" / "bench-meta.json").write_text(json.dumps(meta, indent=1))
    print(json.dumps(info), file=sys.stderr)
    return info


def find_store(size: int, cache: Path, under: str | None = None) -> Path | None:
    """The cached speed store of `size` chunks, or (under="store") a prepared copy's."""
    for meta in sorted(
        (cache / under).glob("bench-meta.json") if under else (cache / "stores").glob(f"speed-{size}-*/bench-meta.json")
    ):
        if json.loads(meta.read_text()).get("complete"):
            return meta.parent / "autodoc.db"
    return None


def _old_coverage(lexical):
    """The coverage weight as it was before issue 19 (every holder of every word fetched)."""
    from autodoc.search.fts import CJK_RUN, coverage_terms
    from autodoc.search.tokens import tokenize
    from autodoc.store.hits import chunk_texts

    def coverage(db, terms, chunk_ids, strict=frozenset()):  # strict: the new one's shortcut, unused here
        pairs = coverage_terms(terms)
        if not pairs or not chunk_ids:
            return {}
        n = max(1, db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0])
        prose = {cid: lexical._prose_stems(t) for cid, t in chunk_texts(db, chunk_ids).items()}
        total, got = 0.0, dict.fromkeys(chunk_ids, 0.0)
        for expr, term in pairs:
            holders = [r[0] for r in db.execute("SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ?", (expr,))]
            df = len(holders)
            idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
            total += idf
            words = [] if CJK_RUN.search(term.text) else [t[2] for t in tokenize(term.text)]
            for cid in got.keys() & set(holders):
                body = lexical._holds(prose[cid], words, term.prefix)
                got[cid] += idf * (1.0 if body else lexical.TITLE_CREDIT)
        if total <= 0:
            return {}
        total = max(got.values()) or total
        return {
            cid: round(lexical.COVERAGE_FLOOR + (1 - lexical.COVERAGE_FLOOR) * (g / total) ** lexical.COVERAGE_POWER, 6)
            for cid, g in got.items()
        }

    return coverage


def measure(size: int, store: Path, data: Path, nq: int) -> dict[str, Any]:
    from autodoc.config import Settings
    from autodoc.search import impact, lexical, maxscore
    from autodoc.search.fts import coverage_terms
    from autodoc.search.query import parse_query, resolve_facets
    from autodoc.service import Service
    from autodoc.store import ftsterms
    from autodoc.store.db import open_reader
    from autodoc.store.filters import build_filter
    from autodoc.store.matches import ranked

    queries = query_sets(data, nq)["claims"]
    svc = Service(Settings.from_env(store=store), writer=False)
    raw, leg_db = open_reader(store), open_reader(store)
    old_cov, new_cov = _old_coverage(lexical), lexical.coverage
    try:
        ws = raw.execute("SELECT id FROM workspaces WHERE name=?", (WORKSPACE,)).fetchone()[0]
        filt = build_filter(ws, facets=[], opt_facets={}, tags=(), paths=(), include_abstract=True)
        terms = {q: resolve_facets(parse_query(q), set()).terms for q in queries}
        exprs = {q: [e for e, _ in coverage_terms(terms[q])] for q in queries}

        def before(fn):
            def run(q):
                lexical.coverage, maxscore.ENABLED, impact.ENABLED = old_cov, False, False
                try:
                    return fn(q)
                finally:
                    lexical.coverage, maxscore.ENABLED, impact.ENABLED = new_cov, True, True

            return run

        def without_impact(fn):  # the leg as it was before the postings index: MaxScore over FTS5
            def run(q):
                impact.ENABLED = False
                try:
                    return fn(q)
                finally:
                    impact.ENABLED = True

            return run

        def impact_rank(q, db=raw):
            return impact.ranker(db, exprs[q], None)(" OR ".join(exprs[q]), 50)

        def ms_rank(q, db=raw):
            state = ftsterms.index_state(db)
            docs = ftsterms.term_docs(db, exprs[q], state)
            bounds = [maxscore.upper_bound(state.rows, docs[e]) for e in exprs[q]]
            return maxscore.top_any(lambda m, n: ranked(db, m, n), exprs[q], bounds, [docs[e] for e in exprs[q]], 50)

        def leg(q):
            return lexical.run_lexical(leg_db, ws, terms[q], filt, want=10, weigh=True)

        def leg_cold(q):
            ftsterms._docs.clear()  # every word's count read again from fts5vocab
            return leg(q)

        def hybrid(q):
            return svc.search(WORKSPACE, q, {"stages": ["lexical", "semantic"], "limit": 10})

        fast = [q for q in queries if impact.ranker(raw, exprs[q], None) is not None]
        if not fast:
            raise SystemExit(f"{store}: no postings (python -m bench.lexical_speed --prepare --copies DIR)")
        fns = {
            "raw_fts5_or": lambda q: ranked(raw, " OR ".join(exprs[q]), 50),
            "maxscore": ms_rank,
            "impact": lambda q: impact_rank(q) if q in fast else ms_rank(q),
            "leg_before": before(leg),
            "leg_maxscore": without_impact(leg),
            "leg": leg,
            "leg_cold_counts": leg_cold,
            "hybrid_before": before(hybrid),
            "hybrid_maxscore": without_impact(hybrid),
            "hybrid": hybrid,
        }
        for q in queries:  # warm-up: pages, statement caches, the query vectors, the word counts
            for f in fns.values():
                f(q)
        # exactness: the MaxScore rows against the raw query's, row for row
        same, worst = 0, 0.0
        for q in queries:
            a, b = ranked(raw, " OR ".join(exprs[q]), 50), ms_rank(q)
            if [r for r, _ in a] == [r for r, _ in b]:
                same += 1
            worst = max([worst] + [abs(x[1] - y[1]) for x, y in zip(a, b)])
        isame, ibits, iworst = 0, 0, 0.0
        for q in fast:
            a, b = ranked(raw, " OR ".join(exprs[q]), 50), impact_rank(q)
            isame += [r for r, _ in a] == [r for r, _ in b]
            ibits += a == b
            iworst = max([iworst] + [abs(x[1] - y[1]) for x, y in zip(a, b)])
        t = interleaved(queries, fns)
        s = {k: summary_ms(v) for k, v in t.items()}
        return {
            "chunks": size,
            "queries": len(queries),
            "timings": s,
            "exact": {"same_rows_and_order": same, "of": len(queries), "max_abs_score_diff": worst},
            "impact_exact": {
                "answered": len(fast),
                "same_rows_and_order": isame,
                "bitwise_equal": ibits,
                "max_abs_score_diff": iworst,
            },
            "ratio_impact_raw": ratio(s["impact"], s["raw_fts5_or"]),
            "ratio_impact_maxscore": ratio(s["impact"], s["maxscore"]),
            "ratio_hybrid_maxscore": ratio(s["hybrid"], s["hybrid_maxscore"]),
            "ratio_maxscore_raw": ratio(s["maxscore"], s["raw_fts5_or"]),
            "ratio_leg": ratio(s["leg"], s["leg_before"]),
            "ratio_hybrid": ratio(s["hybrid"], s["hybrid_before"]),
        }
    finally:
        raw.close()
        leg_db.close()
        svc.close()


def scifact_check(data: Path, cache: Path, copies: Path | None = None) -> dict[str, Any] | None:
    """The product's answers on SciFact's test claims (the cached quality store; with `copies`, a copy
    of it with its postings built), the leg as it was (before), with MaxScore over FTS5 forced on every
    query (maxscore) and as it is (now: the postings index where it answers, MaxScore forced elsewhere):
    the hits and nDCG@10 (hybrid and lexical)."""
    import apsw

    from autodoc.config import Settings
    from autodoc.search import impact, lexical, maxscore
    from autodoc.service import Service
    from autodoc.store import postings
    from autodoc.store.migrations import migrate

    from .beir import WORKSPACE as BEIR_WS
    from .beir import load_collection, path_doc
    from .evaluate import ref_ndcg

    stores = [m.parent / "autodoc.db" for m in sorted((cache / "stores").glob("scifact-*/bench-meta.json"))]
    if not stores:
        return None
    if copies is not None:
        (copies / "scifact").mkdir(parents=True, exist_ok=True)
        shutil.copy2(stores[0], copies / "scifact" / "autodoc.db")
        stores = [copies / "scifact" / "autodoc.db"]
        db = apsw.Connection(str(stores[0]))
        migrate(db)
        postings.build_all(db)
        db.close()
    col = load_collection(data, splits=("test",))
    qrels = col.qrels["test"]
    queries = [(qid, col.queries[qid]) for qid in sorted(qrels)]
    svc = Service(Settings.from_env(store=stores[0]), writer=False)
    old_cov, new_cov, min_matches = _old_coverage(lexical), lexical.coverage, maxscore.MIN_MATCHES
    out: dict[str, Any] = {"queries": len(queries)}
    try:
        for stages in (["lexical", "semantic"], ["lexical"]):
            runs: dict[str, dict[str, list[str]]] = {"before": {}, "maxscore": {}, "now": {}}
            same = {"maxscore": 0, "now": 0}
            for qid, text in queries:
                got = {}
                for label in runs:
                    if label == "before":
                        lexical.coverage, maxscore.ENABLED, impact.ENABLED = old_cov, False, False
                    else:
                        maxscore.MIN_MATCHES = 0  # forced on every query, small as the store is
                        impact.ENABLED = label == "now"
                    try:
                        ans = svc.search(BEIR_WS, text, {"stages": stages, "limit": 10})
                    finally:
                        lexical.coverage, maxscore.ENABLED, maxscore.MIN_MATCHES = new_cov, True, min_matches
                        impact.ENABLED = True
                    got[label] = [(h["chunk_id"], h["score"]) for h in ans["hits"]]
                    runs[label][qid] = list(dict.fromkeys(path_doc(h["path"]) for h in ans["hits"]))
                for label in same:
                    same[label] += got["before"] == got[label]
            ndcg = {k: round(sum(ref_ndcg(r[q], qrels[q]) for q in r) / len(r), 4) for k, r in runs.items()}
            out["+".join(stages)] = {"same_hits": same, "ndcg@10": ndcg}
    finally:
        svc.close()
    return out


def render(res: dict[str, Any]) -> str:
    sizes = res["sizes"]
    L = [
        "# Lexical leg on sentence queries (issue 19)",
        "",
        f"Command: `{res['command']}` · commit `{res['commit']}` · machine: {json.dumps(res['machine'])}",
        "",
        "Whole SciFact claims (the relaxed OR query runs for nearly all), after a warm-up pass, every variant "
        "timed on each query in alternating order, in one process. ms, p50 / p95. *before* = the plain OR query "
        "and the coverage weight read from each word's whole doclist (main before issue 19); *MaxScore* = MaxScore "
        "over FTS5 (search/maxscore.py, main before the postings index); *now* = the postings index "
        "(search/impact.py) ranks the OR when its words are single tokens; *cold counts* = the word counts cache "
        "emptied before each query. The stores are copies of the cached speed stores with their postings built "
        "(`--prepare`).",
        "",
        "| | " + " | ".join(f"{r['chunks']:,} chunks" for r in sizes) + " |",
        "|---|" + "---|" * len(sizes),
    ]

    def row(label, key):
        L.append(
            f"| {label} | "
            + " | ".join(f"{r['timings'][key]['p50']:.2f} / {r['timings'][key]['p95']:.2f}" for r in sizes)
            + " |"
        )

    def ratio_row(label, key):
        L.append(
            f"| **ratio** {label}, p50 · p95 | "
            + " | ".join(f"**{r[key]['p50']}** · {r[key]['p95']}" for r in sizes)
            + " |"
        )

    row("raw FTS5 OR query (LIMIT 50)", "raw_fts5_or")
    row("MaxScore over FTS5, same top 50", "maxscore")
    row("**postings index (numpy bm25), same top 50**", "impact")
    ratio_row("postings / raw", "ratio_impact_raw")
    ratio_row("postings / MaxScore", "ratio_impact_maxscore")
    L.append(
        "| postings rows = raw rows (ids and order); scores equal to the bit | "
        + " | ".join(
            f"{r['impact_exact']['same_rows_and_order']}/{r['impact_exact']['answered']}; "
            f"{r['impact_exact']['bitwise_equal']}/{r['impact_exact']['answered']} "
            f"(max diff {r['impact_exact']['max_abs_score_diff']:.1g})"
            for r in sizes
        )
        + " |"
    )
    L.append(
        "| MaxScore rows = raw rows (ids and order) | "
        + " | ".join(
            f"{r['exact']['same_rows_and_order']}/{r['exact']['of']} (max score diff {r['exact']['max_abs_score_diff']:.1g})"
            for r in sizes
        )
        + " |"
    )
    row("leg `run_lexical`, before", "leg_before")
    row("leg `run_lexical`, MaxScore", "leg_maxscore")
    row("leg `run_lexical`, now", "leg")
    row("leg, now, cold word counts", "leg_cold_counts")
    ratio_row("leg now / before", "ratio_leg")
    row("hybrid `Service.search`, before", "hybrid_before")
    row("hybrid `Service.search`, MaxScore", "hybrid_maxscore")
    row("**hybrid `Service.search`, now**", "hybrid")
    ratio_row("hybrid now / MaxScore", "ratio_hybrid_maxscore")
    ratio_row("hybrid now / before", "ratio_hybrid")
    L += ["", "Targets (issue 19): hybrid p50 ≤ 15 ms at 100k chunks and ≤ 60 ms at 1M, p95 ≤ 3× p50."]
    for r in sizes:
        h = r["timings"]["hybrid"]
        goal = {100_000: 15.0, 1_000_000: 60.0}.get(r["chunks"])
        verdict = "" if goal is None else (" — **met**" if h["p50"] <= goal else f" — **missed** (target {goal:g} ms)")
        L.append(
            f"- {r['chunks']:,} chunks: hybrid p50 {h['p50']:.1f} ms in process{verdict}; p95/p50 "
            f"{h['p95'] / h['p50']:.2f} ({'within' if h['p95'] <= 3 * h['p50'] else 'above'} 3×)."
        )
    L += [
        "",
        "The postings index (store/postings.py), built from scratch on each copy (`--prepare`, "
        "postings.build_all: the same slices a daemon builds after its index jobs):",
        "",
    ]
    for r in sizes:
        p = r.get("postings")
        if p:
            L.append(
                f"- {r['chunks']:,} chunks: built in {p['build_seconds']} s; {p['postings_rows']:,} segment rows, "
                f"{p['postings_bytes'] / 2**20:.0f} MB of records, {p['on_disk_mb']} MB on disk with the delta "
                f"and indexes (the store: {p['store_mb']} MB)."
            )
    for r in sizes:
        d = r.get("daemon")
        if d and d.get("available"):
            L.append(
                f"- {r['chunks']:,} chunks, through the daemon's socket: hybrid claims p50 "
                f"{d['hybrid_claims']['p50']:.1f} ms (p95 {d['hybrid_claims']['p95']:.1f}), lexical claims p50 "
                f"{d['lexical_claims']['p50']:.1f} ms; RSS warm {d.get('rss_warm_mb')} MB, after "
                f"{d.get('rss_after_mb')} MB; save → searchable {d.get('save_to_searchable_ms')} ms "
                f"(p50 {d.get('save_to_searchable_p50_ms')})."
            )
        elif d:
            L.append(f"- {r['chunks']:,} chunks: daemon not measured ({d.get('reason') or d.get('error')}).")
    L += [
        "",
        "How it works: the postings index keeps, per token and per segment of 32,768 chunk ids, a blob of "
        "(chunk id, the chunk's length, tf per column) sorted by id, beside FTS5 in the same SQLite file; new "
        "chunks go to a delta table and deleted ones to a dead list in the transaction that writes their FTS "
        "rows; an index job's end folds a large delta in and purges many dead. A query reads its words' blobs "
        "(a word's narrow segments joined as bytes, the dead removed by searchsorted, the delta inserted in place) "
        "and computes fts5_aux.c's bm25 operation for operation with FTS5's own N, average length and per-word "
        "row counts. The OR's top k is MaxScore term at a time: the rarest words are added into partial scores "
        "by row id until the bounds of the rest sum below the k-th partial score; the rest are only looked up "
        "(searchsorted) for the candidates whose partial score plus the rest's bounds still reach it, the floor "
        "rising and the candidates thinning word by word; the survivors are scored again in phrase order, so the "
        "scores are FTS5's to the bit. The strict AND that runs first is proved empty from the postings (rarest "
        "token first; once few common ids are left, a word is read only in the segments holding them), or ranked "
        "from them when every word is one token; a search reads each word once for the AND, the OR and the "
        "coverage weight. Phrases, prefixes and CJK bigram phrases keep the FTS5 path (MaxScore over FTS5).",
    ]
    sf = res.get("scifact")
    if sf:
        L += [
            "",
            f"SciFact test claims ({sf['queries']}), the product's answers (limit 10) with the leg as it was, with "
            "MaxScore over FTS5 forced on every query, and as it is (the postings index where it answers):",
            "",
        ]
        for k, v in sf.items():
            if k != "queries":
                same = v["same_hits"]
                L.append(
                    f"- {k}: identical hits (ids and scores) to before for {same['maxscore']}/{sf['queries']} "
                    f"claims with MaxScore and {same['now']}/{sf['queries']} now; nDCG@10 before "
                    f"{v['ndcg@10']['before']}, MaxScore {v['ndcg@10']['maxscore']}, now {v['ndcg@10']['now']}"
                )
    return "\n".join(L) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.lexical_speed", description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA / "scifact")
    ap.add_argument("--cache", type=Path, default=None)
    ap.add_argument("--no-scifact", action="store_true", help="skip the SciFact answers check")
    ap.add_argument(
        "--prepare",
        action="store_true",
        help="copy each size's cached store and corpus into --copies, build its postings (timed), and stop",
    )
    ap.add_argument(
        "--copies",
        type=Path,
        default=None,
        help="measure the prepared copies in this folder (with postings) instead of the cached stores",
    )
    ap.add_argument(
        "--daemon",
        action="store_true",
        help="also run a daemon on each copy: socket hybrid claims, "
        "RSS, save → searchable (needs --copies: the saves write into the copied corpus)",
    )
    ap.add_argument("--out", default=str(RESULTS / "lexical_speed.md"))
    ap.add_argument("--json", default=str(RESULTS / "lexical_speed.json"))
    args = ap.parse_args(argv)
    cache = args.cache or cache_root()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    if args.prepare:
        if args.copies is None:
            ap.error("--prepare needs --copies DIR")
        for size in sizes:
            prepare(size, cache, args.copies)
        return 0
    out: list[dict[str, Any]] = []
    for size in sizes:
        store = (
            find_store(size, cache) if args.copies is None else find_store(size, args.copies / f"speed-{size}", "store")
        )
        if store is None:
            print(
                f"no complete speed store of {size} chunks in {cache}/stores (python -m bench.speed --build-only)",
                file=sys.stderr,
            )
            continue
        t0 = time.monotonic()
        r = measure(size, store, args.data, args.queries)
        meta = json.loads((store.parent / "bench-meta.json").read_text())
        r["postings"] = meta.get("postings")
        if args.daemon and args.copies is not None:
            from .speed import measure_daemon

            r["daemon"] = measure_daemon(store, query_sets(args.data, args.queries), size, meta)
        out.append(r)
        print(f"{size}: {time.monotonic() - t0:.0f} s", file=sys.stderr)
    scifact = None if args.no_scifact else scifact_check(args.data, cache, args.copies)
    res = {
        "scifact": scifact,
        "command": command_line(),
        "commit": git_commit(),
        "machine": machine_note(),
        "sizes": out,
    }
    Path(args.json).write_text(json.dumps(res, indent=1))
    Path(args.out).write_text(render(res))
    print(render(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
