"""The before/after harness: one case run against the code of a git revision
(`--base REV`) and the working tree in the same run, interleaved or taking
turns so the machine's load weighs on both alike, every answer compared.

    python -m bench.compare pool --chunks 10000 --base REV      # two daemons under 8 clients (daemon_overhead.md)
    python -m bench.compare lexical --store STORE --base main   # the lexical leg's impact/postings (lexical_speed.md)
    python -m bench.compare search --store DIR --base REV       # Service.search in one process (keyword_path.md)
    python -m bench.compare vectors --arrays DIR --base REV     # VectorIndex.search per phase (semantic_path.md)
    python -m bench.compare digest                              # digests of every SciFact answer, to diff by hand
    python -m bench.compare --help

The base's code is exported from git (`git archive`) into a temporary folder
and loaded beside the tree's (a package of another name in this process, or
the PYTHONPATH of a daemon of its own). Each section below was a script of
its own; its docstring is kept as DOC_<CASE>.

Runs on: the benchmark's main thread (and the daemons it starts)."""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import importlib
import importlib.util
import io
import json
import math
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from .common import (
    DEFAULT_DATA,
    REPO,
    SCIFACT,
    WORKSPACE,
    Case,
    cache_root,
    command_line,
    git_commit,
    harness,
    interleaved,
    machine_note,
    query_sets,
    ratio,
    speed_store,
    start_daemon,
    stop_daemon,
    summary_ms,
)
from .concurrency import caught_up, cpu_s, run_clients
from .quality import WORKSPACE as BEIR_WORKSPACE
from .quality import build_store, load_collection

# ==== pool (formerly bench/pool_ab.py) ============================================================

DOC_POOL = """Two versions of the daemon side by side under 8 clients (issue 19): each arm is a
daemon on its own copy of one store, started from a git revision of the code (or the
working tree), and the arms take turns, a burst each, so the machine's load weighs on
both alike. bench/concurrency.py runs one daemon at a time, minutes apart; on this
noisy machine its 8 / 1 ratio swings by ±0.3 between runs of the same code, too much
to tell a 10 % change.

    python -m bench.compare pool --chunks 10000 --stages lexical --base 7156092   # before=7156092, now=.
    python -m bench.compare pool --chunks 100000 --stages lexical,semantic --rounds 6 --arm …

Each round, per arm: one client sends the query list, then 8 clients send it twice over
(split between them); the 8-client burst is also timed for the daemon's CPU (its readers
and helper included) and its involuntary context switches (a daemon preempted while it
has frames to handle). Medians over rounds. The stores are the speed benchmark's cached
ones (synthetic vectors, SciFact keyword queries, as bench/concurrency.py).
"""


def git_export(rev: str, into: Path, *paths: str) -> Path:
    """The files of git revision ``rev`` (every file, or these paths) extracted under ``into``:
    the base of every before/after case."""
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev, *paths], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def code_of(rev: str, into: Path) -> str | None:
    """PYTHONPATH for the daemon of git revision ``rev`` (None: this working tree)."""
    if rev == ".":
        return None
    return str(git_export(rev, into) / "daemon")


