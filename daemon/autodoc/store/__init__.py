"""The store stage: one SQLite file (apsw, WAL) behind the Store (store.py);
each module here owns the SQL of one kind of row.

`Store` is loaded when first asked for (a module `__getattr__`), so reading the
lease (store/lease.py) or a row module does not load apsw, numpy and every
migration: the CLI finds a daemon without them.

Runs on: any thread (importing; `Store` itself says how it is shared).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .store import Store

__all__ = ["Store"]


def __getattr__(name: str) -> Any:
    if name == "Store":
        from .store import Store

        return Store
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
