"""The PostgreSQL store at scale (issue 34, "Scale"): the speed stores of bench.speed (100k, 1M chunks)
copied into PostgreSQL and measured beside the SQLite store they came from, in one run.

    python -m bench.pg_scale copy --size 100000            # the cached speed store -> a database (once)
    python -m bench.pg_scale measure --size 100000 [--queries 100] [--out docs/benchmarks/pg_scale.md]
    python -m bench.pg_scale statements                    # where an index run's writer time goes

`copy`: the speed store (bench.speed --build-only --sizes N builds and caches it) goes into the
database `speed_N` of a private PostgreSQL 16 + pgvector server (pgserver, the test extra; its data in
the bench cache, `pg-scale/pgdata`, so a 1M copy is made once) by the product's own `store copy`
(store/pg/copy.py: binary COPY table by table, the same ids, then the HNSW index as the product makes
it). Timed, with the load beside it.

`measure` (one process, everything interleaved query by query, warm-up first):

- search: `Service.search` on the SQLite store and on the PostgreSQL store (each a read-only
  Service, as a reader daemon opens it), hybrid (the default stages) and each leg alone
  (["lexical"], ["semantic"]), for bench.speed's two query sets (keyword pairs and SciFact claims);
  the SQLite backend is the same-process baseline, so every PostgreSQL figure has its ratio;
- a reader daemon's RSS: `autodoc serve` on the database (pgvector: the daemon holds no vectors)
  after the query sets went through it, its reader processes counted; the same for the SQLite store;
- 16 clients over 4 daemons on the one database (each daemon its own socket and XDG dirs, as four
  machines), each client a thread with its own connection sending the query sets in turn for
  `--seconds`: requests/s and p50/p99; beside it 16 clients on one daemon over the SQLite store;
- index throughput: real corpora of ../shared/data/corpora (opentelemetry-docs + swift-evolution,
  ~1,500 files; lexical only, no model) indexed by `Service.index` into a fresh SQLite file and a
  fresh PostgreSQL schema, alternately, `--index-rounds` times: chunks/s each.

`statements`: the index part's corpora indexed once into a fresh database with every statement of
the writer timed (where an index run's time goes: docs/dev/postgres.md, section 7c).

The server is a throwaway one (fsync off, as the tests' server), shared_buffers 1 GB. The machine is
shared: every figure has the load average (1 min) beside it.

Runs on: the benchmark's main thread (16 client threads for the concurrency part).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .common import (
    DEFAULT_DATA,
    RESULTS,
    SCIFACT,
    WORKSPACE,
    SocketClient,
    cache_root,
    command_line,
    git_commit,
    interleaved,
    log,
    machine_note,
    percentile,
    query_sets,
    ratio,
    summary_ms,
)

REPO = Path(__file__).resolve().parents[1]
CORPORA = DEFAULT_DATA / "corpora"
INDEX_CORPORA = ("opentelemetry-docs", "swift-evolution")
NO_MODEL = {"embedding": {"provider": "none"}}
XDG = ("XDG_RUNTIME_DIR", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME")
SERVER_CONF = "\n# bench/pg_scale.py\nshared_buffers = 1GB\nmax_connections = 200\n"


def load() -> float:
    return round(os.getloadavg()[0], 2)


# -- the server ----------------------------------------------------------------------------------


class Server:
    """The bench's PostgreSQL server (data kept in the bench cache between runs)."""

    def __init__(self) -> None:
        sys.path.insert(0, str(REPO / "tests"))
        from helpers.pg import PgServer  # type: ignore[import-not-found]  # the tests' private server

        self.base = cache_root() / "pg-scale"
        self.base.mkdir(parents=True, exist_ok=True)
        self.pg = PgServer(self.base / "pgdata")

    def start(self) -> str:
        conf = self.pg.pgdata / "postgresql.conf"
        if not conf.exists():
            self.pg.start()  # initdb
            self.pg.stop()
        if "bench/pg_scale.py" not in conf.read_text():
            with open(conf, "a") as f:
                f.write(SERVER_CONF)
        return self.pg.start()

    def uri(self, database: str) -> str:
        return self.pg.uri(database)

    def stop(self) -> None:
        self.pg.stop(timeout=120)


