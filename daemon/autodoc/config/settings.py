"""Process-wide settings: where the store and the socket are, and every
environment variable the daemon reads (AUTODOC_*), read here and nowhere else.

The store is a file (a resolved Path) or a PostgreSQL database (the connection string as
given, config/pguri.py): `Settings.store` is one or the other, and whatever shows it to a
person shows `store_shown` (the password masked). A database has no file beside it for the
lease that lets clients find its daemon: that lease lives in the runtime dir, named after
the redacted connection string (`lease_file`).

Built once at start (defaults < environment < command-line flags), frozen,
and passed explicitly.

Runs on: the main thread, once at start.
"""

from __future__ import annotations

import hashlib
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from .defaults import MAX_FRAME_BYTES
from .pguri import is_postgres, redact

log = logging.getLogger("autodoc")

MAX_AUTO = 4  # reader processes `auto` starts at most: each holds its own model and vectors

SHUTDOWN_DEADLINE_S = 5.0


def default_store_path() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "autodoc" / "autodoc.db"


def default_socket_path() -> Path:
    run = os.environ.get("XDG_RUNTIME_DIR")
    if run and os.path.isdir(run):
        return Path(run) / "autodoc" / "autodoc.sock"
    # No runtime dir (containers, cron): a per-user folder under /tmp, made 0700.
    return Path("/tmp") / f"autodoc-{os.getuid()}" / "autodoc.sock"


def runtime_dir() -> Path:
    """The per-user folder of the default socket (the runtime dir, else /tmp/autodoc-UID)."""
    return default_socket_path().parent


def lease_file(store: Path | str) -> Path:
    """Where the writer lease of `store` is (store/lease.py): beside a store file; for a database,
    in the runtime dir under a name made from its redacted connection string, so that every
    process of this user on this machine finds the one daemon serving it, and the file names no
    password (nor anything made from one)."""
    if isinstance(store, Path):
        return Path(str(store) + ".lease")
    digest = hashlib.sha256(redact(store).strip().encode()).hexdigest()[:16]
    return runtime_dir() / f"pg-{digest}.lease"


def store_socket_path(store: Path | str) -> Path:
    """Where the daemon serving `store` listens unless told (--socket PATH, $AUTODOC_SOCKET): the
    default store's at the default socket; any other store's beside it, under a name made from
    the store (a database's: its lease's name). A daemon started for a second store (by the
    TUI, MCP, `autodoc socket --start`, the Neovim plugin) then never finds the default socket
    taken by the first's, nor does a client of that socket reach a store it did not name."""
    if isinstance(store, Path):
        if store == default_store_path().expanduser().resolve():
            return default_socket_path()
        return runtime_dir() / f"store-{hashlib.sha256(str(store).encode()).hexdigest()[:16]}.sock"
    return lease_file(store).with_suffix(".sock")


def default_instant_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "autodoc", "instant")


