"""The lexical leg on both stores in one run (issue 34, docs/dev/postgres.md section 2): a folder
indexed into SQLite (FTS5) and into PostgreSQL (the product's postings, bm25 computed from them:
store/lexical/bm25.py) by the same Service, then every query through `Service.search` with stages
["lexical"] on each: how many answers are byte-identical (the search's timing field aside), each
query's first answer's latency on each (no cache of the leg holds it yet), then --rounds of them all
interleaved: p50/p95 on each backend and their ratio (PostgreSQL / SQLite).

    python -m bench.pg_lexical                                  # foam-docs, the equivalence test's queries
    python -m bench.pg_lexical --scifact [--queries N]          # SciFact's 5,183 abstracts: claims, keywords, phrases

The PostgreSQL server is a private one (pgserver, PostgreSQL 16) in a temp folder, on a Unix socket.
SciFact's folder is bench.quality's cached Markdown copy (built by `python -m bench.quality` first).
Prints one JSON object. Runs on: the benchmark's main thread.
"""

from __future__ import annotations

import argparse
import functools
import json
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from .common import cache_root, command_line, git_commit, interleaved, log, machine_note, query_sets, ratio, summary_ms

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
FOAM = DATA / "corpora" / "foam-docs"
FOAM_QUERIES = [
    "graph",
    "tags wikilinks",
    "how do I link my notes to each other with backlinks",
    '"daily note"',
    '"note templates" graph',
    "wo*",
    "temp* note",
    "wikilnks",
    "markdown previw graph",
    "link path:docs/user/features",
    "publish to github pages",
    "vscode extension settings",
]

# phrases of common words: each is verified by tokenizing every chunk holding all its words (bm25.py);
# with --rounds 1 each is timed once, before any cache holds it
SCIFACT_PHRASES = ['"in the"', '"of the"', '"the effect of"', '"in a" study', '"associated with"', '"t cells"']


def _server(base: Path) -> tuple[Any, str]:
    sys.path.insert(0, str(ROOT / "tests"))
    from helpers.pg import PgServer  # type: ignore[import-not-found]  # the tests' private server

    server = PgServer(base / "pgdata")
    return server, server.start()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.pg_lexical", description=__doc__.split("\n\n")[0])
    ap.add_argument("--scifact", action="store_true", help="SciFact's abstracts and claims instead of foam-docs")
    ap.add_argument("--queries", type=int, default=100, help="claims and keyword pairs each (--scifact)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--limit", type=int, default=10)
    args = ap.parse_args(argv)

    from autodoc.config import Settings
    from autodoc.service import Service

    if args.scifact:
        folders = sorted(cache_root().glob("scifact-md-*"))
        if not folders:
            log("no SciFact Markdown folder in the bench cache: run python -m bench.quality first")
            return 2
        corpus, sets = folders[-1], {**query_sets(DATA / "scifact", args.queries), "phrases": SCIFACT_PHRASES}
    else:
        corpus, sets = FOAM, {"foam": FOAM_QUERIES}
    base = Path(tempfile.mkdtemp(prefix="pglex-", dir="/tmp"))
    server, uri = _server(base)
    out: dict[str, Any] = {"commit": git_commit(), "command": command_line(), "machine": machine_note()}
    try:
        schema = f"b_{uuid.uuid4().hex[:8]}"
        targets: dict[str, str | Path] = {
            "sqlite": base / "autodoc.db",
            "postgres": f"{uri}&options={quote(f'-csearch_path={schema}')}",
        }
        services = {}
        for name, target in targets.items():
            s = Service(Settings.from_env(store=target))
            s.workspace_add("w", str(corpus), {"embedding": {"provider": "none"}})
            t0 = time.monotonic()
            rep = s.index("w")
            out[f"index_{name}_s"] = round(time.monotonic() - t0, 2)
            out["chunks"] = rep["chunks"]
            services[name] = s
            log(f"{name}: indexed {rep['chunks']} chunks in {out[f'index_{name}_s']} s")
        opts = {"stages": ["lexical"], "limit": args.limit}

        def answer(name: str, q: str) -> str:
            ans = services[name].search("w", q, opts)
            ans.pop("took_ms", None)
            return json.dumps(ans, sort_keys=True, ensure_ascii=False)

        for label, queries in sets.items():
            differ: list[str] = []
            first: dict[str, list[float]] = {
                n: [] for n in services
            }  # the first answer to each query: no cache holds it
            for q in queries:
                got = {}
                for n in services:
                    t0 = time.perf_counter()
                    got[n] = answer(n, q)
                    first[n].append(time.perf_counter() - t0)
                if got["sqlite"] != got["postgres"]:
                    differ.append(q)
            fns: dict[str, Callable[[str], str]] = {n: functools.partial(answer, n) for n in services}
            times = interleaved(queries, fns, rounds=args.rounds)
            lite, pg = summary_ms(times["sqlite"]), summary_ms(times["postgres"])
            out[label] = {
                "queries": len(queries),
                "identical": len(queries) - len(differ),
                "differ": differ[:10],
                "first_sqlite_ms": summary_ms(first["sqlite"]),
                "first_postgres_ms": summary_ms(first["postgres"]),
                "sqlite_ms": lite,
                "postgres_ms": pg,
                "postgres_over_sqlite": ratio(pg, lite),
            }
            log(label, json.dumps(out[label]))
        for s in services.values():
            s.close()
    finally:
        server.stop()
        shutil.rmtree(base, ignore_errors=True)
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
