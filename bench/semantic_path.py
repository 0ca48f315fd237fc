"""The semantic leg's vector search on a speed store's real index: per phase, against a
baseline commit's code on the same arrays, and beside a thread that holds the GIL.

    python -m bench.semantic_path --dump /tmp/x/store100k --arrays /tmp/x/v100k   # once: the index as the product loads it
    python -m bench.semantic_path --arrays /tmp/x/v100k --baseline main           # phases, now vs main, recall, GIL

`--dump` opens a COPY of a speed store (bench/speed.py; never the cached one in place)
read-only, loads its workspace's vectors through the product's VectorCache and writes
ids, float16 vectors and column-major code words as .npy, with the query vectors of
bench.speed's claims and keywords (loading 1M rows from SQLite takes minutes; the .npy
files load in seconds). The rest times `VectorIndex.search` (top 51: the hybrid's
semantic depth) with thread CPU time, interleaving this code and the baseline's query
by query, compares their answers and measures each one's recall@51 against the exact
scan of the same index.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from .common import DEFAULT_DATA
from .profile_search import baseline_package, open_service
from .speed import WORKSPACE, query_sets

TOP = 51


def dump(store: Path, out: Path, data: Path, n: int) -> None:
    svc = open_service("autodoc", store)
    try:
        prov = svc.providers.get({"provider": "onnx"})
        db = svc.store.reader()
        t0 = time.perf_counter()
        with db:
            ws_id = db.execute("SELECT id FROM workspaces WHERE name=?", (WORKSPACE,)).fetchone()[0]
            index = svc.vectors.merged(db, ws_id, prov.fingerprint, prov.dim)
        out.mkdir(parents=True, exist_ok=True)
        np.save(out / "ids.npy", index.ids)
        np.save(out / "vecs.npy", index.vecs)
        np.save(out / "words.npy", index._words)
        sets = query_sets(data, n)
        for name in ("claims", "keywords"):
            np.save(out / f"q_{name}.npy", np.stack([prov.embed_query(q) for q in sets[name]]))
        print(f"{len(index)} rows loaded in {time.perf_counter() - t0:.1f} s -> {out}")
    finally:
        svc.close()


def phases(V, index, queries: np.ndarray) -> dict[str, float]:
    """Thread CPU p50 (ms) of each step of the default prefilter, as VectorIndex.search runs them."""
    t: dict[str, list[float]] = {}

    def timed(name, fn):
        c = time.thread_time()
        r = fn()
        t.setdefault(name, []).append(time.thread_time() - c)
        return r

    n, nbytes = len(index), (index.dim + 7) // 8
    for q in queries:
        q = q / np.linalg.norm(q)
        qwords = V._words_of(np.packbits(q > 0)[None, :])[:, 0]
        dist = timed("hamming", lambda: V.hamming_distances(index._words, qwords))
        k = max(index.coarse_min, math.ceil(index.coarse_fraction * n))
        rows = timed("coarse cut", lambda: V._closest_codes(dist, k))
        lut = V.asym_lut(q, nbytes)
        scores = timed("asymmetric", lambda: V.asym_scores_rows(lut, index._words, rows))
        short = rows[V._smallest(-scores, max(index.shortlist_min, index.shortlist_factor * TOP))]
        short.sort()
        cos = timed("float16 rescoring", lambda: index._dot_half(short, q))
        timed("top", lambda: index._top(short, cos, TOP))
        timed("search (all)", lambda: index.search(q, top=TOP))
    return {k: round(float(np.median(v)) * 1000, 3) for k, v in t.items()}


def python_thread(ms: float) -> threading.Thread:
    """A thread running pure Python for `ms` (it gives the GIL up only when the interpreter makes it)."""

    def work():
        end = time.perf_counter() + ms / 1000
        x = 0
        while time.perf_counter() < end:
            for i in range(200):
                x += i

    th = threading.Thread(target=work)
    th.start()
    return th


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arrays", type=Path, required=True, help="the folder of .npy files (--dump writes it)")
    ap.add_argument("--dump", type=Path, metavar="STORE", help="first write --arrays from a copy of a speed store")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA / "scifact")
    ap.add_argument("-n", type=int, default=200, help="queries per set")
    ap.add_argument("--baseline", metavar="COMMIT", help="compare with this commit's VectorIndex")
    ap.add_argument("--gil-ms", type=float, default=80.0, help="the pure-Python thread's run beside a search")
    args = ap.parse_args(argv)
    if args.dump:
        dump(args.dump, args.arrays, args.data, args.n)
    d = args.arrays
    ids, vecs, words = np.load(d / "ids.npy"), np.load(d / "vecs.npy"), np.load(d / "words.npy")
    queries = np.concatenate([np.load(d / "q_claims.npy")[: args.n], np.load(d / "q_keywords.npy")[: args.n]])
    from autodoc.search import vectors as V

    tmp = Path(tempfile.mkdtemp(prefix="semantic-path-"))
    try:
        impls = {"now": V}
        if args.baseline:
            pkg = baseline_package(args.baseline, tmp)
            impls["base"] = __import__(f"{pkg}.search.vectors", fromlist=["VectorIndex"])
        indexes = {k: m.VectorIndex(ids, vecs, words=words) for k, m in impls.items()}  # the arrays are shared
        now = indexes["now"]
        out: dict = {"rows": len(now), "queries": len(queries), "phases_now_ms": phases(V, now, queries[:100])}
        cpu: dict[str, list[float]] = {k: [] for k in indexes}
        recall: dict[str, list[float]] = {k: [] for k in indexes}
        same = 0
        for i, q in enumerate(queries):
            got = {}
            for k in list(indexes) if i % 2 == 0 else list(indexes)[::-1]:
                c = time.thread_time()
                got[k] = indexes[k].search(q, top=TOP)
                cpu[k].append(time.thread_time() - c)
            exact = {j for j, _ in now.search(q, top=TOP, exact=True)}
            for k, hits in got.items():
                recall[k].append(len(exact & {j for j, _ in hits}) / TOP)
            same += len({json.dumps(h) for h in got.values()}) == 1
        for k in indexes:
            out[k] = {
                "cpu_p50_ms": round(float(np.median(cpu[k])) * 1000, 3),
                "recall@51": round(float(np.mean(recall[k])), 5),
                "recall_min": round(float(np.min(recall[k])), 3),
            }
        if args.baseline:
            out["identical_answers"] = f"{same}/{len(queries)}"
        gil: dict[str, list[float]] = {"alone": [], "beside a Python thread": []}
        for q in queries[:40]:
            for mode in gil:
                th = python_thread(args.gil_ms) if mode != "alone" else None
                t0 = time.perf_counter()
                now.search(q, top=TOP)
                gil[mode].append(time.perf_counter() - t0)
                if th:
                    th.join()
        out["gil_wall_p50_ms"] = {k: round(float(np.median(v)) * 1000, 2) for k, v in gil.items()}
        print(json.dumps(out, indent=1))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
