"""The Store seam: what search/, index/, embed/ and the service call on a store, so a second
backend (PostgreSQL, issue 34) can stand beside the SQLite one (store/store.py).

A caller holds a `Snapshot` (a read transaction, or the writer inside one) only to pass it to
this package's row functions (store/reads.py, workspaces.py, ...); it never runs SQL on it. The
signatures here name no driver type: `Snapshot` is the one name for the handle, a small protocol
that an `apsw.Connection` satisfies as it is (the SQLite store) and so does `store.pg.snapshot.
PgSnapshot` (a psycopg connection that takes the same `?` SQL). What a row module needs beyond it
(which backend it talks to) it asks `store.sql.dialect(db)`.

    with store.read() as db:    # one snapshot
        ...
    with store.write() as db:   # the write lock and one transaction
        ...
    with store.locked() as db:  # the write lock without a transaction (work that spans several)
        ...

Runs on: any thread (the implementation says which connection each thread gets).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol


class Cursor(Protocol):
    """What a statement answers: its rows, one at a time or all at once."""

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...

    def __next__(self) -> Any: ...


class Snapshot(Protocol):
    """A connection inside a read snapshot or the write transaction: `?` SQL (or `:name` with a dict).

    `with db:` is a transaction, a savepoint when one is already open."""

    def execute(self, sql: str, args: Any = None, /) -> Cursor: ...

    def executemany(self, sql: str, seq: Iterable[Any], /) -> Any: ...

    def __enter__(self) -> Snapshot: ...

    def __exit__(self, etype: Any, evalue: Any, etraceback: Any, /) -> Any: ...


class StoreInterface(Protocol):
    """One store file (or database): snapshots to read, one writer while this process holds its lease."""

    @property
    def path(self) -> Path | str:
        """The store file, or a PostgreSQL store's target with its password redacted (never the password)."""
        ...

    @property
    def dialect(self) -> str:
        """Which backend this is: store/sql.py's SQLITE or POSTGRES, as `dialect(db)` says of its snapshots."""
        ...

    @property
    def writable(self) -> bool:
        """Whether this process holds the writer (and the lease)."""
        ...

    def read(self) -> AbstractContextManager[Snapshot]:
        """One read snapshot (nests: an inner read joins the outer one)."""
        ...

    def write(self) -> AbstractContextManager[Snapshot]:
        """The write lock and one transaction (a savepoint when nested)."""
        ...

    def locked(self) -> AbstractContextManager[Snapshot]:
        """The write lock without a transaction."""
        ...

    def check_writable(self) -> None:
        """Raise RuntimeError when this store was opened read-only."""
        ...

    def set_holder(self, holder: dict[str, Any]) -> None:
        """What the lease says about its holder (pid, socket)."""
        ...

    def close(self) -> None: ...
