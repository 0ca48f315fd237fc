"""Two daemons sharing one PostgreSQL store (issue 34): how long an edit indexed through daemon A takes
to reach daemon B (docs/dev/postgres.md, section 6; docs/benchmarks/pg_daemons.md).

    python -m bench.pg_daemons [--edits 100] [--corpus simpler-grants-adr] [--watch] [--out docs/benchmarks/pg_daemons.json]

A private PostgreSQL 16 server (pgserver, the test extra) in a temp folder; two real daemons
(`python -m autodoc.daemon --store <uri> --socket … --no-watch`), each with its own socket and XDG
dirs, as two machines would run them; a copy of a real corpus from ../shared/data/corpora added and
indexed through A (lexical only: no embedding model, so the figures are the store's and the feed's,
not a model's). A client subscribes to B's changes. Then, `--edits` times: one file of the copy is
rewritten with a new unique word, A is asked to index the workspace (`workspace.index`, which
answers once its transactions committed), and B is watched:

- `a_index`: A's index call, start to answer (a scan of the folder and the one write);
- `b_notified`: from the start of A's call to B's subscriber receiving `changes.changed` for the
  edit: the pg_notify at commit, B's LISTEN thread reading the change log, B's fan-out;
- `b_searchable`: from the start of A's call until a search through B first finds the new word
  (B searched in a loop, one call at a time);
- `b_after_a_answered`: from A's answer to that first finding search's answer (≥ 0): what a person
  who saw A finish waits before B shows it; the baseline beside it, `b_search`, is one search
  through B on a quiet store (the round trip the loop cannot beat).

With `--watch`, A runs its watcher (the live index) and nobody asks it to index: each edit is a save,
and `b_searchable` runs from the save's write to the first search through B that finds the word
(the live index's debounce included); `a_index` and `b_after_a_answered` are then absent.

Prints one JSON object (and writes it to --out). Runs on: the benchmark's main thread (anyio)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
from pathlib import Path
from typing import Any

import anyio

from .common import command_line, git_commit, log, machine_note, summary_ms

CORPORA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "corpora"
NO_MODEL = {"embedding": {"provider": "none"}}
XDG = ("XDG_RUNTIME_DIR", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME")


def start_server(base: Path) -> tuple[Any, str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs: XDG_RUNTIME_DIR unset
        import pgserver

    server = pgserver.get_server(base / "pgdata", cleanup_mode="stop")
    return server, server.get_uri()


def start_daemon(base: Path, uri: str, watch: bool = False) -> tuple[subprocess.Popen, Path]:
    """One `machine`: its own socket, XDG dirs and log; ready once the socket answers."""
    from autodoc.rpc.transport import socket_answers

    base.mkdir(parents=True)
    env = {**os.environ, "AUTODOC_STORE": uri, "AUTODOC_LOG": "WARNING"}
    for name in XDG:
        env[name] = str(base / name.lower())
        Path(env[name]).mkdir(mode=0o700)
    sock = base / "s.sock"
    argv = [sys.executable, "-m", "autodoc.daemon", "--store", uri, "--socket", str(sock)]
    if not watch:
        argv.append("--no-watch")
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=open(base / "log", "wb"), env=env
    )
    deadline = time.monotonic() + 120
    while not (sock.exists() and socket_answers(sock)):
        if proc.poll() is not None or time.monotonic() > deadline:
            sys.exit(f"the daemon did not start:\n{(base / 'log').read_text(errors='replace')[-3000:]}")
        time.sleep(0.05)
    return proc, sock


async def measure(a_sock: Path, b_sock: Path, kb: Path, edits: int, watch: bool) -> dict[str, Any]:
    from autodoc_client import Client

    a = await Client.connect_socket(a_sock)
    b = await Client.connect_socket(b_sock)
    sub = await Client.connect_socket(b_sock)
    await sub.call("changes.subscribe", {"workspace": "kb"})
    quiet = []
    for _ in range(20):
        t = time.perf_counter()
        await b.call("search.query", ["kb", "decision", {"limit": 10}])
        quiet.append(time.perf_counter() - t)
    rows: dict[str, list[float]] = {"a_index": [], "b_notified": [], "b_searchable": [], "b_after_a_answered": []}
    (kb / "bench-edits").mkdir(exist_ok=True)
    for i in range(edits):
        word = f"edit{i}x{uuid.uuid4().hex[:8]}"
        rel = f"bench-edits/e{i % 10}.md"
        text = f"# Edit {i}\n\nThe {word} decision, written on machine A.\n"
        notified: list[float] = []
        found: list[float] = []

        async def listen() -> None:
            while True:
                note = await sub.next_notification("changes.changed", timeout=30)
                if any(c["path"] == rel for c in note.params["changes"]):
                    notified.append(time.perf_counter())
                    return

        async def poll() -> None:
            while True:
                hits = (await b.call("search.query", ["kb", word, {"limit": 5}]))["hits"]
                if any(h["path"] == rel for h in hits):
                    found.append(time.perf_counter())
                    return

        if watch:
            (kb / rel).write_text(text)  # the save A's watcher sees
            t0 = time.perf_counter()
            async with anyio.create_task_group() as tg:
                tg.start_soon(listen)
                tg.start_soon(poll)
        else:
            (kb / rel).write_text(text)
            t0 = time.perf_counter()
            async with anyio.create_task_group() as tg:
                tg.start_soon(listen)
                tg.start_soon(poll)
                await a.call("workspace.index", ["kb"])
                t1 = time.perf_counter()
            rows["a_index"].append(t1 - t0)
            rows["b_after_a_answered"].append(max(0.0, found[0] - t1))
        rows["b_notified"].append(notified[0] - t0)
        rows["b_searchable"].append(found[0] - t0)
        if (i + 1) % 20 == 0:
            log(f"{i + 1}/{edits}: b_searchable p50 so far {summary_ms(rows['b_searchable'])}")
    for c in (a, b, sub):
        await c.close()
    out: dict[str, Any] = {k: summary_ms(v) for k, v in rows.items() if v}
    out["b_search"] = summary_ms(quiet)
    out["within_1s"] = sum(1 for x in rows["b_searchable"] if x <= 1.0)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.pg_daemons", description=__doc__.split("\n\n")[0])
    ap.add_argument("--edits", type=int, default=100)
    ap.add_argument("--corpus", default="simpler-grants-adr", help="a folder of ../shared/data/corpora")
    ap.add_argument("--watch", action="store_true", help="A's watcher indexes each save (no index call)")
    ap.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    args = ap.parse_args(argv)
    base = Path(tempfile.mkdtemp(prefix="ad-pgd-", dir="/tmp"))
    server = None
    procs: list[subprocess.Popen] = []
    try:
        server, uri = start_server(base)
        kb = base / "kb"
        shutil.copytree(CORPORA / args.corpus, kb)
        files = sum(1 for _ in kb.rglob("*.md"))
        pa, a_sock = start_daemon(base / "a", uri, watch=args.watch)
        procs.append(pa)
        from autodoc_client import call_socket

        call_socket(a_sock, "workspace.add", ["kb", str(kb), NO_MODEL], timeout=120)
        t = time.monotonic()
        report = call_socket(a_sock, "workspace.index", ["kb"], timeout=600)
        log(f"indexed {files} files ({report['chunks']} chunks) through A in {time.monotonic() - t:.1f} s")
        pb, b_sock = start_daemon(base / "b", uri)
        procs.append(pb)
        res = {
            "bench": "pg_daemons",
            "commit": git_commit(),
            "command": command_line(),
            "machine": machine_note(),
            "corpus": args.corpus,
            "files": files,
            "chunks": report["chunks"],
            "edits": args.edits,
            "watch": args.watch,
            **anyio.run(measure, a_sock, b_sock, kb, args.edits, args.watch),
        }
    finally:
        for p in procs:
            p.terminate()
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
        if server is not None:
            server.cleanup()
        shutil.rmtree(base, ignore_errors=True)
    text = json.dumps(res, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
