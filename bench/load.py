"""Load run (issue 16): many clients over the daemon's real socket while a writer
changes the folder under the live index.

A daemon (`autodoc serve --socket`, temp store, a generated workspace indexed
without an embedding model) serves C clients, each on its own connection and
thread, sending R requests one at a time: search.query 50 %, document.read
20 %, workspace.status 15 %, changes.since 15 %. Meanwhile a writer adds,
edits, renames and deletes files (one operation every ~0.1 s), and a
subscriber (changes.subscribe) collects every pushed changes.changed.

Counted as errors: a transport failure, an error answer other than
document.not_found for a file the writer deleted or renamed meanwhile
(counted apart as `gone`), an answer that does not match its schema.
Change events: once the writer stops and the log is quiet, the log read from
the start must hold each writer operation exactly once, in order per file (add →
add, edit → modify, rename → rename with old_path, delete → delete) and
nothing else; the pushed feed must equal the log (no gaps, no duplicates);
each client's changes.since polling must have seen strictly increasing cursors.

    python -m bench.load --clients 32 --requests 1000

tests/test_load.py runs a short version.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import socket
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common import REPO, git_commit, machine_note, percentile, replace_section
from bench.speed import start_daemon, stop_daemon

REPORT = REPO / "docs" / "benchmarks" / "reliability.md"
WORDS = (
    "lease recovery sqlite write ahead log checkpoint zebra migration rollback plan owner alice bob index "
    "chunk token window vector search ranking fusion daemon socket schema facet link generation cursor"
).split()
MIX = (("search.query", 50), ("document.read", 20), ("workspace.status", 15), ("changes.since", 15))
GONE = -32003  # document.not_found: the writer deleted or renamed the file between the pick and the read
NO_MODEL = {"embedding": {"provider": "none"}}
QUIET = 3.0


class Conn:
    """One newline-framed connection; notifications are handed to `on_note`."""

    def __init__(self, path: Path, on_note=None):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(str(path))
        self.f = self.sock.makefile("rb")
        self.id = 0
        self.on_note = on_note

    def call(self, method: str, params: Any) -> dict:
        self.id += 1
        self.sock.sendall(
            json.dumps({"jsonrpc": "2.0", "id": self.id, "method": method, "params": params}).encode() + b"\n"
        )
        return self.read(self.id)

    def read(self, want: int | None) -> dict:
        while True:
            line = self.f.readline()
            if not line:
                raise ConnectionError("the daemon closed the connection")
            msg = json.loads(line)
            if "id" not in msg:
                if self.on_note:
                    self.on_note(msg)
                if want is None:
                    return msg
                continue
            if msg["id"] == want:
                return msg

    def close(self) -> None:
        try:
            self.f.close()
            self.sock.close()
        except OSError:
            pass


def save(path: Path, text: str) -> None:
    """As editors save: a hidden temp file renamed over the name. An in-place write
    is seen twice when the watcher catches it between truncate and write (the empty
    file, then the full one): two true changes, which would blur the count here."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _text(rng: random.Random, title: str) -> str:
    paras = "\n\n".join(" ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 80))) for _ in range(3))
    return f"# {title}\n\n{paras}\n"


@dataclass
class Result:
    clients: int
    requests: int
    latencies: dict[str, list[float]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    invalid: int = 0
    gone: int = 0
    writer_ops: Counter = field(default_factory=Counter)
    log_entries: int = 0
    pushed: int = 0
    lost: int = 0
    duplicated: int = 0
    unexpected: int = 0
    polls_out_of_order: int = 0
    seconds: float = 0.0
    examples: list[str] = field(default_factory=list)


def run(
    clients: int,
    requests: int,
    files: int = 150,
    seed: int = 16,
    pause: float = 0.1,
    settle: float = 2.0,
    check_schemas: bool = True,
) -> Result:
    from autodoc.rpc import schemas

    base = Path(tempfile.mkdtemp(prefix="ad-load-", dir="/tmp"))
    rng = random.Random(seed)
    kb, store, sock = base / "kb", base / "s" / "autodoc.db", base / "run" / "d.sock"
    kb.mkdir()
    names = [f"n{i:04d}.md" for i in range(files)]
    for n in names:
        (kb / n).write_text(_text(rng, n))
    proc, why = start_daemon(store, sock)
    if proc is None:
        raise RuntimeError(why)
    res = Result(clients, requests)
    lock = threading.Lock()
    present = set(names)  # what the writer has on disk (clients read from it)
    try:
        admin = Conn(sock)
        admin.call("workspace.add", {"name": "kb", "root": str(kb), "config": NO_MODEL})
        admin.call("workspace.index", {"workspace": "kb"})
        while "kb" not in admin.call("server.info", {})["result"]["watching"]:
            time.sleep(0.05)
        start_cursor = admin.call("workspace.status", {"workspace": "kb"})["result"]["change_cursor"]

        pushed: list[dict] = []
        sub = Conn(
            sock,
            on_note=lambda m: pushed.extend(m["params"]["changes"]) if m.get("method") == "changes.changed" else None,
        )
        sub.call("changes.subscribe", {"workspace": "kb"})

        def listen() -> None:  # until the socket is shut down below
            while True:
                try:
                    sub.read(None)
                except (OSError, ValueError):
                    return

        expected: list[tuple[str, str, str | None]] = []  # (op, path, old_path) in order
        writer_stop = threading.Event()

        def writer() -> None:
            wr = random.Random(seed + 1)
            serial = files
            touched: dict[str, float] = {}  # a file is not touched again within QUIET s: the live
            while not writer_stop.is_set():  # index may rightly fold two quick saves into one change
                now = time.monotonic()
                with lock:
                    have = sorted(n for n in present if now - touched.get(n, -QUIET) >= QUIET)
                op = wr.choice(("add", "edit", "edit", "rename", "delete")) if have else "add"
                if op == "add":
                    name = f"w{serial:05d}.md"
                    serial += 1
                    save(kb / name, _text(wr, name))
                    expected.append(("add", name, None))
                    with lock:
                        present.add(name)
                elif op == "edit":
                    name = wr.choice(have)
                    save(kb / name, _text(wr, name + " edited"))
                    expected.append(("modify", name, None))
                elif op == "rename":
                    name, new = wr.choice(have), f"r{serial:05d}.md"
                    serial += 1
                    with lock:
                        present.discard(name)
                    (kb / name).rename(kb / new)
                    expected.append(("rename", new, name))
                    with lock:
                        present.add(new)
                else:
                    name = wr.choice(have)
                    with lock:
                        present.discard(name)
                    (kb / name).unlink()
                    expected.append(("delete", name, None))
                touched[name] = touched[expected[-1][1]] = time.monotonic()
                res.writer_ops[op] += 1
                time.sleep(pause)

        def client(k: int) -> None:
            cr = random.Random(seed * 1000 + k)
            lat: dict[str, list[float]] = {m: [] for m, _ in MIX}
            cursor, last_seen = start_cursor, start_cursor
            try:
                c = Conn(sock)
            except OSError as e:
                with lock:
                    res.errors.append(f"client {k}: connect: {e}")
                return
            try:
                for _ in range(requests):
                    method = cr.choices([m for m, _ in MIX], [w for _, w in MIX])[0]
                    if method == "search.query":
                        params: Any = {"workspace": "kb", "query": " ".join(cr.sample(WORDS, 2)), "opts": {"limit": 10}}
                    elif method == "document.read":
                        with lock:
                            path = cr.choice(sorted(present)) if present else names[0]
                        params = {"workspace": "kb", "path": path, "opts": {"line_start": 1, "line_end": 3}}
                    elif method == "workspace.status":
                        params = {"workspace": "kb"}
                    else:
                        params = {"workspace": "kb", "cursor": cursor, "limit": 100}
                    t0 = time.perf_counter()
                    msg = c.call(method, params)
                    lat[method].append(time.perf_counter() - t0)
                    if "error" in msg:
                        if method == "document.read" and msg["error"]["code"] == GONE:
                            with lock:
                                res.gone += 1
                            continue
                        with lock:
                            res.errors.append(f"{method} {json.dumps(params)[:120]}: {msg['error']}")
                        continue
                    if check_schemas and schemas.result_errors(method, msg["result"]):
                        with lock:
                            res.invalid += 1
                            res.errors.append(f"{method}: answer does not match its schema")
                    if method == "changes.since":
                        got = [ch["cursor"] for ch in msg["result"]["changes"]]
                        if got and (got[0] <= last_seen or got != sorted(set(got))):
                            with lock:
                                res.polls_out_of_order += 1
                        if got:
                            last_seen = got[-1]
                        cursor = msg["result"]["next_cursor"]
            except Exception as e:  # reported, never hidden
                with lock:
                    res.errors.append(f"client {k}: {type(e).__name__}: {e}"[:300])
            finally:
                c.close()
                with lock:
                    for m, xs in lat.items():
                        res.latencies.setdefault(m, []).extend(xs)

        listener = threading.Thread(target=listen)
        listener.start()
        w = threading.Thread(target=writer)
        t0 = time.perf_counter()
        w.start()
        threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        res.seconds = time.perf_counter() - t0
        writer_stop.set()
        w.join()

        # quiet: the log stops growing (debounce and index done)
        log: list[dict] = []
        stable_since, last_len = time.monotonic(), -1
        while time.monotonic() - stable_since < settle:
            log, cur = [], start_cursor
            while True:
                r = admin.call("changes.since", {"workspace": "kb", "cursor": cur, "limit": 10000})["result"]
                log += r["changes"]
                cur = r["next_cursor"]
                if not r["has_more"]:
                    break
            if len(log) != last_len:
                stable_since, last_len = time.monotonic(), len(log)
            time.sleep(0.2)
        time.sleep(0.5)
        sub.sock.shutdown(socket.SHUT_RDWR)
        listener.join()
        sub.close()
        admin.close()

        res.log_entries, res.pushed = len(log), len(pushed)
        got = [(ch["op"], ch["path"], ch["old_path"]) for ch in log]
        missing = list((Counter(expected) - Counter(got)).elements())
        extra = list((Counter(got) - Counter(expected)).elements())
        res.lost, res.unexpected = len(missing), len(extra)
        if missing:
            res.examples.append(f"writer operations not in the log: {missing[:5]}")
        if extra:
            res.examples.append(f"log entries no writer operation explains: {extra[:5]}")

        # one debounced batch is logged in path order: the order that must hold is per file
        def per_file(entries: list[tuple[str, str, str | None]]) -> dict[str, list]:
            out: dict[str, list] = {}
            for e in entries:
                for p in {e[1], e[2]} - {None}:
                    out.setdefault(p, []).append(e)
            return out

        if not missing and not extra and per_file(got) != per_file(expected):
            res.examples.append("the log holds every operation but not in the writer's order for some file")
            res.unexpected += 1
        cursors = [ch["cursor"] for ch in pushed]
        res.duplicated = len(cursors) - len(set(cursors))
        log_cursors = [ch["cursor"] for ch in log]
        if sorted(set(cursors)) != log_cursors:
            gaps = sorted(set(log_cursors) - set(cursors))
            res.lost += len(gaps)
            res.examples.append(f"pushed feed lacks {len(gaps)} logged cursors, e.g. {gaps[:5]}")
    finally:
        stop_daemon(proc)
        shutil.rmtree(base, ignore_errors=True)
    return res


def ms(xs: list[float], p: float) -> str:
    return f"{percentile(xs, p) * 1000:.1f}" if xs else "-"


def report(r: Result, args: argparse.Namespace) -> str:
    m = machine_note()
    total = sum(len(v) for v in r.latencies.values())
    everything = [x for v in r.latencies.values() for x in v]
    lines = [
        "## Load: clients and a writer",
        "",
        f"`python -m bench.load --clients {args.clients} --requests {args.requests} --files {args.files}` "
        "(bench/load.py): a real daemon on its Unix socket, a generated workspace indexed without an embedding "
        f"model; {args.clients} clients, each its own connection and thread, send {args.requests} requests one at "
        "a time (search.query 50 %, document.read 20 %, workspace.status 15 %, changes.since 15 %) while a "
        "writer adds, edits, renames and deletes files under the live index (one operation every ~0.1 s) and a "
        "subscriber collects the pushed changes. Every answer is checked against its schema. tests/test_load.py "
        "runs a short version.",
        "",
        "| figure | value |",
        "| --- | --- |",
        f"| requests answered | {total:,} in {r.seconds:.0f} s ({total / max(r.seconds, 1e-9):.0f}/s) |",
        f"| errors (transport, error answers, schema mismatches) | {len(r.errors)} |",
        f"| document.read of a file the writer had just removed (document.not_found, correct) | {r.gone} |",
        f"| writer operations | {sum(r.writer_ops.values())} ({', '.join(f'{k} {v}' for k, v in sorted(r.writer_ops.items()))}) |",
        f"| change-log entries after them | {r.log_entries} |",
        f"| pushed to the subscriber | {r.pushed} |",
        f"| lost change events (not logged, or logged and not pushed) | {r.lost} |",
        f"| duplicated change events | {r.duplicated} |",
        f"| log entries no operation explains, or out of order | {r.unexpected} |",
        f"| changes.since polls with a cursor going back | {r.polls_out_of_order} |",
        "",
        "| method | requests | p50 ms | p99 ms |",
        "| --- | --- | --- | --- |",
    ]
    for meth, _ in MIX:
        xs = r.latencies.get(meth, [])
        lines.append(f"| {meth} | {len(xs):,} | {ms(xs, 50)} | {ms(xs, 99)} |")
    lines.append(f"| all | {len(everything):,} | {ms(everything, 50)} | {ms(everything, 99)} |")
    lines += [
        "",
        f"Run on {time.strftime('%Y-%m-%d')} at {git_commit()} with Python {m['python']}, {m['nproc']} "
        f"cores (load {m['load'][0]}), shared with other jobs.",
    ]
    if r.errors or r.examples:
        lines += ["", "Problems found:", ""] + [f"- {e}" for e in (r.examples + r.errors)[:20]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--files", type=int, default=150)
    ap.add_argument("--seed", type=int, default=16)
    ap.add_argument("--report", type=Path, default=REPORT)
    args = ap.parse_args(argv)
    r = run(args.clients, args.requests, args.files, args.seed)
    replace_section(args.report, "bench.load", report(r, args))
    bad = len(r.errors) + r.lost + r.duplicated + r.unexpected + r.polls_out_of_order
    print(
        f"{sum(len(v) for v in r.latencies.values())} requests, {len(r.errors)} errors, {r.lost} lost, "
        f"{r.duplicated} duplicated, {r.unexpected} unexpected; report: {args.report}"
    )
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
