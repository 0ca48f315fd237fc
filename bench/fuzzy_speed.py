"""What the lexical leg's fuzzy fallback costs (issue 35): a lexical search for a word typed with
one letter dropped, beside the same search for the word spelt right, on a speed store
(bench/speed.py's synthetic corpus of SciFact sections; built and cached here when absent).

The words: `--queries` words of 8+ letters drawn (seeded) from the store's chunks, each once as
written (the baseline, same process, interleaved) and once without its middle letter (only words
whose typo no chunk holds, so every typo'd search takes the fallback). Reported: p50/p95 of the
whole search (Service.search, mode lexical, limit 10) for each, the ratio, the time of the
vocabulary lookup and correction alone (search/lexical/fuzzy.correct), and how often the typo was
corrected back to the word's own stem.

    python -m bench.fuzzy_speed --size 100000 --queries 100 [--cache DIR | --store PATH]
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
from pathlib import Path

from .common import DEFAULT_DATA, WORKSPACE, build_store, cache_root, git_commit, log, machine_note, summary_ms


def _words(db, n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    top = db.execute("SELECT max(id) FROM chunks").fetchone()[0]
    out: list[str] = []
    while len(out) < n:
        row = db.execute("SELECT text FROM chunks WHERE id >= ? LIMIT 1", (rng.randint(1, top),)).fetchone()
        words = [w.lower() for w in re.findall(r"[A-Za-z]{8,}", row[0] if row else "")]
        if words:
            w = rng.choice(words)
            if w not in out:
                out.append(w)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.fuzzy_speed", description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA / "scifact")
    ap.add_argument("--cache", type=Path, default=None)
    ap.add_argument("--store", type=Path, default=None, help="an indexed speed store to read (built elsewhere)")
    args = ap.parse_args(argv)

    from autodoc.config import Settings
    from autodoc.search.lexical import fuzzy, leg
    from autodoc.search.query import Term
    from autodoc.service import Service
    from autodoc.store.lexical import ftsterms

    store = args.store or Path(build_store(args.size, args.data, args.cache or cache_root())["store"])
    svc = Service(Settings.from_env(store=store))
    try:
        if args.store is None:
            svc.index(WORKSPACE)  # an upgraded store finishes its postings build first (migration 8)
        db = svc.store.reader()
        pairs = []
        for w in _words(db, args.queries * 3, seed=35):
            typo = w[: len(w) // 2] + w[len(w) // 2 + 1 :]
            stem = ftsterms.parse_expr(db, f'"{typo}"').tokens
            if stem and not ftsterms.token_docs(db, list(stem))[stem[0]]:
                pairs.append((w, typo))
            if len(pairs) == args.queries:
                break
        right_ms, typo_ms, correct_ms, off_ms, back = [], [], [], [], 0
        for _ in range(2):  # a warm-up round, then the measured one
            right_ms, typo_ms, correct_ms, off_ms, back = [], [], [], [], 0
            for w, typo in pairs:
                for fallback in (True, False) if len(right_ms) % 2 else (False, True):  # each first in turn
                    leg.FUZZY = fallback
                    t0 = time.perf_counter()
                    svc.search(WORKSPACE, w, {"mode": "lexical", "limit": 10})
                    (right_ms if fallback else off_ms).append(time.perf_counter() - t0)
                leg.FUZZY = True
                t0 = time.perf_counter()
                a = svc.search(WORKSPACE, typo, {"mode": "lexical", "limit": 10})
                typo_ms.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                fuzzy.correct(db, [Term(typo)])
                correct_ms.append(time.perf_counter() - t0)
                want = ftsterms.parse_expr(db, f'"{w}"').tokens
                got = (a.get("corrections") or {}).get(typo)
                back += bool(got) and ftsterms.parse_expr(db, f'"{got}"').tokens == want
        r, t, c, o = summary_ms(right_ms), summary_ms(typo_ms), summary_ms(correct_ms), summary_ms(off_ms)
        print(f"# fuzzy fallback at {args.size:,} chunks ({git_commit()}; {machine_note()})")
        print(f"{len(pairs)} words of 8+ letters, each spelt right and with its middle letter dropped")
        print("| search (lexical, limit 10) | p50 ms | p95 ms |")
        print("|---|---:|---:|")
        print(f"| word spelt right, fallback off (before) | {o['p50']:.1f} | {o['p95']:.1f} |")
        print(f"| word spelt right | {r['p50']:.1f} | {r['p95']:.1f} |")
        print(f"| word typo'd (fuzzy fallback) | {t['p50']:.1f} | {t['p95']:.1f} |")
        print(f"| the correction alone (fuzzy.correct) | {c['p50']:.1f} | {c['p95']:.1f} |")
        print(f"ratio typo'd / right p50: {t['p50'] / r['p50']:.2f}; corrected back to the word: {back}/{len(pairs)}")
    finally:
        svc.close()
    log("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
