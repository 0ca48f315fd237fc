"""What PostgreSQL's own search gives against the product's (issue 34, docs/dev/postgres.md): the
figures the design of the PostgreSQL store chooses by.

    python -m bench.pg_study lexical [--store PATH] [--queries N]   # SciFact train nDCG@10
    python -m bench.pg_study vectors [--store PATH] [--size N]      # pgvector HNSW vs exact numpy
    python -m bench.pg_study notify [--edits N]                     # commit → LISTEN delivery latency
    python -m bench.pg_study scifact [--queries N]                  # SciFact test, both stores, one run
    python -m bench.pg_study hnsw [--store PATH] [--queries N]      # the HNSW graph's build parameters

Both read a built SciFact store (bench.quality's cache; --store names one, else the newest under
the cache's stores/ whose name starts with "scifact-"): it is copied first (SQLite's backup API) so
another run's lease on it does not matter, and a private server is started with pgserver in a temp
folder (PostgreSQL 16 + pgvector 0.6; the test extra installs it).

lexical: every chunk of the store (its document's title, its breadcrumb, its text) goes into one
Postgres table with a tsvector (title weight A, breadcrumb B, text D; the `english` configuration)
and a GIN index; each SciFact train query runs as an OR of its words (the product's lexical leg
relaxes to OR too) ranked by ts_rank / ts_rank_cd (normalisations 0 and 1), top 100 chunks folded to
documents, and the product's own lexical leg (`Service.search` with stages ["lexical"], BM25 over its
postings) on the same copy and queries. nDCG@10 / R@100 by bench.quality's evaluator (ir-measures).

vectors: the store's float32 vectors (real, MiniLM 384-d), grown to --size with bench.common.synthetic,
into a vector(384) column with an HNSW index (vector_cosine_ops, m 16, ef_construction 64: pgvector's
defaults); 200 synthetic queries: recall@10 against the exact top 10 (numpy, float32 dot products over
normalised rows: the product's exact search), and per-query latency of each (p50/p95).

notify: one connection commits N transactions, each inserting a row and calling pg_notify with its
id (as an indexed edit will); another, in another process, LISTENs and records when each arrives: the
latency from just before COMMIT to delivery, p50/p95 (the floor under "an edit indexed by one daemon
is searchable through another within 1 s").

scifact: the product on both stores in one run. The bench's cached SciFact store (bench.quality's
build_store: indexed and embedded) is copied and brought up to date with the code (an incremental
index; its vectors, keyed by text hash, stay); a PostgreSQL store on the private server gets the
same workspace folder and configuration, the copy's vectors (rows copied through the store's own
write, so the `v` column and the HNSW index are made as the embed queue makes them: nothing is
re-embedded) and its own index run. Then every SciFact test query through `Service.search` on
each store: lexical, semantic and the default hybrid at limit 100 (and hybrid at 10), nDCG@10 / R@10 / R@100 / MRR@10
by bench.quality's evaluator, p50/p95 latency, how many answers are byte-identical between the
stores and where they part, how the semantic leg was served, and the leg alone at depths 11, 51
and 201 against the SQLite store's exact search (answers differing, exact chunks missed).

hnsw: the graph parameters of the store's index (store/pg/vectors.py HNSW_M, HNSW_EF_CONSTRUCTION):
for each (m, ef_construction), the store's real vectors inserted one statement per row into a table
that has the index already (as the embed queue writes them: rows/s), then every SciFact test query
(embedded by the model) answered by the index at ef_search 100 and 204 (what a search asks for its
top 11 and 51: store_side.py) against the exact top 11 / 51 of the same rows: exact neighbours
missed, and p50 per query.

Prints one JSON object. Runs on: the benchmark's main thread."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from .common import cache_root, command_line, git_commit, log, machine_note, summary_ms, synthetic


def newest_store() -> Path:
    stores = sorted((cache_root() / "stores").glob("scifact-*/autodoc.db"), key=lambda p: p.stat().st_mtime)
    if not stores:
        sys.exit("no SciFact store in the bench cache: run `python -m bench.quality` once (or pass --store)")
    return stores[-1]


def copy_store(src: Path, dest: Path) -> Path:
    import apsw

    target = apsw.Connection(str(dest))
    source = apsw.Connection(str(src), flags=apsw.SQLITE_OPEN_READONLY)
    with target.backup("main", source, "main") as b:
        b.step(-1)
    source.close()
    target.close()
    return dest


def start_server(base: Path) -> tuple[Any, str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs: XDG_RUNTIME_DIR unset
        import pgserver

    server = pgserver.get_server(base / "pgdata", cleanup_mode="stop")
    return server, server.get_uri()


OR_QUERY = "replace(plainto_tsquery('english', %s)::text, '&', '|')::tsquery"
RANKERS = {
    "ts_rank": "ts_rank(tsv, q)",
    "ts_rank norm 1 (÷ 1+log length)": "ts_rank(tsv, q, 1)",
    "ts_rank_cd": "ts_rank_cd(tsv, q)",
    "ts_rank_cd norm 1": "ts_rank_cd(tsv, q, 1)",
}


def fold(paths: list[str]) -> list[str]:
    from .quality import path_doc

    out: list[str] = []
    for p in paths:
        d = path_doc(p)
        if d not in out:
            out.append(d)
    return out


def lexical(store: Path, uri: str, n_queries: int | None) -> dict[str, Any]:
    import apsw
    import psycopg

    from autodoc.config import Settings
    from autodoc.service import Service

    from .quality import DEFAULT_DATA, WORKSPACE, evaluate, load_collection, run_queries

    col = load_collection(DEFAULT_DATA / "scifact", splits=("train",))
    queries = col.split_queries("train")[:n_queries]
    qrels = col.qrels["train"]
    out: dict[str, Any] = {"queries": len(queries)}

    db = apsw.Connection(str(store), flags=apsw.SQLITE_OPEN_READONLY)
    rows = db.execute(
        "SELECT c.id, d.path, d.title, c.breadcrumb, c.text FROM chunks c JOIN documents d ON d.id = c.document_id"
    ).fetchall()
    db.close()
    out["chunks"] = len(rows)

    with psycopg.connect(uri, autocommit=True) as pg:
        pg.execute("DROP TABLE IF EXISTS lex")
        pg.execute("CREATE TABLE lex (id bigint PRIMARY KEY, path text, title text, breadcrumb text, body text)")
        t0 = time.perf_counter()
        with pg.cursor().copy("COPY lex (id, path, title, breadcrumb, body) FROM STDIN") as cp:
            for r in rows:
                cp.write_row(r)
        pg.execute(
            "ALTER TABLE lex ADD COLUMN tsv tsvector GENERATED ALWAYS AS ("
            "setweight(to_tsvector('english', title), 'A') || setweight(to_tsvector('english', breadcrumb), 'B')"
            " || setweight(to_tsvector('english', body), 'D')) STORED"
        )
        pg.execute("CREATE INDEX lex_tsv ON lex USING gin (tsv)")
        pg.execute("ANALYZE lex")
        out["pg_load_seconds"] = round(time.perf_counter() - t0, 2)
        variants: list[dict[str, Any]] = []
        for name, rank in RANKERS.items():
            sql = f"SELECT path FROM lex, (SELECT {OR_QUERY} AS q) x WHERE tsv @@ q ORDER BY {rank} DESC, id LIMIT 100"
            run: dict[str, list[str]] = {}
            lat: list[float] = []
            for qid, text in queries:
                t0 = time.perf_counter()
                paths = [p for (p,) in pg.execute(sql, (text,)).fetchall()]
                lat.append(time.perf_counter() - t0)
                run[qid] = fold(paths)
            m = evaluate(run, qrels)
            variants.append({"name": f"postgres {name}", "metrics": _round(m), "latency_ms": summary_ms(lat)})
            log(f"{name}: nDCG@10 {m['nDCG@10']:.4f}")

    svc = Service(Settings.from_env(store=store))
    try:
        svc.search(WORKSPACE, "warm up", {"stages": ["lexical"]})
        r = run_queries(svc, queries, {"stages": ["lexical"], "limit": 100})
    finally:
        svc.close()
    m = evaluate(r["run"], qrels)
    variants.append(
        {
            "name": "autodoc lexical leg (BM25 over its postings)",
            "metrics": _round(m),
            "latency_ms": summary_ms(r["latency"]),
            "lexical_match": r["lexical_match"],
        }
    )
    log(f"autodoc lexical: nDCG@10 {m['nDCG@10']:.4f}")
    out["variants"] = variants
    return out


def vectors(store: Path, uri: str, size: int) -> dict[str, Any]:
    import apsw
    import psycopg

    db = apsw.Connection(str(store), flags=apsw.SQLITE_OPEN_READONLY)
    fp = db.execute("SELECT active_fp FROM embed_state WHERE active_fp IS NOT NULL").fetchone()[0]
    blobs = [bytes(b) for (b,) in db.execute("SELECT f32 FROM vectors WHERE model_fp = ?", (fp,)).fetchall()]
    db.close()
    real = np.stack([np.frombuffer(b, dtype=np.float32) for b in blobs])
    real /= np.linalg.norm(real, axis=1, keepdims=True)
    dim = real.shape[1]
    base = real if size <= len(real) else np.concatenate([real, synthetic(real, size - len(real), seed=0)])
    base = np.ascontiguousarray(base[:size], dtype=np.float32)
    queries = synthetic(real, 200, seed=1)
    out: dict[str, Any] = {"size": len(base), "real": len(real), "dim": dim, "queries": len(queries)}

    exact: list[np.ndarray] = []
    lat_np: list[float] = []
    for q in queries:
        t0 = time.perf_counter()
        s = base @ q
        top = np.argpartition(-s, 10)[:10]
        top = top[np.argsort(-s[top])]
        lat_np.append(time.perf_counter() - t0)
        exact.append(top)
    out["numpy_exact"] = {"latency_ms": summary_ms(lat_np), "matrix_mb": round(base.nbytes / 2**20, 1)}

    with psycopg.connect(uri, autocommit=True) as pg:
        pg.execute("CREATE EXTENSION IF NOT EXISTS vector")
        pg.execute("DROP TABLE IF EXISTS vec")
        pg.execute(f"CREATE TABLE vec (id int PRIMARY KEY, v vector({dim}))")
        t0 = time.perf_counter()
        with pg.cursor().copy("COPY vec (id, v) FROM STDIN") as cp:
            for i, row in enumerate(base):
                cp.write_row((i, "[" + ",".join(f"{x:.7g}" for x in row) + "]"))
        out["pg_copy_seconds"] = round(time.perf_counter() - t0, 2)
        pg.execute("SET maintenance_work_mem = '512MB'")
        t0 = time.perf_counter()
        pg.execute("CREATE INDEX vec_hnsw ON vec USING hnsw (v vector_cosine_ops)")
        out["hnsw_build_seconds"] = round(time.perf_counter() - t0, 2)
        pg.execute("ANALYZE vec")
        for ef in (40, 100):
            pg.execute(f"SET hnsw.ef_search = {ef}")
            lat: list[float] = []
            hits = 0
            for q, want in zip(queries, exact):
                lit = "[" + ",".join(f"{x:.7g}" for x in q) + "]"
                t0 = time.perf_counter()
                got = [i for (i,) in pg.execute("SELECT id FROM vec ORDER BY v <=> %s::vector LIMIT 10", (lit,))]
                lat.append(time.perf_counter() - t0)
                hits += len(set(got) & set(want.tolist()))
            out[f"pgvector_hnsw_ef{ef}"] = {
                "recall@10": round(hits / (10 * len(queries)), 4),
                "latency_ms": summary_ms(lat),
            }
            log(f"hnsw ef {ef}: recall@10 {hits / (10 * len(queries)):.4f}, p50 {summary_ms(lat)}")
        plan = pg.execute("EXPLAIN SELECT id FROM vec ORDER BY v <=> %s::vector LIMIT 10", (lit,)).fetchall()
        out["plan_uses_hnsw"] = any("vec_hnsw" in r[0] for r in plan)
    return out


LISTENER = """
import sys, time, psycopg
conn = psycopg.connect(sys.argv[1], autocommit=True)
conn.execute("LISTEN autodoc_study")
print("ready", flush=True)
n = int(sys.argv[2])
for note in conn.notifies(stop_after=n, timeout=120):
    print(note.payload, time.time(), flush=True)
