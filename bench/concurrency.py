"""The concurrency harness: many clients over the daemon's socket, and what the
socket, the lanes and the reader processes add per call.

    python -m bench.concurrency [options]    # clients: 1..32 clients, threads vs reader processes (concurrency.md)
    python -m bench.concurrency CASE [options]   # overhead, timeline, merge-memory, handoff, save-searchable
    python -m bench.concurrency --help       # the cases

Each section below was a script of its own; its docstring is kept as DOC_<CASE>.
Daemons started here run in processes of their own (some as
`python -m bench.concurrency CASE --serve-…` so the case can wrap the daemon's
functions first).

Runs on: the benchmark's main thread and its client threads."""

from __future__ import annotations

import argparse
import atexit
import glob
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import numpy as np

from autodoc.api import METHODS
from autodoc.config import Settings
from autodoc.readers.pool import ReaderPool
from autodoc.rpc.schemas import bind_params
from autodoc.service import Service

from .common import (
    REPO,
    RESULTS,
    SCIFACT,
    WORKSPACE,
    Case,
    SocketClient,
    cache_root,
    command_line,
    git_commit,
    harness,
    machine_note,
    percentile,
    query_sets,
    rss_mb,
    start_daemon,
    start_instrumented,
    stop_daemon,
    summary_ms,
)

# ==== clients (formerly bench/concurrency.py) =====================================================

DOC_CLIENTS = """search.query over the daemon's socket with 1, 2, 8 and 32 concurrent
clients (issues 3 and 19): requests/s and p50/p95/p99 per request, against
the same queries run in-process, one after another, in the same run; then
the same 8 fast clients beside one slow client (it sends searches and never
reads an answer), which must not slow them down.

Uses the speed benchmark's cached stores (`python -m bench.speed
--build-only` builds them), or --store. Each client is its own connection;
clients share one query list. Writes docs/benchmarks/concurrency.md, a
section per store size (--out-json keeps the figures, so sizes run apart
land in one page).

    python -m bench.concurrency [--chunks 100000,10000] [--queries 200] [--modes threads,pool] [--rounds 2]
"""


def stats(lat: list[float], wall: float, clients: Any, errors: list[str]) -> dict:
    return {
        "clients": clients,
        "requests": len(lat),
        "rps": len(lat) / wall if wall else 0.0,
        "wall_s": round(wall, 3),
        **summary_ms(lat),
        "p99": round(percentile([x * 1000 for x in lat], 99), 3),
        "errors": errors[:3],
    }


class SlowClient:
    """A connection that sends search requests and never reads an answer: the
    daemon's writes to it back up (socket buffer, then its outbox) while the
    other connections must go on being answered."""

    def __init__(self, sock: Path, query: str, stages: list[str], requests: int = 400):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(str(sock))
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        line = json.dumps(
            {"jsonrpc": "2.0", "method": "search.query", "params": [WORKSPACE, query, {"stages": stages, "limit": 50}]}
        )
        self.sock.setblocking(False)
        self.sent = 0
        for i in range(requests):
            try:
                self.sock.sendall((line[:-1] + f', "id": {i}}}\n').encode())
                self.sent += 1
            except BlockingIOError:
                break

    def close(self) -> None:
        self.sock.close()


def run_clients(sock: Path, queries: list[str], clients: int, stages: list[str], whole: bool = False) -> dict:
    """``clients`` connections splitting the query list (``whole``: each sends all of it)."""
    lat: list[float] = []
    lock = threading.Lock()
    errors: list[str] = []

    def worker(k: int) -> None:
        c = SocketClient(sock)
        mine = []
        try:
            for q in queries[k::clients] if clients > 1 and not whole else queries:
                t0 = time.perf_counter()
                c.call("search.query", [WORKSPACE, q, {"stages": stages, "limit": 10}])
                mine.append(time.perf_counter() - t0)
        except Exception as e:  # reported, not hidden
            errors.append(str(e)[:200])
        finally:
            c.close()
        with lock:
            lat.extend(mine)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    return stats(lat, wall, clients, errors)


def children(pid: int) -> list[int]:
    """Every child process, whichever thread started it (the lexical helper is started from a
    search's thread: /proc/<pid>/task/<pid>/children alone missed it)."""
    out: list[int] = []
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return out
    for task in tasks:
        try:
            out += [int(x) for x in (task / "children").read_text().split()]
        except OSError:
            pass
    return out


def role(pid: int) -> str:
    """A child's job: a reader process (readers/reader.py) or the lexical helper (search/lexical/legproc.py)."""
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "other"
    return (
        "helper"
        if b"autodoc.search.lexical.legproc" in cmd
        else "readers"
        if b"autodoc.readers.reader" in cmd
        else "other"
    )


def cpu_s(pid: int) -> dict[str, float]:
    """User + system CPU seconds (every thread) of the daemon, its reader processes and its
    lexical helper."""
    total = {"daemon": 0.0, "readers": 0.0, "helper": 0.0, "other": 0.0}
    for x in [pid, *children(pid)]:
        try:
            fields = Path(f"/proc/{x}/stat").read_text().rsplit(")", 1)[1].split()
            total["daemon" if x == pid else role(x)] += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            pass
    return total