def _database(admin_uri: str, name: str, fresh: bool) -> None:
    import psycopg

    with psycopg.connect(admin_uri, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if exists and fresh:
            conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        if fresh or not exists:
            conn.execute(f'CREATE DATABASE "{name}"')


READER = "autodoc_reader"


def reader_uri(server: Server, database: str) -> str:
    """The database as a reader role sees it (README, For a team): SELECT only, so its daemons open the
    store read-only (no watching, no catch-up index, no embedding): what a team's readers run."""
    import psycopg

    from autodoc.store.pg.roles import grant

    with psycopg.connect(server.uri(database), autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (READER,)).fetchone() is None:
            conn.execute(f"CREATE ROLE {READER} LOGIN")
        grant(conn, readers=[READER])
    uri = server.uri(database)
    return uri.replace("postgres:@", f"{READER}:@", 1) if "postgres:@" in uri else uri + f"&user={READER}"


def _copied(server: Server, size: int) -> Path:
    return server.base / f"copied-{size}.json"


def speed_store(size: int) -> Path:
    from .speed import find_store

    store = find_store(size, cache_root())
    if store is None:
        raise SystemExit(f"no cached {size}-chunk speed store: python -m bench.speed --build-only --sizes {size}")
    return store


# -- copy ----------------------------------------------------------------------------------------


def run_copy(size: int, build_memory: str) -> dict[str, Any]:
    from autodoc.store.pg.copy import copy_store

    server = Server()
    admin = server.start()
    try:
        src = speed_store(size)
        name = f"speed_{size}"
        _database(admin, name, fresh=True)
        before = load()
        t0 = time.monotonic()
        last = [0.0]

        def progress(table: str, n: int) -> None:
            if time.monotonic() - last[0] > 30 or n == 0:
                last[0] = time.monotonic()
                log(f"  copy {table}: {n:,} rows ({time.monotonic() - t0:.0f} s, load {load()})")

        report = copy_store(src, server.uri(name), progress=progress, build_memory=build_memory)
        info = {
            "size": size,
            "source": str(src),
            "source_mb": round(src.stat().st_size / 2**20, 1),
            "seconds": round(time.monotonic() - t0, 1),
            "load_before": before,
            "load_after": load(),
            "command": command_line(),
            "commit": git_commit(),
            "date": time.strftime("%Y-%m-%d %H:%M"),
            "build_memory": build_memory,
            "report": report,
        }
        import psycopg

        with psycopg.connect(server.uri(name)) as conn:
            row = conn.execute("SELECT pg_database_size(current_database())").fetchone()
            info["database_mb"] = round(row[0] / 2**20, 1) if row else None
        _copied(server, size).write_text(json.dumps(info, indent=1))
        log(json.dumps(info))
        return info
    finally:
        server.stop()


# -- measuring -----------------------------------------------------------------------------------


def _services(src: Path, uri: str) -> tuple[Any, Any]:
    from autodoc.config import Settings
    from autodoc.service import Service

    return Service(Settings.from_env(store=src), writer=False), Service(Settings.from_env(store=uri), writer=False)


def _search(svc: Any, opts: dict[str, Any], q: str) -> Any:
    return svc.search(WORKSPACE, q, opts)


def searches(src: Path, uri: str, sets: dict[str, list[str]], rounds: int) -> dict[str, Any]:
    """Every query set through both backends, hybrid and each leg alone, interleaved."""
    lite, pg = _services(src, uri)
    out: dict[str, Any] = {}
    try:
        st = pg.workspace_status(WORKSPACE)
        out["postgres_embedding"] = st["embedding"]
        kinds = {"hybrid": None, "lexical": ["lexical"], "semantic": ["semantic"]}
        for name, queries in sets.items():
            fns: dict[str, Callable[[str], Any]] = {}
            for kind, stages in kinds.items():
                opts: dict[str, Any] = {"limit": 10} | ({"stages": stages} if stages else {})
                for backend, svc in (("sqlite", lite), ("postgres", pg)):
                    fns[f"{kind}/{backend}"] = functools.partial(_search, svc, opts)
            t0 = time.monotonic()
            for q in queries:  # warm-up: the query vectors land in the provider's cache, pages in memory
                for fn in fns.values():
                    fn(q)
            log(f"  {name}: warm-up {time.monotonic() - t0:.0f} s (load {load()})")
            same = sum(
                1
                for q in queries
                if [h["chunk_id"] for h in lite.search(WORKSPACE, q, {"limit": 10})["hits"]]
                == [h["chunk_id"] for h in pg.search(WORKSPACE, q, {"limit": 10})["hits"]]
            )
            before = load()
            t = interleaved(queries, fns, rounds=rounds)
            s = {k: summary_ms(v) for k, v in t.items()}
            res: dict[str, Any] = {"queries": len(queries), "same_hybrid_top10": same, "load": [before, load()]}
            for kind in kinds:
                a, b = s[f"{kind}/postgres"], s[f"{kind}/sqlite"]
                res[kind] = {"postgres": a, "sqlite": b, "ratio": ratio(a, b)}
            out[name] = res
            log(f"  {name}: {json.dumps(res)}")
    finally:
        lite.close()
        pg.close()
    return out


def _tree_rss(pid: int, children: bool = True) -> float:
    """RSS of a process and its children (a daemon's reader processes), MB."""
    import psutil  # type: ignore[import-untyped]  # pgserver's dependency

    p = psutil.Process(pid)
    return round(sum(x.memory_info().rss for x in [p, *(p.children(recursive=True) if children else [])]) / 2**20, 1)


def start_daemon(base: Path, store: str) -> tuple[subprocess.Popen, Path]:
    """One `machine`: its own socket, XDG dirs and log; ready once the socket answers."""
    from autodoc.rpc.transport import socket_answers

    base.mkdir(parents=True)
    env = {**os.environ, "AUTODOC_STORE": store, "AUTODOC_LOG": "WARNING"}
    for name in XDG:
        env[name] = str(base / name.lower())
        Path(env[name]).mkdir(mode=0o700)
    sock = base / "s.sock"
    argv = [sys.executable, "-m", "autodoc.daemon", "--store", store, "--socket", str(sock), "--no-watch"]
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=open(base / "log", "wb"), env=env
    )
    deadline = time.monotonic() + 600
    while not (sock.exists() and socket_answers(sock)):
        if proc.poll() is not None or time.monotonic() > deadline:
            sys.exit(f"the daemon did not start:\n{(base / 'log').read_text(errors='replace')[-3000:]}")
        time.sleep(0.1)
    return proc, sock


def stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.terminate()
    for p in procs:
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def clients(socks: list[Path], queries: list[str], n: int, seconds: float) -> dict[str, Any]:
    """`n` clients (threads, each its own connection), spread over the sockets, each sending the
    queries in turn (its own starting point) for `seconds`: requests/s and latency."""
    times: list[list[float]] = [[] for _ in range(n)]
    errors: list[str] = []
    start = threading.Barrier(n + 1)
    stop_at = [0.0]

    def client(i: int) -> None:
        c = SocketClient(socks[i % len(socks)])
        try:
            k = i * 7
            start.wait()
            while time.monotonic() < stop_at[0]:
                q = queries[k % len(queries)]
                k += 1
                t = time.perf_counter()
                try:
                    c.call("search.query", [WORKSPACE, q, {"limit": 10}])
                except Exception as e:  # counted, and the run goes on
                    errors.append(str(e)[:200])
                times[i].append(time.perf_counter() - t)
        finally:
            c.close()

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    before = load()
    stop_at[0] = time.monotonic() + seconds
    t0 = time.monotonic()
    start.wait()
    for t in threads:
        t.join()
    took = time.monotonic() - t0
    every = [x for ts in times for x in ts]
    return {
        "clients": n,
        "daemons": len(socks),
        "seconds": round(took, 1),
        "requests": len(every),
        "requests_per_s": round(len(every) / took, 1),
        "p50_ms": round(percentile(every, 50) * 1000, 1),
        "p99_ms": round(percentile(every, 99) * 1000, 1),
        "errors": len(errors),
        "first_error": errors[0] if errors else None,
        "load": [before, load()],
    }