"""


def notify(uri: str, edits: int) -> dict[str, Any]:
    import subprocess

    import psycopg

    with psycopg.connect(uri, autocommit=True) as pg:
        pg.execute("DROP TABLE IF EXISTS edits")
        pg.execute("CREATE TABLE edits (id int PRIMARY KEY, body text)")
        listener = subprocess.Popen(
            [sys.executable, "-c", LISTENER, uri, str(edits)], stdout=subprocess.PIPE, text=True
        )
        assert listener.stdout is not None
        assert listener.stdout.readline().strip() == "ready"
        sent: dict[str, float] = {}
        for i in range(edits):
            with pg.transaction():
                pg.execute("INSERT INTO edits VALUES (%s, %s)", (i, "x" * 1000))
                pg.execute("SELECT pg_notify('autodoc_study', %s)", (str(i),))
                sent[str(i)] = time.time()  # the COMMIT follows as the block ends
            time.sleep(0.01)
        got = {}
        for line in listener.stdout:
            key, at = line.split()
            got[key] = float(at)
        listener.wait(30)
    lat = [got[k] - sent[k] for k in sent if k in got]
    return {"edits": edits, "delivered": len(got), "in_order": list(got) == list(sent), "latency_ms": summary_ms(lat)}


def _copy_vectors(lite, pg, ws_name: str) -> dict[str, Any]:
    """The SQLite store's vectors and serving model into the PostgreSQL store's workspace of the same
    name (store/vectors.py's write: on Postgres it writes `v` and makes the HNSW index)."""
    from autodoc.store import vectors as stored
    from autodoc.store.workspaces import get_workspace

    t0 = time.monotonic()
    with lite.read() as src:
        ws_src = get_workspace(src, ws_name)
        active = stored.active_model(src, ws_src.id)
        assert active is not None, "the SQLite store has no vectors"
        rows = src.execute(
            "SELECT text_hash, f32, bits FROM vectors WHERE workspace_id=? AND model_fp=? ORDER BY text_hash",
            (ws_src.id, active.fingerprint),
        ).fetchall()
    with pg.write() as dst:
        ws = get_workspace(dst, ws_name)
        for i in range(0, len(rows), 1000):
            batch = [(h, bytes(f), bytes(b)) for h, f, b in rows[i : i + 1000]]
            stored.write_vectors(dst, ws.id, active.fingerprint, batch)
        stored.activate(dst, ws.id, active.fingerprint, active.config or {}, active.name or "")
    return {"vectors": len(rows), "seconds": round(time.monotonic() - t0, 2), "model_fp": active.fingerprint}


def _comparable(answer: bytes) -> Any:
    """An answer without what no two runs share (timings)."""
    a = json.loads(answer)
    if isinstance(a, dict):
        a.pop("took_ms", None)
        a.pop("timings", None)
    return a


def _difference(lite: bytes, pg: bytes) -> dict[str, Any]:
    """Where two answers to one query part: the first hit (rank from 1) whose chunk or scores differ,
    the two hits there, and whether the same chunks are answered at all."""
    a, b = json.loads(lite), json.loads(pg)
    ha, hb = a.get("hits", []), b.get("hits", [])
    key = lambda h: (h.get("path"), h.get("chunk_id"), h.get("scores"))  # noqa: E731
    rank = next((i for i, (x, y) in enumerate(zip(ha, hb)) if key(x) != key(y)), min(len(ha), len(hb)))
    pick = lambda h: {k: h.get(k) for k in ("path", "chunk_id", "scores")}  # noqa: E731
    return {
        "first_rank": rank + 1,
        "sqlite": pick(ha[rank]) if rank < len(ha) else None,
        "postgres": pick(hb[rank]) if rank < len(hb) else None,
        "same_chunks": {h.get("chunk_id") for h in ha} == {h.get("chunk_id") for h in hb},
        "hits_differ": sum(key(x) != key(y) for x, y in zip(ha, hb)) + abs(len(ha) - len(hb)),
        "other_fields_differ": sorted(k for k in set(a) | set(b) if k != "hits" and a.get(k) != b.get(k)),
    }


def scifact(uri: str, tmp: Path, n_queries: int | None) -> dict[str, Any]:
    from autodoc.config import Settings
    from autodoc.service import Service

    from .quality import (
        DEFAULT_DATA,
        DEFAULT_HYBRID,
        HYBRID,
        WORKSPACE,
        build_store,
        evaluate,
        load_collection,
        run_queries,
    )

    col = load_collection(DEFAULT_DATA / "scifact")
    built = build_store(col, quiet=True)  # the cached store (embeds only what it lacks)
    lite_path = copy_store(built.store, tmp / "scifact.db")
    out: dict[str, Any] = {"source_store": str(built.store), "build": built.report}
    lite = Service(Settings.from_env(store=lite_path))
    pg = Service(Settings.from_env(store=uri))
    try:
        t0 = time.monotonic()
        lite.index(WORKSPACE)  # the copy against this code (a no-op when the cache is current)
        out["sqlite_index_seconds"] = round(time.monotonic() - t0, 2)
        with lite.store.read() as db:  # the same configuration (chunking, model, fusion)
            config = json.loads(db.execute("SELECT config FROM workspaces WHERE name=?", (WORKSPACE,)).fetchone()[0])
        pg.workspace_add(WORKSPACE, str(built.workspace_dir), config)
        out["copy"] = _copy_vectors(lite.store, pg.store, WORKSPACE)
        t0 = time.monotonic()
        rep = pg.index(WORKSPACE, embed=True)
        out["postgres_index"] = {
            "seconds": round(time.monotonic() - t0, 2),
            "chunks": rep["chunks"],
            "embedded": rep["embedding"],
        }
        out["embedding"] = {
            name: {k: svc.workspace_status(WORKSPACE)["embedding"][k] for k in ("state", "embedded", "total", "search")}
            for name, svc in (("sqlite", lite), ("postgres", pg))
        }
        queries = col.split_queries("test")[:n_queries]
        qrels = {q: col.qrels["test"][q] for q, _ in queries}
        out["queries"] = len(queries)
        out["configs"] = []
        for name, opts in (
            ("lexical", {"stages": ["lexical"], "limit": 100}),
            ("semantic", {"stages": ["semantic"], "limit": 100}),
            (DEFAULT_HYBRID, {"stages": HYBRID, "limit": 100}),
            ("hybrid (default), limit 10", {"stages": HYBRID, "limit": 10}),
        ):
            row: dict[str, Any] = {"name": name}
            answers = {}
            for backend, svc in (("sqlite", lite), ("postgres", pg)):
                svc.search(WORKSPACE, "warm up the caches", {**opts, "limit": 5})
                log(f"{backend}: {name} ({len(queries)} queries)")
                r = run_queries(svc, queries, opts)
                answers[backend] = r["answers"]
                row[backend] = {
                    "metrics": _round(evaluate(r["run"], qrels)),
                    "latency_ms": summary_ms(r["latency"]),
                    "errors": len(r["errors"]),
                    "semantic": r["semantic"],
                }
            row["ndcg10_difference"] = round(
                row["postgres"]["metrics"]["nDCG@10"] - row["sqlite"]["metrics"]["nDCG@10"], 4
            )
            differ = [q for q, _ in queries if _comparable(answers["sqlite"][q]) != _comparable(answers["postgres"][q])]
            row["identical_answers"] = len(queries) - len(differ)
            row["differing"] = [
                _difference(answers["sqlite"][q], answers["postgres"][q]) | {"query": q} for q in differ
            ]
            log(f"  {row['name']}: sqlite {row['sqlite']['metrics']} postgres {row['postgres']['metrics']}")
            out["configs"].append(row)
        out["semantic_leg"] = _leg_recall(lite, pg, WORKSPACE, [t for _, t in queries])
    finally:
        pg.close()
        lite.close()
    return out


def _leg_recall(lite, pg, ws_name: str, texts: list[str]) -> dict[str, Any]:
    """The semantic leg alone at the depths a search asks it for (51: limit 10; 201: limit 100): the
    PostgreSQL store's answer (HNSW candidates, rescored) against the SQLite store's exact in-memory
    one, query by query: how many answers differ and how many of the exact chunks were missed."""
    from autodoc.search.semantic.store_side import StoreVectors
    from autodoc.search.semantic.vector_cache import VectorCache
    from autodoc.store import vectors as stored
    from autodoc.store.workspaces import get_workspace

    out: dict[str, Any] = {}
    with lite.store.read() as a, pg.store.read() as b:
        wa, wb = get_workspace(a, ws_name), get_workspace(b, ws_name)
        active = stored.active_model(a, wa.id)
        assert active is not None
        provider = lite.providers.get(active.config or {})
        exact = VectorCache().searchable(a, wa.id, active.fingerprint, provider.dim)
        served = VectorCache().searchable(b, wb.id, active.fingerprint, provider.dim)
        vecs = [provider.embed_query(t) for t in texts]
        for top in (11, 51, 201):
            differ = missed = 0
            lat = []
            for v in vecs:
                want = exact.search(v, top, None)
                t0 = time.perf_counter()
                got = served.search(v, top, None)
                lat.append(time.perf_counter() - t0)
                differ += got != want
                missed += len({i for i, _ in want} - {i for i, _ in got})
            out[f"top{top}"] = {
                "served_by": "pgvector" if isinstance(served, StoreVectors) else "memory",
                "answers_differing": differ,
                "exact_chunks_missed": missed,
                "of": top * len(vecs),
                "recall": round(1 - missed / (top * len(vecs)), 5),
                "latency_ms": summary_ms(lat),
            }
    return out


GRAPHS = [(16, 64), (24, 100), (32, 200)]


def hnsw(store: Path, uri: str, n_queries: int | None) -> dict[str, Any]:
    import apsw
    import psycopg

    from autodoc.embed.providers import Providers
    from autodoc.store.pg.vectors import literal

    from .quality import DEFAULT_DATA, load_collection

    db = apsw.Connection(str(store), flags=apsw.SQLITE_OPEN_READONLY)
    active = db.execute("SELECT active_fp, active_config FROM embed_state WHERE active_fp IS NOT NULL").fetchone()
    assert active is not None, "the store has no vectors"
    fp, config = active
    rows = [(h, bytes(b)) for h, b in db.execute("SELECT text_hash, f32 FROM vectors WHERE model_fp = ?", (fp,))]
    db.close()
    real = np.stack([np.frombuffer(b, dtype="<f4") for _, b in rows])
    dim = real.shape[1]
    provider = Providers().get(json.loads(config))
    assert provider is not None and provider.fingerprint == fp, "the store's model is not the bundled one"
    col = load_collection(DEFAULT_DATA / "scifact")
    queries = [provider.embed_query(t) for _, t in col.split_queries("test")[:n_queries]]
    exact = {
        top: [np.argsort(-(real @ (q / np.linalg.norm(q))), kind="stable")[:top] for q in queries] for top in (11, 51)
    }
    out: dict[str, Any] = {"rows": len(rows), "dim": dim, "queries": len(queries), "graphs": []}
    with psycopg.connect(uri, autocommit=True) as pg:
        pg.execute("CREATE EXTENSION IF NOT EXISTS vector")
        for m, efc in GRAPHS:
            pg.execute("DROP TABLE IF EXISTS g")
            pg.execute("CREATE TABLE g (id int PRIMARY KEY, v vector)")
            pg.execute(
                f"CREATE INDEX g_hnsw ON g USING hnsw ((v::vector({dim})) vector_cosine_ops) "
                f"WITH (m = {m}, ef_construction = {efc})"
            )
            t0 = time.monotonic()
            with pg.transaction(), pg.cursor() as cur:
                cur.executemany("INSERT INTO g VALUES (%s, %s::vector)", [(i, literal(v)) for i, v in enumerate(real)])
            row: dict[str, Any] = {
                "m": m,
                "ef_construction": efc,
                "insert_rows_per_s": round(len(rows) / (time.monotonic() - t0), 1),
            }
            for top, ef in ((11, 100), (51, 204)):
                missed, lat = 0, []
                for q, want in zip(queries, exact[top]):
                    with pg.transaction():
                        pg.execute("SELECT set_config('hnsw.ef_search', %s, true)", (str(ef),))
                        t0 = time.perf_counter()
                        got = [
                            i
                            for (i,) in pg.execute(
                                f"SELECT id FROM g ORDER BY v::vector({dim}) <=> %s::vector({dim}) LIMIT %s",
                                (literal(q), ef),
                            )
                        ]
                        lat.append(time.perf_counter() - t0)
                    missed += len(set(want.tolist()) - set(got))
                row[f"top{top}_ef{ef}"] = {"missed": missed, "of": top * len(queries), "p50_ms": summary_ms(lat)["p50"]}
            log(f"hnsw m {m} ef_construction {efc}: {row}")
            out["graphs"].append(row)
        pg.execute("DROP TABLE IF EXISTS g")
    return out


def _round(m: dict[str, float]) -> dict[str, float]:
    return {k: round(v, 4) for k, v in m.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.pg_study", description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=["lexical", "vectors", "notify", "scifact", "hnsw"])
    ap.add_argument("--store", type=Path, help="a built SciFact store (default: the newest in the bench cache)")
    ap.add_argument("--queries", type=int, help="lexical, scifact: only the first N train (test) queries")
    ap.add_argument("--size", type=int, default=50_000, help="vectors: rows (real ones, then synthetic)")
    ap.add_argument("--edits", type=int, default=100, help="notify: transactions")
    args = ap.parse_args(argv)
    res: dict[str, Any] = {"what": args.what, "command": command_line(), "commit": git_commit()}
    res["machine"] = machine_note()
    with tempfile.TemporaryDirectory(prefix="ad-pgstudy-", dir="/tmp") as tmp:
        store = Path(tmp) / "autodoc.db"
        if args.what in ("lexical", "vectors", "hnsw"):
            src = args.store or newest_store()
            res["source_store"] = str(src)
            copy_store(src, store)
        server, uri = start_server(Path(tmp))
        try:
            if args.what == "lexical":
                res.update(lexical(store, uri, args.queries))
            elif args.what == "vectors":
                res.update(vectors(store, uri, args.size))
            elif args.what == "hnsw":
                res.update(hnsw(store, uri, args.queries))
            elif args.what == "scifact":
                res.update(scifact(uri, Path(tmp), args.queries))
            else:
                res.update(notify(uri, args.edits))
        finally:
            server.cleanup()
    print(json.dumps(res, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