def pss_mb(pid: int) -> float | None:
    try:
        for line in open(f"/proc/{pid}/smaps_rollup"):
            if line.startswith("Pss:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


def memory(pid: int) -> dict[str, Any]:
    """The daemon's RSS, and its reader processes' (PSS counts shared pages once)."""
    kids = [k for k in children(pid) if role(k) == "readers"]
    return {
        "daemon_rss_mb": rss_mb(pid),
        "readers": len(kids),
        "readers_rss_mb": [rss_mb(k) for k in kids],
        "pss_total_mb": round(sum(pss_mb(x) or 0 for x in [pid, *kids]), 1),
    }


def caught_up(log: Path, timeout: float = 180.0) -> None:
    """Wait for the live index's start-up catch-up (it stats every file: 5-15 s at 100k under
    load), so that no row shares the cores with it."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if "caught up" in log.read_text(errors="replace"):
            return
        time.sleep(0.2)


MODES = {"threads": "0", "pool": "auto"}  # AUTODOC_READERS for the daemon (auto: one reader per core)


def run_daemon_rows(store: Path, queries: list[str], stages: list[str], mode: str) -> dict[str, Any]:
    sock = Path(tempfile.mkdtemp(prefix="adconc-")) / "d.sock"
    env = MODES[mode]
    if env is None:
        os.environ.pop("AUTODOC_READERS", None)
    else:
        os.environ["AUTODOC_READERS"] = env
    p, why = start_daemon(store, sock)
    os.environ.pop("AUTODOC_READERS", None)
    if p is None:
        raise SystemExit(why)
    try:
        caught_up(sock.parent / "daemon.log")
        # warm-up: indexes loaded, and every query's vector cached in every process that may run
        # it: 8 clients start the pool's readers, then each sends the whole list, so each query
        # reaches each reader (not only whichever was free). Split between them, a reader saw
        # half the queries: the 1-client row (the daemon, its cache warm) then measured searches
        # and the 8-client rows searches plus query embeddings (≈ 7 ms of CPU a claim).
        run_clients(sock, queries, 1, stages)
        run_clients(sock, queries, 8, stages)
        run_clients(sock, queries, 8, stages, whole=True)
        res = []
        for n in (1, 2, 8, 32):
            c0, k0 = cpu_s(p.pid), time.process_time()
            res.append(run_clients(sock, queries, n, stages))
            c1, k1 = cpu_s(p.pid), time.process_time()
            row, per = res[-1], 1000 / max(1, res[-1]["requests"])
            row["cpu_ms_per_request"] = round((sum(c1.values()) - sum(c0.values())) * per, 3)
            row["cpu_ms_split"] = {k: round((c1[k] - c0[k]) * per, 2) for k in c1 if c1[k] - c0[k] > 0}
            # the clients share the cores: their CPU (this process's threads) is not the daemon's,
            # but with it the row says how busy the machine was, so whether more clients could
            # have had more requests/s at this CPU per request
            row["client_cpu_ms_per_request"] = round((k1 - k0) * per, 3)
            busy_s = sum(c1.values()) - sum(c0.values()) + (k1 - k0)
            row["cores_busy"] = round(busy_s / row["wall_s"], 2) if row.get("wall_s") else None
        slow = SlowClient(sock, queries[0], stages)
        try:
            time.sleep(0.5)  # let its answers back up
            beside = run_clients(sock, queries, 8, stages)
            beside["clients"] = f"8 + 1 slow ({slow.sent} requests sent, none read)"
            res.append(beside)
        finally:
            slow.close()
        mem = memory(p.pid)
    finally:
        stop_daemon(p)
    return {
        "mode": mode,
        "rows": res,
        "memory": mem,
        "load": os.getloadavg()[0],
        "scaling_8_over_1": round(res[2]["rps"] / res[0]["rps"], 2) if res[0]["rps"] else None,
    }


def measure_store(store: Path, queries: list[str], label: str, modes: list[str], rounds: int) -> dict[str, Any]:
    from autodoc.config import Settings
    from autodoc.service import Service

    out: dict[str, Any] = {"store": str(store), "queries": len(queries), "legs": {}}
    for stages_name, stages in (("lexical", ["lexical"]), ("hybrid", ["lexical", "semantic"])):
        # in-process baseline first (the daemon holds the writer lease, readers are fine beside it)
        svc = Service(Settings.from_env(store=store), writer=False)
        for q in queries:
            svc.search(WORKSPACE, q, {"stages": stages, "limit": 10})
        lat = []
        t0 = time.perf_counter()
        for q in queries:
            t = time.perf_counter()
            svc.search(WORKSPACE, q, {"stages": stages, "limit": 10})
            lat.append(time.perf_counter() - t)
        inproc = stats(lat, time.perf_counter() - t0, "in-process", [])
        svc.close()
        runs = []
        for r in range(rounds):  # the modes alternate, so the machine's load weighs on each alike
            for mode in modes if r % 2 == 0 else modes[::-1]:
                runs.append(run_daemon_rows(store, queries, stages, mode))
                print(label, stages_name, mode, json.dumps(runs[-1]), flush=True)
        out["legs"][stages_name] = {"in_process": inproc, "runs": runs}
    return out


def render(results: dict[str, Any], nq: int, preamble: str = "") -> str:
    lines = [
        "# Concurrent clients over the daemon's socket",
        "",
        "Generated by `bench/concurrency.py`; re-run the command below to refresh.",
        "",
        f"- Command: `{results['command']}`",
        f"- Commit: `{results['commit']}` · machine: " + ", ".join(f"{k} {v}" for k, v in results["machine"].items()),
        f"- Stores: the speed benchmark's stores (synthetic vectors); {nq} keyword queries (two content words "
        "from SciFact claims), limit 10, after a warm-up (1 client, 8 clients, then 8 clients each sending the "
        "whole list, so that every process that may run a query has its vector cached: every row measures "
        "searches, none query embeddings).",
        "- Each client is its own socket connection (newline framing) in its own thread, splitting the query list; "
        "latency is per request as the client sees it. The in-process row runs the same queries one after another "
        "through `Service.search` in this process. The slow-client column runs the 8 clients again beside one "
        "connection that sent up to 400 searches (limit 50) and never reads an answer.",
        "- Modes, alternating in one session (threads, pool, pool, threads, …) so the machine's load weighs on "
        "each alike: **threads** is `AUTODOC_READERS=0` (every search on the "
        "daemon's threads, as before the pool); **pool** is the daemon as it ships (`AUTODOC_READERS` unset or `auto`; "
        "readers/pool.py: searches in "
        "one reader process per core once clients overlap).",
        "- CPU per request: user + system CPU of the daemon, its reader processes and its lexical helper "
        "(search/lexical/legproc.py, which runs a lone hybrid search's lexical leg beside its semantic one), per request "
        "the clients sent. The clients' own CPU (this process's threads: socket calls, JSON) is its own column; "
        "cores busy is everyone's CPU (daemon, readers, helper, clients) over the row's wall time, of 2.0 on "
        "this machine: a row near 2.0 was bound by CPU, and more clients can add requests/s there only by "
        "costing less CPU per request.",
        "- Target (issue 19): at 8 clients ≥ 1.8× one client's requests/s on this 2-core machine, p99 reported, "
        "and a slow client stalls nobody.",
        "",
    ]
    if preamble:
        lines += [preamble, ""]
    for size, r in sorted(results["sizes"].items(), key=lambda kv: int(kv[0])):
        lines += [f"## {int(size):,} chunks", "", f"Store `{r['store']}`.", ""]
        for name, leg in r["legs"].items():
            ip = leg["in_process"]
            lines += [
                f"### {name}",
                "",
                f"In-process, one after another: {ip['rps']:.1f} requests/s, p50 {ip['p50']:.2f} ms, "
                f"p99 {ip['p99']:.2f} ms.",
                "",
                "| run | load | 1 client req/s | 2 | 8 | 32 | **8 / 1** | 8 clients p50 · p99 ms | "
                "8 + 1 slow req/s · p99 ms | CPU ms per request, 1 · 8 clients (daemon + readers + helper) | "
                "clients' CPU ms per request, 1 · 8 | cores busy, 1 · 8 clients | memory MB |",
                "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
            ]
            for i, run in enumerate(leg["runs"], 1):
                rows = run["rows"]
                mem = run["memory"]
                memtxt = f"daemon RSS {mem['daemon_rss_mb']}"
                if mem["readers"]:
                    memtxt += f" + readers {' + '.join(str(x) for x in mem['readers_rss_mb'])}; PSS total {mem['pss_total_mb']}"
                errs = sum(len(x["errors"]) for x in rows)
                lines.append(
                    f"| {i}. {run['mode']} | {run['load']:.1f} | {rows[0]['rps']:.1f} | {rows[1]['rps']:.1f} | "
                    f"{rows[2]['rps']:.1f} | {rows[3]['rps']:.1f} | **{run['scaling_8_over_1']}×** | "
                    f"{rows[2]['p50']:.1f} · {rows[2]['p99']:.1f} | {rows[4]['rps']:.1f} · {rows[4]['p99']:.1f} | "
                    f"{_cpu(rows[0])} · {_cpu(rows[2])} | {_num(rows[0], 'client_cpu_ms_per_request')} · "
                    f"{_num(rows[2], 'client_cpu_ms_per_request')} | {_num(rows[0], 'cores_busy')} · "
                    f"{_num(rows[2], 'cores_busy')} | "
                    f"{memtxt}{f' ({errs} errors)' if errs else ''} |"
                )
            lines.append("")
    lines += [
        "See also [reliability.md](reliability.md#load-clients-and-a-writer): 32 clients × 1,000 mixed",
        "requests (search, read, status, changes.since) while a writer changes the folder under",
        "the live index, with p50/p99 per method (`python -m bench.reliability load`).",
        "",
    ]
    return "\n".join(lines)


def _num(row: dict, key: str) -> str:
    x = row.get(key)  # absent from runs measured before it was
    return "–" if x is None else f"{x:.2f}"


def _cpu(row: dict) -> str:
    total = row.get("cpu_ms_per_request")
    if total is None:
        return "–"
    split = row.get("cpu_ms_split")
    if not split:
        return f"{total:.2f}"
    return f"{total:.2f} ({' + '.join(f'{split.get(k, 0):.2f}' for k in ('daemon', 'readers', 'helper'))})"


def main_clients(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.concurrency clients", description=DOC_CLIENTS.splitlines()[0])
    ap.add_argument("--chunks", default="100000", help="store sizes, comma-separated (the speed benchmark's stores)")
    ap.add_argument(
        "--store", type=Path, action="append", help="a store file instead (its size is read from it; repeatable)"
    )
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--data", type=Path, default=SCIFACT)
    ap.add_argument("--modes", default="threads,pool", help="daemon modes to alternate: threads, pool")
    ap.add_argument("--rounds", type=int, default=2, help="times each mode runs, alternating")
    ap.add_argument("--preamble", type=Path, help="a Markdown file whose text goes before the tables")
    ap.add_argument("--out", type=Path, default=RESULTS / "concurrency.md")
    ap.add_argument(
        "--out-json",
        type=Path,
        default=RESULTS / "concurrency.json",
    )
    a = ap.parse_args(argv)
    stores: dict[int, Path] = {}
    if a.store:
        from autodoc.store.db import open_reader

        for path in a.store:
            db = open_reader(path)
            stores[db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0] // 1000 * 1000] = path
            db.close()
    else:
        for n in (int(x) for x in a.chunks.split(",")):
            found = sorted(glob.glob(str(cache_root() / "stores" / f"speed-{n}-*" / "autodoc.db")))
            if not found:
                print(f"no cached {n}-chunk store: run python -m bench.speed --build-only first")
                return 1
            stores[n] = Path(found[0])
    queries = query_sets(a.data, a.queries)["keywords"]
    results: dict[str, Any] = {"sizes": {}}
    if a.out_json.exists():
        results = json.loads(a.out_json.read_text())
        results.setdefault("sizes", {})
    results.update(command=command_line(), commit=git_commit(), machine=machine_note())
    for n, store in stores.items():
        results["sizes"][str(n)] = measure_store(store, queries, f"{n:,}", a.modes.split(","), a.rounds)
        a.out_json.write_text(json.dumps(results, indent=1) + "\n")
    a.out.write_text(render(results, len(queries), a.preamble.read_text().strip() if a.preamble else ""))
    print(a.out.read_text())
    return 0


# ==== overhead (formerly bench/daemon_overhead.py) ================================================

DOC_OVERHEAD = """What the daemon's socket adds per call over the same call in-process
(issue 19: ≤ 0.5 ms): frame, parse, dispatch, the worker-thread hop, encode,
and the minimal client's own JSON on both ends.

One run, one store: a daemon serves the store on a Unix socket while this
process opens a Service on the same store (a reader beside the daemon's
writer lease). Each request runs both ways back to back, alternating which
goes first; the per-call difference (socket − in-process) is reported as
p50/p95 beside both sides' own latencies. The in-process side goes through
``connect.invoke`` (the same binding and schema check the daemon applies).

    python -m bench.concurrency overhead --store /tmp/copy/autodoc.db [--rounds 1000]
    python -m bench.concurrency overhead --chunks 100000      # the speed benchmark's cached store
    python -m bench.concurrency overhead --store … --stub-before /tmp/old/daemon:/tmp/old/clients/python

Then the RPC layer alone: a daemon of its own serving a stub in the
Service's place (``--stub-calls``, 0 skips it), its CPU per call and the
round trip, with reads handed to worker threads the usual way (a task,
jsonrpcserver, anyio's hand-off), through the thread lane (rpc/quick.py: every
read counted as not quick) and on the inline path (rpc/inline.py, and its
quick lane): stub daemons called in alternating blocks.

A daemon on a cached store only reads it (no file is written under its
folder by these requests), but its live index watches the corpus folder.
"""


def requests_for(queries: list[str], claims: list[str] | None = None) -> list[tuple[str, str, Any]]:
    """(label, method, params): a small answer read from the store, a lexical search, and
    with ``claims`` a hybrid search of a whole claim (a worker thread's hop, not the quick lane)."""
    out: list[tuple[str, str, Any]] = []
    for i, q in enumerate(queries):
        out.append(("workspace.list", "workspace.list", {}))
        out.append(
            (
                "search lexical (keywords, limit 10)",
                "search.query",
                [WORKSPACE, q, {"stages": ["lexical"], "limit": 10}],
            )
        )
        if claims:
            out.append(
                (
                    "search hybrid (claims, limit 10)",
                    "search.query",
                    [WORKSPACE, claims[i % len(claims)], {"stages": ["lexical", "semantic"], "limit": 10}],
                )
            )
    return out


def proc_cpu(pid: int) -> float:
    """User + system CPU seconds of a process, every thread."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure_overhead(store: Path, queries: list[str], rounds: int, claims: list[str] | None = None) -> dict[str, Any]:
    from autodoc.config import Settings
    from autodoc.connect import invoke
    from autodoc.service import Service

    sock = Path(tempfile.mkdtemp(prefix="adovh-")) / "d.sock"
    p, why = start_daemon(store, sock)
    if p is None:
        raise SystemExit(why)
    svc = Service(Settings.from_env(store=store), writer=False)
    client = SocketClient(sock)
    try:
        reqs = requests_for(queries, claims)
        for _, method, params in reqs:  # warm both sides: caches, the FTS pages, the schema validators
            invoke(svc, method, params)
            client.call(method, params)
        per: dict[str, dict[str, list[float]]] = {}
        n = 0
        while n < rounds:
            for label, method, params in reqs:
                first_local = n % 2 == 0
                for local in (first_local, not first_local):
                    t0 = time.perf_counter()
                    if local:
                        invoke(svc, method, params)
                    else:
                        client.call(method, params)
                    dt = time.perf_counter() - t0
                    per.setdefault(label, {"inproc": [], "socket": []})["inproc" if local else "socket"].append(dt)
                n += 1
                if n >= rounds:
                    break
        out = {}
        for label, t in per.items():
            diff = [s - i for s, i in zip(t["socket"], t["inproc"])]
            out[label] = {
                "calls": len(diff),
                "inproc": summary_ms(t["inproc"]),
                "socket": summary_ms(t["socket"]),
                "difference": summary_ms(diff),
            }
        # CPU time per call, which other processes on a shared machine do not inflate as they
        # do wall time: the daemon's (all its threads, from /proc) over a pass of socket calls,
        # this thread's over the same calls in-process, and the client's own share of the socket calls.
        for label in per:
            method, params = next((m, p) for lb, m, p in reqs if lb == label)
            n = max(200, rounds // len(per))
            t0 = time.thread_time()
            for _ in range(n):
                invoke(svc, method, params)
            inproc_cpu = (time.thread_time() - t0) / n
            c0, t0 = proc_cpu(p.pid), time.thread_time()
            for _ in range(n):
                client.call(method, params)
            client_cpu = (time.thread_time() - t0) / n
            daemon_cpu = (proc_cpu(p.pid) - c0) / n
            out[label]["cpu_ms"] = {
                "inproc": round(inproc_cpu * 1000, 3),
                "daemon": round(daemon_cpu * 1000, 3),
                "client": round(client_cpu * 1000, 3),
                "difference": round((daemon_cpu + client_cpu - inproc_cpu) * 1000, 3),
            }
        return out
    finally:
        client.close()
        svc.close()
        stop_daemon(p)


class StubService:
    """In the Service's place: answers at once, so what a call costs is the RPC
    layer alone (frame, parse, dispatch, the hand-off, encode)."""

    def workspace_list(self) -> dict:
        return {"workspaces": []}

    def info(self) -> dict:
        return {}

    def add_change_listener(self, fn: Any) -> None:
        pass

    def remove_change_listener(self, fn: Any) -> None:
        pass


def serve_stub(sock: Path, inline: bool, thread_lane: bool = False) -> None:
    import anyio

    from autodoc.rpc.server import RpcServer

    server = RpcServer(StubService())
    if thread_lane:
        server.inline.below_s = server.inline.wall_below_s = 0.0  # nothing quick: each lone read to the thread lane
    elif not inline and hasattr(server, "route"):  # issue 33: the inline rule is a constructor argument
        server = RpcServer(StubService(), inline=False)  # every read through a worker thread, no quick lane
    elif not inline and hasattr(server, "inline"):
        server.inline = None  # every read through a worker thread, as before issue 19's inline path
        server.quick = None  # and no quick lane (rpc/quick.py)
    anyio.run(lambda: server.run(socket_path=sock))


class StubDaemon:
    """A daemon process of its own serving the stub, and a client connected to it."""

    def __init__(self, inline: bool, env: dict[str, str] | None = None, thread_lane: bool = False):
        import subprocess
        import sys

        self.sock = Path(tempfile.mkdtemp(prefix="adstub-")) / "d.sock"
        self.p = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bench.concurrency",
                "overhead",
                "--serve-stub",
                str(self.sock),
                *([] if inline else ["--no-inline"]),
                *(["--thread-lane"] if thread_lane else []),
            ],
            cwd=REPO,
            env=env,
        )
        t0 = time.monotonic()
        while not self.sock.exists():
            if self.p.poll() is not None or time.monotonic() - t0 > 60:
                raise SystemExit("the stub daemon did not start")
            time.sleep(0.05)
        self.client = SocketClient(self.sock)
        for _ in range(300):  # warm: and the inline path learns that workspace.list is quick
            self.client.call("workspace.list", {})
        self.lat: list[float] = []
        self.daemon_cpu = self.client_cpu = 0.0

    def block(self, calls: int) -> None:
        c0, tc = proc_cpu(self.p.pid), time.thread_time()
        for _ in range(calls):
            t = time.perf_counter()
            self.client.call("workspace.list", {})
            self.lat.append(time.perf_counter() - t)
        self.daemon_cpu += proc_cpu(self.p.pid) - c0
        self.client_cpu += time.thread_time() - tc

    def result(self) -> dict[str, Any]:
        n = len(self.lat)
        return {
            "calls": n,
            "round_trip": summary_ms(self.lat),
            "cpu_ms": {"daemon": round(self.daemon_cpu / n * 1000, 3), "client": round(self.client_cpu / n * 1000, 3)},
        }

    def close(self) -> None:
        self.client.close()
        self.p.terminate()
        self.p.wait(10)


def measure_stubs(calls: int, block: int = 250, variants: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """Stub daemons side by side (default: reads through worker threads, and
    inline), called in alternating blocks so that what else runs on the
    machine weighs on each alike; ``calls`` to each."""
    variants = variants or {
        "threads": {"inline": False},
        "thread lane": {"inline": True, "thread_lane": True},
        "inline": {"inline": True},
    }
    daemons = {name: StubDaemon(**kw) for name, kw in variants.items()}
    try:
        done = 0
        while done < calls:
            for d in daemons.values():
                d.block(min(block, calls - done))
            done += block
        return {name: d.result() for name, d in daemons.items()}
    finally:
        for d in daemons.values():
            d.close()


def main_overhead(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.concurrency overhead", description=DOC_OVERHEAD.splitlines()[0])
    ap.add_argument("--store", type=Path, help="a store file (default: the speed benchmark's cached one)")
    ap.add_argument("--chunks", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=1500, help="calls each way, over all request kinds")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--data", type=Path, default=SCIFACT)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--hybrid", action="store_true", help="also hybrid searches of whole claims")
    ap.add_argument("--stub-calls", type=int, default=3000, help="calls to a stub Service (0: skip)")
    ap.add_argument(
        "--stub-before",
        metavar="PYTHONPATH",
        help="also a stub daemon on other code, e.g. an earlier commit's daemon/ from git archive",
    )
    ap.add_argument("--serve-stub", type=Path, help=argparse.SUPPRESS)  # the stub daemon's own process
    ap.add_argument("--no-inline", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--thread-lane", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.serve_stub:
        serve_stub(a.serve_stub, inline=not a.no_inline, thread_lane=a.thread_lane)
        return 0
    store = a.store
    if store is None:
        found = sorted(glob.glob(str(cache_root() / "stores" / f"speed-{a.chunks}-*" / "autodoc.db")))
        if not found:
            print(f"no cached {a.chunks}-chunk store: run python -m bench.speed --build-only first")
            return 1
        store = Path(found[0])
    sets = query_sets(a.data, a.queries)
    res = {
        "command": command_line(),
        "commit": git_commit(),
        "machine": machine_note(),
        "store": str(store),
        "results": measure_overhead(store, sets["keywords"], a.rounds, sets["claims"] if a.hybrid else None),
    }
    if a.stub_calls:
        variants: dict[str, dict[str, Any]] = {}
        if a.stub_before:
            before_env = dict(os.environ, PYTHONPATH=a.stub_before)
            variants["before (--stub-before), threads"] = {"inline": False, "env": before_env}
            variants["before (--stub-before), inline"] = {"inline": True, "env": before_env}
        variants.update(
            {
                "threads": {"inline": False},
                "thread lane": {"inline": True, "thread_lane": True},
                "inline": {"inline": True},
            }
        )
        res["stub"] = measure_stubs(a.stub_calls, variants=variants)
    if a.json:
        a.json.write_text(json.dumps(res, indent=1) + "\n")
    print(f"store {store}; {res['machine']}")
    print(
        "| request | calls | in-process p50 / p95 ms | socket p50 / p95 ms | difference p50 / p95 ms | "
        "CPU ms per call: in-process · daemon + client · difference |"
    )
    print("|---|---|---|---|---|---|")
    for label, r in res["results"].items():
        c = r["cpu_ms"]
        print(
            f"| {label} | {r['calls']} | {r['inproc']['p50']:.3f} / {r['inproc']['p95']:.3f} | "
            f"{r['socket']['p50']:.3f} / {r['socket']['p95']:.3f} | "
            f"**{r['difference']['p50']:.3f}** / {r['difference']['p95']:.3f} | "
            f"{c['inproc']:.3f} · {c['daemon']:.3f} + {c['client']:.3f} · **{c['difference']:.3f}** |"
        )
    if "stub" in res:
        print(
            "\nThe RPC layer alone: a stub in the Service's place, workspace.list; stub daemons (reads "
            "through worker threads, or inline: the quick lane), called in alternating blocks\n"
        )
        print("| daemon | calls | round trip p50 / p95 ms | daemon CPU ms per call | client CPU ms per call |")
        print("|---|---|---|---|---|")
        for name, st in res["stub"].items():
            print(
                f"| {name} | {st['calls']} | {st['round_trip']['p50']:.3f} / {st['round_trip']['p95']:.3f} | "
                f"**{st['cpu_ms']['daemon']:.3f}** | {st['cpu_ms']['client']:.3f} |"
            )
    return 0


# ==== timeline (formerly bench/daemon_timeline.py) ================================================

DOC_TIMELINE = """Where one socket call's time goes, step by step (issue 19: the socket adds
≤ 0.5 ms over in-process): a daemon on the speed benchmark's cached store
stamps each step of a request (frame read, task started, jsonrpcserver's
dispatch, params bound, the hand-off to a worker thread, the search, back on
the loop, encode; or the quick lane's steps, rpc/quick.py) with
``time.perf_counter`` — CLOCK_MONOTONIC, one clock for every process on the
machine — while one minimal client sends searches and stamps its send, its
receive and its own JSON decode. Medians per step.

    python -m bench.concurrency timeline [--chunks 100000] [--stages lexical,semantic] [--set claims]

The stamps wrap functions by name (module attributes); the daemon's code
runs otherwise unchanged. Each stamp costs ~1 µs.
"""


STEPS = [
    ("client send → daemon reads the frame", "send", "read"),
    ("frame → the lane takes it", "read", "lane"),
    ("lane: params checked and bound", "lane", "bound"),
    ("bound → handed to a worker (thread lane)", "bound", "put"),
    ("handed → the read starts (thread lane)", "put", "read0"),
    ("handed → the loop blocks (thread lane)", "put", "idle"),
    ("bound → the read starts", "bound", "read0"),
    ("the read", "read0", "read1"),
    ("read done → encoding starts", "read1", "encode0"),
    ("frame → its task starts", "read", "handle"),
    ("task → jsonrpcserver calls the method", "handle", "invoke"),
    ("params checked and bound", "invoke", "bound"),
    ("bound → the worker thread starts", "bound", "thread0"),
    ("the search (worker thread)", "thread0", "thread1"),
    ("thread done → back on the loop", "thread1", "resumed"),
    ("back → encoding starts", "resumed", "encode0"),
    ("JSON encode", "encode0", "encode1"),
    ("encoded → client has the bytes", "encode1", "recv"),
    ("client decodes the JSON", "recv", "decoded"),
]
# how a call was served, told by its stamps
PATHS = [
    ("the thread lane (rpc/quick.py: a worker thread, no task)", "put"),
    ("the quick lane (rpc/quick.py: on the loop, no task)", "read0"),
    ("a task and a worker thread (the usual path)", "thread0"),
    ("a task, inline on the loop (the usual path, rpc/inline.py)", "invoke"),
]


def stamp_quick_reads(M, mark) -> None:
    """Stamp the start and end of each read the quick lane runs."""
    if hasattr(M.Methods, "quick_reads"):
        owner, attr = M.Methods, "quick_reads"
    else:  # issue 33: the route (rpc/route.py) names the quick lane's reads
        import autodoc.rpc.route as R

        owner, attr = R.Router, "lane_reads"
    quick_reads = getattr(owner, attr)

    def stamped(f):
        def g(*a, **k):
            mark("read0")
            try:
                return f(*a, **k)
            finally:
                mark("read1")

        return g

    def stamped_read(read):
        if hasattr(read, "call"):  # a LaneRead (the thread lane's code)
            return read._replace(call=stamped(read.call))
        return stamped(read)

    setattr(owner, attr, lambda self: {name: stamped_read(r) for name, r in quick_reads(self).items()})


def serve_stamped(out: Path, argv: list[str]) -> int:
    """The daemon with stamps (runs in the daemon's own process)."""
    import anyio.to_thread

    import autodoc.rpc.connection as C
    import autodoc.rpc.dispatch as D
    import autodoc.rpc.framing as FR
    import autodoc.rpc.methods as M
    from autodoc.cli import main as cli_main

    ev: list[tuple[str, float]] = []

    def mark(name: str) -> None:
        ev.append((name, time.perf_counter()))

    def before(obj, name, label, coro=False):
        f = getattr(obj, name)
        if coro:

            async def g(*a, **k):
                mark(label)
                return await f(*a, **k)
        else:

            def g(*a, **k):
                mark(label)
                return f(*a, **k)

        setattr(obj, name, g)

    before(FR.FrameDecoder, "feed", "read")
    before(C.Connection, "_handle", "handle", coro=True)
    try:
        import autodoc.rpc.quick as Q
    except ImportError:  # an earlier commit's daemon (PYTHONPATH), before the quick lane
        Q = None
    if Q is not None:
        if os.environ.get("ADTL_NO_THREAD_LANE"):
            Q.WORKERS = 0  # every read not known to be quick takes the usual path, as before
        before(Q.QuickLane, "answer", "lane")
        stamp_quick_reads(M, mark)
        if hasattr(Q, "_Workers"):
            before(Q._Workers, "submit", "put")
            import selectors

            sel = selectors.EpollSelector.select

            def select(self, timeout=None):
                if (timeout is None or timeout > 0) and ev and ev[-1][0] in ("put", "read0"):
                    mark("idle")  # the loop blocks, first after a hand-off
                return sel(self, timeout)

            selectors.EpollSelector.select = select

    before(D.Dispatcher, "_invoke", "invoke", coro=True)
    bind = D.schemas.bind_params

    def bound(*a, **k):
        r = bind(*a, **k)
        mark("bound")
        return r

    D.schemas.bind_params = bound
    encode_name = "encode" if hasattr(C.Connection, "encode") else "_encode"  # the latter before the thread lane
    encode = getattr(C.Connection, encode_name)

    def encoded(self, m):
        mark("encode0")
        r = encode(self, m)
        mark("encode1")
        return r

    setattr(C.Connection, encode_name, encoded)
    run_sync = anyio.to_thread.run_sync

    async def stamped_run_sync(fn, *a, **k):
        def g(*aa):
            mark("thread0")
            try:
                return fn(*aa)
            finally:
                mark("thread1")

        r = await run_sync(g, *a, **k)
        mark("resumed")
        return r

    anyio.to_thread.run_sync = stamped_run_sync  # the module every worker-thread hop goes through
    atexit.register(lambda: out.write_text(json.dumps(ev)))
    sys.argv = ["autodoc", *argv]
    return cli_main()


def main_timeline(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.concurrency timeline", description=DOC_TIMELINE.split("\n\n")[0])
    ap.add_argument("--chunks", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--stages", default="lexical,semantic")
    ap.add_argument("--set", choices=("keywords", "claims"), default="claims")
    ap.add_argument("--settle", type=float, default=12.0, help="seconds for the daemon's start-up catch-up")
    ap.add_argument(
        "--no-thread-lane",
        action="store_true",
        help="reads not known to be quick take the usual path (a task, jsonrpcserver, anyio's thread)",
    )
    ap.add_argument("--serve-stamped", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.serve_stamped:
        return serve_stamped(Path(a.serve_stamped[0]), a.serve_stamped[1:])
    if a.no_thread_lane:
        os.environ["ADTL_NO_THREAD_LANE"] = "1"
    p, sock, out = start_instrumented(a.chunks, "bench.concurrency timeline", "--serve-stamped", "adtl-")
    qs = query_sets(SCIFACT, a.queries)[a.set]
    stages = a.stages.split(",")
    time.sleep(a.settle)
    c = SocketClient(sock)
    client: list[tuple[float, float, float]] = []
    try:
        for _ in range(a.rounds):
            for q in qs:
                c.id += 1
                frame = (
                    json.dumps(
                        {
                            "jsonrpc": "2.0",
                            "id": c.id,
                            "method": "search.query",
                            "params": [WORKSPACE, q, {"stages": stages, "limit": 10}],
                        }
                    ).encode()
                    + b"\n"
                )
                t0 = time.perf_counter()
                c.sock.sendall(frame)
                line = c.f.readline()
                t1 = time.perf_counter()
                json.loads(line)
                client.append((t0, t1, time.perf_counter()))
    finally:
        c.close()
        stop_daemon(p)
    ev = json.loads(out.read_text())
    rows = []
    for t0, t1, t2 in client[len(qs) :]:  # the first round teaches caches and the inline rule
        first: dict[str, float] = {"send": t0, "recv": t1, "decoded": t2}
        for name, t in ev:
            if t0 <= t <= t1:
                first.setdefault(name, t)
        rows.append(first)
    print(
        f"{len(rows)} {a.set} searches ({'+'.join(stages)}, limit 10) at {a.chunks:,} chunks, "
        f"load {os.getloadavg()[0]:.2f}"
    )
    for title, key in PATHS:
        mine = [r for r in rows if key in r]
        rows = [r for r in rows if key not in r]
        if mine:
            print_path(title, mine)
    if rows:
        print(f"\n{len(rows)} calls with none of the paths' stamps")
    return 0


def print_path(title: str, rows: list[dict[str, float]]) -> None:
    print(f"\n{len(rows)} calls through {title}\n\n| step | p50 ms | calls |\n|---|---|---|")
    for label, a_, b_ in STEPS:
        d = [(r[b_] - r[a_]) * 1000 for r in rows if a_ in r and b_ in r]
        if d:
            print(f"| {label} | {np.median(d):.3f} | {len(d)} |")
    whole = [(r["decoded"] - r["send"]) * 1000 for r in rows]
    print(f"| **round trip** | {np.median(whole):.3f} | {len(whole)} |")
    other = [
        (r["decoded"] - r["send"] - (r[b_] - r[a_])) * 1000
        for r in rows
        for a_, b_ in (("thread0", "thread1"), ("read0", "read1"))
        if a_ in r and b_ in r
    ]
    if other:
        print(f"| **round trip less the search** | {np.median(other):.3f} | {len(other)} |")


# ==== merge-memory (formerly bench/merge_memory.py) ===============================================

DOC_MERGE_MEMORY = """Peak memory of merging a shared vector base (issue 19, RSS at 1M chunks):
the delta merged straight into the next shared file (readers/shared_vectors.
write_merged, what the daemon does now) against the merge built in private
memory and then copied into the file (what it did before), on the same base.

    python -m bench.concurrency merge-memory [--rows 1000000] [--delta 60000] [--dead 20000]

Each way runs in a fresh process: a synthetic base of ``--rows`` float16
vectors (384 dimensions, the bundled model's) is shared into a folder under
/dev/shm, ``--dead`` of its rows retired and ``--delta`` rows added (past the
merge threshold of a twentieth), then the peak is reset (/proc/self/clear_refs)
and the merge runs. Reported: RSS before the merge, the peak during it
(VmHWM: private pages and the shared file's pages this process touched) and
the peak's rise; the searches over both merged bases are checked equal.
"""

DIM = 384


def _status(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(field)


def run_one(way: str, rows: int, delta: int, dead: int, folder: Path) -> dict:
    from autodoc.readers.shared_vectors import Sharing
    from autodoc.search.semantic.vector_cache import VectorCache, WorkspaceVectors
    from autodoc.search.semantic.vectors import VectorIndex

    rng = np.random.default_rng(7)
    vecs = np.empty((rows, DIM), dtype=np.float16)
    for i in range(0, rows, 100_000):
        v = rng.standard_normal((min(100_000, rows - i), DIM)).astype(np.float32)
        vecs[i : i + len(v)] = v / np.linalg.norm(v, axis=1, keepdims=True)
    base = VectorIndex(np.arange(rows, dtype=np.int64), vecs)
    del vecs
    doc_chunks = {d: np.arange(d * 10, min(rows, d * 10 + 10), dtype=np.int64) for d in range((rows + 9) // 10)}
    sharing = Sharing(lambda *item: None, directory=folder)
    shared = sharing.publish(1, "fp", base, doc_chunks)
    assert shared is not None
    del base
    wv = WorkspaceVectors("fp", shared, VectorIndex.empty(DIM), doc_chunks=doc_chunks, shared=shared)
    wv.retire(rng.choice(rows, dead, replace=False).astype(np.int64))
    add = rng.standard_normal((delta, DIM)).astype(np.float32)
    add /= np.linalg.norm(add, axis=1, keepdims=True)
    wv.add(list(range(rows, rows + delta)), add, None)
    del add
    cache = VectorCache()
    cache.sharing = sharing
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
    before = _status("VmRSS")
    t0 = time.perf_counter()
    if way == "straight":
        cache._share(1, "fp", wv)  # what VectorCache.get does past the threshold
    else:  # before: merged in private memory, then copied into a new file
        wv.merge()
        wv.merged_into(sharing.publish(1, "fp", wv.base, doc_chunks))
    seconds = time.perf_counter() - t0
    peak = _status("VmHWM")
    q = np.random.default_rng(3).standard_normal(DIM).astype(np.float32)
    hits = wv.base.search(q, top=20, exact=False)
    sharing.close()
    return {
        "way": way,
        "rss_before_mb": before / 2**20,
        "peak_mb": peak / 2**20,
        "rise_mb": (peak - before) / 2**20,
        "seconds": seconds,
        "rows_after": len(wv.base),
        "hits": hits,
    }


def main_merge_memory(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.concurrency merge-memory", description=DOC_MERGE_MEMORY.split("\n\n")[0]
    )
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--delta", type=int, default=60_000)
    ap.add_argument("--dead", type=int, default=20_000)
    ap.add_argument("--one", choices=("straight", "copied"), help=argparse.SUPPRESS)
    ap.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.one:
        print(json.dumps(run_one(a.one, a.rows, a.delta, a.dead, a.folder)))
        return 0
    out = []
    for way in ("copied", "straight", "copied", "straight"):
        folder = Path(tempfile.mkdtemp(prefix="adbench-", dir="/dev/shm"))
        try:
            res = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "bench.concurrency",
                    "merge-memory",
                    "--one",
                    way,
                    "--folder",
                    str(folder),
                    "--rows",
                    str(a.rows),
                    "--delta",
                    str(a.delta),
                    "--dead",
                    str(a.dead),
                ],
                capture_output=True,
                text=True,
                check=True,
                cwd=REPO,
            )
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        out.append(json.loads(res.stdout.strip().splitlines()[-1]))
    same = all(r["hits"] == out[0]["hits"] for r in out)
    print(f"`{command_line()}` · commit {git_commit()} · {machine_note()}")
    print(
        f"\n{a.rows:,} float16 rows of {DIM} dimensions shared; {a.dead:,} retired and {a.delta:,} added; "
        f"merged to {out[0]['rows_after']:,} rows. Same top 20 from every merged base: {same}.\n"
    )
    print("| merge | RSS before, MB | peak during, MB | rise, MB | seconds |\n|---|---|---|---|---|")
    for r in out:
        label = "straight into the new file (now)" if r["way"] == "straight" else "private, then copied (before)"
        print(
            f"| {label} | {r['rss_before_mb']:.0f} | {r['peak_mb']:.0f} | **{r['rise_mb']:.0f}** | {r['seconds']:.2f} |"
        )
    return 0 if same else 1


# ==== handoff (formerly bench/pool_handoff.py) ====================================================

DOC_HANDOFF = """What handing a read to a reader process (readers/pool.py) costs the daemon's event
loop, against handing it to a worker thread (issue 19), in alternating blocks
of calls so the machine's load weighs on both alike.

A cheap read (workspace.tags on a small indexed copy of tests/corpora/kb)
keeps the method itself out of the figure: the loop's CPU per call is the
hand-off, the wake-ups and, for the pool, the frames.

    python -m bench.concurrency handoff [--calls 1000] [--blocks 3]
"""

KB = REPO / "tests" / "corpora" / "kb"


async def measure_handoff(service: Service, calls: int, blocks: int) -> None:
    pool = ReaderPool(service, size=1)
    params = bind_params("workspace.tags", {"workspace": "kb"})  # as the daemon hands them on: defaults filled
    call = METHODS["workspace.tags"].call
    async with anyio.create_task_group() as tg:
        tg.start_soon(pool.run)
        pool.want()
        with anyio.fail_after(120):
            while not pool.ready:
                await anyio.sleep(0.05)
        for _ in range(200):  # warm-up
            await pool.call("workspace.tags", params, None)
            await anyio.to_thread.run_sync(call, service, params)
        for b in range(blocks):
            for mode in ("pool", "thread") if b % 2 == 0 else ("thread", "pool"):
                c0, t0, method = time.thread_time(), time.perf_counter(), 0.0
                for _ in range(calls):
                    if mode == "pool":
                        method += (await pool.call("workspace.tags", params, None))[1]
                    else:
                        await anyio.to_thread.run_sync(call, service, params)
                cpu = (time.thread_time() - c0) * 1e3 / calls
                wall = (time.perf_counter() - t0) * 1e3 / calls
                extra = f" · the method in the reader {method * 1e3 / calls:.3f} ms" if mode == "pool" else ""
                print(
                    f"block {b + 1} {mode:6}: loop CPU {cpu:.3f} ms/call · wall {wall:.3f} ms/call{extra} "
                    f"· load {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
        tg.cancel_scope.cancel()


def main_handoff(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.concurrency handoff", description=DOC_HANDOFF.splitlines()[0])
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--blocks", type=int, default=3)
    a = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="adpool-", dir="/tmp"))
    try:
        shutil.copytree(KB, tmp / "kb", symlinks=True)
        service = Service(Settings.from_env(store=tmp / "store.db"))
        service.workspace_add("kb", str(tmp / "kb"), {"embedding": {"provider": "none"}})
        service.index("kb")
        try:
            anyio.run(measure_handoff, service, a.calls, a.blocks)
        finally:
            service.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


# ==== save-searchable (formerly bench/save_searchable.py) =========================================

DOC_SAVE_SEARCHABLE = """Save → searchable through a daemon, the speed benchmark's loop alone (issue 19):
five saves, the first in a folder that does not exist yet, each polled with a
lexical search for its unique word until it answers.

Writes into the corpus: run it on a copy of a speed store and its corpus
(`speed-<n>-<fp>/` and `speed-corpus-<n>`, the workspace's root pointed at the
copy), never on the cached ones.

    python -m bench.concurrency save-searchable STORE CORPUS [--folder bench-live] [--settle 75]
"""


def main_save_searchable(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.concurrency save-searchable", description=DOC_SAVE_SEARCHABLE.splitlines()[0]
    )
    ap.add_argument("store", type=Path)
    ap.add_argument("corpus", type=Path, help="the workspace's root (a copy)")
    ap.add_argument("--folder", default="bench-live", help="a new folder for the saves (removed after)")
    ap.add_argument(
        "--settle",
        type=float,
        default=75.0,
        help="seconds to wait after start: the daemon's catch-up index holds the writer until done",
    )
    a = ap.parse_args(argv)
    sock = Path(tempfile.mkdtemp(prefix="adsave-")) / "d.sock"
    p, why = start_daemon(a.store, sock, timeout=600)
    if p is None:
        print(why)
        return 1
    c = SocketClient(sock)
    try:
        time.sleep(a.settle)
        lat: list[float | None] = []
        for i in range(5):
            word = f"zqx{random.getrandbits(40):x}"
            path = a.corpus / a.folder / f"live-{i}.md"
            path.parent.mkdir(exist_ok=True)
            t0 = time.perf_counter()
            path.write_text(f"# Live note {i}\n\nThe marker {word} appears here.\n")
            found = None
            while time.perf_counter() - t0 < 30:
                if c.call("search.query", [WORKSPACE, word, {"stages": ["lexical"], "limit": 1}])["hits"]:
                    found = time.perf_counter() - t0
                    break
                time.sleep(0.005)
            lat.append(None if found is None else round(found * 1000, 1))
            path.unlink()
            time.sleep(0.3)
        print(f"save → searchable ms: {lat}; daemon RSS {rss_mb(p.pid)} MB; log {sock.parent / 'daemon.log'}")
    finally:
        shutil.rmtree(a.corpus / a.folder, ignore_errors=True)
        c.close()
        stop_daemon(p)
    return 0


# ==== the harness ===================================================================================

CASES = [
    Case("clients", main_clients, DOC_CLIENTS),
    Case("overhead", main_overhead, DOC_OVERHEAD),
    Case("timeline", main_timeline, DOC_TIMELINE),
    Case("merge-memory", main_merge_memory, DOC_MERGE_MEMORY),
    Case("handoff", main_handoff, DOC_HANDOFF),
    Case("save-searchable", main_save_searchable, DOC_SAVE_SEARCHABLE),
]


def main(argv: list[str] | None = None) -> int:
    return harness("python -m bench.concurrency", __doc__ or "", CASES, argv, default="clients")


if __name__ == "__main__":
    sys.exit(main())
