"""Small typed helpers over a connection for this package's modules: the one row of an
aggregate, the one value of it (a query that always answers one row, e.g. COUNT), and the two
things a row module's SQL may differ by between backends (docs/dev/postgres.md, section 1): which
backend a snapshot talks to (`dialect`), and how a list of ids is bound (`in_ids`).

Row modules write one SQL text for both backends wherever they can (`?` placeholders, `RETURNING`,
`ON CONFLICT`), and branch on `dialect(db)` only where the backends have no common spelling.

Runs on: the caller's thread, on the connection it passes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from .interface import Snapshot

SQLITE = "sqlite"
POSTGRES = "postgres"


def dialect(db: Snapshot) -> str:
    """ "sqlite" for an apsw connection, "postgres" for store.pg.snapshot.PgSnapshot."""
    return getattr(db, "dialect", SQLITE)


def in_ids(db: Snapshot, column: str, ids: Iterable[Any]) -> tuple[str, Any]:
    """`column` is one of `ids`: the SQL condition (one `?`) and the value to bind to it.

    SQLite reads a JSON array (one bound value, however many ids); Postgres takes a Python list as
    an array. Works for strings as well as ints."""
    if dialect(db) == POSTGRES:
        return f"{column} = ANY(?)", list(ids)
    return f"{column} IN (SELECT value FROM json_each(?))", json.dumps(list(ids))


def id_rows(db: Snapshot, ids: Iterable[Any]) -> tuple[str, Any]:
    """A one-column table of `ids` (a subquery: `SELECT ... FROM (<sql>) AS x(value)` style use is not
    needed, its column is `value`), and the value to bind to its one `?`."""
    if dialect(db) == POSTGRES:
        return "SELECT unnest(?) AS value", list(ids)
    return "SELECT value FROM json_each(?)", json.dumps(list(ids))


def row_key(db: Snapshot) -> str:
    """The name of an ordinary table's own row id (`links`): SQLite's implicit rowid, Postgres's
    explicit `id` column (store/pg/schema.py)."""
    return "id" if dialect(db) == POSTGRES else "rowid"


def no_limit(db: Snapshot, limit: int) -> int | None:
    """A LIMIT argument: SQLite reads a negative one as none; Postgres refuses it and reads NULL so."""
    return None if limit < 0 and dialect(db) == POSTGRES else limit


def one(db: Snapshot, sql: str, args: Any = ()) -> tuple[Any, ...]:
    """The single row a query always answers."""
    row = db.execute(sql, args).fetchone()
    if row is None:
        raise RuntimeError(f"no row from a query that always answers one: {sql}")
    return tuple(row)


def scalar(db: Snapshot, sql: str, args: Any = ()) -> Any:
    """The first value of the single row a query always answers."""
    return one(db, sql, args)[0]


def all_rows(db: Snapshot, sql: str, args: Any = ()) -> list[tuple[Any, ...]]:
    """Every row of a query, as tuples (each function names what its columns are)."""
    return db.execute(sql, args).fetchall()
