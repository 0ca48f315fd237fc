"""The writer lease: an exclusive flock on a file beside the store (for a PostgreSQL
database, a file in the runtime dir named after it: config/settings.py `lease_file`).

A second writer fails at once, naming the holder (pid, socket) recorded in the
lease file, instead of waiting on SQLite's busy timeout or racing the first.
The kernel drops a flock when its process dies, so a crashed daemon never
leaves a stale lease behind.

Runs on: any thread; taken once when a writer opens the store, released when it closes.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Any

from ..config.pguri import redact
from ..config.settings import lease_file
from ..errors import StoreLocked


class Lease:
    def __init__(self, store_path: Path | str, holder: dict[str, Any] | None = None):
        self.path = lease_file(store_path)
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            info = _read_holder(fd)
            os.close(fd)
            who = f"pid {info.get('pid', '?')}"
            if info.get("socket"):
                who += f", socket {info['socket']}"
            # only a holder with a socket can be talked to (a stdio server, an editor's LSP cannot)
            what = "talk to that daemon, or stop it first" if info.get("socket") else "stop it first, or wait for it"
            raise StoreLocked(
                f"the store {redact(str(store_path))} is held by another AutoDoc writer ({who}); {what}",
                {"holder": info},
            ) from None
        self._fd: int | None = fd
        self.update(holder or {})

    def update(self, holder: dict[str, Any]) -> None:
        if self._fd is None:
            return
        data = json.dumps({"pid": os.getpid(), **holder}).encode()
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, data, 0)

    def release(self) -> None:
        if self._fd is not None:
            try:
                os.ftruncate(self._fd, 0)
            finally:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
                os.close(self._fd)
                self._fd = None


def _read_holder(fd: int) -> dict[str, Any]:
    try:
        raw = os.pread(fd, 4096, 0)
        return json.loads(raw) if raw else {}
    except (OSError, ValueError):
        return {}


def read_holder(store_path: Path | str) -> dict[str, Any] | None:
    """Who holds the lease now, or None when nobody does (used to find a daemon)."""
    path = lease_file(store_path)
    if not path.exists():
        return None
    fd = os.open(path, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_holder(fd)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)
