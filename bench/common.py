"""Shared helpers for the benchmarks: paths, caches, the machine note, timing.

Benchmarks are not tests: they report figures. Everything they build (the
Markdown workspace, stores, synthetic corpora) lives in a cache folder outside
the repository, ``$AUTODOC_BENCH_CACHE`` or ``~/.cache/autodoc-bench``.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO.parent / "shared" / "data"
RESULTS = REPO / "docs" / "benchmarks"


def cache_root() -> Path:
    env = os.environ.get("AUTODOC_BENCH_CACHE")
    if env:
        return Path(env).expanduser().resolve()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "autodoc-bench"


def git_commit() -> str:
    """The commit the benchmark ran on, with '+dirty' when the tree has changes.
    $AUTODOC_BENCH_COMMIT overrides it (a run against an exported snapshot)."""
    if os.environ.get("AUTODOC_BENCH_COMMIT"):
        return os.environ["AUTODOC_BENCH_COMMIT"]
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
        status = subprocess.run(
            ["git", "status", "--porcelain"], cwd=REPO, capture_output=True, text=True
        ).stdout.splitlines()
        dirty = any(not l.startswith("??") for l in status)
        bench_new = any(
            l.startswith("??") and (" bench/" in l or "test_bench" in l or "docs/benchmarks" in l) for l in status
        )
        return sha + ("+dirty" if dirty else "") + (" + uncommitted bench/ files" if bench_new else "")
    except Exception:
        return "unknown"


def machine_note() -> dict[str, Any]:
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    cpu = ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "nproc": os.cpu_count(),
        "load": [round(x, 2) for x in load],
        "cpu": cpu,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def command_line() -> str:
    mod = sys.argv[0]
    name = Path(mod).stem
    prefix = f"python -m bench.{name}" if Path(mod).resolve().parent == REPO / "bench" else f"python {mod}"
    env = [f"{k}={os.environ[k]}" for k in ("PYTHONPATH",) if os.environ.get(k)]
    return " ".join([*env, prefix, *sys.argv[1:]])


def file_digest(path: Path, n: int = 16) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:n]


def tree_digest(root: Path, pattern: str = "*.py", n: int = 16) -> str:
    """Digest of the source files under root (to notice a changed chunker)."""
    h = hashlib.sha256()
    for p in sorted(root.rglob(pattern)):
        h.update(p.relative_to(root).as_posix().encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:n]


def json_digest(obj: Any, n: int = 12) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:n]


def percentile(xs: Iterable[float], p: float) -> float:
    """Linear-interpolated percentile (p in 0..100) — numpy's default method."""
    v = sorted(xs)
    if not v:
        return float("nan")
    if len(v) == 1:
        return v[0]
    k = (len(v) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def summary_ms(seconds: list[float]) -> dict[str, float]:
    ms = [s * 1000 for s in seconds]
    return {
        "n": len(ms),
        "p50": round(percentile(ms, 50), 3),
        "p95": round(percentile(ms, 95), 3),
        "mean": round(statistics.fmean(ms), 3) if ms else float("nan"),
    }


class Progress:
    """A throttled progress printer for Service.index / embed_pending callbacks."""

    def __init__(self, label: str, every_s: float = 10.0, stream=sys.stderr):
        self.label = label
        self.every = every_s
        self.last = 0.0
        self.t0 = time.monotonic()
        self.stream = stream

    def __call__(self, done: int, total: int, what: str) -> None:
        now = time.monotonic()
        if now - self.last >= self.every or done >= total:
            self.last = now
            el = now - self.t0
            rate = done / el if el > 0 else 0.0
            print(
                f"  [{self.label}] {done}/{total} {what[:40]} ({el:.0f} s, {rate:.1f}/s)", file=self.stream, flush=True
            )


def log(*a: Any) -> None:
    print(*a, file=sys.stderr, flush=True)


def replace_section(path: Path, name: str, text: str) -> None:
    """Write `text` between `<!-- name: begin (generated) -->` and its end marker in
    path, keeping whatever else the file says (appended when the markers are absent)."""
    begin, end = f"<!-- {name}: begin (generated) -->", f"<!-- {name}: end -->"
    body = f"{begin}\n{text.rstrip()}\n{end}"
    old = path.read_text() if path.exists() else ""
    if begin in old and end in old:
        head, rest = old.split(begin, 1)
        new = head + body + rest.split(end, 1)[1]
    else:
        new = old.rstrip("\n") + "\n\n" + body + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(new)


def speed_store(size: int) -> Path:
    """The speed benchmark's cached store of this many chunks (bench.speed --build-only makes it)."""
    stores = sorted(Path(cache_root(), "stores").glob(f"speed-{size}-*/autodoc.db"))
    if not stores:
        raise SystemExit(f"no cached {size}-chunk store: python -m bench.speed --build-only")
    return stores[-1]


def run_sizes(
    prog: str, doc: str, argv: list[str] | None, *, sizes: str, rounds: int, out: Path, measure: Any, render: Any
) -> int:
    """The main of a benchmark that measures each speed store in turn: ``measure(store, queries,
    rounds)`` per size, ``render(results)`` into ``--out`` (and its .json beside it)."""
    import argparse

    ap = argparse.ArgumentParser(prog=prog, description=doc.split("\n\n")[0])
    ap.add_argument("--sizes", default=sizes)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=rounds)
    ap.add_argument("--out", default=str(out))
    a = ap.parse_args(argv)
    res = {
        "command": command_line(),
        "commit": git_commit(),
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "machine": machine_note(),
        "rounds": a.rounds,
        "sizes": {},
    }
    for size in [int(x) for x in a.sizes.split(",") if x]:
        print(f"measuring {size:,}", file=sys.stderr)
        res["sizes"][str(size)] = measure(speed_store(size), a.queries, a.rounds)
        print(json.dumps(res["sizes"][str(size)]), file=sys.stderr)
    res["load_end"] = [round(x, 2) for x in os.getloadavg()]
    text = render(res)
    if a.out != "-":
        Path(a.out).write_text(text)
        Path(a.out).with_suffix(".json").write_text(json.dumps(res, indent=1))
    print(text)
    return 0
