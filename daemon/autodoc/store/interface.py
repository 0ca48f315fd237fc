"""The Store seam: what search/, index/, embed/ and the service call on a store, so a second
backend (PostgreSQL, issue 34) can stand beside the SQLite one (store/store.py).

A caller holds a `Snapshot` (a read transaction, or the writer inside one) only to pass it to
this package's row functions (store/reads.py, workspaces.py, ...); it never runs SQL on it. The
signatures here name no apsw type: `Snapshot` is the one name for the handle, today the SQLite
connection itself.

    with store.read() as db:    # one snapshot
        ...
    with store.write() as db:   # the write lock and one transaction
        ...
    with store.locked() as db:  # the write lock without a transaction (work that spans several)
        ...

Runs on: any thread (the implementation says which connection each thread gets).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

if TYPE_CHECKING:  # the type only: importing this module loads no database driver
    import apsw

Snapshot: TypeAlias = "apsw.Connection"


class StoreInterface(Protocol):
    """One store file (or database): snapshots to read, one writer while this process holds its lease."""

    path: Path

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
