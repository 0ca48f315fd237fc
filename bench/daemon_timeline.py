"""Where one socket call's time goes, step by step (issue 19: the socket adds
≤ 0.5 ms over in-process): a daemon on the speed benchmark's cached store
stamps each step of a request (frame read, task started, jsonrpcserver's
dispatch, params bound, the hand-off to a worker thread, the search, back on
the loop, encode; or the quick lane's steps, rpc/quick.py) with
``time.perf_counter`` — CLOCK_MONOTONIC, one clock for every process on the
machine — while one minimal client sends searches and stamps its send, its
receive and its own JSON decode. Medians per step.

    python -m bench.daemon_timeline [--chunks 100000] [--stages lexical,semantic] [--set claims]

The stamps wrap functions by name (module attributes); the daemon's code
runs otherwise unchanged. Each stamp costs ~1 µs.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from .speed import WORKSPACE, SocketClient, query_sets, start_instrumented, stop_daemon

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "scifact"

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
    quick_reads = M.Methods.quick_reads

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

    M.Methods.quick_reads = lambda self: {name: stamped_read(r) for name, r in quick_reads(self).items()}


def serve_stamped(out: Path, argv: list[str]) -> int:
    """The daemon with stamps (runs in the daemon's own process)."""
    import anyio.to_thread

    import autodoc.rpc.connection as C
    import autodoc.rpc.dispatch as D
    import autodoc.rpc.framing as FR
    import autodoc.rpc.methods as M
    from autodoc.cli import main

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

    M.anyio.to_thread.run_sync = stamped_run_sync
    atexit.register(lambda: out.write_text(json.dumps(ev)))
    sys.argv = ["autodoc", *argv]
    return main()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.daemon_timeline", description=__doc__.split("\n\n")[0])
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
    p, sock, out = start_instrumented(a.chunks, "bench.daemon_timeline", "--serve-stamped", "adtl-")
    qs = query_sets(DATA, a.queries)[a.set]
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


if __name__ == "__main__":
    sys.exit(main())
