"""Shared helpers for the benchmarks: paths, caches, the machine note, timing,
a harness's main over its named cases (`Case`, `harness`), and the speed
stores every speed, concurrency and compare case reads: synthetic corpora,
synthetic vectors, the query sets, interleaved timing, and a daemon started
on a store (`start_daemon`, `SocketClient`, `stop_daemon`).

Benchmarks are not tests: they report figures. Everything they build (the
Markdown workspace, stores, synthetic corpora) lives in a cache folder outside
the repository, ``$AUTODOC_BENCH_CACHE`` or ``~/.cache/autodoc-bench``.

Runs on: the caller's thread (a daemon it starts is a process of its own).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import random
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO.parent / "shared" / "data"
RESULTS = REPO / "docs" / "benchmarks"
SCIFACT = DEFAULT_DATA / "scifact"


def cache_root() -> Path:
    env = os.environ.get("AUTODOC_BENCH_CACHE")
    if env:
        return Path(env).expanduser().resolve()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "autodoc-bench"


def scifact_store(cache: Path) -> Path | None:
    """The cached SciFact store (bench.quality builds it) embedded with the model this product runs;
    None when there is none. Several may be cached while the model changes: an earlier model's
    vectors are read by no search, so a store taken by its name alone measured hybrid as lexical."""
    from autodoc.embed.onnx import OnnxProvider

    fp = OnnxProvider().fingerprint
    for d in sorted((cache / "stores").glob("scifact-*"), key=lambda p: -p.stat().st_mtime):
        meta = d / "bench-meta.json"
        if (d / "autodoc.db").exists() and meta.exists() and json.loads(meta.read_text())["key"].get("model_fp") == fp:
            return d / "autodoc.db"
    return None


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


class Case(NamedTuple):
    """One named benchmark of a harness: ``python -m bench.<harness> <name> [its options]``."""

    name: str
    run: Callable[[list[str] | None], int]
    doc: str


def harness(prog: str, doc: str, cases: list[Case], argv: list[str] | None = None, default: str | None = None) -> int:
    """A harness's main: the first argument names the case to run (``--help`` after it lists the
    case's own options); without one, the default case (if any) runs with every argument."""
    args = list(sys.argv[1:] if argv is None else argv)
    by_name = {c.name: c for c in cases}
    if args and args[0] in by_name:
        return by_name[args[0]].run(args[1:])
    if default is not None and args[:1] not in (["-h"], ["--help"]):
        return by_name[default].run(args)
    width = max(len(c.name) for c in cases)
    lines = [f"usage: {prog} CASE [options]   ({prog} CASE --help: the case's options)", "", doc.strip(), "", "cases:"]
    for c in cases:
        first = " ".join(c.doc.split("\n\n")[0].split())
        first = first if len(first) <= 100 else first[:99] + "…"
        lines.append(f"  {c.name:<{width}}  {first}{'  (the default)' if c.name == default else ''}")
    print("\n".join(lines))
    return 0 if args[:1] in (["-h"], ["--help"]) else 2


# -- the speed stores (bench.speed builds them; the other harnesses read them) -----------------------
#
# normalise(0.7·a + 0.3·b + noise) for random real vectors a, b: one recipe for every bench


def synthetic(real: np.ndarray, n: int, seed: int = 0, noise: float = 0.5) -> np.ndarray:
    """n vectors, each normalise(0.7·a + 0.3·b + noise) for random real a, b;
    built in blocks to bound memory."""
    rng = np.random.default_rng(seed)
    d = real.shape[1]
    out = np.empty((n, d), dtype=np.float32)
    sigma = noise / np.sqrt(d)
    for s in range(0, n, 100_000):
        e = min(n, s + 100_000)
        a = real[rng.integers(0, len(real), e - s)]
        b = real[rng.integers(0, len(real), e - s)]
        x = 0.7 * a + 0.3 * b + rng.standard_normal((e - s, d), dtype=np.float32) * sigma
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        out[s:e] = x
    return out


WORKSPACE = "speed"
SECTIONS = 9  # + the intro = 10 chunks a file
# The raw baseline: the product leg's own FTS5 statement, alone (no filter, no rows, no answer).
_SENT = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
_STOP = frozenset(
    "the a an of in and or to for with on by from at as is are was were be been that this these "
    "those which who whom its their our we it not no".split()
)


