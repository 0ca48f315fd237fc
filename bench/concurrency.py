"""search.query over the daemon's socket with 1, 2, 8 and 32 concurrent
clients (issues 3 and 19): requests/s and p50/p95/p99 per request, against
the same queries run in-process, one after another, in the same run; then
the same 8 fast clients beside one slow client (it sends searches and never
reads an answer), which must not slow them down.

Uses the speed benchmark's cached stores (`python -m bench.speed
--build-only` builds them), or --store. Each client is its own connection;
clients share one query list. Writes docs/benchmarks/concurrency.md, a
section per store size (--out-json keeps the figures, so sizes run apart
land in one page).

    python -m bench.concurrency [--chunks 100000,10000] [--queries 200]
"""

from __future__ import annotations

import argparse
import glob
import json
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from .common import cache_root, command_line, git_commit, machine_note, percentile, summary_ms
from .speed import WORKSPACE, SocketClient, query_sets, rss_mb, start_daemon, stop_daemon

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "scifact"


def stats(lat: list[float], wall: float, clients: Any, errors: list[str]) -> dict:
    return {"clients": clients, "requests": len(lat), "rps": len(lat) / wall if wall else 0.0,
            **summary_ms(lat), "p99": round(percentile([x * 1000 for x in lat], 99), 3), "errors": errors[:3]}


class SlowClient:
    """A connection that sends search requests and never reads an answer: the
    daemon's writes to it back up (socket buffer, then its outbox) while the
    other connections must go on being answered."""

    def __init__(self, sock: Path, query: str, stages: list[str], requests: int = 400):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(str(sock))
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        line = json.dumps({"jsonrpc": "2.0", "method": "search.query",
                           "params": [WORKSPACE, query, {"stages": stages, "limit": 50}]})
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


def run_clients(sock: Path, queries: list[str], clients: int, stages: list[str]) -> dict:
    lat: list[float] = []
    lock = threading.Lock()
    errors: list[str] = []

    def worker(k: int) -> None:
        c = SocketClient(sock)
        mine = []
        try:
            for q in queries[k::clients] if clients > 1 else queries:
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


def measure_store(store: Path, queries: list[str], label: str) -> dict[str, Any]:
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
        sock = Path(tempfile.mkdtemp(prefix="adconc-")) / "d.sock"
        p, why = start_daemon(store, sock)
        if p is None:
            raise SystemExit(why)
        try:
            run_clients(sock, queries, 1, stages)  # warm-up: query vectors cached, index loaded
            res = [inproc] + [run_clients(sock, queries, n, stages) for n in (1, 2, 8, 32)]
            slow = SlowClient(sock, queries[0], stages)
            try:
                time.sleep(0.5)  # let its answers back up
                beside = run_clients(sock, queries, 8, stages)
                beside["clients"] = f"8 + 1 slow ({slow.sent} requests sent, none read)"
                res.append(beside)
            finally:
                slow.close()
            rss = rss_mb(p.pid)
        finally:
            stop_daemon(p)
        out["legs"][stages_name] = {"rows": res, "rss_mb": rss,
                                    "scaling_8_over_1": round(res[3]["rps"] / res[1]["rps"], 2) if res[1]["rps"] else None}
        print(label, stages_name, json.dumps(out["legs"][stages_name]), flush=True)
    return out


def render(results: dict[str, Any], nq: int) -> str:
    lines = [
        "# Concurrent clients over the daemon's socket",
        "",
        "Generated by `bench/concurrency.py`; re-run the command below to refresh.",
        "",
        f"- Command: `{results['command']}`",
        f"- Commit: `{results['commit']}` · machine: " + ", ".join(f"{k} {v}" for k, v in results["machine"].items()),
        f"- Stores: the speed benchmark's stores (synthetic vectors); {nq} keyword queries (two content words "
        "from SciFact claims), limit 10, after a warm-up pass.",
        "- Each client is its own socket connection (newline framing) in its own thread, splitting the query list; "
        "latency is per request as the client sees it. The in-process row runs the same queries one after another "
        "through `Service.search` in this process. The last row runs the 8 clients again beside a slow client: one "
        "connection that sent up to 400 searches (limit 50) and never reads an answer.",
        "- Target (issue 19): at 8 clients ≥ 1.8× one client's requests/s on this 2-core machine, and a slow client "
        "stalls nobody. The machine is shared (see the load figures): other processes take CPU during the run.",
        "- Before issue 19 (commit b5b62b7, 100k, load ≈ 1): lexical 91.7 → 177.8 requests/s from 1 to 8 clients, "
        "hybrid 85.2 → 62.3; no p99, no slow client. The slow-client row's before/after and the socket overhead are in "
        "[daemon_overhead.md](daemon_overhead.md).",
        "",
    ]
    for size, r in sorted(results["sizes"].items(), key=lambda kv: int(kv[0])):
        lines += [f"## {int(size):,} chunks", "", f"Store `{r['store']}`.", ""]
        for name, leg in r["legs"].items():
            lines += [f"### {name}", "", "| clients | requests | requests/s | p50 ms | p95 ms | p99 ms | errors |",
                      "|---|---|---|---|---|---|---|"]
            for x in leg["rows"]:
                lines.append(f"| {x['clients']} | {x['requests']} | {x['rps']:.1f} | {x['p50']:.2f} | {x['p95']:.2f} | "
                             f"{x['p99']:.2f} | {'; '.join(x['errors']) or '0'} |")
            lines += ["", f"8 clients / 1 client requests/s: **{leg['scaling_8_over_1']}×**. "
                          f"Daemon RSS after the runs: {leg['rss_mb']} MB.", ""]
    lines += ["See also [reliability.md](reliability.md#load-clients-and-a-writer): 32 clients × 1,000 mixed",
              "requests (search, read, status, changes.since) while a writer changes the folder under",
              "the live index, with p50/p99 per method (`python -m bench.load`).", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunks", default="100000", help="store sizes, comma-separated (the speed benchmark's stores)")
    ap.add_argument("--store", type=Path, help="one store file instead (its size is read from it)")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "docs" / "benchmarks" / "concurrency.md")
    ap.add_argument("--out-json", type=Path, default=Path(__file__).resolve().parents[1] / "docs" / "benchmarks" / "concurrency.json")
    a = ap.parse_args(argv)
    stores: dict[int, Path] = {}
    if a.store:
        from autodoc.store.db import open_reader

        db = open_reader(a.store)
        stores[db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0] // 1000 * 1000] = a.store
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
        results["sizes"][str(n)] = measure_store(store, queries, f"{n:,}")
        a.out_json.write_text(json.dumps(results, indent=1) + "\n")
    a.out.write_text(render(results, len(queries)))
    print(a.out.read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