def _send_all(sock: Path, queries: list[str]) -> None:
    c = SocketClient(sock)
    try:
        for q in queries:
            c.call("search.query", [WORKSPACE, q, {"limit": 10}])
    finally:
        c.close()


def daemons(src: Path, uri: str, sets: dict[str, list[str]], seconds: float) -> dict[str, Any]:
    """A reader daemon's RSS on each backend, then 16 clients over 4 daemons (PostgreSQL) and over
    the one daemon a SQLite store can have."""
    base = Path(tempfile.mkdtemp(prefix="ad-pgscale-", dir="/tmp"))
    queries = [q for qs in sets.values() for q in qs]
    out: dict[str, Any] = {}
    procs: list[subprocess.Popen] = []
    try:
        for backend, store in (("sqlite", str(src)), ("postgres", uri)):
            t0 = time.monotonic()
            p, sock = start_daemon(base / f"rss-{backend}", store)
            procs.append(p)
            started = round(time.monotonic() - t0, 1)
            c = SocketClient(sock)
            rss0 = _tree_rss(p.pid)
            for q in queries:
                c.call("search.query", [WORKSPACE, q, {"limit": 10}])
            status = c.call("workspace.status", [WORKSPACE])
            c.close()
            out[f"rss_{backend}"] = {
                "started_s": started,
                "rss_started_mb": rss0,
                "rss_after_mb": _tree_rss(p.pid),
                "daemon_only_mb": _tree_rss(p.pid, children=False),
                "searches": len(queries),
                "embedding_search": status["embedding"].get("search"),
                "load": load(),
            }
            log(f"  rss {backend}: {out[f'rss_{backend}']}")
            if backend == "sqlite":
                out["clients_sqlite_1_daemon"] = clients([sock], queries, 16, seconds)
                log(f"  16 clients, 1 SQLite daemon: {out['clients_sqlite_1_daemon']}")
            stop(procs)
            procs.clear()
        socks = []
        for i in range(4):
            p, sock = start_daemon(base / f"d{i}", uri)
            procs.append(p)
            socks.append(sock)
        # warm-up as the SQLite daemon had (its RSS step sent it every query): each daemon gets every
        # query once, so its query vectors are cached and its caches loaded before the timed run
        warm = [threading.Thread(target=_send_all, args=(sock, queries)) for sock in socks]
        for t in warm:
            t.start()
        for t in warm:
            t.join()
        clients(socks, queries, 16, 5)  # and every reader connection of every daemon open
        out["clients_postgres_4_daemons"] = clients(socks, queries, 16, seconds)
        log(f"  16 clients, 4 PostgreSQL daemons: {out['clients_postgres_4_daemons']}")
        out["clients_postgres_1_daemon"] = clients(socks[:1], queries, 16, seconds)
        log(f"  16 clients, 1 PostgreSQL daemon: {out['clients_postgres_1_daemon']}")
    finally:
        stop(procs)
        shutil.rmtree(base, ignore_errors=True)
    return out


