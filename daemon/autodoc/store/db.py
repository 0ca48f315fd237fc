"""Opening connections: every connection gets apsw's best practice (WAL, busy
timeout, foreign keys). One writer connection; readers open one per thread.

Runs on: the thread that will use the connection (apsw connections stay on one thread here).
"""

from __future__ import annotations

import os
from pathlib import Path

import apsw
import apsw.bestpractice

from ..errors import StoreTooNew
from .migrations import MIGRATIONS, migrate, schema_version

_FLAGS_RW = apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE


_applied = False


BUSY_TIMEOUT_MS = 5000


def _ensure_bestpractice() -> None:
    # apply() installs hooks for every connection opened afterwards, process-wide.
    # Not connection_optimize: its PRAGMA optimize on every new reader can take
    # the write lock and collide with the writer; the writer runs it on close.
    global _applied
    if not _applied:
        bp = apsw.bestpractice
        apsw.bestpractice.apply(tuple(f for f in bp.recommended if f is not bp.connection_optimize))
        _applied = True


def open_writer(path: Path) -> apsw.Connection:
    _ensure_bestpractice()
    path.parent.mkdir(parents=True, exist_ok=True)
    # the store holds every indexed note: only its owner may read it. SQLite gives the
    # -wal and -shm files the main file's mode, so creating it 0600 covers all three.
    os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
    if path.stat().st_mode & 0o077:
        os.chmod(path, 0o600)
    db = apsw.Connection(str(path), flags=_FLAGS_RW)
    db.set_busy_timeout(BUSY_TIMEOUT_MS)
    db.execute("PRAGMA synchronous = NORMAL")
    migrate(db)
    return db


def open_reader(path: Path) -> apsw.Connection:
    _ensure_bestpractice()
    if not path.exists():
        raise FileNotFoundError(f"no store at {path}")
    db = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READWRITE)
    db.set_busy_timeout(BUSY_TIMEOUT_MS)
    version = schema_version(db)
    if version > len(MIGRATIONS):
        raise StoreTooNew(
            f"the store's schema is version {version}, newer than this AutoDoc understands ({len(MIGRATIONS)})"
        )
    return db
