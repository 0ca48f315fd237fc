"""A private PostgreSQL server for the tests of the PostgreSQL store (issue 34).

`pgserver` (a test dependency) bundles PostgreSQL 16 with pgvector; it starts a server on a Unix
socket in a folder of ours (no TCP port, nothing shared with another run or xdist worker) and
returns a `postgresql://` URI. Its wheels exist for CPython 3.11/3.12 on x86_64 Linux only:
`missing_reason()` says why the tests cannot run elsewhere, and the fixture skips with it.

The first start runs initdb itself, with `--no-sync` and `fsync = off` (a throwaway server: about
4 s instead of 11 s on this busy 2-core machine, and a stop in 0.1 s instead of seconds of
checkpoint fsyncs); a clean shutdown still writes everything, so a restart keeps committed rows.
It uses two of pgserver's inner functions (`_commands.initdb`, `utils.ensure_user_exists`), which is
why the pin is exact.

`PgServer.stop()` stops the server with `pg_ctl stop` (a clean shutdown, not a kill) and checks
the postmaster is gone, so a test or a fixture that stops one knows no server outlived it."""

from __future__ import annotations

import importlib.util
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any


def missing_reason() -> str | None:
    """Why a private PostgreSQL server cannot be started here, or None when it can."""
    if importlib.util.find_spec("psycopg") is None:
        return "psycopg is not installed (pip install -e '.[test]')"
    if importlib.util.find_spec("pgserver") is None:
        return (
            f"pgserver is not installed: its wheels (PostgreSQL 16 + pgvector) exist for CPython 3.11/3.12 "
            f"on x86_64 Linux only, this is CPython {sys.version_info.major}.{sys.version_info.minor}"
        )
    return None


class PgServer:
    """One private server whose data lives in `pgdata` (created if absent; its parent must exist)."""

    def __init__(self, pgdata: Path) -> None:
        self.pgdata = pgdata
        self._server: Any = None
        self.pid: int | None = None

    def start(self) -> str:
        """Starts the server (initdb on first use) and returns its URI (database `postgres`)."""
        with warnings.catch_warnings():
            # platformdirs warns, at pgserver's import, that XDG_RUNTIME_DIR is unset (it uses /tmp/runtime-UID)
            warnings.simplefilter("ignore")
            import pgserver

        if not (self.pgdata / "PG_VERSION").exists():
            self._initdb()
        # cleanup_mode "stop": `stop()` (or, failing that, interpreter exit) runs `pg_ctl stop`;
        # the folder is the caller's to delete, so a test can restart on the same data.
        self._server = pgserver.get_server(self.pgdata, cleanup_mode="stop")
        self.pid = self._server.get_pid()
        return self.uri()

    def _initdb(self) -> None:
        from pgserver._commands import initdb

        self.pgdata.mkdir(exist_ok=True)
        user = None
        if os.geteuid() == 0:
            # postgres refuses to run as root: pgserver runs it as a system user of its own
            # (what pgserver's own ensure_pgdata_inited does before its initdb)
            import pwd
            import stat

            from pgserver._commands import POSTGRES_BIN_PATH
            from pgserver.utils import ensure_folder_permissions, ensure_prefix_permissions, ensure_user_exists

            user = "pgserver"
            ensure_user_exists(user)
            ensure_prefix_permissions(self.pgdata)
            ensure_prefix_permissions(POSTGRES_BIN_PATH)
            read, execute = stat.S_IRGRP | stat.S_IROTH, stat.S_IXGRP | stat.S_IXOTH
            ensure_folder_permissions(POSTGRES_BIN_PATH, read | execute)
            ensure_folder_permissions(POSTGRES_BIN_PATH.parent / "lib", read)
            entry = pwd.getpwnam(user)
            os.chown(self.pgdata, entry.pw_uid, entry.pw_gid)
        args = ["--auth=trust", "--auth-local=trust", "--encoding=utf8", "-U", "postgres", "--no-sync"]
        initdb(args, pgdata=self.pgdata, user=user)
        with open(self.pgdata / "postgresql.conf", "a") as conf:
            conf.write(
                "\n# tests/helpers/pg.py: a throwaway server\nfsync = off\nsynchronous_commit = off\nfull_page_writes = off\n"
            )

    def uri(self, database: str = "postgres") -> str:
        assert self._server is not None, "the server is not started"
        return str(self._server.get_uri(database))

    def log_text(self) -> str:
        log = self.pgdata / "log"
        return log.read_text(errors="replace") if log.exists() else ""

    def running(self) -> bool:
        import psutil  # a dependency of pgserver

        return self.pid is not None and psutil.pid_exists(self.pid) and psutil.Process(self.pid).status() != "zombie"

    def crash(self) -> None:
        """An immediate shutdown (`pg_ctl stop -m immediate`): every backend quits at once, its
        clients see their sockets close with no message, nothing is checkpointed; `start()` then
        recovers from the WAL, as after the server's processes were killed."""
        from pgserver._commands import pg_ctl

        assert self._server is not None, "the server is not started"
        pg_ctl(["-m", "immediate", "-w", "stop"], pgdata=self.pgdata, user=self._server.system_user)
        self.stop()  # pgserver's handle let go: the postmaster is gone already

    def stop(self, timeout: float = 30.0) -> None:
        """A clean shutdown: returns once the postmaster has exited, raises if it has not in `timeout` s."""
        if self._server is None:
            return
        server, self._server = self._server, None
        server.cleanup()
        deadline = time.monotonic() + timeout
        while self.running():
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"PostgreSQL (pid {self.pid}) did not stop in {timeout} s:\n{self.log_text()[-2000:]}"
                )
            time.sleep(0.05)


def schema_uri(pg_uri: str, schema: str) -> str:
    """The server's URI with the AutoDoc schema to use (each test module its own)."""
    return f"{pg_uri}{'&' if '?' in pg_uri else '?'}options=-csearch_path%3D{schema}"
