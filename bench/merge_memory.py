"""Peak memory of merging a shared vector base (issue 19, RSS at 1M chunks):
the delta merged straight into the next shared file (search/shared_vectors.
write_merged, what the daemon does now) against the merge built in private
memory and then copied into the file (what it did before), on the same base.

    python -m bench.merge_memory [--rows 1000000] [--delta 60000] [--dead 20000]

Each way runs in a fresh process: a synthetic base of ``--rows`` float16
vectors (384 dimensions, the bundled model's) is shared into a folder under
/dev/shm, ``--dead`` of its rows retired and ``--delta`` rows added (past the
merge threshold of a twentieth), then the peak is reset (/proc/self/clear_refs)
and the merge runs. Reported: RSS before the merge, the peak during it
(VmHWM: private pages and the shared file's pages this process touched) and
the peak's rise; the searches over both merged bases are checked equal.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from .common import command_line, git_commit, machine_note

DIM = 384


def _status(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(field)


def run_one(way: str, rows: int, delta: int, dead: int, folder: Path) -> dict:
    from autodoc.search.shared_vectors import Sharing
    from autodoc.search.vector_cache import VectorCache, WorkspaceVectors
    from autodoc.search.vectors import VectorIndex

    rng = np.random.default_rng(7)
    vecs = np.empty((rows, DIM), dtype=np.float16)
    for i in range(0, rows, 100_000):
        v = rng.standard_normal((min(100_000, rows - i), DIM)).astype(np.float32)
        vecs[i : i + len(v)] = v / np.linalg.norm(v, axis=1, keepdims=True)
    base = VectorIndex(np.arange(rows, dtype=np.int64), vecs)
    del vecs
    doc_chunks = {d: np.arange(d * 10, min(rows, d * 10 + 10), dtype=np.int64) for d in range((rows + 9) // 10)}
    sharing = Sharing(lambda *item: None, directory=folder)
    shared = sharing.publish(1, "fp", base, doc_chunks)
    assert shared is not None
    del base
    wv = WorkspaceVectors("fp", shared, VectorIndex.empty(DIM), doc_chunks=doc_chunks, shared=shared)
    wv.retire(rng.choice(rows, dead, replace=False).astype(np.int64))
    add = rng.standard_normal((delta, DIM)).astype(np.float32)
    add /= np.linalg.norm(add, axis=1, keepdims=True)
    wv.add(list(range(rows, rows + delta)), add, None)
    del add
    cache = VectorCache()
    cache.sharing = sharing
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
    before = _status("VmRSS")
    t0 = time.perf_counter()
    if way == "straight":
        cache._share(1, "fp", wv)  # what VectorCache.get does past the threshold
    else:  # before: merged in private memory, then copied into a new file
        wv.merge()
        wv.merged_into(sharing.publish(1, "fp", wv.base, doc_chunks))
    seconds = time.perf_counter() - t0
    peak = _status("VmHWM")
    q = np.random.default_rng(3).standard_normal(DIM).astype(np.float32)
    hits = wv.base.search(q, top=20, exact=False)
    sharing.close()
    return {
        "way": way,
        "rss_before_mb": before / 2**20,
        "peak_mb": peak / 2**20,
        "rise_mb": (peak - before) / 2**20,
        "seconds": seconds,
        "rows_after": len(wv.base),
        "hits": hits,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.merge_memory", description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--delta", type=int, default=60_000)
    ap.add_argument("--dead", type=int, default=20_000)
    ap.add_argument("--one", choices=("straight", "copied"), help=argparse.SUPPRESS)
    ap.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.one:
        print(json.dumps(run_one(a.one, a.rows, a.delta, a.dead, a.folder)))
        return 0
    out = []
    for way in ("copied", "straight", "copied", "straight"):
        folder = Path(tempfile.mkdtemp(prefix="adbench-", dir="/dev/shm"))
        try:
            res = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "bench.merge_memory",
                    "--one",
                    way,
                    "--folder",
                    str(folder),
                    "--rows",
                    str(a.rows),
                    "--delta",
                    str(a.delta),
                    "--dead",
                    str(a.dead),
                ],
                capture_output=True,
                text=True,
                check=True,
                cwd=Path(__file__).resolve().parents[1],
            )
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        out.append(json.loads(res.stdout.strip().splitlines()[-1]))
    same = all(r["hits"] == out[0]["hits"] for r in out)
    print(f"`{command_line()}` · commit {git_commit()} · {machine_note()}")
    print(
        f"\n{a.rows:,} float16 rows of {DIM} dimensions shared; {a.dead:,} retired and {a.delta:,} added; "
        f"merged to {out[0]['rows_after']:,} rows. Same top 20 from every merged base: {same}.\n"
    )
    print("| merge | RSS before, MB | peak during, MB | rise, MB | seconds |\n|---|---|---|---|---|")
    for r in out:
        label = "straight into the new file (now)" if r["way"] == "straight" else "private, then copied (before)"
        print(
            f"| {label} | {r['rss_before_mb']:.0f} | {r['peak_mb']:.0f} | **{r['rise_mb']:.0f}** | {r['seconds']:.2f} |"
        )
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
