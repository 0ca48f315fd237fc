"""Where an in-process search spends its time, and what a change did to it.

    python -m bench.profile_search --store /tmp/x/store100k              # p50/p95 per set and mode
    python -m bench.profile_search --store /tmp/x/store100k --profile 25 # + cProfile, per search
    python -m bench.profile_search --store /tmp/x/store100k --baseline 076531f
    python -m bench.profile_search --store /tmp/x/store1m --arrays /tmp/x/v1m --baseline main

`--store` is a folder holding a COPY of a speed benchmark store (bench/speed.py; the
cached ones are never opened in place) whose workspace `speed` points at a copy of its
corpus. Query sets are bench.speed's (keywords: two content words of a SciFact claim;
claims: whole claims). `--baseline COMMIT` exports that commit's daemon/autodoc as a
package of another name into a temporary folder, opens a second Service of it on the
same store, and times both interleaved query by query in this one process; every
answer of both is compared (same hits in the same order, scores to 1e-9, the same
`answerable`), and any difference is printed and makes the exit status 1.
"""

from __future__ import annotations

import argparse
import cProfile
import importlib
import io
import json
import pstats
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .common import DEFAULT_DATA, summary_ms
from .speed import WORKSPACE, query_sets

MODES = {
    "hybrid": {"stages": ["lexical", "semantic"], "limit": 10},
    "lexical": {"stages": ["lexical"], "limit": 10},
}
SORT = "cumulative"
REPO = Path(__file__).resolve().parents[1]


def baseline_package(commit: str, into: Path) -> str:
    """daemon/autodoc at `commit`, importable as autodoc_base (its imports are relative)."""
    tar = subprocess.run(
        ["git", "-C", str(REPO), "archive", commit, "daemon/autodoc"], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=tar, check=True)
    shutil.move(str(into / "daemon" / "autodoc"), str(into / "autodoc_base"))
    sys.path.insert(0, str(into))
    return "autodoc_base"


def open_service(package: str, store: Path):
    settings = importlib.import_module(f"{package}.config").Settings
    service = importlib.import_module(f"{package}.service").Service
    return service(settings.from_env(store=store / "autodoc.db"), writer=False)


def inject_vectors(package: str, svc, workspace: str, arrays: Path) -> None:
    """The workspace's vectors from bench.semantic_path's .npy dump of this store instead of
    its rows (minutes at 1M): each service's own VectorIndex, over shared arrays."""
    import numpy as np

    ids, vecs, words = (np.load(arrays / f"{n}.npy") for n in ("ids", "vecs", "words"))
    index_cls = importlib.import_module(f"{package}.search.vectors").VectorIndex
    held = importlib.import_module(f"{package}.search.vector_cache").WorkspaceVectors
    prov = svc.providers.get({"provider": "onnx"})
    db = svc.store.reader()
    with db:
        ws_id = db.execute("SELECT id FROM workspaces WHERE name=?", (workspace,)).fetchone()[0]
    svc.vectors._by_key[(ws_id, prov.fingerprint)] = held(
        prov.fingerprint, index_cls(ids, vecs, words=words), index_cls.empty(prov.dim)
    )


def digest(answer: dict[str, Any]) -> dict[str, Any]:
    """What must not change: the hits, their order and scores, and the answer's verdicts."""
    return {
        "answerable": answer.get("answerable"),
        "lexical_match": answer.get("lexical_match"),
        "mode_used": answer.get("mode_used"),
        "hits": [
            (
                h["chunk_id"],
                h["score"],
                h["relevance"],
                h["scores"],
                h["ranks"],
                h["compatibility"],
                h["snippet"],
                h["via"],
            )
            for h in answer["hits"]
        ],
    }


def differs(a: Any, b: Any, tol: float = 1e-9) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return abs(a - b) > tol
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() != b.keys() or any(differs(a[k], b[k], tol) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) != len(b) or any(differs(x, y, tol) for x, y in zip(a, b))
    return a != b


def interleaved(queries: list[str], fns: dict[str, Callable[[str], Any]], rounds: int) -> dict[str, dict]:
    """bench.speed's interleaving (the order alternates query by query), timing each call's wall
    time and the process's CPU time (every thread: the semantic leg runs on the service's pool)."""
    names = list(fns)
    wall: dict[str, list[float]] = {k: [] for k in names}
    cpu: dict[str, list[float]] = {k: [] for k in names}
    for r in range(rounds):
        for i, q in enumerate(queries):
            for k in names if (i + r) % 2 == 0 else names[::-1]:
                c0, t0 = time.process_time(), time.perf_counter()
                fns[k](q)
                wall[k].append(time.perf_counter() - t0)
                cpu[k].append(time.process_time() - c0)
    return {
        k: {**summary_ms(wall[k]), "cpu_p50": summary_ms(cpu[k])["p50"], "cpu_mean": summary_ms(cpu[k])["mean"]}
        for k in names
    }


