"""Two versions of the daemon side by side under 8 clients (issue 19): each arm is a
daemon on its own copy of one store, started from a git revision of the code (or the
working tree), and the arms take turns, a burst each, so the machine's load weighs on
both alike. bench/concurrency.py runs one daemon at a time, minutes apart; on this
noisy machine its 8 / 1 ratio swings by ±0.3 between runs of the same code, too much
to tell a 10 % change.

    python -m bench.pool_ab --chunks 10000 --stages lexical --arm before=7156092 --arm now=.
    python -m bench.pool_ab --chunks 100000 --stages lexical,semantic --rounds 6 --arm …

Each round, per arm: one client sends the query list, then 8 clients send it twice over
(split between them); the 8-client burst is also timed for the daemon's CPU (its readers
and helper included) and its involuntary context switches (a daemon preempted while it
has frames to handle). Medians over rounds. The stores are the speed benchmark's cached
ones (synthetic vectors, SciFact keyword queries, as bench/concurrency.py).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from .common import command_line, git_commit, machine_note, speed_store
from .concurrency import DATA, caught_up, cpu_s, run_clients
from .speed import query_sets, start_daemon, stop_daemon

ROOT = Path(__file__).resolve().parents[1]


def code_of(rev: str, into: Path) -> str | None:
    """PYTHONPATH for the daemon of git revision ``rev`` (None: this working tree)."""
    if rev == ".":
        return None
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return str(into / "daemon")


def involuntary(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("nonvoluntary_ctxt_switches"):
            return int(line.split(":")[1])
    return 0


def start(store: Path, work: Path, label: str, pythonpath: str | None) -> tuple[Any, Path]:
    """A daemon on a private copy of ``store``: one writer per store file."""
    copy = work / label / "store"
    copy.mkdir(parents=True)
    for f in store.parent.glob(store.name + "*"):
        if not f.name.endswith(".lease"):
            shutil.copy2(f, copy / f.name)
    saved = os.environ.get("PYTHONPATH")
    if pythonpath:
        os.environ["PYTHONPATH"] = pythonpath  # the daemon and its readers import that code
    try:
        sock = work / label / "d.sock"
        p, why = start_daemon(copy / store.name, sock)
    finally:
        os.environ.pop("PYTHONPATH", None)
        if saved is not None:
            os.environ["PYTHONPATH"] = saved
    if p is None:
        raise SystemExit(f"{label}: {why}")
    caught_up(sock.parent / "daemon.log")
    return p, sock


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunks", type=int, default=10000)
    ap.add_argument("--stages", default="lexical", help="comma-separated: lexical or lexical,semantic")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument(
        "--arm",
        action="append",
        required=True,
        metavar="LABEL=REV",
        help="a git revision, or . for the working tree (repeatable)",
    )
    a = ap.parse_args(argv)
    stages = a.stages.split(",")
    queries = query_sets(DATA, a.queries)["keywords"]
    store = speed_store(a.chunks)
    arms = [tuple(x.split("=", 1)) for x in a.arm]
    work = Path(tempfile.mkdtemp(prefix="pool-ab-"))
    daemons: list[tuple[str, Any, Path]] = []
    res: dict[str, dict[str, list[float]]] = {}
    try:
        for label, rev in arms:
            p, sock = start(store, work, label, code_of(rev, work / label / "code"))
            daemons.append((label, p, sock))
            res[label] = {"one": [], "eight": [], "cpu": [], "switches": []}
            # warm-up, as bench/concurrency.py: every process that may run a query has its vector
            run_clients(sock, queries, 1, stages)
            run_clients(sock, queries, 8, stages)
            run_clients(sock, queries, 8, stages, whole=True)
        for r in range(a.rounds):
            for label, p, sock in daemons if r % 2 == 0 else daemons[::-1]:
                res[label]["one"].append(run_clients(sock, queries, 1, stages)["rps"])
                c0, s0 = cpu_s(p.pid), involuntary(p.pid)
                row = run_clients(sock, queries * 2, 8, stages)
                c1, s1 = cpu_s(p.pid), involuntary(p.pid)
                res[label]["eight"].append(row["rps"])
                res[label]["cpu"].append((sum(c1.values()) - sum(c0.values())) * 1000 / row["requests"])
                res[label]["switches"].append((s1 - s0) / row["requests"])
    finally:
        for _, p, _ in daemons:
            stop_daemon(p)
        shutil.rmtree(work, ignore_errors=True)
    med = statistics.median
    print(
        f"- Command: `{command_line()}` · commit `{git_commit()[:12]}` · "
        + ", ".join(f"{k} {v}" for k, v in machine_note().items())
    )
    print(f"- {a.chunks:,} chunks, stages {', '.join(stages)}, {a.rounds} rounds, medians\n")
    print(
        "| arm | 1 client req/s | 8 clients req/s | 8 / 1 (median of each round's) | CPU ms per request, "
        "8 clients | daemon's involuntary switches per request |"
    )
    print("|---|---|---|---|---|---|")
    for label, rev in arms:
        x = res[label]
        ratio = med([b / o for o, b in zip(x["one"], x["eight"])])
        print(
            f"| {label} (`{rev}`) | {med(x['one']):.1f} | {med(x['eight']):.1f} | **{ratio:.2f}×** | "
            f"{med(x['cpu']):.2f} | {med(x['switches']):.2f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
