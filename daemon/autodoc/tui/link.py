"""The terminal app's way to the service: the daemon over its socket when one
runs (started on demand), else a Service in this process — the choice is
connect.py's `Backend`, as for the CLI, the language server and the MCP server.

Input: Settings, and a callback for the daemon's notifications. Output: a
link whose `call` blocks until the answer (run it on a worker thread, never
on the app's event loop) and whose calls can be cancelled from any thread:
over the socket a cancelled call is withdrawn with `$/cancelRequest`; in
this process its answer is dropped when it comes.

Over the socket one connection stays open (a persistent async client on
its own thread and event loop), so that `changes.subscribe` holds and the
daemon's pushes (workspace.changed, embedding.progress, changes.changed,
$/progress) reach the app. When the daemon goes away (stopped, restarted,
crashed), the next call asks the Backend again where the daemon is — one
started since, or one it starts when the app may start one — connects
there, subscribes again and makes the call; the app hears `$/reconnected`
and reads its workspaces again.

Runs on: the caller's thread (the app's worker threads); the socket's
reader on the link's own thread ("autodoc-tui-rpc").
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from ..config import Settings
from ..connect import Backend, Remote, start_daemon

log = logging.getLogger("autodoc.tui")

Notify = Callable[[str, Any], None]  # (method, params), called on the link's thread
Progress = Callable[[int, int, str], None]
START_TIMEOUT_S = 20.0
READS = ("search.", "document.", "workspace.list", "workspace.status", "workspace.tags", "changes.")


class Cancelled(Exception):
    """The call was withdrawn (a newer one superseded it)."""


class Pending:
    """One call in flight; `cancel()` from any thread."""

    def __init__(self) -> None:
        self.cancelled = False
        self._future: concurrent.futures.Future | None = None
        self._lock = threading.Lock()

    def attach(self, future: concurrent.futures.Future) -> None:
        with self._lock:
            self._future = future
            if self.cancelled:
                future.cancel()

    def cancel(self) -> None:
        with self._lock:
            self.cancelled = True
            if self._future is not None:
                self._future.cancel()


class SocketLink:
    """Calls on one lasting connection to the daemon."""

    mode = "daemon"

    def __init__(self, socket: Path, notify: Notify, backend: Backend | None = None):
        self.socket = socket
        self.backend = backend  # where to look for the daemon again once it went away
        self._notify = notify
        self._progress: dict[int, Progress] = {}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="autodoc-tui-rpc", daemon=True)
        self._thread.start()
        self._client: Any = None
        self._lock = threading.Lock()
        self._subscribed = False
        self._closed = False  # the app is gone: no call may reconnect, let alone start a daemon
        self._connect()

    def _run(self, coro: Any) -> concurrent.futures.Future:
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def _connect(self) -> Any:
        from autodoc_client import Client

        with self._lock:
            if self._closed:
                raise OSError("the app has closed its connection")
            if self._client is not None and not self._client.closed:
                return self._client
            again = self._client is not None
            if again:
                self._find_daemon()
            client = self._run(Client.connect_socket(self.socket)).result(START_TIMEOUT_S)
            client.on_notification(self._on_note)
            self._run(client.listen())  # the one reader: answers to their calls, pushes to _on_note
            self._client = client
            if self._subscribed:
                self._run(client.call("changes.subscribe", [None])).result(START_TIMEOUT_S)
        if again:
            log.warning("reconnected to the daemon at %s", self.socket)
            self._notify("$/reconnected", {"socket": str(self.socket)})
        return client

    def _find_daemon(self) -> None:
        """(under the lock) The daemon this link talked to is gone: the Backend's next choice,
        which may start one. Working in-process from here would change what the app is: refused."""
        if self.backend is None:
            return
        target = self.backend.choose_again("the daemon went away")
        if not isinstance(target, Remote):
            why = self.backend.why_local or "no daemon serves the store now"
            raise OSError(f"the daemon went away and none could be started ({why}); restart autodoc tui")
        self.socket = target.socket

    def _on_note(self, note: Any) -> None:
        if note.method == "$/progress" and isinstance(note.params, dict):
            cb = self._progress.get(note.params.get("token"))  # type: ignore[arg-type]
            if cb is not None:
                cb(
                    int(note.params.get("done") or 0),
                    int(note.params.get("total") or 0),
                    str(note.params.get("message") or ""),
                )
            return
        self._notify(note.method, note.params)

    def subscribe(self) -> None:
        """Every workspace's pushes to this connection (the app follows whichever is open)."""
        self._subscribed = True
        self.call("changes.subscribe", [None])

    def call(
        self, method: str, params: Any, *, pending: Pending | None = None, progress: Progress | None = None
    ) -> Any:
        try:
            return self._call_once(method, params, pending, progress)
        except ConnectionError:
            if not method.startswith(READS):
                raise
            # the daemon went away just before (its close not seen yet): a read may simply go again
            log.info("the daemon closed the connection during %s: once more", method)
            return self._call_once(method, params, pending, progress)

    def _call_once(self, method: str, params: Any, pending: Pending | None, progress: Progress | None) -> Any:
        from autodoc_client import ConnectionClosed, RemoteError

        from ..errors import from_rpc

        try:
            client = self._connect()
        except OSError as e:
            raise ConnectionError(f"cannot reach the daemon at {self.socket}: {e}") from None
        rid = client.next_id()
        message = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        if progress is not None:
            self._progress[rid] = progress
        future = self._run(client.call_raw(message))
        if pending is not None:
            pending.attach(future)
        try:
            response = future.result()
        except concurrent.futures.CancelledError:
            raise Cancelled() from None
        except ConnectionClosed as e:
            raise ConnectionError(f"the daemon closed the connection ({e})") from None
        finally:
            self._progress.pop(rid, None)
        if "error" in response:
            err = RemoteError.from_error(response["error"] or {})
            raise from_rpc({"code": err.code, "message": err.message, "data": err.data}) from None
        return response.get("result")

    def close(self) -> None:
        with self._lock:
            self._closed = True
        client = self._client
        if client is not None:
            try:
                self._run(client.close(timeout=1)).result(3)
            except Exception:  # closing a connection the daemon already dropped
                pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=3)


