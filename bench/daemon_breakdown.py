"""Where a search's time goes inside the daemon, per call (issue 19's socket
overhead): a daemon on the speed benchmark's cached store runs with timers
around the RPC layer's steps (the connection's handling of a frame, dispatch,
the method's run, params binding, JSON encoding, the send), while one client
sends keyword searches; medians per step beside the client's round trip.

    python -m bench.daemon_breakdown [--chunks 10000] [--queries 100] [--rounds 4]

The timers wrap functions by name (module attributes), so the daemon runs the
product's code otherwise unchanged; each timer adds ~1 µs.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np

from .speed import WORKSPACE, SocketClient, query_sets, start_instrumented, stop_daemon

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "scifact"


def serve_timed(out: Path, argv: list[str]) -> int:
    """The daemon, with timers (runs in the daemon's own process)."""
    import atexit

    import autodoc.rpc.connection as C
    import autodoc.rpc.framing as FR
    import autodoc.rpc.methods as M
    import autodoc.rpc.schemas as SC
    from autodoc.cli import main

    acc: dict[str, list[float]] = {}
    where: list[str] = []

    def sync(mod, name):
        f = getattr(mod, name)

        @functools.wraps(f)
        def g(*a, **k):
            t0 = time.perf_counter()
            try:
                return f(*a, **k)
            finally:
                acc.setdefault(name, []).append(time.perf_counter() - t0)
        setattr(mod, name, g)

    def coro(obj, name, label):
        f = getattr(obj, name)

        @functools.wraps(f)
        async def g(*a, **k):
            t0 = time.perf_counter()
            try:
                return await f(*a, **k)
            finally:
                acc.setdefault(label, []).append(time.perf_counter() - t0)
        setattr(obj, name, g)

    sync(SC, "bind_params")
    sync(FR, "dump_json")
    coro(C.Connection, "_handle", "frame handled (dispatch + send)")
    coro(C.Connection, "_dispatch", "dispatch (jsonrpcserver + method)")
    coro(C.Connection, "send", "send (encode + write)")
    run = M.run_peer_read

    async def run_peer_read(app, ctx, fn, *a, **k):
        def timed(*aa, **kk):
            where.append(threading.current_thread().name)
            t0 = time.perf_counter()
            try:
                return fn(*aa, **kk)
            finally:
                acc.setdefault("the search itself (Service.search)", []).append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        try:
            return await run(app, ctx, timed, *a, **k)
        finally:
            acc.setdefault("method run (inline or a worker thread)", []).append(time.perf_counter() - t0)
    M.run_peer_read = run_peer_read
    atexit.register(lambda: out.write_text(json.dumps({"acc": acc, "where": where})))
    sys.argv = ["autodoc", *argv]
    return main()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.daemon_breakdown", description=__doc__.split("\n\n")[0])
    ap.add_argument("--chunks", type=int, default=10_000)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--stages", default="lexical", help="search stages, comma-separated (lexical,semantic: hybrid)")
    ap.add_argument("--set", choices=("keywords", "claims"), default="keywords", help="which query set")
    ap.add_argument("--settle", type=float, default=20.0,
                    help="seconds to wait after the daemon answers: its start-up catch-up and any reader "
                         "processes it starts use the cores for seconds, which a 3-second run would measure")
    ap.add_argument("--serve-timed", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.serve_timed:
        return serve_timed(Path(a.serve_timed[0]), a.serve_timed[1:])
    p, sock, out = start_instrumented(a.chunks, "bench.daemon_breakdown", "--serve-timed", "adbrk-")
    qs = query_sets(DATA, a.queries)[a.set]
    stages = a.stages.split(",")
    time.sleep(a.settle)
    wall, size = [], []
    c = SocketClient(sock)
    try:
        for _ in range(a.rounds):
            for q in qs:
                t0 = time.perf_counter()
                res = c.call("search.query", {"workspace": WORKSPACE, "query": q,
                                              "opts": {"stages": stages, "limit": 10}})
                wall.append(time.perf_counter() - t0)
                size.append(len(json.dumps(res)))
    finally:
        c.close()
        stop_daemon(p)
    got = json.loads(out.read_text())
    skip = len(qs)  # the first round teaches the inline policy each kind's cost
    ms = lambda xs: round(float(np.median(xs[len(xs) // a.rounds:])) * 1000, 3)  # noqa: E731
    print(f"{len(wall) - skip} {a.set} searches ({'+'.join(stages)}, limit 10) at {a.chunks:,} chunks, "
          f"load {os.getloadavg()[0]:.2f}")
    print(f"| step | p50 ms | calls |\n|---|---|---|\n| client round trip (minimal client) | {ms(wall)} | {len(wall)} |")
    for k, v in got["acc"].items():
        print(f"| {k} | {ms(v)} | {len(v)} |")
    where = got["where"][len(got["where"]) - (len(wall) - skip) if len(got["where"]) > len(wall) - skip else 0:]
    print(f"\nresponse {int(np.median(size)):,} bytes; after the first round the search ran on the event loop "
          f"(inline) {sum(w == 'MainThread' for w in where)} times, on a daemon thread "
          f"{sum(w != 'MainThread' for w in where)}, in a reader process (rpc/pool.py, untimed here) the rest")
    return 0


if __name__ == "__main__":
    sys.exit(main())
