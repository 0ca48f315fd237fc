"""The Store: the one way into the SQLite file; the SQLite implementation of the
seam in store/interface.py (StoreInterface), which callers outside store/ type against.

Runs on: any thread. Reads use this thread's own read connection (opened on
first use, closed when the thread is gone); a read transaction is one
snapshot. Writes go through the single writer connection, which exists only
while this process holds the store's lease, under one re-entrant write lock.

    with store.read() as db:    # one snapshot
        ...
    with store.write() as db:   # the write lock and one transaction
        ...

Every SQL statement lives in a module of this package; callers pass the
connection these give them to those modules' functions.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import apsw

from ..errors import WorkspaceNotFound
from .db import open_reader, open_writer
from .lease import Lease
from .sql import SQLITE


class Store:
    dialect = SQLITE

    def __init__(self, path: Path, *, writer: bool = True, holder: dict[str, Any] | None = None):
        self.path = path
        self._lease: Lease | None = None
        self._db: apsw.Connection | None = None
        self._write_lock = threading.RLock()
        self._local = threading.local()
        self._readers: list[tuple[threading.Thread, apsw.Connection]] = []
        self._readers_lock = threading.Lock()
        if writer:
            self._lease = Lease(path, holder)
            try:
                self._db = open_writer(path)
            except BaseException:
                self._lease.release()
                raise
        elif not path.exists():
            raise WorkspaceNotFound(f"no store at {path}: add a workspace first (autodoc workspace add NAME PATH)")

    @property
    def writable(self) -> bool:
        return self._db is not None

    def reader(self) -> apsw.Connection:
        """This thread's read connection (outside a transaction, each statement is its own snapshot)."""
        db = getattr(self._local, "db", None)
        if db is None:
            db = open_reader(self.path)
            self._local.db = db
            me = threading.current_thread()
            with self._readers_lock:
                # worker threads come and go (anyio retires idle ones): close the
                # connections of threads that are gone instead of leaking them
                alive = []
                for t, conn in self._readers:
                    if t.is_alive():
                        alive.append((t, conn))
                    else:
                        _close_quietly(conn)
                alive.append((me, db))
                self._readers = alive
        return db

    @contextmanager
    def read(self) -> Iterator[apsw.Connection]:
        """One read snapshot (nests: an inner read joins the outer one)."""
        db = self.reader()
        with db:
            yield db

    def writer(self) -> apsw.Connection:
        """The writer connection, for a caller that holds `locked()`."""
        if self._db is None:
            raise RuntimeError("this store was opened read-only")
        return self._db

    def check_writable(self) -> None:
        """Raise RuntimeError when this store was opened read-only (store/interface.py)."""
        self.writer()

    @contextmanager
    def locked(self) -> Iterator[apsw.Connection]:
        """The write lock without a transaction: for work that spans several."""
        db = self.writer()
        with self._write_lock:
            yield db

    @contextmanager
    def write(self) -> Iterator[apsw.Connection]:
        """The write lock and one transaction (a savepoint when nested)."""
        db = self.writer()
        with self._write_lock, db:
            yield db

    def set_holder(self, holder: dict[str, Any]) -> None:
        if self._lease:
            self._lease.update(holder)

    def close(self) -> None:
        with self._readers_lock:
            for _, db in self._readers:
                _close_quietly(db)
            self._readers.clear()
        if self._db is not None:
            with self._write_lock:
                self._db.close()
                self._db = None
        if self._lease is not None:
            self._lease.release()
            self._lease = None


def _close_quietly(db: apsw.Connection) -> None:
    try:
        db.close()
    except Exception:
        pass
