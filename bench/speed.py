"""Speed and memory at 10k and 100k chunks (1M with --sizes), product against
a raw baseline measured in the same process, interleaved query by query.

    python -m bench.speed                            # 10k + 100k, writes docs/benchmarks/speed.md
    python -m bench.speed --sizes 10000 --out -      # one size, print only

Corpora: Markdown files of English-like text, built once and cached outside
the repository: every file is a SciFact title as its `#` heading, an intro
paragraph and nine `##` sections, each a few sentences sampled from the
SciFact abstracts — ten chunks a file. They are indexed by the product
(`Service.index`).

Vectors: NOT embedded with the model (100k chunks would take hours here).
Each chunk gets normalise(0.7·a + 0.3·b + noise) for two real
all-MiniLM-L6-v2 vectors a, b drawn at random from the SciFact store the
quality benchmark builds (or from 512 SciFact abstracts embedded here when
that store is missing), noise N(0, 0.5²/384) per dimension. They are written
straight into the store's `vectors` table keyed as the product keys them
(workspace, model fingerprint, chunk text hash; float32 little-endian and
np.packbits sign codes), then `Service.embed_pending` finds nothing pending
and activates the model — so the product's own runtime loads and serves them.
Queries are real: SciFact claims embedded by the real model.

Every timing is after a warm-up pass over the same queries (query vectors are
then in the provider's LRU cache, as the targets assume), and product and
baseline alternate query by query so that machine noise hits both alike.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from .common import (
    DEFAULT_DATA,
    RESULTS,
    cache_root,
    command_line,
    git_commit,
    log,
    machine_note,
    speed_store,
    summary_ms,
)
from .vectors_search import synthetic

WORKSPACE = "speed"
SECTIONS = 9  # + the intro = 10 chunks a file
# The raw baseline: the product leg's own FTS5 statement, alone (no filter, no rows, no answer).
LEXICAL_SQL_RAW = (
    "SELECT rowid, bm25(chunks_fts, 3.0, 2.0, 2.0, 1.0) AS s FROM chunks_fts "
    "WHERE chunks_fts MATCH ? ORDER BY s LIMIT 50"
)
TARGETS = {
    "lexical_ratio": 1.3,
    "hybrid_p50_ms": {100_000: 10.0, 1_000_000: 60.0},  # keywords (wave 1)
    "hybrid_claims_p50_ms": {100_000: 15.0, 1_000_000: 60.0},  # sentences, issue 19; and p95 ≤ 3 × p50
    "hybrid_p95_over_p50": 3.0,
    "prefilter_recall": 0.98,
    "embed_ratio": 0.9,
    "save_to_searchable_ms": 300.0,
}

# -- corpus ------------------------------------------------------------------------

_SENT = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
_STOP = frozenset(
    "the a an of in and or to for with on by from at as is are was were be been that this these "
    "those which who whom its their our we it not no".split()
)


def sentence_pool(data: Path) -> tuple[list[str], list[str]]:
    sents: list[str] = []
    titles: list[str] = []
    with open(data / "corpus.jsonl", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            if d.get("title"):
                titles.append(" ".join(d["title"].split()))
            for s in _SENT.split(d.get("text") or ""):
                s = " ".join(s.split())
                if 30 <= len(s) <= 400:
                    sents.append(s)
    return sents, titles


def make_file(rng: random.Random, sents: list[str], titles: list[str]) -> str:
    out = [f"# {rng.choice(titles)}", "", " ".join(rng.choice(sents) for _ in range(rng.randint(1, 3))), ""]
    for _ in range(SECTIONS):
        words = [w.strip(".,;:()[]") for w in rng.choice(sents).split()]
        words = [w for w in words if w and w.lower() not in _STOP][: rng.randint(2, 5)]
        out += [f"## {' '.join(words).capitalize() or 'Notes'}", ""]
        out += [" ".join(rng.choice(sents) for _ in range(rng.randint(2, 5))), ""]
    return "\n".join(out)


def build_corpus(chunks: int, data: Path, cache: Path) -> Path:
    """cache/speed-corpus-<chunks>/ with chunks/10 files in folders of 1000."""
    folder = cache / f"speed-corpus-{chunks}"
    done = folder / ".complete"
    if done.exists():
        return folder
    if folder.exists():
        shutil.rmtree(folder)
    sents, titles = sentence_pool(data)
    rng = random.Random(chunks)
    files = max(1, chunks // (SECTIONS + 1))
    for i in range(files):
        sub = folder / f"d{i // 1000:04d}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"note-{i:07d}.md").write_text(make_file(rng, sents, titles), encoding="utf-8")
    done.write_text(json.dumps({"files": files, "built": time.time()}))
    return folder


# -- vectors -----------------------------------------------------------------------


def real_vectors(cache: Path, data: Path, fp: str, sample: int = 512, min_rows: int = 1000) -> tuple[np.ndarray, str]:
    """Real all-MiniLM-L6-v2 vectors: from the quality benchmark's SciFact store
    when there is one for this model, else 512 SciFact abstracts embedded now."""
    import apsw

    for db_path in sorted((cache / "stores").glob("scifact-*/autodoc.db")):
        try:
            db = apsw.Connection(str(db_path), flags=apsw.SQLITE_OPEN_READONLY)
            blobs = [r[0] for r in db.execute("SELECT f32 FROM vectors WHERE model_fp=?", (fp,))]
            db.close()
        except Exception:
            continue
        if len(blobs) >= min_rows:
            return np.frombuffer(b"".join(blobs), dtype="<f4").reshape(
                len(blobs), -1
            ).copy(), f"{len(blobs)} real SciFact chunk vectors from {db_path.parent.name}"
    path = cache / f"real-sample-{sample}-{fp[:12]}.npy"
    if not path.exists():
        from autodoc.embed.onnx import OnnxProvider

        texts = []
        with open(data / "corpus.jsonl", encoding="utf-8") as f:
            for line in f:
                d = json.loads(line)
                texts.append(f"{d['title']}\n{d['text']}")
                if len(texts) >= sample:
                    break
        np.save(path, OnnxProvider().embed(texts))
    v = np.load(path)
    return v, f"{len(v)} SciFact abstracts embedded for this benchmark (no SciFact store in the cache)"


# normalise(0.7·a + 0.3·b + noise) for random real vectors a, b: one recipe for every bench
synthetic_vectors = synthetic


def seed_vectors(store: Path, fp: str, real: np.ndarray, seed: int) -> int:
    """Write a synthetic vector for every chunk text hash lacking one (no Service
    may be open on the store). Returns how many were written."""
    import apsw

    from autodoc.search.vectors import sign_codes

    db = apsw.Connection(str(store))
    ws_id = db.execute("SELECT id FROM workspaces WHERE name=?", (WORKSPACE,)).fetchone()[0]
    hashes = [
        r[0]
        for r in db.execute(
            "SELECT c.text_hash FROM chunks c WHERE c.workspace_id=? AND NOT EXISTS (SELECT 1 FROM vectors v "
            "WHERE v.workspace_id=c.workspace_id AND v.model_fp=? AND v.text_hash=c.text_hash) "
            "GROUP BY c.text_hash ORDER BY MIN(c.id)",
            (ws_id, fp),
        )
    ]
    if hashes:
        vecs = np.ascontiguousarray(synthetic_vectors(real, len(hashes), seed), dtype="<f4")
        codes = sign_codes(vecs)
        with db:
            db.executemany(
                "INSERT OR REPLACE INTO vectors(workspace_id, model_fp, text_hash, f32, bits) VALUES (?,?,?,?,?)",
                ((ws_id, fp, h, vecs[i].tobytes(), codes[i].tobytes()) for i, h in enumerate(hashes)),
            )
    db.close()
    return len(hashes)


def build_store(
    chunks: int, data: Path, cache: Path, *, sample: int = 512, min_rows: int = 1000, quiet: bool = False
) -> dict[str, Any]:
    """Corpus + an indexed store with synthetic vectors, cached."""
    from autodoc.config import Settings
    from autodoc.embed.onnx import OnnxProvider
    from autodoc.service import Service

    corpus = build_corpus(chunks, data, cache)
    fp = OnnxProvider().fingerprint
    sdir = cache / "stores" / f"speed-{chunks}-{fp[:12]}"
    store = sdir / "autodoc.db"
    meta_path = sdir / "bench-meta.json"
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    if meta.get("complete"):
        return meta | {"store": str(store), "corpus": str(corpus)}
    sdir.mkdir(parents=True, exist_ok=True)
    svc = Service(Settings.from_env(store=store))
    try:
        if WORKSPACE not in svc.workspaces():
            svc.workspace_add(WORKSPACE, str(corpus), {"embedding": {"provider": "onnx"}})
        from .common import Progress

        t0 = time.monotonic()
        rep = svc.index(WORKSPACE, progress=None if quiet else Progress(f"index {chunks}", 30))
        took = time.monotonic() - t0
        if rep["added"]:
            meta["index_build"] = {
                "files": rep["added"],
                "chunks": rep["chunks"],
                "seconds": round(took, 1),
                "docs_per_s": round(rep["added"] / took, 1),
                "chunks_per_s": round(rep["chunks"] / took, 1),
            }
    finally:
        svc.close()
    real, source = real_vectors(cache, data, fp, sample, min_rows)
    t0 = time.monotonic()
    n = seed_vectors(store, fp, real, seed=chunks)
    meta["vectors"] = {"synthetic": n, "source": source, "seconds": round(time.monotonic() - t0, 1)}
    svc = Service(Settings.from_env(store=store))
    try:
        emb = svc.embed_pending(WORKSPACE)
        st = svc.workspace_status(WORKSPACE)
        if st["embedding"]["state"] != "ready":
            raise RuntimeError(f"vectors not active: {st['embedding']} {emb}")
        meta["chunks"] = st["chunks"]
        meta["files"] = st["files"]["indexed"]
    finally:
        svc.close()
    meta["complete"] = True
    meta["fingerprint"] = fp
    meta_path.write_text(json.dumps(meta, indent=1))
    return meta | {"store": str(store), "corpus": str(corpus)}


# -- queries -----------------------------------------------------------------------


def query_sets(data: Path, n: int) -> dict[str, list[str]]:
    claims = []
    with open(data / "queries.jsonl", encoding="utf-8") as f:
        for line in f:
            claims.append(json.loads(line)["text"])
    qrels = data / "qrels" / "test.tsv"
    if qrels.exists():
        {l.split("\t")[0] for l in qrels.read_text().splitlines()[1:]}
    rng = random.Random(7)
    pool = claims[:]
    rng.shuffle(pool)
    claims_n = pool[:n]
    short = []
    for c in pool[n:]:
        words = sorted({w.strip(".,;:()[]'\"").lower() for w in c.split()} - _STOP, key=lambda w: (-len(w), w))
        words = [w for w in words if w.isalpha()]
        if len(words) >= 2:
            short.append(" ".join(words[:2]))
        if len(short) >= n:
            break
    return {"keywords": short, "claims": claims_n}


# -- measuring ---------------------------------------------------------------------


def prefilter_kinds() -> list[str]:
    from autodoc.search import vectors

    return list(getattr(vectors, "PREFILTERS", ("asym", "hamming")))


def default_prefilter() -> str:
    import inspect

    from autodoc.search.vectors import VectorIndex

    return inspect.signature(VectorIndex.__init__).parameters["prefilter"].default


def interleaved(queries: list[str], fns: dict[str, Callable[[str], Any]], rounds: int = 1) -> dict[str, list[float]]:
    """Time every fn on every query, alternating the order per query."""
    names = list(fns)
    out: dict[str, list[float]] = {k: [] for k in names}
    for r in range(rounds):
        for i, q in enumerate(queries):
            order = names if (i + r) % 2 == 0 else names[::-1]
            for k in order:
                t0 = time.perf_counter()
                fns[k](q)
                out[k].append(time.perf_counter() - t0)
    return out


def ratio(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
    return {
        "p50": round(a["p50"] / b["p50"], 3) if b["p50"] else float("nan"),
        "p95": round(a["p95"] / b["p95"], 3) if b["p95"] else float("nan"),
    }


def rss_mb(pid: int) -> float | None:
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


class SocketClient:
    """A minimal synchronous newline-delimited JSON-RPC client (the least a
    client can add on top of the daemon)."""

    def __init__(self, path: Path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(str(path))
        self.f = self.sock.makefile("rb")
        self.id = 0

    def call(self, method: str, params: Any) -> Any:
        self.id += 1
        self.sock.sendall(
            json.dumps({"jsonrpc": "2.0", "id": self.id, "method": method, "params": params}).encode() + b"\n"
        )
        while True:
            line = self.f.readline()
            if not line:
                raise ConnectionError("daemon closed the connection")
            msg = json.loads(line)
            if msg.get("id") == self.id:
                if "error" in msg:
                    raise RuntimeError(msg["error"])
                return msg["result"]

    def close(self) -> None:
        try:
            self.f.close()
            self.sock.close()
        except OSError:
            pass


def start_daemon(store: Path, sock: Path, timeout: float = 120.0) -> tuple[subprocess.Popen | None, str]:
    exe = Path(sys.executable).with_name("autodoc")
    argv = [
        str(exe) if exe.exists() else sys.executable,
        *([] if exe.exists() else ["-m", "autodoc.cli"]),
        "--store",
        str(store),
        "serve",
        "--socket",
        str(sock),
    ]
    sock.parent.mkdir(parents=True, exist_ok=True)
    errlog = open(sock.parent / "daemon.log", "wb")
    try:
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errlog)
    except OSError as e:
        return None, f"could not start the daemon: {e}"
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if p.poll() is not None:
            return None, f"the daemon exited with {p.returncode}: " + (sock.parent / "daemon.log").read_text()[-400:]
        if sock.exists():
            try:
                c = SocketClient(sock)
            except OSError:
                time.sleep(0.1)
                continue
            try:
                c.call("server.info", {})
                return p, "ok"
            except RuntimeError as e:  # it answers, with an error: no point waiting
                stop_daemon(p)
                return None, f"the daemon answered server.info with an error: {e}"[:300]
            except Exception:
                pass
            finally:
                c.close()
        time.sleep(0.1)
    p.terminate()
    return None, "the daemon did not answer on its socket within the timeout"


def start_instrumented(chunks: int, module: str, flag: str, prefix: str) -> tuple[subprocess.Popen, Path, Path]:
    """A daemon on the cached store of this size, run as ``python -m <module> <flag> OUT --store …``
    so that the module can wrap the daemon's functions before it starts; (process, socket, OUT)."""
    store = speed_store(chunks)
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    out, sock = tmp / "out.json", tmp / "d.sock"
    popen = subprocess.Popen

    def wrapped(cmd, *pa, **pk):
        if "serve" in cmd:
            cmd = [sys.executable, "-m", module, flag, str(out), *cmd[cmd.index("--store") :]]
            pk.setdefault("cwd", str(Path(__file__).resolve().parents[1]))
        return popen(cmd, *pa, **pk)

    subprocess.Popen = wrapped
    try:
        p, why = start_daemon(store, sock)
    finally:
        subprocess.Popen = popen
    if p is None:
        raise SystemExit(why)
    return p, sock, out