def involuntary(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("nonvoluntary_ctxt_switches"):
            return int(line.split(":")[1])
    return 0


def start(store: Path, work: Path, label: str, pythonpath: str | None) -> tuple[Any, Path]:
    """A daemon on a private copy of ``store``: one writer per store file."""
    copy = work / label / "store"
    copy.mkdir(parents=True)
    for f in store.parent.glob(store.name + "*"):
        if not f.name.endswith(".lease"):
            shutil.copy2(f, copy / f.name)
    saved = os.environ.get("PYTHONPATH")
    if pythonpath:
        os.environ["PYTHONPATH"] = pythonpath  # the daemon and its readers import that code
    try:
        sock = work / label / "d.sock"
        p, why = start_daemon(copy / store.name, sock)
    finally:
        os.environ.pop("PYTHONPATH", None)
        if saved is not None:
            os.environ["PYTHONPATH"] = saved
    if p is None:
        raise SystemExit(f"{label}: {why}")
    caught_up(sock.parent / "daemon.log")
    return p, sock


def main_pool(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.compare pool", description=DOC_POOL.splitlines()[0])
    ap.add_argument("--chunks", type=int, default=10000)
    ap.add_argument("--stages", default="lexical", help="comma-separated: lexical or lexical,semantic")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument(
        "--arm",
        action="append",
        default=[],
        metavar="LABEL=REV",
        help="a git revision, or . for the working tree (repeatable)",
    )
    ap.add_argument("--base", metavar="REV", help="two arms: before=REV and now=. (the working tree)")
    a = ap.parse_args(argv)
    if a.base:
        a.arm = [f"before={a.base}", "now=.", *a.arm]
    if not a.arm:
        ap.error("give --base REV or --arm LABEL=REV")
    stages = a.stages.split(",")
    queries = query_sets(SCIFACT, a.queries)["keywords"]
    store = speed_store(a.chunks)
    arms = [tuple(x.split("=", 1)) for x in a.arm]
    work = Path(tempfile.mkdtemp(prefix="pool-ab-"))
    daemons: list[tuple[str, Any, Path]] = []
    res: dict[str, dict[str, list[float]]] = {}
    try:
        for label, rev in arms:
            p, sock = start(store, work, label, code_of(rev, work / label / "code"))
            daemons.append((label, p, sock))
            res[label] = {"one": [], "eight": [], "cpu": [], "switches": []}
            # warm-up, as bench/concurrency.py: every process that may run a query has its vector
            run_clients(sock, queries, 1, stages)
            run_clients(sock, queries, 8, stages)
            run_clients(sock, queries, 8, stages, whole=True)
        for r in range(a.rounds):
            for label, p, sock in daemons if r % 2 == 0 else daemons[::-1]:
                res[label]["one"].append(run_clients(sock, queries, 1, stages)["rps"])
                c0, s0 = cpu_s(p.pid), involuntary(p.pid)
                row = run_clients(sock, queries * 2, 8, stages)
                c1, s1 = cpu_s(p.pid), involuntary(p.pid)
                res[label]["eight"].append(row["rps"])
                res[label]["cpu"].append((sum(c1.values()) - sum(c0.values())) * 1000 / row["requests"])
                res[label]["switches"].append((s1 - s0) / row["requests"])
    finally:
        for _, p, _ in daemons:
            stop_daemon(p)
        shutil.rmtree(work, ignore_errors=True)
    med = statistics.median
    print(
        f"- Command: `{command_line()}` · commit `{git_commit()[:12]}` · "
        + ", ".join(f"{k} {v}" for k, v in machine_note().items())
    )
    print(f"- {a.chunks:,} chunks, stages {', '.join(stages)}, {a.rounds} rounds, medians\n")
    print(
        "| arm | 1 client req/s | 8 clients req/s | 8 / 1 (median of each round's) | CPU ms per request, "
        "8 clients | daemon's involuntary switches per request |"
    )
    print("|---|---|---|---|---|---|")
    for label, rev in arms:
        x = res[label]
        ratio = med([b / o for o, b in zip(x["one"], x["eight"])])
        print(
            f"| {label} (`{rev}`) | {med(x['one']):.1f} | {med(x['eight']):.1f} | **{ratio:.2f}×** | "
            f"{med(x['cpu']):.2f} | {med(x['switches']):.2f} |"
        )
    return 0


# ==== lexical (formerly bench/lexical_ab.py) ======================================================

DOC_LEXICAL = """The lexical leg of sentence queries (whole SciFact claims) with a git ref's
search/lexical/impact.py and store/lexical/postings.py (the "base", e.g. main) against the
working tree's, interleaved query by query in one process on one store: the
OR's ranking alone (top 50), the leg (`run_lexical`, weighed as in a hybrid
search) and the hybrid `Service.search` (lexical + semantic, query vectors
cached), with whether the base's and the tree's answers are equal (ranking to
the bit; the leg's hits and weights; the hybrid's hits and scores).

Usage: python -m bench.compare lexical --store /tmp/x/speed-1000000/store/autodoc.db [--ref main] [--queries 100]
(the store as bench/speed.py's copies: never a cached store, which a newer schema would migrate)

Runs on: the benchmark's main thread.
"""


def _base(ref: str, tmp: Path):
    """The ref's impact and postings modules, loaded beside the tree's (the base's reads its own postings)."""
    import autodoc.search.lexical.impact as tree

    def load(name: str, path: str):
        text = subprocess.run(["git", "show", f"{ref}:{path}"], capture_output=True, text=True, check=True).stdout
        f = tmp / (name.rsplit(".", 1)[1] + ".py")
        f.write_text(text)
        spec = importlib.util.spec_from_file_location(name, f)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        return mod

    # a ref since the lexical leg's move keeps them in search/lexical/ and store/lexical/
    moved = subprocess.run(["git", "cat-file", "-e", f"{ref}:daemon/autodoc/store/lexical/postings.py"]).returncode == 0
    sub = "lexical/" if moved else ""
    posts = load(f"autodoc.store.{sub.replace('/', '.')}postings_base", f"daemon/autodoc/store/{sub}postings.py")
    impact = load(f"autodoc.search.{sub.replace('/', '.')}impact_base", f"daemon/autodoc/search/{sub}impact.py")
    impact.postings = posts
    if not hasattr(impact, "postread"):
        impact.postread = posts
    impact.EMPTY = tree.EMPTY
    impact.one_search = getattr(impact, "one_search", tree.one_search)
    if not hasattr(impact, "all_ranker"):  # before: the AND only proved empty, else FTS5's
        impact.all_ranker = lambda db, ex, col: impact.EMPTY if impact.none_holds_all(db, ex) else None
    return impact


def main_lexical(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.compare lexical", description=DOC_LEXICAL.split("\n\n")[0])
    ap.add_argument("--store", type=Path, required=True)
    ap.add_argument("--base", "--ref", dest="ref", default="main", metavar="REV")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA / "scifact")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)

    from autodoc.config import Settings
    from autodoc.search.lexical import impact as tree
    from autodoc.search.lexical import leg as lexical
    from autodoc.search.lexical.fts import coverage_terms
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


# ==== search (formerly bench/profile_search.py) ===================================================

DOC_SEARCH = """Where an in-process search spends its time, and what a change did to it.

    python -m bench.compare search --store /tmp/x/store100k              # p50/p95 per set and mode
    python -m bench.compare search --store /tmp/x/store100k --profile 25 # + cProfile, per search
    python -m bench.compare search --store /tmp/x/store100k --baseline 076531f
    python -m bench.compare search --store /tmp/x/store1m --arrays /tmp/x/v1m --baseline main

`--store` is a folder holding a COPY of a speed benchmark store (bench/speed.py; the
cached ones are never opened in place) whose workspace `speed` points at a copy of its
corpus. Query sets are bench.speed's (keywords: two content words of a SciFact claim;
claims: whole claims). `--baseline COMMIT` exports that commit's daemon/autodoc as a
package of another name into a temporary folder, opens a second Service of it on the
same store, and times both interleaved query by query in this one process; every
answer of both is compared (same hits in the same order, scores to 1e-9, the same
`answerable`), and any difference is printed and makes the exit status 1.
"""

MODES = {
    "hybrid": {"stages": ["lexical", "semantic"], "limit": 10},
    "lexical": {"stages": ["lexical"], "limit": 10},
}
SORT = "cumulative"


def baseline_package(commit: str, into: Path) -> str:
    """daemon/autodoc at `commit`, importable as autodoc_base (its imports are relative)."""
    git_export(commit, into, "daemon/autodoc")
    shutil.move(str(into / "daemon" / "autodoc"), str(into / "autodoc_base"))
    sys.path.insert(0, str(into))
    return "autodoc_base"


def open_service(package: str, store: Path):
    settings = importlib.import_module(f"{package}.config").Settings
    service = importlib.import_module(f"{package}.service").Service
    return service(settings.from_env(store=store / "autodoc.db"), writer=False)


def _module(package: str, name: str, before: str):
    """package's module `name`, or `before` (its path in a revision before the move to search/semantic/)."""
    try:
        return importlib.import_module(f"{package}.{name}")
    except ModuleNotFoundError:
        return importlib.import_module(f"{package}.{before}")


def inject_vectors(package: str, svc, workspace: str, arrays: Path) -> None:
    """The workspace's vectors from the vectors case's .npy dump (--dump) of this store instead of
    its rows (minutes at 1M): each service's own VectorIndex, over shared arrays."""
    import numpy as np

    ids, vecs, words = (np.load(arrays / f"{n}.npy") for n in ("ids", "vecs", "words"))
    index_cls = _module(package, "search.semantic.vectors", "search.vectors").VectorIndex
    held = _module(package, "search.semantic.vector_cache", "search.vector_cache").WorkspaceVectors
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


def interleaved_cpu(queries: list[str], fns: dict[str, Callable[[str], Any]], rounds: int) -> dict[str, dict]:
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


def main_search(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.compare search",
        description=DOC_SEARCH,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--store", type=Path, required=True, help="a folder holding a copy of a speed store")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA / "scifact")
    ap.add_argument("-n", type=int, default=100, help="queries per set")
    ap.add_argument("--sets", default="keywords,claims")
    ap.add_argument("--modes", default="hybrid,lexical", help="hybrid, lexical, vectors (VectorIndex.search alone)")
    ap.add_argument("--rounds", type=int, default=1, help="timed passes over each set")
    ap.add_argument("--profile", type=int, default=0, metavar="N", help="print cProfile's top N per set and mode")
    ap.add_argument(
        "--base", "--baseline", dest="baseline", metavar="REV", help="time and compare against this revision's code"
    )
    ap.add_argument(
        "--workspace", default=WORKSPACE, help="the store's workspace (bench.quality's SciFact store: bench)"
    )
    ap.add_argument("--arrays", type=Path, help="the vectors from the vectors case's .npy dump (--dump) of this store")
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
                row = interleaved_cpu(queries, fns, rounds=args.rounds)
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


# ==== vectors (formerly bench/semantic_path.py) ===================================================

DOC_VECTORS = """The semantic leg's vector search on a speed store's real index: per phase, against a
baseline commit's code on the same arrays, and beside a thread that holds the GIL.

    python -m bench.compare vectors --dump /tmp/x/store100k --arrays /tmp/x/v100k   # once: the index as the product loads it
    python -m bench.compare vectors --arrays /tmp/x/v100k --baseline main           # phases, now vs main, recall, GIL

`--dump` opens a COPY of a speed store (bench/speed.py; never the cached one in place)
read-only, loads its workspace's vectors through the product's VectorCache and writes
ids, float16 vectors and column-major code words as .npy, with the query vectors of
bench.speed's claims and keywords (loading 1M rows from SQLite takes minutes; the .npy
files load in seconds). The rest times `VectorIndex.search` (top 51: the hybrid's
semantic depth) with thread CPU time, interleaving this code and the baseline's query
by query, compares their answers and measures each one's recall@51 against the exact
scan of the same index.
"""

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


def main_vectors(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.compare vectors",
        description=DOC_VECTORS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--arrays", type=Path, required=True, help="the folder of .npy files (--dump writes it)")
    ap.add_argument("--dump", type=Path, metavar="STORE", help="first write --arrays from a copy of a speed store")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA / "scifact")
    ap.add_argument("-n", type=int, default=200, help="queries per set")
    ap.add_argument(
        "--base", "--baseline", dest="baseline", metavar="REV", help="compare with this revision's VectorIndex"
    )
    ap.add_argument("--gil-ms", type=float, default=80.0, help="the pure-Python thread's run beside a search")
    args = ap.parse_args(argv)
    if args.dump:
        dump(args.dump, args.arrays, args.data, args.n)
    d = args.arrays
    ids, vecs, words = np.load(d / "ids.npy"), np.load(d / "vecs.npy"), np.load(d / "words.npy")
    queries = np.concatenate([np.load(d / "q_claims.npy")[: args.n], np.load(d / "q_keywords.npy")[: args.n]])
    from autodoc.search.semantic import vectors as V

    tmp = Path(tempfile.mkdtemp(prefix="semantic-path-"))
    try:
        impls = {"now": V}
        if args.baseline:
            pkg = baseline_package(args.baseline, tmp)
            impls["base"] = _module(pkg, "search.semantic.vectors", "search.vectors")
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


# ==== digest (formerly bench/answers_digest.py) ===================================================

DOC_DIGEST = """Answers as bytes: a digest of every SciFact test answer, to show that a
change which should not move any answer moved none.

    python -m bench.compare digest            # build (or reuse) the store, print the digests
    python -m bench.compare digest --no-build # search the cached store only (read-only)

Run it before and after a refactor (for the code before, put its `daemon/` on
PYTHONPATH): equal digests mean byte-identical answers for every query, in
each of the lexical, semantic and default hybrid configurations.
"""

MODES = {"lexical": {"stages": ["lexical"]}, "semantic": {"stages": ["semantic"]}, "hybrid": {}}


def main_digest(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.compare digest")
    ap.add_argument("--no-build", action="store_true", help="only search the cached store, read-only")
    ap.add_argument("--limit", type=int, default=100)
    args = ap.parse_args(argv)
    import autodoc
    from autodoc.config import Settings
    from autodoc.service import Service

    col = load_collection(DEFAULT_DATA / "scifact", splits=("test",))
    if args.no_build:
        stores = sorted((cache_root() / "stores").glob("scifact-*/autodoc.db"))
        if len(stores) != 1:
            print(f"need exactly one cached SciFact store, found {stores}", file=sys.stderr)
            return 2
        store = stores[0]
    else:
        store = build_store(col, quiet=True).store
    svc = Service(Settings.from_env(store=store), writer=False)
    try:
        print(f"autodoc from {autodoc.__file__}, store {store}")
        queries = sorted((qid, col.queries[qid]) for qid in col.qrels["test"])
        for mode, opts in MODES.items():
            h = hashlib.sha256()
            for _, text in queries:
                h.update(
                    json.dumps(
                        svc.search(BEIR_WORKSPACE, text, {"limit": args.limit, **opts}),
                        sort_keys=True,
                        ensure_ascii=False,
                    ).encode()
                )
            print(f"{mode:9} {len(queries)} answers sha256 {h.hexdigest()}")
    finally:
        svc.close()
    return 0


# ==== the harness ===================================================================================

CASES = [
    Case("pool", main_pool, DOC_POOL),
    Case("lexical", main_lexical, DOC_LEXICAL),
    Case("search", main_search, DOC_SEARCH),
    Case("vectors", main_vectors, DOC_VECTORS),
    Case("digest", main_digest, DOC_DIGEST),
]


def main(argv: list[str] | None = None) -> int:
    return harness("python -m bench.compare", __doc__ or "", CASES, argv)


if __name__ == "__main__":
    sys.exit(main())
