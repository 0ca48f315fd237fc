"""Where the MCP server's calls run, and the forgiving match of names a model guessed.

The daemon's socket when a daemon holds the store (any number of MCP servers,
editors and scripts then share it); else, when asked (`--spawn-daemon`), a
daemon started here in the background; else a Service in this process — a
writer, or a reader when another process holds the lease without a socket.
It never exits on the lease: a daemon that goes away is replaced by the next
choice at the next call.

Runs on: the event loop (async methods); the calls themselves on worker threads.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

from ..api import METHODS
from ..config import Settings
from ..connect import Local, Remote, daemon_socket
from ..errors import ShuttingDown, StoreLocked
from ..store.lease import read_holder
from ..suggest import close_names

log = logging.getLogger("autodoc.mcp")

SPAWN_WAIT_S = 30.0
STOP_WAIT_S = 10.0  # a stopping daemon's lease outlives its socket by its shutdown deadline (5 s)
BROWSE_LIMIT = 200  # search.query's largest limit: a facet browse lists at most this many documents


class ToolError(Exception):
    """A tool call the model should redo differently; the message says how."""

    def __init__(self, message: str, **data: Any):
        super().__init__(message)
        self.message = message
        self.data = {k: v for k, v in data.items() if v is not None}


ChangeCallback = Callable[[str, list[dict[str, Any]]], None]


class Backend:
    def __init__(self, settings: Settings, *, spawn: bool = False):
        self.settings = settings
        self.spawn = spawn
        self._lock = threading.Lock()
        self._current: Remote | Local | None = None
        self._local_listeners: list[ChangeCallback] = []
        self._embedder: threading.Thread | None = None

    # -- choosing ------------------------------------------------------------------

    def _resolve(self) -> Remote | Local:
        with self._lock:
            if self._current is None:
                self._current = self._choose()
            return self._current

    def _choose(self) -> Remote | Local:
        sock = daemon_socket(self.settings)
        if sock is None and self.spawn:
            sock = self._spawn_daemon()
        if sock is not None:
            log.info("using the daemon on %s", sock)
            return Remote(sock)
        try:
            local = Local(self.settings, writer=True)
        except StoreLocked as e:  # a daemon on stdio alone (no socket) holds it: read what it writes
            log.info("the store is held by another process (%s): serving read-only", e.message)
            return Local(self.settings, writer=False)
        log.info("no daemon serves %s: serving it in this process", self.settings.store)
        for fn in self._local_listeners:
            local.service.add_change_listener(fn)
        self._start_embedding(local)
        return local

    def _spawn_daemon(self) -> Path | None:
        """Start `autodoc serve --socket` for this store, detached, and wait for its socket."""
        argv = [
            sys.executable,
            "-m",
            "autodoc.cli",
            "--store",
            str(self.settings.store),
            "--socket",
            str(self.settings.socket),
            "serve",
            "--socket",
        ]
        log.info("starting a daemon: %s", " ".join(argv))
        self.settings.store.parent.mkdir(parents=True, exist_ok=True)
        logfile = open(str(self.settings.store) + ".daemon.log", "ab")
        try:
            subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=logfile,
                start_new_session=True,
                env=os.environ.copy(),
            )
        finally:
            logfile.close()
        deadline = time.monotonic() + SPAWN_WAIT_S
        while time.monotonic() < deadline:
            sock = daemon_socket(self.settings)
            if sock is not None:
                return sock
            time.sleep(0.1)
        log.warning(
            "the daemon did not come up in %.0f s (see %s.daemon.log): serving in this process",
            SPAWN_WAIT_S,
            self.settings.store,
        )
        return None

    def _start_embedding(self, local: Local) -> None:
        """In-process, nobody else fills vectors: the embed queue runs on its own thread."""
        if not local.writable:
            return
        service = local.service

        def work() -> None:
            try:
                service.embed_queue.work(until_idle=False, status=service.embedding_status_by_name)
            except Exception:  # the queue stopping at close, or a provider's failure: searches say so
                log.debug("the embed queue stopped", exc_info=True)

        self._embedder = threading.Thread(target=work, name="autodoc-mcp-embed", daemon=True)
        self._embedder.start()

    @property
    def mode(self) -> str:
        cur = self._resolve()
        if isinstance(cur, Remote):
            return "daemon"
        return "in-process" if cur.writable else "in-process (read-only: another process holds the store)"

    @property
    def socket(self) -> Path | None:
        cur = self._current
        return cur.socket if isinstance(cur, Remote) else None

    def on_local_changes(self, fn: ChangeCallback) -> None:
        """Call fn(workspace, changes) after an in-process write (a daemon pushes its own)."""
        self._local_listeners.append(fn)
        if isinstance(self._current, Local):
            self._current.service.add_change_listener(fn)

    # -- calling -----------------------------------------------------------------------

    def call_sync(self, method: str, params: Any) -> Any:
        cur = self._resolve()
        if isinstance(cur, Local) and not cur.writable and (m := METHODS.get(method)) is not None and m.write:
            cur = self._choose_again(cur, "a write, and the process that held the store may have gone")
        try:
            return cur.call(method, params)
        except (OSError, ShuttingDown):
            if not isinstance(cur, Remote):
                raise
            # the daemon went away between calls, or is going: choose again (a new daemon, or this process)
            return self._choose_again(cur, "the daemon went away").call(method, params)

    def _choose_again(self, cur: Remote | Local, why: str) -> Remote | Local:
        log.info("%s: choosing where calls run again", why)
        with self._lock:
            if self._current is cur:
                self._current = None
        if isinstance(cur, Local):
            cur.close()
        else:  # a daemon that is stopping keeps its lease a moment after its socket is gone
            deadline = time.monotonic() + STOP_WAIT_S
            while (
                read_holder(self.settings.store)
                and daemon_socket(self.settings) is None
                and time.monotonic() < deadline
            ):
                time.sleep(0.1)
        return self._resolve()

    async def call(self, method: str, params: Any) -> Any:
        return await anyio.to_thread.run_sync(self.call_sync, method, params)

    def close(self) -> None:
        with self._lock:
            cur, self._current = self._current, None
        if cur is not None:
            cur.close()

    # -- names a model may have guessed -------------------------------------------------

    async def workspaces(self) -> list[str]:
        return [w["name"] for w in (await self.call("workspace.list", {}))["workspaces"]]

    async def workspace(self, name: Any, *, many: bool = False) -> list[str]:
        """The workspaces a call is about: the one named (matched without regard to case),
        or, with no name, the only one there is, or with `many` every one."""
        names = await self.workspaces()
        if not names:
            raise ToolError(
                "there is no workspace yet: add one with `autodoc workspace add NAME FOLDER`, then `autodoc index NAME`"
            )
        if name in (None, "", "*", "all", "ALL"):
            if many or len(names) == 1:
                return names
            raise ToolError("name a workspace", workspaces=names)
        if not isinstance(name, str):
            raise ToolError(f"workspace must be a name (a string), one of {names}", workspaces=names)
        if name in names:
            return [name]
        folded = [n for n in names if n.lower() == name.lower()]
        if len(folded) == 1:
            return folded
        near = close_names(name, names, 3, cutoff=0.5, fold_case=False)
        raise ToolError(f"no workspace named {name!r}", did_you_mean=near or None, workspaces=names)

    async def documents(
        self, workspace: str, limit: int = BROWSE_LIMIT, after: str | None = None
    ) -> list[dict[str, Any]]:
        """The workspace's documents in path order ({path, title, line_end…}): a facet browse
        with no words, which lists files without ranking them; after: those past this path."""
        opts: dict[str, Any] = {"limit": limit, "scope": "files", **({"after": after} if after is not None else {})}
        answer = await self.call("search.query", [workspace, "", opts])
        return answer["hits"]