def fallback(server: Server, size: int, sets: dict[str, list[str]]) -> dict[str, Any]:
    """A reader daemon's RSS where the database has no pgvector: the product's in-memory index,
    loaded from the bytea rows. The database is a copy of the measured one (CREATE DATABASE …
    TEMPLATE) made as store/pg/schema.py leaves a database without the extension: no `v`, no HNSW,
    meta vector_extension "absent"."""
    import psycopg

    name = f"speed_{size}_novector"
    with psycopg.connect(server.uri("postgres"), autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None:
            t0 = time.monotonic()
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "speed_{size}"')
            with psycopg.connect(server.uri(name), autocommit=True) as db:
                db.execute("SET search_path TO autodoc, public")
                for (index,) in db.execute(
                    "SELECT indexname FROM pg_indexes WHERE schemaname = 'autodoc' AND indexname LIKE 'vectors_hnsw_%'"
                ).fetchall():
                    db.execute(f'DROP INDEX "{index}"')
                db.execute("ALTER TABLE vectors DROP COLUMN v")
                db.execute("UPDATE meta SET value = 'absent' WHERE key = 'vector_extension'")
                db.execute("VACUUM FULL vectors")
            log(f"  {name} made in {time.monotonic() - t0:.0f} s")
    uri = reader_uri(server, name)
    base = Path(tempfile.mkdtemp(prefix="ad-pgscale-fb-", dir="/tmp"))
    queries = [q for qs in sets.values() for q in qs]
    procs: list[subprocess.Popen] = []
    try:
        p, sock = start_daemon(base / "fallback", uri)
        procs.append(p)
        c = SocketClient(sock)
        rss0 = _tree_rss(p.pid)
        t0 = time.monotonic()
        c.call("search.query", [WORKSPACE, queries[0], {"limit": 10}])
        first = time.monotonic() - t0
        times = []
        for q in queries:
            t = time.perf_counter()
            c.call("search.query", [WORKSPACE, q, {"limit": 10}])
            times.append(time.perf_counter() - t)
        status = c.call("workspace.status", [WORKSPACE])
        c.close()
        return {
            "rss_started_mb": rss0,
            "first_search_s": round(first, 1),
            "rss_after_mb": _tree_rss(p.pid),
            "daemon_only_mb": _tree_rss(p.pid, children=False),
            "search_ms": summary_ms(times),
            "embedding_search": status["embedding"].get("search"),
            "load": load(),
        }
    finally:
        stop(procs)
        shutil.rmtree(base, ignore_errors=True)


def throughput(server: Server, rounds: int) -> dict[str, Any]:
    """Real corpora indexed into a fresh SQLite file and a fresh PostgreSQL database, alternately."""
    from autodoc.config import Settings
    from autodoc.service import Service

    base = Path(tempfile.mkdtemp(prefix="ad-pgscale-ix-", dir="/tmp"))
    runs: dict[str, list[dict[str, Any]]] = {"sqlite": [], "postgres": []}
    try:
        for r in range(rounds):
            order = ("sqlite", "postgres") if r % 2 == 0 else ("postgres", "sqlite")
            for backend in order:
                if backend == "sqlite":
                    store: Any = base / f"ix-{r}" / "autodoc.db"
                    store.parent.mkdir(parents=True)
                else:
                    _database(server.uri("postgres"), "index_bench", fresh=True)
                    store = server.uri("index_bench")
                svc = Service(Settings.from_env(store=store))
                try:
                    chunks = files = 0
                    before = load()
                    t0 = time.monotonic()
                    for name in INDEX_CORPORA:
                        svc.workspace_add(name, str(CORPORA / name), NO_MODEL)
                        rep = svc.index(name)
                        chunks += rep["chunks"]
                        files += rep["added"]
                    took = time.monotonic() - t0
                finally:
                    svc.close()
                row = {
                    "files": files,
                    "chunks": chunks,
                    "seconds": round(took, 1),
                    "chunks_per_s": round(chunks / took, 1),
                    "files_per_s": round(files / took, 1),
                    "load": [before, load()],
                }
                runs[backend].append(row)
                log(f"  index {backend}: {row}")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    best = {k: max(v, key=lambda x: x["chunks_per_s"]) for k, v in runs.items()}
    return {
        "corpora": list(INDEX_CORPORA),
        "runs": runs,
        "best_chunks_per_s": {k: v["chunks_per_s"] for k, v in best.items()},
        "ratio_best": round(best["postgres"]["chunks_per_s"] / best["sqlite"]["chunks_per_s"], 3),
    }


def statements() -> dict[str, Any]:
    """The index part's corpora indexed once into a fresh PostgreSQL database with every statement of
    the writer's snapshot timed (a wrapper round PgSnapshot.execute/executemany): seconds and count by
    statement, its first line with the rows of a multi-row VALUES folded into one."""
    import re

    from autodoc.config import Settings
    from autodoc.service import Service
    from autodoc.store.pg.snapshot import PgSnapshot

    spent: dict[str, list[float]] = {}

    def timed(method: Any) -> Any:
        def run(self: Any, sql: str, *args: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return method(self, sql, *args)
            finally:
                key = re.sub(r"\)(\s*,\s*\([?,\s]*\))+", ")", " ".join(sql.split()))[:100]
                got = spent.setdefault(key, [0.0, 0])
                got[0] += time.perf_counter() - t0
                got[1] += 1

        return run

    server = Server()
    server.start()
    saved = PgSnapshot.execute, PgSnapshot.executemany
    PgSnapshot.execute, PgSnapshot.executemany = timed(PgSnapshot.execute), timed(PgSnapshot.executemany)  # type: ignore[method-assign]
    try:
        _database(server.uri("postgres"), "statements_bench", fresh=True)
        svc = Service(Settings.from_env(store=server.uri("statements_bench")))
        try:
            before, chunks, t0 = load(), 0, time.monotonic()
            for name in INDEX_CORPORA:
                svc.workspace_add(name, str(CORPORA / name), NO_MODEL)
                chunks += svc.index(name)["chunks"]
            took = time.monotonic() - t0
        finally:
            svc.close()
    finally:
        PgSnapshot.execute, PgSnapshot.executemany = saved  # type: ignore[method-assign]
        server.stop()
    top = sorted(spent.items(), key=lambda kv: -kv[1][0])
    return {
        "command": command_line(),
        "commit": git_commit(),
        "chunks": chunks,
        "seconds": round(took, 1),
        "load": [before, load()],
        "in_statements_s": round(sum(v[0] for v in spent.values()), 2),
        "statements": sum(int(v[1]) for v in spent.values()),
        "by_statement": [{"sql": k, "seconds": round(v[0], 3), "count": int(v[1])} for k, v in top[:15]],
    }


def run_measure(args: argparse.Namespace) -> dict[str, Any]:
    server = Server()
    server.start()
    try:
        res: dict[str, Any] = {
            "bench": "pg_scale",
            "size": args.size,
            "command": command_line(),
            "commit": git_commit(),
            "date": time.strftime("%Y-%m-%d %H:%M"),
            "machine": machine_note(),
            "load_start": load(),
        }
        if args.parts - {"index"}:  # the index part indexes corpora of its own: no copy, no query sets
            copied = json.loads(_copied(server, args.size).read_text())
            src = speed_store(args.size)
            uri = reader_uri(server, f"speed_{args.size}")
            sets = query_sets(SCIFACT, args.queries)
            res["copy"] = {
                k: copied[k] for k in ("seconds", "source_mb", "database_mb", "load_before", "load_after", "command")
            } | {"hnsw": copied["report"].get("hnsw"), "steps_s": copied["report"]["seconds"]}
        if "search" in args.parts:
            log(f"searches at {args.size:,}")
            res["search"] = searches(src, uri, sets, args.rounds)
        if "daemons" in args.parts:
            log("daemons")
            res["daemons"] = daemons(src, uri, sets, args.seconds)
        if "fallback" in args.parts:
            log("in-memory fallback daemon")
            res["fallback"] = fallback(server, args.size, sets)
            log(f"  {res['fallback']}")
        if "index" in args.parts:
            log("index throughput")
            res["index"] = throughput(server, args.index_rounds)
        res["load_end"] = load()
        return res
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.pg_scale", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("copy", help="copy the cached speed store of --size chunks into the bench's database")
    c.add_argument("--size", type=int, default=100_000)
    c.add_argument("--build-memory", default="3GB", help="maintenance_work_mem of the HNSW build (the graph fits)")
    m = sub.add_parser("measure", help="measure --size (its copy made first)")
    m.add_argument("--size", type=int, default=100_000)
    m.add_argument("--queries", type=int, default=100, help="queries per set (keyword pairs, claims)")
    m.add_argument("--rounds", type=int, default=1)
    m.add_argument("--seconds", type=float, default=30.0, help="each concurrency run")
    m.add_argument("--index-rounds", type=int, default=2)
    m.add_argument("--parts", default="search,daemons,index", help="of search,daemons,index,fallback")
    m.add_argument("--json", type=Path, default=RESULTS / "pg_scale.json", help="results by size ('-': print only)")
    sub.add_parser("statements", help="the index part's corpora indexed once, every writer statement timed")
    r = sub.add_parser("render", help="write --out from --json")
    r.add_argument("--json", type=Path, default=RESULTS / "pg_scale.json")
    r.add_argument("--out", type=Path, default=RESULTS / "pg_scale.md")
    args = ap.parse_args(argv)
    if args.cmd == "copy":
        run_copy(args.size, args.build_memory)
        return 0
    if args.cmd == "statements":
        print(json.dumps(statements(), indent=1))
        return 0
    if args.cmd == "render":
        args.out.write_text(render(json.loads(args.json.read_text())))
        return 0
    args.parts = set(args.parts.split(","))
    res = run_measure(args)
    print(json.dumps(res, indent=1))
    if str(args.json) != "-":
        every = json.loads(args.json.read_text()) if args.json.exists() else {}
        # a run of some parts updates those parts: each part keeps the command and commit it ran with
        for part in ("search", "daemons", "index", "fallback"):
            if part in res:
                res[part]["run"] = {k: res[k] for k in ("command", "commit", "date")}
        every[str(args.size)] = every.get(str(args.size), {}) | res
        args.json.write_text(json.dumps(every, indent=1) + "\n")
    return 0


def _ms(x: dict[str, Any]) -> str:
    return f"{x['p50']:.1f} / {x['p95']:.1f}"


def _runs(r: dict[str, Any]) -> list[str]:
    """Which command measured which parts (a run of some parts updates only those)."""
    by: dict[tuple[str, str, str], list[str]] = {}
    for part in ("search", "daemons", "index", "fallback"):
        if part in r and "run" in r[part]:
            run = r[part]["run"]
            by.setdefault((run["command"], run["commit"][:12], run["date"]), []).append(part)
    return [f"{', '.join(parts)}: `{cmd}` at {commit}, {date}" for (cmd, commit, date), parts in by.items()]


def render(every: dict[str, Any]) -> str:
    """docs/benchmarks/pg_scale.md from the results by size."""
    sizes = sorted(every, key=int)
    L = [
        "# The PostgreSQL store at scale (issue 34)",
        "",
        "Generated by `python -m bench.pg_scale render` from pg_scale.json (`python -m bench.pg_scale copy|measure"
        " --size N`; the harness's docstring says what each figure is). The machine: 2 cores shared with other"
        " work, so absolute figures are inflated; the SQLite store measured in the same process, interleaved"
        " query by query, is the baseline, and the load average (1 min) is beside every figure. What the"
        " figures say, and the slow paths they found: docs/dev/postgres.md, section 7c.",
        "",
    ]
    for k in sizes:
        r = every[k]
        c = r["copy"]
        L += [
            f"## {int(k):,} chunks",
            "",
            "Runs: " + "; ".join(_runs(r)) + ".",
            "",
            f"- Copy (`{c['command']}`, `store copy` of the {c['source_mb']:,} MB speed store): {c['seconds']} s at load"
            f" {c['load_before']}→{c['load_after']}; database {c['database_mb']:,} MB; steps (s): "
            + ", ".join(f"{t} {v}" for t, v in c["steps_s"].items() if v >= 0.5)
            + "; HNSW "
            + ", ".join(f"{h['seconds']} s" for h in c.get("hnsw") or []),
        ]
        if "search" in r:
            L += [
                "",
                "| query set | stages | PostgreSQL p50 / p95 ms | SQLite p50 / p95 ms | ratio p50 / p95 | load |",
                "|---|---|---|---|---|---|",
            ]
            for name in ("keywords", "claims"):
                x = r["search"][name]
                for kind in ("hybrid", "lexical", "semantic"):
                    y = x[kind]
                    L.append(
                        f"| {name} | {kind} | **{_ms(y['postgres'])}** | {_ms(y['sqlite'])} | "
                        f"{y['ratio']['p50']} / {y['ratio']['p95']} | {x['load'][0]}→{x['load'][1]} |"
                    )
            L += [
                "",
                f"Hybrid top-10 the same chunks on both: keywords {r['search']['keywords']['same_hybrid_top10']}/"
                f"{r['search']['keywords']['queries']}, claims {r['search']['claims']['same_hybrid_top10']}/"
                f"{r['search']['claims']['queries']}. PostgreSQL vectors searched by: "
                f"{r['search']['postgres_embedding'].get('search')}.",
            ]
        if "daemons" in r:
            d = r["daemons"]
            L += [
                "",
                "| daemon | RSS at start MB | RSS after the query sets MB (daemon alone) | load |",
                "|---|---|---|---|",
            ]
            for b in ("postgres", "sqlite"):
                x = d[f"rss_{b}"]
                L.append(
                    f"| {b} ({x['embedding_search']}) | {x['rss_started_mb']} | **{x['rss_after_mb']}** "
                    f"({x['daemon_only_mb']}) | {x['load']} |"
                )
            L += ["", "| clients | requests/s | p50 ms | p99 ms | errors | load |", "|---|---|---|---|---|---|"]
            for key, label in (
                ("clients_postgres_4_daemons", "16 over 4 PostgreSQL reader daemons"),
                ("clients_postgres_1_daemon", "16 on 1 PostgreSQL reader daemon"),
                ("clients_sqlite_1_daemon", "16 on 1 SQLite daemon (baseline)"),
            ):
                if key in d:
                    x = d[key]
                    L.append(
                        f"| {label} | **{x['requests_per_s']}** | {x['p50_ms']} | **{x['p99_ms']}** | {x['errors']} | "
                        f"{x['load'][0]}→{x['load'][1]} |"
                    )
        if "fallback" in r:
            f = r["fallback"]
            L += [
                "",
                f"Without pgvector (the in-memory fallback, a copy of the database with no `v` column): a reader "
                f"daemon's RSS {f['rss_started_mb']} MB at start, **{f['rss_after_mb']} MB** once its first search "
                f"loaded the vectors ({f['first_search_s']} s), searches p50/p95 {_ms(f['search_ms'])} ms through the "
                f"socket, load {f['load']}.",
            ]
        if "index" in r:
            ix = r["index"]
            L += [
                "",
                f"Index throughput ({' + '.join(ix['corpora'])}, lexical only, fresh store each run, alternating):",
                "",
                "| backend | runs: chunks/s (load) | best |",
                "|---|---|---|",
            ]
            for b in ("postgres", "sqlite"):
                runs = ", ".join(f"{x['chunks_per_s']} ({x['load'][0]}→{x['load'][1]})" for x in ix["runs"][b])
                L.append(f"| {b} | {runs} | **{ix['best_chunks_per_s'][b]}** |")
            L.append(f"\nPostgreSQL / SQLite (best runs): {ix['ratio_best']}.")
        L.append("")
    return "\n".join(L) + "\n"


if __name__ == "__main__":
    sys.exit(main())
