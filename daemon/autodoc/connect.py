"""Daemon or in-process: the one client-side backend, and the one place that decides where a call runs.

Input: Settings and what an adapter allows (start a daemon, write, embed here).
Output: a `Backend` whose `call(method, params)` answers wherever the call runs,
or one call (`call`) for the CLI.

Choosing, in this order: the daemon's socket when a daemon holds the store's
lease (`Remote`); else, when the adapter asks (`start`), a daemon started here
in the background (`start_daemon`); else a Service in this process (`Local`),
bound and checked exactly as the daemon binds and checks (api.py,
rpc/schemas.py) — a writer, or (`fall_back_to_reader`) a reader when another
process holds the lease without a socket.

Reconnecting: a daemon that goes away between calls (`reconnect_on`) is
replaced by the next choice and the call is made once more there; a
read-only Service asked for a write (`rechoose_for_writes`) chooses again.

Working here: with no daemon nobody else fills vectors, so a writable Local
embeds — everything pending on one thread (`embed_all`, the MCP server), or
what `index_paths` changed, a batch at a time under the write lock (the
language server); an index run called with `embed=True` embeds before it
answers (the CLI, the terminal app). `Local`'s seam (`index_paths`,
`embed_pending`, `embed_forever`, `on_changes`) is the only way to the
Service beyond the method table, and only this module uses it: the CLI, the
language server, the MCP server and the terminal app all choose here.

Runs on: the caller's thread, any number at once (the choice is made under a
lock). A Local backend's reads may run on several threads at once; its writes
serialise on the store's write lock. Embedding on its own threads
("autodoc-NAME-embed", "autodoc-NAME-embed-WORKSPACE").
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .api import METHODS, Method
from .config import Settings
from .errors import MethodNotFound, StoreLocked, from_rpc
from .store.lease import read_holder

if TYPE_CHECKING:
    from .service import Service

log = logging.getLogger("autodoc.connect")

REMOTE_TIMEOUT_S = 3600.0
EMBED_BATCH = 16  # chunks embedded per turn of the write lock after index_paths


def daemon_socket(settings: Settings) -> Path | None:
    """The socket of the daemon holding this store's lease, if one does and it is there."""
    holder = read_holder(settings.store)
    if not holder:
        return None
    sock = holder.get("socket")
    if sock and Path(sock).exists():
        return Path(sock)
    return None


def call_socket(path: Path, method: str, params: Any, timeout: float = REMOTE_TIMEOUT_S) -> Any:
    """One call on the daemon's socket over a plain blocking socket, newline-framed: the answer,
    or the daemon's error raised as this package's own class; OSError (TimeoutError included)
    when nobody answers. A one-shot command has no use for an event loop: starting anyio's cost
    `autodoc search` more than the search itself (issue 37)."""
    import socket

    from .rpc.framing import NEWLINE, encode_message

    deadline = time.monotonic() + timeout
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(str(path))
        s.sendall(encode_message({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}, NEWLINE))
        with s.makefile("rb") as lines:
            while True:
                s.settimeout(max(0.001, deadline - time.monotonic()))
                line = lines.readline()
                if not line.endswith(b"\n"):
                    raise ConnectionResetError(f"the daemon closed the connection before it answered {method}")
                msg = json.loads(line)
                if isinstance(msg, dict) and msg.get("id") == 1 and ("result" in msg or "error" in msg):
                    break  # anything else is a notification the daemon pushed: not this call's
    if "error" in msg:
        raise from_rpc(msg["error"] if isinstance(msg["error"], dict) else {"message": str(msg["error"])})
    return msg["result"]


class Remote:
    """Calls on the daemon's socket, one connection per call."""

    def __init__(self, socket: Path, timeout: float = REMOTE_TIMEOUT_S):
        self.socket = socket
        self.timeout = timeout

    def call(self, method: str, params: Any, **_: Any) -> Any:
        """The answer, or the daemon's error raised as this package's own class."""
        return call_socket(self.socket, method, params, timeout=self.timeout)

    def close(self) -> None:
        pass


