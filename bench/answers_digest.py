"""Answers as bytes: a digest of every SciFact test answer, to show that a
change which should not move any answer moved none.

    python -m bench.answers_digest            # build (or reuse) the store, print the digests
    python -m bench.answers_digest --no-build # search the cached store only (read-only)

Run it before and after a refactor (for the code before, put its `daemon/` on
PYTHONPATH): equal digests mean byte-identical answers for every query, in
each of the lexical, semantic and default hybrid configurations.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys

from .beir import WORKSPACE, build_store, load_collection
from .common import DEFAULT_DATA, cache_root

MODES = {"lexical": {"stages": ["lexical"]}, "semantic": {"stages": ["semantic"]}, "hybrid": {}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.answers_digest")
    ap.add_argument("--no-build", action="store_true", help="only search the cached store, read-only")
    ap.add_argument("--limit", type=int, default=100)
    args = ap.parse_args(argv)
    import autodoc
    from autodoc.config import Settings
    from autodoc.service import Service

    col = load_collection(DEFAULT_DATA / "scifact", splits=("test",))
    if args.no_build:
        stores = sorted((cache_root() / "stores").glob("scifact-*/autodoc.db"))
        if len(stores) != 1:
            print(f"need exactly one cached SciFact store, found {stores}", file=sys.stderr)
            return 2
        store = stores[0]
    else:
        store = build_store(col, quiet=True).store
    svc = Service(Settings.from_env(store=store), writer=False)
    try:
        print(f"autodoc from {autodoc.__file__}, store {store}")
        queries = sorted((qid, col.queries[qid]) for qid in col.qrels["test"])
        for mode, opts in MODES.items():
            h = hashlib.sha256()
            for _, text in queries:
                h.update(
                    json.dumps(
                        svc.search(WORKSPACE, text, {"limit": args.limit, **opts}), sort_keys=True, ensure_ascii=False
                    ).encode()
                )
            print(f"{mode:9} {len(queries)} answers sha256 {h.hexdigest()}")
    finally:
        svc.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