@dataclass(frozen=True)
class Settings:
    # a store file, or a PostgreSQL connection string as given (it may hold a password: a message,
    # log line or answer shows `store_shown`, never this)
    store: Path | str
    socket: Path
    # where the instant tier keeps its distilled tables (embed/instant.py); None: the tier is off.
    # $AUTODOC_INSTANT_DIR names it ("off" turns the tier off); default the XDG cache dir.
    instant_dir: Path | None = None
    # how the store was chosen, for a person who finds it empty: "--store", "AUTODOC_STORE" or "default"
    # (an MCP client passes only HOME and PATH to the server it starts: the shell's AUTODOC_STORE is not seen)
    store_from: str = "default"

    @classmethod
    def from_env(cls, store: str | os.PathLike | None = None, socket: str | os.PathLike | None = None) -> Settings:
        s = store or os.environ.get("AUTODOC_STORE") or default_store_path()
        where: Path | str = str(s).strip() if is_postgres(str(s)) else Path(s).expanduser().resolve()
        k = socket or os.environ.get("AUTODOC_SOCKET") or store_socket_path(where)
        i = os.environ.get("AUTODOC_INSTANT_DIR") or default_instant_dir()
        return cls(
            store=where,
            socket=Path(k).expanduser(),
            instant_dir=None if i == "off" else Path(i).expanduser(),
            store_from="--store" if store else "AUTODOC_STORE" if os.environ.get("AUTODOC_STORE") else "default",
        )

    def __repr__(self) -> str:  # a traceback or a debug line must not print the password either
        return f"Settings(store={self.store_shown!r}, socket={str(self.socket)!r}, store_from={self.store_from!r})"

    @property
    def postgres(self) -> bool:
        """Whether the store is a PostgreSQL database rather than a file."""
        return isinstance(self.store, str)

    @property
    def store_shown(self) -> str:
        """The store as a message, log line or answer names it: a path, or the connection string
        with its password masked."""
        return redact(str(self.store)) if self.postgres else str(self.store)

    @property
    def lease(self) -> Path:
        """The writer lease's file, where clients find the daemon serving this store."""
        return lease_file(self.store)

    @property
    def daemon_log(self) -> Path:
        """Where a daemon started in the background (connect.start_daemon) writes its log: beside
        the store file, or beside a database's lease."""
        return self.lease.with_suffix(".log") if self.postgres else Path(str(self.store) + ".daemon.log")

    def store_named(self) -> str:
        """The store and how it was chosen, as a message names it."""
        how = {
            "--store": "given by --store",
            "AUTODOC_STORE": "from AUTODOC_STORE",
        }.get(self.store_from, "the default: neither --store nor AUTODOC_STORE was set")
        return f"{self.store_shown} ({how})"


@dataclass(frozen=True)
class EnvSettings:
    """Knobs for tests and debugging: AUTODOC_LOG (a logging level),
    AUTODOC_MAX_FRAME_BYTES, AUTODOC_SHUTDOWN_DEADLINE (seconds),
    AUTODOC_CHECK_RESULTS=1 (every answer is checked against its
    schemas/*.result.json; a mismatch answers -32603 with data.problems)."""

    log_level: str | None
    max_frame_bytes: int
    shutdown_deadline: float
    check_results: bool


def env_settings() -> EnvSettings:
    return EnvSettings(
        log_level=os.environ.get("AUTODOC_LOG") or None,
        max_frame_bytes=_env_int("AUTODOC_MAX_FRAME_BYTES", MAX_FRAME_BYTES),
        shutdown_deadline=_env_float("AUTODOC_SHUTDOWN_DEADLINE", SHUTDOWN_DEADLINE_S),
        check_results=os.environ.get("AUTODOC_CHECK_RESULTS", "") not in ("", "0"),
    )


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ[name])
    except (KeyError, ValueError):
        return default


def _env_float(name: str, default: float) -> float:
    try:
        return float(os.environ[name])
    except (KeyError, ValueError):
        return default


def reader_processes() -> int:
    """How many reader processes (readers/pool.py; the lexical helper, search/lexical/legproc.py, runs when
    this is not 0), and how many workers parse an index job's files (index/prepare.py):
    ``AUTODOC_READERS`` = N (0: none), or ``auto``, the default (one per core, none on one
    core). On the 2-core machine at load 1.6-2.6 the pool served 8 clients at 1.96x one
    client's lexical req/s (threads 1.06x) and 1.69x hybrid (threads 0.9x)
    (docs/benchmarks/concurrency.md); at load 8-12, with no core to spare, it did worse than
    threads, so a busy machine can turn it off."""
    env = (os.environ.get("AUTODOC_READERS") or "auto").strip().lower()
    if env.isdigit():
        return int(env)
    if env != "auto":
        log.warning("AUTODOC_READERS=%r is neither a number nor auto: no reader processes", env)
        return 0
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return min(cores, MAX_AUTO) if cores >= 2 else 0
