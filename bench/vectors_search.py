"""Scratch measurement of autodoc.search.vectors: prefilter recall@top against
exact cosine, and per-query latency, on real SciFact embeddings and on
synthetic-but-realistic sets built from them (mixtures of real vectors + noise).

    python -m bench.vectors_embed cache --n 2000       # once (~3 min)
    python -m bench.vectors_search recall-real [--queries 300] [--top 50]
    python -m bench.vectors_search recall [--sizes 100000,1000000] [--noise 0.5]
    python -m bench.vectors_search speed --sizes 10000,30000,100000,300000,1000000
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from autodoc.search.vectors import VectorIndex

CACHE = Path("/tmp/autodoc_vecbench")
QUERIES = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "scifact" / "queries.jsonl"


def load_real(n: int = 2000) -> tuple[np.ndarray, np.ndarray]:
    z = np.load(CACHE / f"scifact_{n}.npz")
    return z["ids"], z["vecs"]


def load_queries() -> np.ndarray:
    path = CACHE / "scifact_queries.npy"
    if path.exists():
        return np.load(path)
    from autodoc.embed.onnx import OnnxProvider

    texts = [json.loads(line)["text"] for line in open(QUERIES.resolve())]
    q = OnnxProvider().embed(texts)
    np.save(path, q)
    return q


def synthetic(real: np.ndarray, n: int, seed: int = 0, noise: float = 0.5) -> np.ndarray:
    """n vectors, each normalise(0.7·a + 0.3·b + noise) for random real a, b;
    built in blocks to bound memory."""
    rng = np.random.default_rng(seed)
    d = real.shape[1]
    out = np.empty((n, d), dtype=np.float32)
    sigma = noise / np.sqrt(d)
    for s in range(0, n, 100_000):
        e = min(n, s + 100_000)
        a = real[rng.integers(0, len(real), e - s)]
        b = real[rng.integers(0, len(real), e - s)]
        x = 0.7 * a + 0.3 * b + rng.standard_normal((e - s, d), dtype=np.float32) * sigma
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        out[s:e] = x
    return out


def recall_at(ix: VectorIndex, qs: np.ndarray, top: int, truth: list[set[int]] | None = None) -> float:
    hits = 0
    for j, q in enumerate(qs):
        exact = truth[j] if truth is not None else {i for i, _ in ix.search(q, top=top, exact=True)}
        approx = {i for i, _ in ix.search(q, top=top, exact=False)}
        hits += len(exact & approx)
    return hits / (top * len(qs))


CONFIGS = [
    # (label, index options)
    ("hamming K=5000", dict(prefilter="hamming", shortlist_min=5000, shortlist_factor=0)),
    ("hamming K=20000", dict(prefilter="hamming", shortlist_min=20000, shortlist_factor=0)),
    ("asym K=2000", dict(prefilter="asym", shortlist_min=2000, shortlist_factor=0)),
    ("asym K=5000", dict(prefilter="asym", shortlist_min=5000, shortlist_factor=0)),
    ("ham 5%>=20k + asym K=2000", dict(prefilter="hamming+asym", shortlist_min=2000, shortlist_factor=0)),
    ("ham 5%>=20k + asym K=3000", dict(prefilter="hamming+asym", shortlist_min=3000, shortlist_factor=0)),
    ("ham 5%>=20k + asym K=4000", dict(prefilter="hamming+asym", shortlist_min=4000, shortlist_factor=0)),
    ("ham 5%>=20k + asym K=5000", dict(prefilter="hamming+asym", shortlist_min=5000, shortlist_factor=0)),
    ("defaults (ham 5%>=20k + asym K=max(4000,50·top))", dict()),
]


def cmd_recall(args) -> None:
    ids, vecs = load_real()
    qs = load_queries()
    print(f"real SciFact: {len(ids)} abstracts; queries: first {args.queries} SciFact claims; recall@{args.top}")
    sets = [("scifact-2000", ids, vecs)]
    for n in [int(x) for x in args.sizes.split(",")]:
        sets.append((f"synthetic-{n}", np.arange(n), synthetic(vecs, n, noise=args.noise)))
    q = qs[: args.queries]
    for name, i, v in sets:
        truth = [{int(x) for x in i[np.argpartition(-(v @ qq), args.top - 1)[: args.top]]} for qq in q]
        for label, opts in CONFIGS:
            if opts.get("shortlist_min", 2000) >= len(i):
                continue
            ix = VectorIndex(i, v, **opts)
            ts = []
            for qq in q[:10]:
                t = time.perf_counter()
                ix.search(qq, top=args.top, exact=False)
                ts.append(time.perf_counter() - t)
            print(
                f"{name:18s} {label:38s} recall {recall_at(ix, q, args.top, truth):.3f}   "
                f"median {1000 * float(np.median(ts)):.1f} ms",
                flush=True,
            )
        del v


def cmd_recall_real(args) -> None:
    """Real SciFact vectors only. The corpus is small (2,000), so shortlists are
    scaled down to the same fractions of n as at 100k (K=2000 -> 2%)."""
    ids, vecs = load_real()
    q = load_queries()[: args.queries]
    n = len(ids)
    truth = [{int(x) for x in ids[np.argpartition(-(vecs @ qq), args.top - 1)[: args.top]]} for qq in q]
    configs = [
        (f"hamming K={k}", dict(prefilter="hamming", shortlist_min=k, shortlist_factor=0)) for k in (100, 200, 500)
    ]
    configs += [(f"asym K={k}", dict(prefilter="asym", shortlist_min=k, shortlist_factor=0)) for k in (100, 200, 300)]
    configs += [
        (
            f"ham {c} + asym K={k}",
            dict(prefilter="hamming+asym", coarse_min=c, coarse_fraction=0, shortlist_min=k, shortlist_factor=0),
        )
        for c, k in ((400, 100), (400, 200), (1000, 200))
    ]
    print(f"real SciFact {n} abstracts, {len(q)} SciFact claims, recall@{args.top} vs exact cosine")
    for label, opts in configs:
        ix = VectorIndex(ids, vecs, exact_below=0, **opts)
        print(f"  {label:28s} {recall_at(ix, q, args.top, truth):.3f}")


def timeit(fn, reps: int) -> tuple[float, float]:
    """(min, median) seconds: the machine is shared, min is the cleanest figure."""
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return float(np.min(ts)), float(np.median(ts))


def cmd_speed(args) -> None:
    _, vecs = load_real()
    qs = load_queries()[: args.queries]
    for n in [int(x) for x in args.sizes.split(",")]:
        v = synthetic(vecs, n)
        ids = np.arange(n, dtype=np.int64)
        res = {}
        for pf in ("hamming+asym", "hamming", "asym"):
            ix = VectorIndex(ids, v, prefilter=pf)
            t = time.perf_counter()
            ix.search(qs[0], top=50, exact=False)
            build = time.perf_counter() - t
            qi = iter(range(10**9))
            res[pf] = timeit(lambda: ix.search(qs[next(qi) % len(qs)], top=50, exact=False), args.reps)
            res[pf + "-first"] = (build, build)
        ix = VectorIndex(ids, v)
        qi = iter(range(10**9))
        res["exact"] = timeit(lambda: ix.search(qs[next(qi) % len(qs)], top=50, exact=True), args.reps)
        mask = np.zeros(n, bool)
        mask[::10] = True
        res["default-allowed10%"] = timeit(lambda: ix.search(qs[1], top=50, allowed=mask, exact=False), args.reps)
        res["exact-allowed10%"] = timeit(lambda: ix.search(qs[1], top=50, allowed=mask, exact=True), args.reps)
        print(
            f"n={n:>8d} vecs {v.nbytes / 2**20:.0f} MiB  "
            + "  ".join(f"{k} {1000 * t[0]:.1f}/{1000 * t[1]:.1f}" for k, t in res.items())
            + "  (ms min/median)",
            flush=True,
        )
        v = ix = None


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["recall", "recall-real", "speed"])
    ap.add_argument("--sizes", default="100000")
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--top", type=int, default=50)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--noise", type=float, default=0.5)
    a = ap.parse_args()
    {"recall": cmd_recall, "recall-real": cmd_recall_real, "speed": cmd_speed}[a.what](a)
