"""What ordering equal scores by content costs a search (search/ties.py, issue 16).

Opens a speed store read-only (bench/speed.py builds them; this never writes one),
runs SciFact claims and keyword queries as lexical and hybrid searches through
Service.search, and times the tie step inside each (every call into search/ties.py,
its key lookups included) against the whole search, per query.

    python -m bench.ties_cost --size 100000 --queries 200
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import DEFAULT_DATA, RESULTS, cache_root, git_commit, machine_note, replace_section, summary_ms
from bench.speed import WORKSPACE, query_sets

REPORT = RESULTS / "reliability.md"


def find_store(size: int) -> Path:
    for meta in sorted((cache_root() / "stores").glob(f"speed-{size}-*/bench-meta.json")):
        if json.loads(meta.read_text()).get("complete"):
            return meta.parent / "autodoc.db"
    raise SystemExit(f"no complete speed store of {size} chunks under {cache_root() / 'stores'}")


def measure(store: Path, queries: dict[str, list[str]]) -> dict[str, Any]:
    from autodoc.config import Settings
    from autodoc.search import engine, ties
    from autodoc.service import Service

    spent = [0.0]
    calls = {"lookups": 0, "read": False}

    def timed(fn):
        def wrapper(*a, **kw):
            t0 = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                spent[0] += time.perf_counter() - t0

        return wrapper

    class CountedKeys(ties.TieKeys):
        def need(self, ids):
            before = self.queries
            ids = list(ids)
            super().need(ids)
            if self.queries > before:
                calls["lookups"] += 1
                calls["read"] = True

    real = {n: getattr(ties, n) for n in ("order_legs", "order_fused", "ordered_scores")}
    engine.ties = type(sys)("timed_ties")  # the engine's module reference, with every step timed
    for n, fn in real.items():
        setattr(engine.ties, n, timed(fn))
    engine.ties.TieKeys = CountedKeys
    svc = Service(Settings.from_env(store=store), writer=False)
    out: dict[str, Any] = {}
    try:
        for stages in (["lexical"], ["lexical", "semantic"]):
            for kind, qs in queries.items():
                for q in qs[:20]:  # warm: the vector cache, the model, the page cache
                    svc.search(WORKSPACE, q, {"stages": stages, "limit": 10})
                total, tie, reading = [], [], 0
                calls.update(lookups=0)
                for q in qs:
                    spent[0], calls["read"] = 0.0, False
                    t0 = time.perf_counter()
                    svc.search(WORKSPACE, q, {"stages": stages, "limit": 10})
                    total.append(time.perf_counter() - t0)
                    tie.append(spent[0])
                    reading += calls["read"]
                name = f"{'+'.join(stages)} {kind}"
                s, t = summary_ms(total), summary_ms(tie)
                out[name] = {
                    "search_ms": s,
                    "ties_ms": t,
                    "lookups": calls["lookups"],
                    "reading": reading,
                    "queries": len(qs),
                    "share_of_mean": round(sum(tie) / sum(total), 4),
                }
    finally:
        svc.close()
        for n, fn in real.items():
            setattr(ties, n, fn)
        engine.ties = ties
    return out


def report(res: dict[str, Any], args: argparse.Namespace, store: Path) -> str:
    m = machine_note()
    lines = [
        "## What content-ordered ties cost",
        "",
        f"`python -m bench.ties_cost --size {args.size} --queries {args.queries}` (bench/ties_cost.py): "
        f"Service.search on the read-only speed store of {args.size:,} chunks ({store.parent.name}), "
        "limit 10; the tie step is every call into search/ties.py (finding runs of equal scores in each leg, "
        "the fused list and the ranker's order, and sorting them). Its keys (path, ordinal) come with the "
        "candidates query the engine ran before (one more column), so the step reads nothing itself.",
        "",
        "| searches | queries | search p50 ms | tie step p50 ms | tie step p95 ms | tie step mean / search mean "
        "| searches with a tie |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, r in res.items():
        lines.append(
            f"| {name} | {r['queries']} | {r['search_ms']['p50']} | {r['ties_ms']['p50']} | "
            f"{r['ties_ms']['p95']} | {r['share_of_mean']:.2%} | {r['reading']} |"
        )
    lines += [
        "",
        f"Run on {time.strftime('%Y-%m-%d')} at {git_commit()} with Python {m['python']}, "
        f"{m['nproc']} cores (load {m['load'][0]}), shared.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=100000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA / "scifact")
    ap.add_argument("--report", type=Path, default=REPORT)
    args = ap.parse_args(argv)
    store = find_store(args.size)
    res = measure(store, query_sets(args.data, args.queries))
    text = report(res, args, store)
    replace_section(args.report, "bench.ties_cost", text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
