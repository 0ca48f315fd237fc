"""`autodoc store copy --to DATABASE`: the store file copied into a PostgreSQL store (store/pg/copy.py).

What a team does once when it moves to a shared database: the laptop's store (documents, chunks, the
lexical index, the vectors) goes to the server with the same ids, nothing indexed or embedded again,
and the database's vector index is built there. The copy runs in this process, on a read snapshot of
the file (a daemon may keep serving it meanwhile) and one transaction on the database; the target
must hold no workspace yet.

Runs on: the main thread of the CLI.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from .config import Settings
from .config.pguri import is_postgres, redact
from .errors import InvalidParams


def add_parser(sub: Any) -> None:
    sc = sub.add_parser("store", help="copy this store into a PostgreSQL database (a team's shared store)")
    scsub = sc.add_subparsers(dest="scmd", required=True)
    cp = scsub.add_parser(
        "copy",
        help="copy the store file (--store) into an empty PostgreSQL store: the same ids, nothing indexed "
        "or embedded again",
        description="Copies every table of the store file into a PostgreSQL store (made there; it must hold "
        "no workspace yet), in one transaction, then builds its vector index. Reader daemons on the "
        "database then answer as this store does. Keep the password out of the command line: "
        "~/.pgpass, PGPASSWORD or a service file (README, For a team).",
    )
    cp.add_argument("--to", required=True, metavar="DATABASE", help="postgresql://…, 'host=… dbname=…' or service=NAME")
    cp.add_argument(
        "--build-memory",
        default="1GB",
        metavar="SIZE",
        help="maintenance_work_mem of the vector index build (default 1GB); pgvector builds far slower once "
        "its graph outgrows it (docs/benchmarks/pg_scale.md: 1M 384-d vectors built with 3GB in 9 minutes)",
    )


def run(args: argparse.Namespace, settings: Settings) -> int:
    """The copy, its progress on stderr and what was copied on stdout; exit 0."""
    to = str(args.to)
    if settings.postgres:
        raise InvalidParams("--store", "store copy copies a store file; this names a database already")
    store = Path(settings.store)
    if not is_postgres(to):
        raise InvalidParams("--to", f"{redact(to)!r} is not a PostgreSQL connection string (postgresql://…)")
    if not store.exists():
        raise InvalidParams("--store", f"there is no store at {store} to copy")
    from .store.pg.copy import copy_store

    def progress(table: str, n: int) -> None:
        print(f"autodoc: {table}: {n:,} rows" if n else f"autodoc: {table} …", file=sys.stderr)

    rep = copy_store(store, to, progress=progress, build_memory=str(args.build_memory))
    rows = rep["rows"]
    print(
        f"copied {store} to {redact(to)}: {rows['workspaces']} workspaces, {rows['documents']:,} documents, "
        f"{rows['chunks']:,} chunks, {rows['vectors']:,} vectors in {sum(rep['seconds'].values()):.1f} s"
    )
    for h in rep["hnsw"]:
        made = f"built in {h['seconds']} s" if h["made"] else "not made (this role may not): searched in memory"
        print(f"vector index of workspace {h['workspace']} ({h['model'][:12]}): {made}")
    return 0