def sentence_pool(data: Path) -> tuple[list[str], list[str]]:
    sents: list[str] = []
    titles: list[str] = []
    with open(data / "corpus.jsonl", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            if d.get("title"):
                titles.append(" ".join(d["title"].split()))
            for s in _SENT.split(d.get("text") or ""):
                s = " ".join(s.split())
                if 30 <= len(s) <= 400:
                    sents.append(s)
    return sents, titles


def make_file(rng: random.Random, sents: list[str], titles: list[str]) -> str:
    out = [f"# {rng.choice(titles)}", "", " ".join(rng.choice(sents) for _ in range(rng.randint(1, 3))), ""]
    for _ in range(SECTIONS):
        words = [w.strip(".,;:()[]") for w in rng.choice(sents).split()]
        words = [w for w in words if w and w.lower() not in _STOP][: rng.randint(2, 5)]
        out += [f"## {' '.join(words).capitalize() or 'Notes'}", ""]
        out += [" ".join(rng.choice(sents) for _ in range(rng.randint(2, 5))), ""]
    return "\n".join(out)


def build_corpus(chunks: int, data: Path, cache: Path) -> Path:
    """cache/speed-corpus-<chunks>/ with chunks/10 files in folders of 1000."""
    folder = cache / f"speed-corpus-{chunks}"
    done = folder / ".complete"
    if done.exists():
        return folder
    if folder.exists():
        shutil.rmtree(folder)
    sents, titles = sentence_pool(data)
    rng = random.Random(chunks)
    files = max(1, chunks // (SECTIONS + 1))
    for i in range(files):
        sub = folder / f"d{i // 1000:04d}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"note-{i:07d}.md").write_text(make_file(rng, sents, titles), encoding="utf-8")
    done.write_text(json.dumps({"files": files, "built": time.time()}))
    return folder


# -- vectors -----------------------------------------------------------------------


def real_vectors(cache: Path, data: Path, fp: str, sample: int = 512, min_rows: int = 1000) -> tuple[np.ndarray, str]:
    """Real all-MiniLM-L6-v2 vectors: from the quality benchmark's SciFact store
    when there is one for this model, else 512 SciFact abstracts embedded now."""
    import apsw

    for db_path in sorted((cache / "stores").glob("scifact-*/autodoc.db")):
        try:
            db = apsw.Connection(str(db_path), flags=apsw.SQLITE_OPEN_READONLY)
            blobs = [r[0] for r in db.execute("SELECT f32 FROM vectors WHERE model_fp=?", (fp,))]
            db.close()
        except Exception:
            continue
        if len(blobs) >= min_rows:
            return np.frombuffer(b"".join(blobs), dtype="<f4").reshape(
                len(blobs), -1
            ).copy(), f"{len(blobs)} real SciFact chunk vectors from {db_path.parent.name}"
    path = cache / f"real-sample-{sample}-{fp[:12]}.npy"
    if not path.exists():
        from autodoc.embed.onnx import OnnxProvider

        texts = []
        with open(data / "corpus.jsonl", encoding="utf-8") as f:
            for line in f:
                d = json.loads(line)
                texts.append(f"{d['title']}\n{d['text']}")
                if len(texts) >= sample:
                    break
        np.save(path, OnnxProvider().embed(texts))
    v = np.load(path)
    return v, f"{len(v)} SciFact abstracts embedded for this benchmark (no SciFact store in the cache)"


# normalise(0.7·a + 0.3·b + noise) for random real vectors a, b: one recipe for every bench
synthetic_vectors = synthetic


def seed_vectors(store: Path, fp: str, real: np.ndarray, seed: int) -> int:
    """Write a synthetic vector for every chunk text hash lacking one (no Service
    may be open on the store). Returns how many were written."""
    import apsw

    from autodoc.search.semantic.vectors import sign_codes

    db = apsw.Connection(str(store))
    ws_id = db.execute("SELECT id FROM workspaces WHERE name=?", (WORKSPACE,)).fetchone()[0]
    hashes = [
        r[0]
        for r in db.execute(
            "SELECT c.text_hash FROM chunks c WHERE c.workspace_id=? AND NOT EXISTS (SELECT 1 FROM vectors v "
            "WHERE v.workspace_id=c.workspace_id AND v.model_fp=? AND v.text_hash=c.text_hash) "
            "GROUP BY c.text_hash ORDER BY MIN(c.id)",
            (ws_id, fp),
        )
    ]
    if hashes:
        vecs = np.ascontiguousarray(synthetic_vectors(real, len(hashes), seed), dtype="<f4")
        codes = sign_codes(vecs)
        with db:
            db.executemany(
                "INSERT OR REPLACE INTO vectors(workspace_id, model_fp, text_hash, f32, bits) VALUES (?,?,?,?,?)",
                ((ws_id, fp, h, vecs[i].tobytes(), codes[i].tobytes()) for i, h in enumerate(hashes)),
            )
    db.close()
    return len(hashes)


def build_store(
    chunks: int, data: Path, cache: Path, *, sample: int = 512, min_rows: int = 1000, quiet: bool = False
) -> dict[str, Any]:
    """Corpus + an indexed store with synthetic vectors, cached."""
    from autodoc.config import Settings
    from autodoc.embed.onnx import OnnxProvider
    from autodoc.service import Service

    corpus = build_corpus(chunks, data, cache)
    fp = OnnxProvider().fingerprint
    sdir = cache / "stores" / f"speed-{chunks}-{fp[:12]}"
    store = sdir / "autodoc.db"
    meta_path = sdir / "bench-meta.json"
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    if meta.get("complete"):
        return meta | {"store": str(store), "corpus": str(corpus)}
    sdir.mkdir(parents=True, exist_ok=True)
    svc = Service(Settings.from_env(store=store))
    try:
        if WORKSPACE not in svc.workspaces():
            svc.workspace_add(WORKSPACE, str(corpus), {"embedding": {"provider": "onnx"}})

        t0 = time.monotonic()
        rep = svc.index(WORKSPACE, progress=None if quiet else Progress(f"index {chunks}", 30))
        took = time.monotonic() - t0
        if rep["added"]:
            meta["index_build"] = {
                "files": rep["added"],
                "chunks": rep["chunks"],
                "seconds": round(took, 1),
                "docs_per_s": round(rep["added"] / took, 1),
                "chunks_per_s": round(rep["chunks"] / took, 1),
            }
    finally:
        svc.close()
    real, source = real_vectors(cache, data, fp, sample, min_rows)
    t0 = time.monotonic()
    n = seed_vectors(store, fp, real, seed=chunks)
    meta["vectors"] = {"synthetic": n, "source": source, "seconds": round(time.monotonic() - t0, 1)}
    svc = Service(Settings.from_env(store=store))
    try:
        emb = svc.embed_pending(WORKSPACE)
        st = svc.workspace_status(WORKSPACE)
        if st["embedding"]["state"] != "ready":
            raise RuntimeError(f"vectors not active: {st['embedding']} {emb}")
        meta["chunks"] = st["chunks"]
        meta["files"] = st["files"]["indexed"]
    finally:
        svc.close()
    meta["complete"] = True
    meta["fingerprint"] = fp
    meta_path.write_text(json.dumps(meta, indent=1))
    return meta | {"store": str(store), "corpus": str(corpus)}


# -- queries -----------------------------------------------------------------------


def query_sets(data: Path, n: int) -> dict[str, list[str]]:
    claims = []
    with open(data / "queries.jsonl", encoding="utf-8") as f:
        for line in f:
            claims.append(json.loads(line)["text"])
    qrels = data / "qrels" / "test.tsv"
    if qrels.exists():
        {l.split("\t")[0] for l in qrels.read_text().splitlines()[1:]}
    rng = random.Random(7)
    pool = claims[:]
    rng.shuffle(pool)
    claims_n = pool[:n]
    short = []
    for c in pool[n:]:
        words = sorted({w.strip(".,;:()[]'\"").lower() for w in c.split()} - _STOP, key=lambda w: (-len(w), w))
        words = [w for w in words if w.isalpha()]
        if len(words) >= 2:
            short.append(" ".join(words[:2]))
        if len(short) >= n:
            break
    return {"keywords": short, "claims": claims_n}


# -- measuring ---------------------------------------------------------------------


def interleaved(queries: list[str], fns: dict[str, Callable[[str], Any]], rounds: int = 1) -> dict[str, list[float]]:
    """Time every fn on every query, alternating the order per query."""
    names = list(fns)
    out: dict[str, list[float]] = {k: [] for k in names}
    for r in range(rounds):
        for i, q in enumerate(queries):
            order = names if (i + r) % 2 == 0 else names[::-1]
            for k in order:
                t0 = time.perf_counter()
                fns[k](q)
                out[k].append(time.perf_counter() - t0)
    return out


def ratio(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
    return {
        "p50": round(a["p50"] / b["p50"], 3) if b["p50"] else float("nan"),
        "p95": round(a["p95"] / b["p95"], 3) if b["p95"] else float("nan"),
    }


def rss_mb(pid: int) -> float | None:
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


class SocketClient:
    """A minimal synchronous newline-delimited JSON-RPC client (the least a
    client can add on top of the daemon)."""

    def __init__(self, path: Path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(str(path))
        self.f = self.sock.makefile("rb")
        self.id = 0

    def call(self, method: str, params: Any) -> Any:
        self.id += 1
        self.sock.sendall(
            json.dumps({"jsonrpc": "2.0", "id": self.id, "method": method, "params": params}).encode() + b"\n"
        )
        while True:
            line = self.f.readline()
            if not line:
                raise ConnectionError("daemon closed the connection")
            msg = json.loads(line)
            if msg.get("id") == self.id:
                if "error" in msg:
                    raise RuntimeError(msg["error"])
                return msg["result"]

    def close(self) -> None:
        try:
            self.f.close()
            self.sock.close()
        except OSError:
            pass


def start_daemon(store: Path, sock: Path, timeout: float = 120.0) -> tuple[subprocess.Popen | None, str]:
    exe = Path(sys.executable).with_name("autodoc")
    argv = [
        str(exe) if exe.exists() else sys.executable,
        *([] if exe.exists() else ["-m", "autodoc.cli"]),
        "--store",
        str(store),
        "serve",
        "--socket",
        str(sock),
    ]
    sock.parent.mkdir(parents=True, exist_ok=True)
    errlog = open(sock.parent / "daemon.log", "wb")
    try:
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errlog)
    except OSError as e:
        return None, f"could not start the daemon: {e}"
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if p.poll() is not None:
            return None, f"the daemon exited with {p.returncode}: " + (sock.parent / "daemon.log").read_text()[-400:]
        if sock.exists():
            try:
                c = SocketClient(sock)
            except OSError:
                time.sleep(0.1)
                continue
            try:
                c.call("server.info", {})
                return p, "ok"
            except RuntimeError as e:  # it answers, with an error: no point waiting
                stop_daemon(p)
                return None, f"the daemon answered server.info with an error: {e}"[:300]
            except Exception:
                pass
            finally:
                c.close()
        time.sleep(0.1)
    p.terminate()
    return None, "the daemon did not answer on its socket within the timeout"


def start_instrumented(chunks: int, module: str, flag: str, prefix: str) -> tuple[subprocess.Popen, Path, Path]:
    """A daemon on the cached store of this size, run as ``python -m <module> <flag> OUT --store …``
    (module: a harness and its case, "bench.concurrency timeline")
    so that the module can wrap the daemon's functions before it starts; (process, socket, OUT)."""
    store = speed_store(chunks)
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    out, sock = tmp / "out.json", tmp / "d.sock"
    popen = subprocess.Popen

    def wrapped(cmd, *pa, **pk):
        if "serve" in cmd:
            cmd = [sys.executable, "-m", *module.split(), flag, str(out), *cmd[cmd.index("--store") :]]
            pk.setdefault("cwd", str(REPO))
        return popen(cmd, *pa, **pk)

    subprocess.Popen = wrapped
    try:
        p, why = start_daemon(store, sock)
    finally:
        subprocess.Popen = popen
    if p is None:
        raise SystemExit(why)
    return p, sock, out


def stop_daemon(p: subprocess.Popen) -> None:
    p.terminate()
    try:
        p.wait(10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
