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

    python -m bench.concurrency [--chunks 100000,10000] [--queries 200] [--modes threads,pool] [--rounds 2]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
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
    """A child's job: a reader process (rpc/reader.py) or the lexical helper (search/legproc.py)."""
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "other"
    return "helper" if b"autodoc.search.legproc" in cmd else "readers" if b"autodoc.rpc.reader" in cmd else "other"


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
        "rpc/pool.py: searches in "
        "one reader process per core once clients overlap).",
        "- CPU per request: user + system CPU of the daemon, its reader processes and its lexical helper "
        "(search/legproc.py, which runs a lone hybrid search's lexical leg beside its semantic one), per request "
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
        "the live index, with p50/p99 per method (`python -m bench.load`).",
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunks", default="100000", help="store sizes, comma-separated (the speed benchmark's stores)")
    ap.add_argument(
        "--store", type=Path, action="append", help="a store file instead (its size is read from it; repeatable)"
    )
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--modes", default="threads,pool", help="daemon modes to alternate: threads, pool")
    ap.add_argument("--rounds", type=int, default=2, help="times each mode runs, alternating")
    ap.add_argument("--preamble", type=Path, help="a Markdown file whose text goes before the tables")
    ap.add_argument(
        "--out", type=Path, default=Path(__file__).resolve().parents[1] / "docs" / "benchmarks" / "concurrency.md"
    )
    ap.add_argument(
        "--out-json",
        type=Path,
        default=Path(__file__).resolve().parents[1] / "docs" / "benchmarks" / "concurrency.json",
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


if __name__ == "__main__":
    raise SystemExit(main())