def vector_searches(services: dict[str, Any], workspace: str, queries: list[str]) -> dict[str, Callable[[str], Any]]:
    """Each service's own VectorIndex over the workspace's vectors, searched for a hybrid search's
    semantic depth (top 51) with the queries embedded once (as the provider's cache serves them)."""
    fns = {}
    qvec: dict[str, Any] = {}
    for k, svc in services.items():
        prov = svc.providers.get({"provider": "onnx"})
        db = svc.store.reader()
        with db:
            ws_id = db.execute("SELECT id FROM workspaces WHERE name=?", (workspace,)).fetchone()[0]
            index = svc.vectors.merged(db, ws_id, prov.fingerprint, prov.dim)
        if not qvec:
            qvec = {q: prov.embed_query(q) for q in queries}
        fns[k] = lambda q, index=index: index.search(qvec[q], top=51)
    return fns


def profile(fn: Callable[[str], Any], queries: list[str], top: int) -> str:
    prof = cProfile.Profile()
    prof.enable()
    for q in queries:
        fn(q)
    prof.disable()
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out)
    stats.sort_stats(SORT).print_stats(top)
    return f"(cumulative seconds over {len(queries)} searches)\n" + out.getvalue()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", type=Path, required=True, help="a folder holding a copy of a speed store")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA / "scifact")
    ap.add_argument("-n", type=int, default=100, help="queries per set")
    ap.add_argument("--sets", default="keywords,claims")
    ap.add_argument("--modes", default="hybrid,lexical", help="hybrid, lexical, vectors (VectorIndex.search alone)")
    ap.add_argument("--rounds", type=int, default=1, help="timed passes over each set")
    ap.add_argument("--profile", type=int, default=0, metavar="N", help="print cProfile's top N per set and mode")
    ap.add_argument("--baseline", metavar="COMMIT", help="time and compare against this commit's code")
    ap.add_argument(
        "--workspace", default=WORKSPACE, help="the store's workspace (bench.quality's SciFact store: bench)"
    )
    ap.add_argument("--arrays", type=Path, help="the vectors from bench.semantic_path's .npy dump of this store")
    args = ap.parse_args(argv)

    sets = query_sets(args.data, args.n)
    tmp = Path(tempfile.mkdtemp(prefix="profile-search-"))
    services = {"now": open_service("autodoc", args.store)}
    status = 0
    try:
        packages = {"now": "autodoc"}
        if args.baseline:
            packages["base"] = baseline_package(args.baseline, tmp)
            services["base"] = open_service(packages["base"], args.store)
        if args.arrays:
            for k, svc in services.items():
                inject_vectors(packages[k], svc, args.workspace, args.arrays)
        results: dict[str, Any] = {}
        for set_name in args.sets.split(","):
            queries = sets[set_name]
            for mode in args.modes.split(","):
                if mode == "vectors":
                    fns = vector_searches(services, args.workspace, queries)
                else:
                    fns = {
                        k: (lambda q, s=s, o=MODES[mode]: s.search(args.workspace, q, dict(o)))
                        for k, s in services.items()
                    }
                answers = {k: [f(q) for q in queries] for k, f in fns.items()}  # also the warm-up
                if "base" in answers:
                    pick = (lambda a: a) if mode == "vectors" else digest
                    bad = [q for q, a, b in zip(queries, answers["now"], answers["base"]) if differs(pick(a), pick(b))]
                    for q in bad[:5]:
                        print(f"DIFFERENT ANSWER ({set_name}, {mode}): {q!r}", file=sys.stderr)
                    if bad:
                        status = 1
                    results.setdefault("different_answers", {})[f"{set_name}/{mode}"] = len(bad)
                t0 = time.perf_counter()
                row = interleaved(queries, fns, rounds=args.rounds)
                results[f"{set_name}/{mode}"] = row
                print(
                    f"{set_name:9s} {mode:8s} "
                    + "  ".join(
                        f"{k}: p50 {r['p50']:.2f} p95 {r['p95']:.2f} cpu p50 {r['cpu_p50']:.2f} ms"
                        for k, r in row.items()
                    )
                    + f"  ({time.perf_counter() - t0:.1f} s)",
                    flush=True,
                )
                if args.profile:
                    print(profile(fns["now"], queries, args.profile))
        print(json.dumps(results, indent=1))
    finally:
        for s in services.values():
            s.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
