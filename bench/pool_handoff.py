"""What handing a read to a reader process (rpc/pool.py) costs the daemon's event
loop, against handing it to a worker thread (issue 19), in alternating blocks
of calls so the machine's load weighs on both alike.

A cheap read (workspace.tags on a small indexed copy of tests/corpora/kb)
keeps the method itself out of the figure: the loop's CPU per call is the
hand-off, the wake-ups and, for the pool, the frames.

    python -m bench.pool_handoff [--calls 1000] [--blocks 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import anyio
import anyio.to_thread

from autodoc.api import METHODS
from autodoc.config import Settings
from autodoc.rpc.pool import ReaderPool
from autodoc.service import Service

KB = Path(__file__).resolve().parents[1] / "tests" / "corpora" / "kb"


async def measure(service: Service, calls: int, blocks: int) -> None:
    pool = ReaderPool(service, size=1)
    params = {"workspace": "kb"}
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
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
            anyio.run(measure, service, a.calls, a.blocks)
        finally:
            service.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
