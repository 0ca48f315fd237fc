"""What the daemon's socket adds per call over the same call in-process
(issue 19: ≤ 0.5 ms): frame, parse, dispatch, the worker-thread hop, encode,
and the minimal client's own JSON on both ends.

One run, one store: a daemon serves the store on a Unix socket while this
process opens a Service on the same store (a reader beside the daemon's
writer lease). Each request runs both ways back to back, alternating which
goes first; the per-call difference (socket − in-process) is reported as
p50/p95 beside both sides' own latencies. The in-process side goes through
``connect.invoke`` (the same binding and schema check the daemon applies).

    python -m bench.daemon_overhead --store /tmp/copy/autodoc.db [--rounds 1000]
    python -m bench.daemon_overhead --chunks 100000      # the speed benchmark's cached store
    python -m bench.daemon_overhead --store … --stub-before /tmp/old/daemon:/tmp/old/clients/python

Then the RPC layer alone: a daemon of its own serving a stub in the
Service's place (``--stub-calls``, 0 skips it), its CPU per call and the
round trip, with reads handed to worker threads the usual way (a task,
jsonrpcserver, anyio's hand-off), through the thread lane (rpc/quick.py: every
read counted as not quick) and on the inline path (rpc/inline.py, and its
quick lane): stub daemons called in alternating blocks.

A daemon on a cached store only reads it (no file is written under its
folder by these requests), but its live index watches the corpus folder.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from .common import cache_root, command_line, git_commit, machine_note, summary_ms
from .speed import WORKSPACE, SocketClient, query_sets, start_daemon, stop_daemon

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "scifact"


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


def measure(store: Path, queries: list[str], rounds: int, claims: list[str] | None = None) -> dict[str, Any]:
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
                "bench.daemon_overhead",
                "--serve-stub",
                str(self.sock),
                *([] if inline else ["--no-inline"]),
                *(["--thread-lane"] if thread_lane else []),
            ],
            cwd=Path(__file__).resolve().parents[1],
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", type=Path, help="a store file (default: the speed benchmark's cached one)")
    ap.add_argument("--chunks", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=1500, help="calls each way, over all request kinds")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--data", type=Path, default=DATA)
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
        "results": measure(store, sets["keywords"], a.rounds, sets["claims"] if a.hybrid else None),
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


if __name__ == "__main__":
    raise SystemExit(main())
