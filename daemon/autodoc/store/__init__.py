"""The store stage: one SQLite file (apsw, WAL) behind the Store (store.py), or a PostgreSQL
database behind the PgStore (pg/store.py, docs/dev/postgres.md); each module here owns the SQL of
one kind of row, one text for both where it can (store/sql.py).

`open_store` is how a caller opens either: a PostgreSQL URI (config/pguri.py) opens a PgStore,
anything else is a store file's path. `Store` and the PgStore are loaded when first asked for (a
module `__getattr__`, and inside `open_store`), so reading the lease (store/lease.py) or a row module
does not load apsw, psycopg, numpy and every migration: the CLI finds a daemon without them.

Runs on: any thread (importing; `Store` itself says how it is shared).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config.pguri import is_postgres, redact
from ..errors import StoreUnreachable

if TYPE_CHECKING:
    from .interface import StoreInterface
    from .store import Store

__all__ = ["Store", "open_store"]


def open_store(target: str | Path, *, writer: bool = True, holder: dict[str, Any] | None = None) -> StoreInterface:
    """The store at `target`: a PostgreSQL database when it is a PostgreSQL URI or libpq string
    (docs/dev/postgres.md, section 7), else the SQLite file at that path (unchanged)."""
    if isinstance(target, str) and is_postgres(target):
        if importlib.util.find_spec("psycopg") is None:  # installed without the extra: say so, not an internal error
            raise StoreUnreachable(
                f"the store {redact(target)} is a PostgreSQL database and its driver (psycopg) is not installed; "
                "fix: pip install 'autodoc[postgres]'",
                {"store": redact(target)},
            )
        from .pg.store import PgStore

        return PgStore(target, writer=writer, holder=holder)
    from .store import Store

    return Store(Path(target), writer=writer, holder=holder)


def __getattr__(name: str) -> Any:
    if name == "Store":
        from .store import Store

        return Store
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
