"""Small typed helpers over a connection for this package's modules: the one row of an
aggregate, the one value of it (a query that always answers one row, e.g. COUNT or PRAGMA).

Runs on: the caller's thread, on the connection it passes.
"""

from __future__ import annotations

from typing import Any

import apsw


def one(db: apsw.Connection, sql: str, args: Any = ()) -> tuple[Any, ...]:
    """The single row a query always answers."""
    row = db.execute(sql, args).fetchone()
    if row is None:
        raise RuntimeError(f"no row from a query that always answers one: {sql}")
    return row


def scalar(db: apsw.Connection, sql: str, args: Any = ()) -> Any:
    """The first value of the single row a query always answers."""
    return one(db, sql, args)[0]


def all_rows(db: apsw.Connection, sql: str, args: Any = ()) -> list[tuple[Any, ...]]:
    """Every row of a query, as tuples (each function names what its columns are)."""
    return db.execute(sql, args).fetchall()