def stop_daemon(p: subprocess.Popen) -> None:
    p.terminate()
    try:
        p.wait(10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def measure_size(
    chunks: int, meta: dict[str, Any], data: Path, nq: int, daemon: bool, fts_rounds: int = 2
) -> dict[str, Any]:
    from autodoc.config import Settings
    from autodoc.search.fts import build_match
    from autodoc.search.lexical import run_lexical
    from autodoc.search.query import parse_query, resolve_facets
    from autodoc.search.vectors import VectorIndex
    from autodoc.service import Service
    from autodoc.store.db import open_reader
    from autodoc.store.filters import build_filter

    store = Path(meta["store"])
    out: dict[str, Any] = {
        "chunks": meta.get("chunks"),
        "files": meta.get("files"),
        "index_build": meta.get("index_build"),
        "vectors": meta.get("vectors"),
    }
    qs = query_sets(data, nq)
    svc = Service(Settings.from_env(store=store), writer=False)
    raw = open_reader(store)
    # the leg gets a connection of its own: sharing one, whichever of the two ran second found
    # the pages the other had just read for the same query, a warm cache the product never has
    leg_db = open_reader(store)
    try:
        ws_id = raw.execute("SELECT id FROM workspaces WHERE name=?", (WORKSPACE,)).fetchone()[0]
        filt = build_filter(ws_id, facets=[], opt_facets={}, tags=(), paths=(), include_abstract=True)

        def terms(q):
            return resolve_facets(parse_query(q), set()).terms

        # ---- lexical: Service.search vs the raw FTS5 query(ies) it ran
        lex: dict[str, Any] = {}
        for name, queries in qs.items():
            matches = {}
            for q in queries:
                t = terms(q)
                a = build_match(t, "all")
                n = len(raw.execute(LEXICAL_SQL_RAW, (a,)).fetchall()) if a else 0
                matches[q] = [a] + ([build_match(t, "any")] if n < 10 else [])

            def product(q):
                return svc.search(WORKSPACE, q, {"stages": ["lexical"], "limit": 10})

            def leg(q):
                return run_lexical(leg_db, ws_id, terms(q), filt, want=10)

            def fts(q):
                for m in matches[q]:
                    if m:
                        raw.execute(LEXICAL_SQL_RAW, (m,)).fetchall()

            for q in queries:  # warm-up
                product(q), leg(q), fts(q)
            t = interleaved(queries, {"product": product, "leg": leg, "raw_fts5": fts}, rounds=fts_rounds)
            s = {k: summary_ms(v) for k, v in t.items()}
            relaxed = sum(1 for q in queries if len(matches[q]) > 1)
            # what the snippets cost: the product's snippet maker on the hits it returned
            from autodoc.search.snippet import snippet_maker
            from autodoc.search.tokens import tokenize

            t_prod = 0.0
            nhits = 0
            for q in queries[:50] if chunks >= 1_000_000 else queries:
                ids = [h["chunk_id"] for h in product(q)["hits"]]
                texts = [raw.execute("SELECT text FROM chunks WHERE id=?", (i,)).fetchone()[0] for i in ids]
                t0 = time.perf_counter()
                make = snippet_maker(terms(q), tokenize)
                for x in texts:
                    make(x)
                t_prod += time.perf_counter() - t0
                nhits += len(texts)
            lex[name] = {
                "timings": s,
                "ratio_product": ratio(s["product"], s["raw_fts5"]),
                "ratio_leg": ratio(s["leg"], s["raw_fts5"]),
                "relaxed_to_or": relaxed,
                "queries": len(queries),
                "example": queries[0],
                "snippet_ms_per_hit": round(t_prod / max(1, nhits) * 1000, 3),
            }
        out["lexical"] = lex

        # ---- semantic: Service.search (query vector cached) vs raw numpy exact top-50
        claims = qs["claims"]
        prov = svc.providers.get({"provider": "onnx"})
        db = svc.store.reader()
        with db:
            index = svc.vectors.merged(db, ws_id, prov.fingerprint, prov.dim)
        # the stored float32 vectors in the index's row order: the raw baseline and the
        # recall ground truth (a large index holds float16, search/vectors.py)
        mat = stored_f32(raw, ws_id, prov.fingerprint, index.ids, prov.dim)
        qv = {q: prov.embed_query(" ".join(t.text for t in terms(q))) for q in claims}

        def sem_product(q):
            return svc.search(WORKSPACE, q, {"stages": ["semantic"], "limit": 10})

        def sem_index(q):
            return index.search(qv[q], top=50)

        def sem_raw(q):
            s = mat @ qv[q]
            top = np.argpartition(-s, 49)[:50]
            return top[np.argsort(-s[top], kind="stable")]

        exact32 = {q: set(index.ids[sem_raw(q)].tolist()) for q in claims}

        for q in claims:
            sem_product(q), sem_index(q), sem_raw(q)
        t = interleaved(claims, {"product": sem_product, "vector_index": sem_index, "raw_numpy": sem_raw})
        s = {k: summary_ms(v) for k, v in t.items()}
        out["semantic"] = {
            "timings": s,
            "ratio_product": ratio(s["product"], s["raw_numpy"]),
            "ratio_index": ratio(s["vector_index"], s["raw_numpy"]),
            "index_rows": len(index),
            "path": "prefilter" if len(index) > index.exact_below else "exact",
            "exact_below": index.exact_below,
        }

        # ---- the prefilter against exact float32 cosine, on this matrix (forced, whatever the size;
        # the index holds float16 above HALF_ABOVE rows, as the product's does)
        pf = {}
        for kind in prefilter_kinds():
            vi = VectorIndex(index.ids, mat, prefilter=kind)
            vi.search(qv[claims[0]], top=50, exact=False)  # build the column layout
            rec, lat_pf, lat_ex = [], [], []
            for q in claims:
                t0 = time.perf_counter()
                vi.search(qv[q], top=50, exact=True)
                t1 = time.perf_counter()
                ap = {i for i, _ in vi.search(qv[q], top=50, exact=False)}
                t2 = time.perf_counter()
                rec.append(len(exact32[q] & ap) / 50)
                lat_ex.append(t1 - t0)
                lat_pf.append(t2 - t1)
            pf[kind] = {
                "recall@50": round(float(np.mean(rec)), 4),
                "min": round(float(np.min(rec)), 3),
                "prefilter_ms": summary_ms(lat_pf),
                "exact_ms": summary_ms(lat_ex),
                "shortlist": max(vi.shortlist_min, vi.shortlist_factor * 50),
            }
        out["prefilter_synthetic"] = pf

        # ---- hybrid, in-process (query vector cached)
        def hyb(q):
            return svc.search(WORKSPACE, q, {"stages": ["lexical", "semantic"], "limit": 10})

        for q in claims:
            hyb(q)
        t = interleaved(claims, {"hybrid": hyb})
        out["hybrid_inprocess"] = summary_ms(t["hybrid"])
        kw = qs["keywords"]
        for q in kw:
            hyb(q)
        out["hybrid_inprocess_keywords"] = summary_ms(interleaved(kw, {"hybrid": hyb})["hybrid"])
        out["bench_process_rss_mb"] = rss_mb(os.getpid())
        out["index_mb"] = round(index.nbytes / 2**20, 1)
    finally:
        raw.close()
        leg_db.close()
        svc.close()

    out["memory_probe"] = memory_probe(store)

    # ---- the daemon over its socket
    if daemon:
        out["daemon"] = measure_daemon(store, qs, chunks, meta)
    return out


def measure_daemon(store: Path, qs: dict[str, list[str]], chunks: int, meta: dict[str, Any]) -> dict[str, Any]:
    sock = Path(tempfile.mkdtemp(prefix="adbench-")) / "d.sock"
    p, why = start_daemon(store, sock)
    if p is None:
        return {"available": False, "reason": why}
    res: dict[str, Any] = {"available": True, "pid": p.pid, "rss_start_mb": rss_mb(p.pid)}
    try:
        c = SocketClient(sock)
        claims, kw = qs["claims"], qs["keywords"]

        def call(q, stages):
            return c.call("search.query", [WORKSPACE, q, {"stages": stages, "limit": 10}])

        # warm-up right before each timed set (the query-vector cache holds 256 texts)
        for name, queries in (("claims", claims), ("keywords", kw)):
            for q in queries:
                call(q, ["lexical", "semantic"])
            res.setdefault("rss_warm_mb", rss_mb(p.pid))
            res[f"hybrid_{name}"] = summary_ms(
                interleaved(queries, {"h": lambda q: call(q, ["lexical", "semantic"])})["h"]
            )
            res[f"lexical_{name}"] = summary_ms(interleaved(queries, {"h": lambda q: call(q, ["lexical"])})["h"])
        res["rss_after_mb"] = rss_mb(p.pid)
        # save → searchable: write a new file with a unique word, poll until it is found
        corpus = Path(meta["corpus"])
        lat = []
        for i in range(5):
            word = f"zqx{random.Random(i + chunks).getrandbits(40):x}"
            path = corpus / "bench-live" / f"live-{i}.md"
            path.parent.mkdir(exist_ok=True)
            t0 = time.perf_counter()
            path.write_text(f"# Live note {i}\n\nThe marker {word} appears here.\n")
            found = None
            while time.perf_counter() - t0 < 10:
                hits = c.call("search.query", [WORKSPACE, word, {"stages": ["lexical"], "limit": 1}])["hits"]
                if hits:
                    found = time.perf_counter() - t0
                    break
                time.sleep(0.005)
            lat.append(found)
            path.unlink()
            time.sleep(0.3)
        shutil.rmtree(corpus / "bench-live", ignore_errors=True)
        ok = [x for x in lat if x is not None]
        res["save_to_searchable_ms"] = [None if x is None else round(x * 1000, 1) for x in lat]
        res["save_to_searchable_p50_ms"] = round(sorted(ok)[len(ok) // 2] * 1000, 1) if ok else None
        c.close()
    except Exception as e:
        res["error"] = f"{type(e).__name__}: {e}"
    finally:
        stop_daemon(p)
    return res


# -- memory: how much loading the vector index costs, product vs a streaming load ------------


def stored_f32(db: Any, ws_id: int, fp: str, ids: np.ndarray, dim: int) -> np.ndarray:
    """The store's float32 vectors of these chunk ids, in that order."""
    pos = {int(c): i for i, c in enumerate(ids.tolist())}
    mat = np.zeros((len(ids), dim), np.float32)
    for cid, f32 in db.execute(
        "SELECT c.id, v.f32 FROM chunks c JOIN vectors v ON v.workspace_id=c.workspace_id AND v.model_fp=? "
        "AND v.text_hash=c.text_hash WHERE c.workspace_id=?",
        (fp, ws_id),
    ):
        i = pos.get(cid)
        if i is not None:
            mat[i] = np.frombuffer(f32, "<f4")
    return mat


def rss_probe(store: Path, mode: str) -> dict[str, Any]:
    """In a fresh process: RSS before and after loading the workspace's vectors,
    through the product (VectorCache.merged, then one search) or
    streamed row by row into preallocated arrays (the proposal)."""
    import gc

    from autodoc.config import Settings
    from autodoc.service import Service

    svc = Service(Settings.from_env(store=store), writer=False)
    try:
        prov = svc.providers.get({"provider": "onnx"})
        r0 = rss_mb(os.getpid())
        db = svc.store.reader()
        ws_id = db.execute("SELECT id FROM workspaces WHERE name=?", (WORKSPACE,)).fetchone()[0]
        if mode == "product":
            with db:
                idx = svc.vectors.merged(db, ws_id, prov.fingerprint, prov.dim)
            idx.search(np.ones(prov.dim, np.float32), top=50)
            n, nbytes = len(idx), idx.nbytes
        else:
            n = db.execute("SELECT COUNT(*) FROM chunks WHERE workspace_id=?", (ws_id,)).fetchone()[0]
            vecs = np.empty((n, prov.dim), np.float32)
            codes = np.empty((n, (prov.dim + 7) // 8), np.uint8)
            ids = np.empty(n, np.int64)
            i = 0
            for cid, f32, bits in db.execute(
                "SELECT c.id, v.f32, v.bits FROM chunks c JOIN vectors v ON v.workspace_id=c.workspace_id "
                "AND v.model_fp=? AND v.text_hash=c.text_hash WHERE c.workspace_id=? ORDER BY c.id",
                (prov.fingerprint, ws_id),
            ):
                ids[i] = cid
                vecs[i] = np.frombuffer(f32, "<f4")
                codes[i] = np.frombuffer(bits, np.uint8)
                i += 1
            n, nbytes = i, vecs.nbytes + codes.nbytes + ids.nbytes
        gc.collect()
        r1 = rss_mb(os.getpid())
        return {
            "mode": mode,
            "rows": n,
            "arrays_mb": round(nbytes / 2**20, 1),
            "rss_before_mb": r0,
            "rss_after_mb": r1,
            "delta_mb": round((r1 or 0) - (r0 or 0), 1),
        }
    finally:
        svc.close()


def memory_probe(store: Path) -> dict[str, Any]:
    out = {}
    for mode in ("product", "streaming"):
        p = subprocess.run(
            [sys.executable, "-m", "bench.speed", "--rss-probe", mode, str(store)],
            capture_output=True,
            text=True,
            cwd=str(Path(__file__).resolve().parents[1]),
        )
        try:
            out[mode] = json.loads(p.stdout.strip().splitlines()[-1])
        except Exception:
            out[mode] = {"error": (p.stderr or p.stdout)[-300:]}
    return out


# -- throughput (fresh small stores, every run) ---------------------------------------


def measure_throughput(data: Path, cache: Path, files_lex: int, files_emb: int) -> dict[str, Any]:
    from autodoc.config import Settings
    from autodoc.embed.onnx import OnnxProvider, get_session, load_tokenizer
    from autodoc.embed.queue import EMBED_BATCH
    from autodoc.service import Service
    from autodoc.store.vectors import pending_texts
    from autodoc.store.workspaces import get_workspace

    out: dict[str, Any] = {}
    sents, titles = sentence_pool(data)
    tmp = Path(tempfile.mkdtemp(prefix="adbench-tp-"))
    try:

        def corpus(name, n, seed):
            d = tmp / name
            d.mkdir()
            rng = random.Random(seed)
            for i in range(n):
                (d / f"n{i:05d}.md").write_text(make_file(rng, sents, titles), encoding="utf-8")
            return d

        # lexical indexing: documents/s (token counting with the model's tokenizer included)
        lexdir = corpus("lex", files_lex, 1)
        svc = Service(Settings.from_env(store=tmp / "lex.db"))
        try:
            svc.workspace_add("t", str(lexdir), {"embedding": {"provider": "onnx"}})
            svc.providers.get({"provider": "onnx"})  # model load is not indexing
            t0 = time.perf_counter()
            rep = svc.index("t")
            dt = time.perf_counter() - t0
            out["lexical_index"] = {
                "files": rep["added"],
                "chunks": rep["chunks"],
                "seconds": round(dt, 2),
                "docs_per_s": round(rep["added"] / dt, 1),
                "chunks_per_s": round(rep["chunks"] / dt, 1),
            }
        finally:
            svc.close()

        # embedding: the product's queue vs a raw onnxruntime loop on the same texts, interleaved
        prov = OnnxProvider()
        tok = load_tokenizer(prov.tokenizer_path, None)
        sess = get_session(prov.model_path, prov.threads)  # the same session options, shared

        def raw_embed(texts, sort=True):
            # the same work as the product: a text over 256 tokens runs as consecutive
            # 256-token windows ([CLS] 254 [SEP]), pooled over all of its tokens
            encs = tok.encode_batch(texts)
            ids, owner = [], []
            for t, e in enumerate(encs):
                x = e.ids
                if len(x) <= 256:
                    ids.append(x)
                    owner.append(t)
                    continue
                for s0 in range(1, len(x) - 1, 254):
                    ids.append([x[0], *x[s0 : min(s0 + 254, len(x) - 1)], x[-1]])
                    owner.append(t)
            order = sorted(range(len(ids)), key=lambda i: len(ids[i])) if sort else list(range(len(ids)))
            sums = np.zeros((len(texts), 384), np.float32)
            counts = np.zeros(len(texts), np.float32)
            for s in range(0, len(order), 32):
                rows = order[s : s + 32]
                w = max(len(ids[i]) for i in rows)
                ii = np.zeros((len(rows), w), np.int64)
                mm = np.zeros((len(rows), w), np.int64)
                for r, i in enumerate(rows):
                    ii[r, : len(ids[i])] = ids[i]
                    mm[r, : len(ids[i])] = 1
                h = sess.run(None, {"input_ids": ii, "attention_mask": mm, "token_type_ids": np.zeros_like(ii)})[0]
                for r, i in enumerate(rows):
                    sums[owner[i]] += h[r, : len(ids[i])].sum(axis=0)
                    counts[owner[i]] += len(ids[i])
            res = sums / counts[:, None]
            return res / np.linalg.norm(res, axis=1, keepdims=True)

        # Round 0 is a warm-up, not counted: whichever kind ran first in a cold process paid
        # the session's first runs and the arena's growth (9.2 s against 7.1 s for the same
        # product round, docs/benchmarks/speed.md at a9bf0cf). Then each kind runs first,
        # second and last once, so what one leaves behind (the arena the product's drain
        # shrinks) weighs on each alike.
        orders = [
            ["product", "raw_in_order", "raw"],
            ["raw", "product", "raw_in_order"],
            ["raw_in_order", "raw", "product"],
            ["product", "raw_in_order", "raw"],
        ]
        rounds = []
        for r, steps in enumerate(orders):
            d = corpus(f"emb{r}", files_emb, 100 + r)
            svc = Service(Settings.from_env(store=tmp / f"emb{r}.db"))
            try:
                svc.workspace_add("t", str(d), {"embedding": {"provider": "onnx"}})
                svc.index("t")
                svc.providers.get({"provider": "onnx"})  # loading the model is the daemon's start, not a fill
                db = svc.store.reader()
                ws = get_workspace(db, "t")
                with db:
                    texts = [t for _, t in pending_texts(db, ws.id, prov.fingerprint, 100000)]
                for kind in steps:
                    t0 = time.perf_counter()
                    if kind == "product":
                        # the daemon's own steps (EMBED_BATCH texts each), not embed_pending's large ones
                        n = svc.embed_queue.work(["t"], until_idle=True, batch=EMBED_BATCH)
                    else:
                        raw_embed(texts, sort=kind == "raw")
                        n = len(texts)
                    if r:
                        rounds.append({"kind": kind, "chunks": n, "seconds": round(time.perf_counter() - t0, 2)})
            finally:
                svc.close()
        prod = [x for x in rounds if x["kind"] == "product"]
        rawr = [x for x in rounds if x["kind"] == "raw"]
        rawo = [x for x in rounds if x["kind"] == "raw_in_order"]
        p_rate = sum(x["chunks"] for x in prod) / sum(x["seconds"] for x in prod)
        r_rate = sum(x["chunks"] for x in rawr) / sum(x["seconds"] for x in rawr)
        o_rate = sum(x["chunks"] for x in rawo) / sum(x["seconds"] for x in rawo)
        out["embedding"] = {
            "rounds": rounds,
            "step": EMBED_BATCH,
            "product_chunks_per_s": round(p_rate, 2),
            "raw_chunks_per_s": round(r_rate, 2),
            "ratio": round(p_rate / r_rate, 3),
            "raw_in_order_chunks_per_s": round(o_rate, 2),
            "ratio_in_order": round(p_rate / o_rate, 3),
        }

        # rerank window 40, proxy: no cross-encoder ships (MODELS.md), but a MiniLM-L6 cross-encoder
        # (ms-marco-MiniLM-L-6-v2) has the embedding model's encoder; run that encoder over the 40 real
        # (claim, passage) pairs a window holds, truncated at 512 as the ranker recipe says.
        from tokenizers import Tokenizer

        ptok = Tokenizer.from_file(str(prov.tokenizer_path))
        ptok.no_padding()
        ptok.enable_truncation(max_length=512, strategy="only_second")
        passages = [
            f"{t}\n{' '.join(rng_s)}" for t, rng_s in zip(titles[:40], [sents[i * 5 : i * 5 + 6] for i in range(40)])
        ]
        claim = query_sets(data, 5)["claims"][0]

        def window40():
            encs = ptok.encode_batch([(claim, p) for p in passages])
            for s0 in range(0, len(encs), 32):
                part = encs[s0 : s0 + 32]
                w = max(len(e.ids) for e in part)
                ii = np.zeros((len(part), w), np.int64)
                mm = np.zeros((len(part), w), np.int64)
                tt = np.zeros((len(part), w), np.int64)
                for r, e in enumerate(part):
                    ii[r, : len(e.ids)] = e.ids
                    mm[r, : len(e.ids)] = 1
                    tt[r, : len(e.ids)] = e.type_ids
                sess.run(None, {"input_ids": ii, "attention_mask": mm, "token_type_ids": tt})

        window40()
        tw = []
        for _ in range(3):
            t0 = time.perf_counter()
            window40()
            tw.append(time.perf_counter() - t0)
        out["rerank_window40_proxy"] = summary_ms(tw) | {
            "mean_pair_tokens": round(
                float(np.mean([len(e.ids) for e in ptok.encode_batch([(claim, p) for p in passages])])), 1
            )
        }

        # query embedding, uncached: the provider's embed() of one text vs the raw loop
        qs = query_sets(data, 120)["claims"]
        prov.embed(qs[:5]), raw_embed(qs[:5])
        t = interleaved(qs, {"product": lambda q: prov.embed([q]), "raw": lambda q: raw_embed([q])})
        s = {k: summary_ms(v) for k, v in t.items()}
        out["query_embedding"] = {"timings": s, "ratio": ratio(s["product"], s["raw"])}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def vectors_only(n: int, cache: Path, data: Path, nq: int = 100) -> dict[str, Any]:
    """The semantic stage's vector search alone at n rows, in memory (no store,
    no text): VectorIndex with the product defaults vs raw numpy exact top 50,
    interleaved, and the default path's recall@50 against exact. For sizes whose
    store was not built (1M)."""
    from autodoc.embed.onnx import OnnxProvider
    from autodoc.search.vectors import VectorIndex

    prov = OnnxProvider()
    real, source = real_vectors(cache, data, prov.fingerprint)
    qpath = cache / f"scifact-queries-{prov.fingerprint[:12]}.npy"
    if qpath.exists():
        qv = np.load(qpath)[:nq]
    else:
        texts = [json.loads(l)["text"] for l in open(data / "queries.jsonl", encoding="utf-8")][:300]
        allq = prov.embed(texts)
        np.save(qpath, allq)
        qv = allq[:nq]
    mat = synthetic_vectors(real, n, seed=n)
    ids = np.arange(n, dtype=np.int64)
    vi = VectorIndex(ids, mat)
    vi.search(qv[0], top=50)  # builds the code layout
    qs = list(range(len(qv)))

    def raw(i):
        s = mat @ qv[i]
        top = np.argpartition(-s, 49)[:50]
        return top[np.argsort(-s[top], kind="stable")]

    t = interleaved(qs, {"vector_index": lambda i: vi.search(qv[i], top=50), "raw_numpy": raw})
    rec = []
    for i in qs[:50]:
        ex = set(raw(i).tolist())
        ap = {j for j, _ in vi.search(qv[i], top=50)}
        rec.append(len(ex & ap) / 50)
    s = {k: summary_ms(v) for k, v in t.items()}
    out = {
        "rows": n,
        "timings": s,
        "ratio": ratio(s["vector_index"], s["raw_numpy"]),
        "path": "prefilter" if n > vi.exact_below else "exact",
        "prefilter": vi.prefilter,
        "recall@50": round(float(np.mean(rec)), 4),
        "index_mb": round(vi.nbytes / 2**20, 1),
        "source": source,
    }
    mat = vi = None  # free them before the next size (the closures above hold the names)
    return out


def prefilter_real(cache: Path, data: Path, nq: int = 300) -> dict[str, Any] | None:
    """Prefilter recall@50 on real embeddings: the SciFact store's chunk vectors
    and real query embeddings (forced prefilter, whatever the size)."""
    from autodoc.embed.onnx import OnnxProvider
    from autodoc.search.vectors import VectorIndex

    prov = OnnxProvider()
    real, source = real_vectors(cache, data, prov.fingerprint)
    if "chunk vectors" not in source:
        return {"note": f"no SciFact store yet ({source}); skipped"}
    qpath = cache / f"scifact-queries-{prov.fingerprint[:12]}.npy"
    if qpath.exists():
        qv = np.load(qpath)
    else:
        texts = [json.loads(l)["text"] for l in open(data / "queries.jsonl", encoding="utf-8")][:nq]
        qv = prov.embed(texts)
        np.save(qpath, qv)
    out = {"rows": len(real), "queries": len(qv), "source": source}
    ids = np.arange(len(real))
    d = VectorIndex(ids[:1], real[:1])
    out["default_shortlist"] = max(d.shortlist_min, d.shortlist_factor * 50)
    out["default_prefilter"] = d.prefilter
    out["kinds"] = prefilter_kinds()
    for kind in prefilter_kinds():
        for sl in (100, 200, 500, "default"):
            vi = (
                VectorIndex(ids, real, prefilter=kind)
                if sl == "default"
                else VectorIndex(ids, real, prefilter=kind, shortlist_min=sl, shortlist_factor=0)
            )
            rec = []
            for q in qv:
                ex = {i for i, _ in vi.search(q, top=50, exact=True)}
                ap = {i for i, _ in vi.search(q, top=50, exact=False)}
                rec.append(len(ex & ap) / 50)
            out[f"{kind}-shortlist{sl}"] = round(float(np.mean(rec)), 4)
    # float16 vectors (what an index above HALF_ABOVE rows holds), forced here, against exact float32
    full, half = VectorIndex(ids, real), VectorIndex(ids, real, half_above=0)
    rec_exact, rec_pf = [], []
    for q in qv:
        ex = {i for i, _ in full.search(q, top=50, exact=True)}
        rec_exact.append(len(ex & {i for i, _ in half.search(q, top=50, exact=True)}) / 50)
        rec_pf.append(len(ex & {i for i, _ in half.search(q, top=50, exact=False)}) / 50)
    out["float16-exact"] = round(float(np.mean(rec_exact)), 4)
    out["float16-hamming+asym-shortlistdefault"] = round(float(np.mean(rec_pf)), 4)
    return out


# -- report ------------------------------------------------------------------------


def _t(s: dict[str, float]) -> str:
    return f"{s['p50']:.2f} / {s['p95']:.2f}"


_PART_NAMES = {
    "daemon": "daemon rows",
    "throughput": "indexing and embedding throughput rows",
    "prefilter": "prefilter recall rows on real vectors",
}


def _parts(text: str) -> str:
    bad = [x for x in text.split(",") if x and x not in _PART_NAMES]
    if bad:
        raise argparse.ArgumentTypeError(f"unknown part(s) {bad}; choose from {sorted(_PART_NAMES)}")
    return text


def render(res: dict[str, Any]) -> str:
    m = res["meta"]
    L = [
        "# Speed and memory\n",
        "Generated by `bench/speed.py`; re-run the command below to refresh.\n",
        f"- Command: `{m['command']}`",
        f"- Commit: `{m['commit']}` · {m['date']}"
        + (f" · product code imported from `{m['code']}`" if m.get("code") else ""),
        *[
            f"- The {_PART_NAMES[part]} were measured again in a later run, `{r['command']}` (commit "
            f"`{r['commit']}`, {r['date']}, load {r['load']})."
            for part, r in m.get("reruns", {}).items()
        ],
        f"- Machine: `nproc` {m['machine']['nproc']} ({m['machine']['cpu']}); load average {m['machine']['load']} "
        f"at the start, {m.get('load_end')} at the end — a shared, noisy machine (other engineers run tests), "
        "so **ratios** to a baseline measured in the same process, interleaved query by query, are the figures to read.",
        f"- Queries: {m['queries']} per set after a warm-up pass over the same queries. `keywords`: two content "
        "words from a SciFact claim (a typical knowledge-base lookup); `claims`: whole SciFact claims (sentences, "
        "so the lexical leg relaxes AND to OR). Times are ms, p50 / p95.",
        f"- Corpora: {m['corpus_note']}",
        f"- Vectors: {m['vector_note']}"
        + " Real vectors drawn from, per size: "
        + "; ".join(f"{int(k):,}: {(s.get('vectors') or {}).get('source')}" for k, s in res["sizes"].items())
        + ".",
        "",
    ]
    sizes = res["sizes"]
    L.append("## Search latency\n")
    L.append("| measure | " + " | ".join(f"{int(k):,} chunks" for k in sizes) + " | target |")
    L.append("|---|" + "---|" * len(sizes) + "---|")

    def row(label, fn, target=""):
        cells = []
        for k in sizes:
            try:
                cells.append(fn(sizes[k]))
            except (KeyError, TypeError):
                cells.append("—")
        L.append(f"| {label} | " + " | ".join(cells) + f" | {target} |")

    for qset in ("keywords", "claims"):
        row(f"lexical `Service.search` ({qset})", lambda s: _t(s["lexical"][qset]["timings"]["product"]))
        row(f"lexical leg only, `run_lexical` ({qset})", lambda s: _t(s["lexical"][qset]["timings"]["leg"]))
        row(
            f"raw FTS5, same MATCH + ORDER BY bm25 LIMIT 50 ({qset})",
            lambda s: _t(s["lexical"][qset]["timings"]["raw_fts5"]),
        )
        row(
            f"**ratio** Service.search / raw FTS5 ({qset}), p50 · p95",
            lambda s: (
                f"**{s['lexical'][qset]['ratio_product']['p50']}** · {s['lexical'][qset]['ratio_product']['p95']}"
            ),
            "≤ 1.3",
        )
        row(
            f"ratio leg / raw FTS5 ({qset})",
            lambda s: f"{s['lexical'][qset]['ratio_leg']['p50']} · {s['lexical'][qset]['ratio_leg']['p95']}",
        )
        row(
            f"answer building: Service.search − leg, p50 ms ({qset})",
            lambda s: (
                f"{s['lexical'][qset]['timings']['product']['p50'] - s['lexical'][qset]['timings']['leg']['p50']:.2f}"
            ),
        )
        row(
            f"snippets on the returned hits ({qset}): ms per hit",
            lambda s: f"{s['lexical'][qset]['snippet_ms_per_hit']}",
        )
        row(
            f"queries relaxed to OR ({qset})",
            lambda s: f"{s['lexical'][qset]['relaxed_to_or']}/{s['lexical'][qset]['queries']}",
        )
    row("semantic `Service.search` (claims, vector cached)", lambda s: _t(s["semantic"]["timings"]["product"]))
    row("semantic VectorIndex.search top 50", lambda s: _t(s["semantic"]["timings"]["vector_index"]))
    row("raw numpy exact top 50 (same matrix)", lambda s: _t(s["semantic"]["timings"]["raw_numpy"]))
    row(
        "**ratio** semantic Service.search / raw numpy",
        lambda s: f"**{s['semantic']['ratio_product']['p50']}** · {s['semantic']['ratio_product']['p95']}",
    )
    row(
        "ratio VectorIndex / raw numpy",
        lambda s: f"{s['semantic']['ratio_index']['p50']} · {s['semantic']['ratio_index']['p95']}",
    )
    row("semantic path used", lambda s: f"{s['semantic']['path']} ({s['semantic']['index_rows']:,} rows)")
    row(
        "**hybrid** in-process (claims)",
        lambda s: f"**{_t(s['hybrid_inprocess'])}**",
        "p50 ≤ 15 at 100k, ≤ 60 at 1M; p95 ≤ 3 × p50",
    )
    row("hybrid in-process (keywords)", lambda s: _t(s["hybrid_inprocess_keywords"]), "p50 ≤ 10 at 100k, ≤ 60 at 1M")
    row("hybrid via daemon socket (claims)", lambda s: _t(s["daemon"]["hybrid_claims"]))
    row("hybrid via daemon socket (keywords)", lambda s: _t(s["daemon"]["hybrid_keywords"]))
    row("lexical via daemon socket (keywords)", lambda s: _t(s["daemon"]["lexical_keywords"]))
    row("lexical via daemon socket (claims)", lambda s: _t(s["daemon"]["lexical_claims"]))
    for qset in ("keywords", "claims"):
        row(
            f"**ratio** lexical via daemon / raw FTS5 in-process ({qset}), p50 (separate phases)",
            lambda s: (
                f"**{s['daemon'][f'lexical_{qset}']['p50'] / s['lexical'][qset]['timings']['raw_fts5']['p50']:.2f}**"
            ),
            "≤ 1.3",
        )
    row("save → searchable via the daemon (ms, 5 saves)", lambda s: f"{s['daemon']['save_to_searchable_ms']}", "≤ 300")
    L.append("")
    for k, v in (res.get("vectors_only") or {}).items():
        L.append(
            f"Vector search alone at {int(k):,} rows (in memory, synthetic vectors as above; no store, no text, "
            f"so no lexical leg and no answer building): VectorIndex ({v['path']}, `{v['prefilter']}`) {_t(v['timings']['vector_index'])} "
            f"ms vs raw numpy exact top 50 {_t(v['timings']['raw_numpy'])} ms (ratio {v['ratio']['p50']}); "
            f"recall@50 of the default path against exact {v['recall@50']}; index {v['index_mb']} MB.\n"
        )
    L.append("## Prefilter recall@50 against exact cosine\n")
    kinds = None
    for s in sizes.values():
        kinds = kinds or list(s.get("prefilter_synthetic", {}))
    pr = res.get("prefilter_real")
    kinds = kinds or (pr or {}).get("kinds") or prefilter_kinds()
    default_kind = default_prefilter()
    L.append(
        "| data | "
        + " | ".join(f"`{k}`" + (" (default)" if k == default_kind else "") for k in kinds)
        + " | shortlist |"
    )
    L.append("|---|" + "---|" * len(kinds) + "---|")
    for k, s in sizes.items():
        pf = s.get("prefilter_synthetic", {})
        if pf:
            cells = [
                f"{pf[x]['recall@50']} (min {pf[x]['min']}; {_t(pf[x]['prefilter_ms'])} ms)" for x in kinds if x in pf
            ]
            ex = next(iter(pf.values()))["exact_ms"]
            L.append(
                f"| synthetic {int(k):,}, prefilter forced (exact scan: {_t(ex)} ms) | "
                + " | ".join(cells)
                + f" | product default ({next(iter(pf.values()))['shortlist']}) |"
            )
    if pr and "rows" in pr:
        for sl in (100, 200, 500, "default"):
            label = f"{sl} (factor 0)" if sl != "default" else f"product default ({pr['default_shortlist']})"
            L.append(
                f"| real SciFact vectors ({pr['rows']:,} chunks, {pr['queries']} real queries) | "
                + " | ".join(str(pr.get(f"{x}-shortlist{sl}")) for x in kinds)
                + f" | {label} |"
            )
    elif pr:
        L.append(f"| real vectors | {pr.get('note')} |" + " |" * len(kinds))
    L.append("\nTarget: ≥ 0.98 on real embeddings.\n")
    tp = res.get("throughput", {})
    if tp:
        L.append("## Throughput\n")
        li = tp.get("lexical_index")
        if li:
            L.append(
                f"- Lexical indexing (fresh store, {li['files']} files, {li['chunks']} chunks, chunk sizes counted "
                f"with the model's tokenizer): **{li['docs_per_s']} documents/s**, {li['chunks_per_s']} chunks/s."
            )
        for k, s in sizes.items():
            ib = s.get("index_build")
            if ib:
                L.append(
                    f"- Building the {int(k):,}-chunk store (once, cached): {ib['files']} files, {ib['chunks']} chunks "
                    f"in {ib['seconds']} s = {ib['docs_per_s']} documents/s, {ib['chunks_per_s']} chunks/s."
                )
        e = tp.get("embedding")
        if e:
            L.append(
                f"- Embedding: product queue (`EmbedQueue.work` in the daemon's steps of {e.get('step', 16)} texts) **{e['product_chunks_per_s']} chunks/s** vs raw "
                f"onnxruntime loop (same session, tokenizer, length-sorted batches of 32) {e['raw_chunks_per_s']} "
                f"chunks/s: ratio **{e['ratio']}** (target ≥ 0.9); against a plain loop (batches of 32 in "
                f"queue order, no length sorting) {e.get('raw_in_order_chunks_per_s')} chunks/s: ratio "
                f"{e.get('ratio_in_order')}. Texts: breadcrumb + newline + chunk text, as the queue embeds them. "
                f"Timed rounds, after an untimed warm-up round of all three (each kind first, second and last "
                f"once): {e['rounds']}."
            )
        rw = tp.get("rerank_window40_proxy")
        if rw:
            L.append(
                f"- Rerank window 40 — **proxy, no ranker ships**: the MiniLM-L6 encoder (the shape of "
                f"ms-marco-MiniLM-L-6-v2) over 40 real (claim, passage) pairs, {rw['mean_pair_tokens']} tokens "
                f"each on average, batches of 32: {rw['p50']:.0f} ms p50 over {rw['n']} runs (a real cross-encoder "
                "adds only its 1-output head). MODELS.md expects 2–3 s for a MiniLM-L6 window of 40 at 256–512 tokens."
            )
        q = tp.get("query_embedding")
        if q:
            L.append(
                f"- Query embedding, uncached, one claim: product {_t(q['timings']['product'])} ms vs raw "
                f"{_t(q['timings']['raw'])} ms (ratio {q['ratio']['p50']})."
            )
        L.append("")
    L.append("## Memory\n")
    for k, s in sizes.items():
        d = s.get("daemon", {})
        n = s.get("chunks") or int(k)
        budget = n * (384 * 4 + 48) / 2**20
        if d.get("available"):
            L.append(
                f"- {int(k):,} chunks: daemon RSS {d.get('rss_start_mb')} MB at start, {d.get('rss_warm_mb')} MB "
                f"after warm-up, {d.get('rss_after_mb')} MB at the end; vectors + codes = {budget:.0f} MB, so the "
                f"budget (vectors + codes + model ~100 MB + 150 MB) is ≈ {budget + 250:.0f} MB."
            )
        else:
            L.append(
                f"- {int(k):,} chunks: daemon not measured ({d.get('reason', 'not run')}); the benchmark "
                f"process itself held {s.get('bench_process_rss_mb')} MB RSS (both stores' Service, "
                f"the model, the vector index of {s.get('index_mb')} MB)."
            )
    for k, s in sizes.items():
        mp = s.get("memory_probe", {})
        if mp.get("product", {}).get("delta_mb") is not None:
            pp, st = mp["product"], mp.get("streaming", {})
            L.append(
                f"- {int(k):,} chunks, loading the vector index in a fresh process: the product "
                f"(`VectorCache.merged` + one search) adds {pp['delta_mb']} MB RSS for {pp['arrays_mb']} MB of arrays; "
                f"streaming the rows into preallocated arrays adds {st.get('delta_mb')} MB for "
                f"{st.get('arrays_mb')} MB (the product streams too; it also keeps per-document chunk lists, "
                "the column-major codes for the Hamming pass and its query buffers)."
            )
    L.append("")
    if res.get("findings"):
        L.append("## Findings\n")
        L += [f"- {f}" for f in res["findings"]]
        L.append("")
    return "\n".join(L) + "\n"


def findings(res: dict[str, Any]) -> list[str]:
    out = []
    for k, s in res["sizes"].items():
        k = int(k)
        for qset in ("keywords", "claims"):
            r = s["lexical"][qset]["ratio_product"]["p50"]
            out.append(
                f"{k:,} chunks, lexical ({qset}): Service.search is {r}× the raw FTS5 query at p50 — "
                + ("meets ≤ 1.3." if r <= 1.3 else f"**misses ≤ 1.3 by {r - 1.3:.2f}×**")
                + f" The leg alone (run_lexical) is {s['lexical'][qset]['ratio_leg']['p50']}×; the rest is "
                "loading rows, boosts, snippets and the answer."
            )
        h, h95 = s["hybrid_inprocess"]["p50"], s["hybrid_inprocess"]["p95"]
        hk = s["hybrid_inprocess_keywords"]["p50"]
        tgt, ctgt = TARGETS["hybrid_p50_ms"].get(k), TARGETS["hybrid_claims_p50_ms"].get(k)
        if tgt:
            out.append(
                f"{k:,} chunks, hybrid p50 in-process (keywords) {hk:.1f} ms against ≤ {tgt} ms: "
                + ("met." if hk <= tgt else f"**missed by {hk - tgt:.1f} ms**.")
            )
        if ctgt:
            spread = TARGETS["hybrid_p95_over_p50"]
            out.append(
                f"{k:,} chunks, hybrid in-process (claims, issue 19) p50 {h:.1f} ms against ≤ {ctgt} ms: "
                + ("met" if h <= ctgt else f"**missed by {h - ctgt:.1f} ms**")
                + f"; p95 {h95:.1f} ms = {h95 / h:.2f} × p50 against ≤ {spread}: "
                + ("met." if h95 <= spread * h else "**missed**.")
            )
        sem = s["semantic"]
        out.append(
            f"{k:,} chunks, semantic: Service.search {sem['timings']['product']['p50']:.1f} ms vs the "
            f"VectorIndex search {sem['timings']['vector_index']['p50']:.1f} ms ({sem['path']}) vs raw numpy "
            f"{sem['timings']['raw_numpy']['p50']:.1f} ms: most of the difference is outside the vector "
            "search (snippets, row loading, answer building)."
        )
        s["lexical"]["keywords"]
        for qset in ("keywords", "claims"):
            lq = s["lexical"][qset]
            gap = lq["timings"]["product"]["p50"] - lq["timings"]["leg"]["p50"]
            out.append(
                f"{k:,} chunks, lexical ({qset}): the leg is {lq['ratio_leg']['p50']}× the raw FTS5 "
                f"query(ies); building the answer adds {gap:.2f} ms (candidate rows, boosts, the page's rows, "
                f"{lq['snippet_ms_per_hit']} ms a snippet), a fixed cost that weighs "
                f"{gap / lq['timings']['raw_fts5']['p50']:.2f}× the raw query at this size."
            )
        d = s.get("daemon", {})
        if d.get("available"):
            n = s.get("chunks") or k
            budget = n * (384 * 4 + 48) / 2**20 + 250
            out.append(
                f"{k:,} chunks: daemon RSS {d.get('rss_after_mb')} MB after the run against a budget of "
                f"≈ {budget:.0f} MB (vectors + codes + ~100 MB model + 150 MB): "
                + (
                    "met."
                    if (d.get("rss_after_mb") or 0) <= budget
                    else f"**over by {d['rss_after_mb'] - budget:.0f} MB**."
                )
            )
            sts = d.get("save_to_searchable_p50_ms")
            if sts is not None:
                out.append(
                    f"{k:,} chunks: save → searchable p50 {sts} ms over 5 saves ({d['save_to_searchable_ms']}) "
                    "against ≤ 300 ms: " + ("met." if sts <= 300 else f"**missed by {sts - 300:.0f} ms**.")
                )
    for k, v in (res.get("vectors_only") or {}).items():
        if k in res.get("sizes", {}):
            continue  # measured end to end above
        out.append(
            f"{int(k):,} rows: hybrid end to end not measured (no store of that size); the vector search alone "
            f"takes {v['timings']['vector_index']['p50']:.1f} ms p50 (raw numpy exact "
            f"{v['timings']['raw_numpy']['p50']:.1f} ms), recall@50 {v['recall@50']}."
        )
    tp = res.get("throughput", {})
    if tp.get("embedding"):
        r = tp["embedding"]["ratio"]
        out.append(
            f"Embedding throughput ratio {r} against ≥ 0.9 (raw loop sorting all pending texts by length): "
            + ("met." if r >= 0.9 else f"**missed by {0.9 - r:.2f}**.")
            + (
                (
                    f" Against a plain in-order loop (batches of 32 as queued) the ratio is "
                    f"{tp['embedding']['ratio_in_order']}: sorting by length is what matters on this compute-bound "
                    "machine; "
                    + (
                        "the queue sorts a window of pending texts by length (embed/queue.py, LINE_TEXTS) and "
                        "takes its small steps from it."
                        if r >= 0.9
                        else "the queue's batches still carry more padding or overhead than the raw loop's."
                    )
                )
                if tp["embedding"].get("ratio_in_order")
                else ""
            )
        )
    pr = res.get("prefilter_real")
    if pr and "rows" in pr:
        parts = ", ".join(f"{k}: {v}" for k, v in pr.items() if "-shortlist" in k)
        dflt = pr.get(f"{pr['default_prefilter']}-shortlistdefault")
        sl = pr["default_shortlist"]
        out.append(
            f"Prefilter recall@50 on real SciFact embeddings ({pr['rows']:,} chunks, {pr['queries']} real queries; "
            f"{parts}): the product default ({pr['default_prefilter']}, shortlist {sl}) gives {dflt} against "
            "≥ 0.98: "
            + ("met" if dflt is not None and dflt >= 0.98 else "**missed**")
            + f". Caveat: only {pr['rows']:,} real rows exist here, so a {sl} shortlist is {sl / pr['rows']:.0%} "
            "of them — far easier than at 100k; the fixed 100/200/500 shortlists and the synthetic rows above "
            "(real vectors mixed with noise, at size) are the better guides."
        )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.speed", description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10000,100000", help="chunk counts, comma-separated (1000000 optional)")
    ap.add_argument("--queries", type=int, default=200, help="queries per set (≥ 100; ≤ 256 fits the query cache)")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA / "scifact")
    ap.add_argument("--cache", type=Path, default=None)
    ap.add_argument("--no-daemon", action="store_true")
    ap.add_argument(
        "--vector-sizes",
        default="1000000",
        help="sizes for the in-memory vector search alone (no store), comma-separated; '' for none",
    )
    ap.add_argument("--no-throughput", action="store_true")
    ap.add_argument("--lex-files", type=int, default=300, help="files for the lexical indexing throughput run")
    ap.add_argument("--emb-files", type=int, default=10, help="files (×10 chunks) per embedding throughput round")
    ap.add_argument("--build-only", action="store_true", help="build and cache the corpora and stores, measure nothing")
    ap.add_argument("--rss-probe", nargs=2, metavar=("MODE", "STORE"), help=argparse.SUPPRESS)
    ap.add_argument("--render-only", action="store_true", help="re-render the report from --json, run nothing")
    ap.add_argument(
        "--rerun",
        default="",
        type=_parts,
        help="re-measure only these parts into the existing --json, comma-separated: daemon (socket, "
        "RSS, save → searchable), throughput (indexing, embedding), prefilter (real vectors)",
    )
    ap.add_argument("--out", default=str(RESULTS / "speed.md"))
    ap.add_argument("--json", default=str(RESULTS / "speed.json"))
    args = ap.parse_args(argv)
    rerun = [x for x in args.rerun.split(",") if x]
    if args.render_only or rerun:
        res = json.loads(Path(args.json).read_text())
        cache = args.cache or cache_root()
        note = {
            "command": command_line(),
            "commit": git_commit(),
            "date": time.strftime("%Y-%m-%d %H:%M"),
            "load": [round(x, 2) for x in os.getloadavg()],
        }
        for part in rerun:
            res["meta"].setdefault("reruns", {})[part] = note
            if part == "daemon":
                for k in res["sizes"]:
                    meta = build_store(int(k), args.data, cache)
                    log(f"daemon at {int(k):,}")
                    res["sizes"][k]["daemon"] = measure_daemon(
                        Path(meta["store"]), query_sets(args.data, args.queries), int(k), meta
                    )
            elif part == "throughput":
                log("throughput")
                res["throughput"] = measure_throughput(args.data, cache, args.lex_files, args.emb_files)
            elif part == "prefilter":
                log("prefilter on real vectors")
                res["prefilter_real"] = prefilter_real(cache, args.data)
        if rerun:
            Path(args.json).write_text(json.dumps(res, indent=1, default=str))
        res["findings"] = findings(res)
        text = render(res)
        if args.out != "-":
            Path(args.out).write_text(text)
        print(text)
        return 0
    if args.rss_probe:
        print(json.dumps(rss_probe(Path(args.rss_probe[1]), args.rss_probe[0])))
        return 0
    cache = args.cache or cache_root()
    sizes = [int(x) for x in args.sizes.split(",") if x]
    started = time.time()
    machine = machine_note()
    commit = git_commit()  # before anything runs: the tree may change under a long run
    import autodoc

    code = str(Path(autodoc.__file__).resolve().parent)
    metas = {}
    for n in sizes:
        log(f"building {n:,}-chunk corpus and store (cached)")
        metas[n] = build_store(n, args.data, cache)
    if args.build_only:
        print(json.dumps(metas, indent=1, default=str))
        return 0
    res: dict[str, Any] = {"sizes": {}}
    for n in sizes:
        log(f"measuring {n:,}")
        res["sizes"][str(n)] = measure_size(n, metas[n], args.data, args.queries, daemon=not args.no_daemon)
    if not args.no_throughput:
        log("throughput")
        res["throughput"] = measure_throughput(args.data, cache, args.lex_files, args.emb_files)
    for n in [int(x) for x in args.vector_sizes.split(",") if x]:
        log(f"vectors only, {n:,} rows in memory")
        res.setdefault("vectors_only", {})[str(n)] = vectors_only(n, cache, args.data)
    log("prefilter on real vectors")
    res["prefilter_real"] = prefilter_real(cache, args.data)
    next(iter(metas.values()))
    res["meta"] = {
        "command": command_line(),
        "commit": commit,
        "code": code,
        "date": time.strftime("%Y-%m-%d %H:%M", time.localtime(started)),
        "machine": machine,
        "load_end": [round(x, 2) for x in os.getloadavg()],
        "queries": args.queries,
        "corpus_note": f"{SECTIONS + 1} chunks a file (a `#` title from SciFact, an intro, {SECTIONS} `##` sections of "
        "2–5 sentences sampled from SciFact abstracts), cached in "
        f"`{cache}/speed-corpus-<size>/`; stores in `{cache}/stores/speed-<size>-<fp>/`.",
        "vector_note": "synthetic: normalise(0.7·a + 0.3·b + noise) for real vectors a, b, "
        "written into the store's vectors table keyed (workspace, model fingerprint, text hash) as the "
        "product keys them; the product's runtime loads and searches them. Query vectors are real.",
        "seconds": round(time.time() - started, 1),
    }
    res["findings"] = findings(res)
    text = render(res)
    if args.out != "-":
        Path(args.out).write_text(text)
        log(f"wrote {args.out}")
    if args.json != "-":
        Path(args.json).write_text(json.dumps(res, indent=1, default=str))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