def bind(method: str, params: Any) -> tuple[Method, dict[str, Any]]:
    """The method's row and its params by name, checked by its JSON Schema: the one
    validation params get (MethodNotFound or InvalidParams naming the field)."""
    m = METHODS.get(method)
    if m is None or m.call is None:
        raise MethodNotFound(f"no method {method!r} runs without the daemon (start one: autodoc serve --socket)")
    from .rpc.schemas import bind_params  # jsonschema: only once a call runs here

    return m, bind_params(method, params)


Progress = Callable[[int, int, str], None]
ChangeCallback = Callable[[str, list[dict[str, Any]]], None]


def run_bound(
    service: Service, m: Method, bound: dict[str, Any], *, progress: Progress | None = None, embed: bool = False
) -> Any:
    """Call one method, params already bound, on a service in this process; an index run
    takes `progress` and, with `embed`, embeds what it indexed before answering."""
    assert m.call is not None
    if m.progress:
        return m.call(service, bound, progress=progress, embed=embed)
    return m.call(service, bound)


def invoke(service: Service, method: str, params: Any) -> Any:
    """Bind, check and call one method on a service in this process."""
    return run_bound(service, *bind(method, params))


class Local:
    """Calls on a Service in this process, and the narrow seam a Backend needs beyond them."""

    def __init__(self, settings: Settings, *, writer: bool):
        from .service import Service

        self.service = Service(settings, writer=writer)
        self.asked_to_write = writer  # and not writable: a database role that may only read

    @property
    def writable(self) -> bool:
        return self.service.writable

    def call(self, method: str, params: Any, *, progress: Progress | None = None, embed: bool = False) -> Any:
        return run_bound(self.service, *bind(method, params), progress=progress, embed=embed)

    # -- the seam: what only a process that serves the store itself does (Backend's use) --

    def index_paths(self, workspace: str, paths: list[str]) -> None:
        """The live index of a few workspace-relative paths (a file the editor saved)."""
        self.service.index_paths(workspace, paths)

    def embed_pending(self, workspaces: Iterable[str], *, batch: int, guard: Callable[[], Any]) -> None:
        """Vectors for what these workspaces lack, a batch at a time under `guard`, until none lack any."""
        self.service.embed_queue.work(workspaces, until_idle=True, batch=batch, guard=guard)

    def embed_forever(self) -> None:
        """Vectors for whatever lacks them, as it comes, until the service closes (as a daemon's queue runs)."""
        service = self.service
        service.embed_queue.work(until_idle=False, status=service.embedding_status_by_name)

    def on_changes(self, fn: ChangeCallback) -> None:
        """Call fn(workspace, changes) after each write here."""
        self.service.add_change_listener(fn)

    def close(self) -> None:
        self.service.close()


Target = Remote | Local


def start_daemon(
    settings: Settings,
    log_path: Path,
    *,
    wait_s: float,
    poll_s: float = 0.05,
    until_answers: bool = True,
    watch_exit: bool = True,
) -> str | None:
    """Start `autodoc serve --socket` for this store, detached so it outlives this process and
    serves other clients too, and wait until its socket is in the lease (and, `until_answers`,
    answers). None when it is up, else why not (the caller then works in-process); `watch_exit`
    stops waiting when the daemon exits first, unless it exited because another daemon (one
    another client started at the same moment) holds the store's lease to serve a socket."""
    from .rpc.transport import socket_answers

    # a database's connection string goes in the environment, never in argv: a command line is
    # anyone's to read (ps, /proc/PID/cmdline) and the string may hold a password
    store = [] if settings.postgres else ["--store", str(settings.store)]
    env = {**os.environ, "AUTODOC_STORE": str(settings.store)} if settings.postgres else None
    argv = [sys.executable, "-m", "autodoc.cli", *store, "--socket", str(settings.socket), "serve", "--socket"]
    log.info("starting a daemon on %s: %s", settings.store_shown, " ".join(argv))
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as err:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True, env=env
        )
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        sock = daemon_socket(settings)
        if sock is not None and (not until_answers or socket_answers(sock)):
            return None
        if watch_exit and proc.poll() is not None:
            held = read_holder(settings.store)
            if not (held and held.get("socket")):
                return f"the daemon exited with status {proc.returncode} (its log: {log_path})"
            # ours lost the lease to a daemon another client started at the same moment (two editors
            # opening at once), which may still be migrating a new database: that one serves the
            # store once it listens, so wait for it rather than work in-process
            watch_exit = False
        time.sleep(poll_s)
    return f"the daemon did not answer within {wait_s:.0f} s (its log: {log_path})"