class LocalLink:
    """Calls on a Service in this process (no daemon could be reached or started)."""

    mode = "in-process"

    def __init__(self, backend: Backend, why: str | None = None):
        self.backend = backend
        self.why = why  # why not the daemon, to show

    def subscribe(self) -> None:
        pass  # nothing pushes in-process: the app re-runs its query after its own changes

    def call(
        self, method: str, params: Any, *, pending: Pending | None = None, progress: Progress | None = None
    ) -> Any:
        if pending is not None and pending.cancelled:
            raise Cancelled()
        # an index run here embeds what it indexed before answering: no daemon will
        out = self.backend.call(method, params, progress=progress, embed=True)
        if pending is not None and pending.cancelled:
            raise Cancelled()
        return out

    def close(self) -> None:
        self.backend.close()


Link = SocketLink | LocalLink


def open_link(settings: Settings, notify: Notify, *, start: bool, daemon_log: Path) -> Link:
    """The daemon's socket when it runs (or, with `start`, once it is started), else in-process."""
    starter = partial(start_daemon, log_path=daemon_log, wait_s=START_TIMEOUT_S) if start else None
    backend = Backend(settings, start=starter, reconnect_on=(), stop_wait_s=5.0, name="tui")
    target = backend.current()
    if isinstance(target, Remote):
        return SocketLink(target.socket, notify, backend)
    why = backend.why_local
    if not start:
        why = "not asked to start a daemon (--in-process)"
        log.warning("working in-process: %s", why)
    return LocalLink(backend, why)