Starter = Callable[[Settings], str | None]  # start a daemon; None when it is up, else why not


class Backend:
    """Where one adapter's calls run: chosen at the first call, chosen again when that fails."""

    def __init__(
        self,
        settings: Settings,
        *,
        writer: bool = True,
        fall_back_to_reader: bool = True,
        start: Starter | None = None,
        embed_all: bool = False,
        reconnect_on: tuple[type[BaseException], ...] = (OSError,),
        stop_wait_s: float = 0.0,
        rechoose_for_writes: bool = False,
        name: str = "client",
    ):
        self.settings = settings
        self.writer = writer
        self.fall_back_to_reader = fall_back_to_reader
        self.start = start
        self.embed_all = embed_all
        self.reconnect_on = reconnect_on
        self.stop_wait_s = stop_wait_s  # a stopping daemon's lease outlives its socket a moment
        self.rechoose_for_writes = rechoose_for_writes
        self.name = name
        self.why_local: str | None = None  # why the last choice was not a daemon, when one was asked for
        self._lock = threading.Lock()  # the choice
        self._current: Target | None = None
        self._listeners: list[ChangeCallback] = []
        self._write_lock = threading.Lock()  # index_paths and each batch of its embedding
        self._closed = False
        self._embedding: dict[str, bool] = {}  # workspace → index_paths ran again while its embed thread ran
        self._embed_lock = threading.Lock()

    # -- choosing ------------------------------------------------------------------------

    def current(self) -> Target:
        with self._lock:
            if self._current is None:
                self._current = self._choose()
            return self._current

    def _choose(self) -> Target:
        sock = daemon_socket(self.settings)
        if sock is None and self.start is not None:
            self.why_local = self.start(self.settings)
            if self.why_local:
                log.warning("working in-process: %s", self.why_local)
            sock = daemon_socket(self.settings)
        if sock is not None:
            log.info("calls go to the daemon at %s", sock)
            return Remote(sock)
        try:
            local = Local(self.settings, writer=self.writer)
        except StoreLocked as e:  # a writer without a socket (a stdio daemon, `autodoc index`) holds it
            if not self.fall_back_to_reader:
                raise
            log.info("calls run in this process on %s, read only: %s", self.settings.store_shown, e.message)
            return Local(self.settings, writer=False)
        log.info("calls run in this process on %s (no daemon serves it)", self.settings.store_shown)
        for fn in self._listeners:
            local.on_changes(fn)
        if self.embed_all and local.writable:
            threading.Thread(
                target=self._embed_forever, args=(local,), name=f"autodoc-{self.name}-embed", daemon=True
            ).start()
        return local

    def _choose_again(self, cur: Target, why: str) -> Target:
        log.info("%s: choosing where calls run again", why)
        with self._lock:
            if self._current is cur:
                self._current = None
        if isinstance(cur, Local):
            cur.close()
        else:
            deadline = time.monotonic() + self.stop_wait_s
            while (
                read_holder(self.settings.store)
                and daemon_socket(self.settings) is None
                and time.monotonic() < deadline
            ):
                time.sleep(0.1)
        return self.current()

    def choose_again(self, why: str) -> Target:
        """The daemon chosen last went away (a lasting connection saw it close): choose again,
        which finds one started since, or starts one when this backend may."""
        cur = self.current()
        return self._choose_again(cur, why) if isinstance(cur, Remote) else cur

    @property
    def socket(self) -> Path | None:
        """The daemon's socket when calls go to one (as last chosen; nothing is chosen here)."""
        cur = self._current
        return cur.socket if isinstance(cur, Remote) else None

    @property
    def mode(self) -> str:
        cur = self.current()
        if isinstance(cur, Remote):
            return "daemon"
        if cur.writable:
            return "in-process"
        if cur.asked_to_write:
            return "in-process (read-only: this database role may only read)"
        return "in-process (read-only: another process holds the store)"

    @property
    def indexes_here(self) -> bool:
        """Whether this process writes the store (no daemon does it for us)."""
        cur = self.current()
        return isinstance(cur, Local) and cur.writable

    def on_local_changes(self, fn: ChangeCallback) -> None:
        """Call fn(workspace, changes) after an in-process write (a daemon pushes its own)."""
        self._listeners.append(fn)
        if isinstance(self._current, Local):
            self._current.on_changes(fn)

    # -- calling -------------------------------------------------------------------------

    def call(self, method: str, params: Any, *, progress: Progress | None = None, embed: bool = False) -> Any:
        """One call wherever it runs; a daemon that went away is replaced and the call made again."""
        cur = self.current()
        # (a Local that asked to write and may not is a read-only database role: choosing again cannot help)
        if self.rechoose_for_writes and isinstance(cur, Local) and not cur.writable and not cur.asked_to_write:
            if (m := METHODS.get(method)) is not None and m.write:
                cur = self._choose_again(cur, "a write, and the process that held the store may have gone")
        try:
            return cur.call(method, params, progress=progress, embed=embed)
        except self.reconnect_on as e:
            if not isinstance(cur, Remote):
                raise
            log.warning("the daemon at %s did not answer (%s); choosing again", cur.socket, e)
            return self._choose_again(cur, "the daemon went away").call(method, params, progress=progress, embed=embed)

    def close(self) -> None:
        with self._write_lock:
            self._closed = True
        with self._lock:
            cur, self._current = self._current, None
        if cur is not None:
            cur.close()

    # -- working here ----------------------------------------------------------------------

    def index_paths(self, workspace: str, paths: list[str], *, embed_batch: int = EMBED_BATCH) -> bool:
        """Index these workspace-relative paths now, then embed what they changed on a thread, one
        batch per turn of the write lock (so a write waits for at most one batch). Only a writable
        Service here does: False when a daemon (which watches its files) or another writer does."""
        cur = self.current()
        with self._write_lock:
            if self._closed or not (isinstance(cur, Local) and cur.writable):
                return False
            cur.index_paths(workspace, paths)
        self._embed_later(cur, workspace, embed_batch)
        return True

    def _embed_later(self, local: Local, workspace: str, batch: int) -> None:
        with self._embed_lock:
            if workspace in self._embedding:
                self._embedding[workspace] = True
                return
            self._embedding[workspace] = False

        def run() -> None:
            try:
                while True:
                    local.embed_pending([workspace], batch=batch, guard=lambda: self._write_lock)
                    with self._embed_lock:
                        # decide and leave in one critical section, so an index_paths that lands
                        # now either sees this thread gone or is looked at again
                        if self._closed or not self._embedding[workspace]:
                            del self._embedding[workspace]
                            return
                        self._embedding[workspace] = False
            except Exception as e:  # the provider is down or missing: answers report it
                log.info("embedding %s stopped: %s", workspace, e)
            with self._embed_lock:
                self._embedding.pop(workspace, None)

        threading.Thread(target=run, name=f"autodoc-{self.name}-embed-{workspace}", daemon=True).start()

    @staticmethod
    def _embed_forever(local: Local) -> None:
        try:
            local.embed_forever()
        except Exception:  # the queue stopping at close, or a provider's failure: searches say so
            log.debug("the embed queue stopped", exc_info=True)


def call(settings: Settings, method: str, params: Any, *, progress: bool = False, embed: bool = True) -> Any:
    """One call, wherever it runs (the CLI's: chosen once, no daemon started). In-process, an
    index run embeds what it indexed before answering unless told not to (`embed`: the CLI then
    hands the embedding to a daemon), with a progress bar on stderr."""
    sock = daemon_socket(settings)
    if sock is not None:
        return Remote(sock).call(method, params)
    m, bound = bind(method, params)
    local = Local(settings, writer=m.write)
    bar = None
    if progress and m.progress:
        from .progress import ProgressBar, ProgressLines

        bar = ProgressBar() if sys.stderr.isatty() else ProgressLines()
    try:
        return run_bound(local.service, m, bound, progress=bar, embed=embed)
    finally:
        if bar:
            bar.close()
        local.close()
