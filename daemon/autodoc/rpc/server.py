"""RPC stage, the server: owns the transports, the connections, the change
feed and shutdown. Methods live in methods.py, where each call runs in
route.py, dispatch in dispatch.py, frames in framing.py.

Input: a Service. Output: JSON-RPC over stdio and/or one Unix socket.

Shutdown, whatever asked for it (server.shutdown, a signal, stdin closing):
stop accepting connections and new requests (they answer -32020), let
in-flight requests finish until the deadline, cancel the rest (-32020), flush
every answer, close the connections and remove the socket file. Closing the
Service is the caller's job (daemon.py), after ``run`` returns.

Runs on: the event loop; ``run_in_loop``, ``broadcast`` and the change listener
are called from any thread and hop onto it.
"""

from __future__ import annotations

import logging
import os
import select
import threading
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.from_thread
import anyio.lowlevel

from ..config import MAX_FRAME_BYTES
from ..config.settings import SHUTDOWN_DEADLINE_S
from .connection import MAX_INFLIGHT_BYTES, MAX_INFLIGHT_REQUESTS, Connection
from .dispatch import Dispatcher
from .inline import InlineReads
from .methods import Methods
from .quick import QuickLane
from .route import Offload, Router
from .transport import FdStream, SocketStream, prepare_socket_path, same_file

log = logging.getLogger("autodoc.rpc")

READERS = 8
CHANGES_PER_NOTIFICATION = 500
_POLL_S = 0.02


_HUNG_UP = select.POLLHUP | getattr(select, "POLLRDHUP", 0)


class RpcServer:
    def __init__(
        self,
        service: Any,
        *,
        max_frame_bytes: int = MAX_FRAME_BYTES,
        max_inflight: int = MAX_INFLIGHT_REQUESTS,
        max_inflight_bytes: int = MAX_INFLIGHT_BYTES,
        readers: int = READERS,
        shutdown_deadline: float = SHUTDOWN_DEADLINE_S,
        check_results: bool = False,
        pool: Offload | None = None,
        inline: bool = True,
    ):
        """``pool``: the reader processes (readers/pool.py), which daemon.py builds and runs;
        None keeps every read in this process. ``inline``: False runs no read on the event
        loop (no rpc/inline.py rule, no quick lane): every read through a worker thread."""
        self.service = service
        self.max_frame_bytes = max_frame_bytes
        self.max_inflight = max_inflight
        self.max_inflight_bytes = max_inflight_bytes
        self.shutdown_deadline = shutdown_deadline
        # Named limiters: searches and reads share the readers; every write
        # (workspace changes, index runs, the live index) takes the one writer slot.
        self.readers = anyio.CapacityLimiter(readers)
        self.writer = anyio.CapacityLimiter(1)
        # quick reads on the loop while nothing else runs (rpc/inline.py)
        self.inline: InlineReads | None = InlineReads() if inline else None
        self.pool = pool
        self.route = Router(service, readers=self.readers, writer=self.writer, inline=self.inline, pool=pool)
        self.socket_path: Path | None = None
        self.watching: list[str] = []  # workspaces the live index watches (daemon.py)
        self.connections: set[Connection] = set()
        self.dispatcher = Dispatcher(Methods(self, self.route).handlers(), check_results=check_results)
        self.quick: QuickLane | None = None
        if self.inline is not None:
            self.quick = QuickLane(
                self.route.lane_reads(),
                self.inline,
                self.readers,
                check_results=check_results,
                input_waiting=self.input_waiting,
            )
        self.shutting_down = False
        self.shutdown_reason = ""
        self.workspace_listeners: list[Callable[[], None]] = []
        self._shutdown_requested = anyio.Event()
        self._accept_scopes: list[anyio.CancelScope] = []
        self._token: Any = None
        self._loop_thread: int | None = None
        self._changes_lock = threading.Lock()
        self._pending_changes: list[tuple[str, dict]] = []
        self._wakeup_pending = False
        self._fanout_send, self._fanout_recv = anyio.create_memory_object_stream[None](1)
        self._listening = False
        self._connection_count = 0

    # -- running ---------------------------------------------------------------------

    async def run(
        self,
        *,
        stdio: bool = False,
        socket_path: Path | None = None,
        stdio_fds: tuple[int, int] = (0, 1),
        task_status: anyio.abc.TaskStatus[Any] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve on the chosen transports until shutdown is requested, then
        shut down in order. Reports ``started`` once every transport listens."""
        if socket_path is not None:
            # Before any task group: a SocketInUse raised inside one would reach the
            # caller wrapped in an ExceptionGroup (a traceback instead of one line).
            prepare_socket_path(Path(socket_path))
        self.bind_loop()
        self._add_change_listener()
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._fan_out_changes)
                if socket_path is not None:
                    await tg.start(self.serve_socket, Path(socket_path))
                if stdio:
                    await tg.start(self.serve_stdio, *stdio_fds)
                task_status.started(self)
                await self._shutdown_requested.wait()
                with anyio.CancelScope(shield=True):
                    await self.shutdown()
                tg.cancel_scope.cancel()
        finally:
            self._remove_change_listener()

    def bind_loop(self) -> None:
        self._token = anyio.lowlevel.current_token()
        self._loop_thread = threading.get_ident()

    def request_shutdown(self, reason: str) -> None:
        """Ask for a graceful shutdown (from the event loop's thread)."""
        if not self._shutdown_requested.is_set():
            log.info("shutting down: %s", reason)
            self.shutdown_reason = reason
            self.shutting_down = True
            self._shutdown_requested.set()

    @property
    def shutdown_requested(self) -> anyio.Event:
        return self._shutdown_requested

    def accepting(self) -> bool:
        return not self.shutting_down

    def input_waiting(self) -> bool:
        """Whether a connection has bytes not read yet: a burst of requests, which the quick
        lane, answering each on the loop as though the daemon were idle, would serve one by
        one on one core instead of handing them to the readers and threads together."""
        fds = [c.read_fd for c in self.connections if c.reading and c.read_fd is not None]
        if not fds:
            return False
        poller = select.poll()
        for fd in fds:
            poller.register(fd, select.POLLIN | _HUNG_UP)
        # a peer that closed (one call per connection, say) reads as "readable" until its
        # connection has read the end: not a request on its way
        return any(mask & select.POLLIN and not mask & _HUNG_UP for _, mask in poller.poll(0))

    async def shutdown(self) -> None:
        self.shutting_down = True
        for scope in self._accept_scopes:
            scope.cancel()
        with anyio.move_on_after(self.shutdown_deadline):
            while any(c.inflight_count for c in self.connections):
                await anyio.sleep(_POLL_S)
        left = sum(c.inflight_count for c in self.connections)
        if left:
            log.warning("cancelling %d request(s) still running after %.1f s", left, self.shutdown_deadline)
            for conn in list(self.connections):
                conn.cancel_all("shutdown")
            with anyio.move_on_after(1.0):
                while any(c.inflight_count for c in self.connections):
                    await anyio.sleep(_POLL_S)
        for conn in list(self.connections):
            conn.stop_reading()
        with anyio.move_on_after(1.0):
            for conn in list(self.connections):
                await conn.done.wait()
        for conn in list(self.connections):
            conn.kill()

    # -- transports -----------------------------------------------------------------

    async def serve_socket(
        self, path: Path, *, task_status: anyio.abc.TaskStatus[Any] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Listen on a Unix socket (0600, in a 0700 folder) until shutdown."""
        path = Path(path)
        prepare_socket_path(path)
        listener = await anyio.create_unix_listener(path)
        os.chmod(path, 0o600)
        ino = path.lstat().st_ino
        self.socket_path = path
        scope = anyio.CancelScope()
        self._accept_scopes.append(scope)
        try:
            async with anyio.create_task_group() as conns:
                with scope:
                    async with listener:
                        log.info("listening on %s", path)
                        task_status.started(path)
                        while not self.shutting_down:
                            stream = SocketStream(await listener.accept())
                            self._connection_count += 1
                            conns.start_soon(
                                self._serve_connection,
                                stream,
                                f"socket#{self._connection_count}",
                                None,
                                stream.peer_gone,
                            )
                if same_file(path, ino):
                    path.unlink()
        finally:
            if same_file(path, ino):
                path.unlink()

    async def serve_stdio(
        self,
        read_fd: int = 0,
        write_fd: int = 1,
        *,
        task_status: anyio.abc.TaskStatus[Any] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve one connection on stdin/stdout; stdin closing shuts the daemon down."""
        stream = FdStream(read_fd, write_fd)
        task_status.started()
        await self._serve_connection(
            stream,
            "stdio",
            lambda: self.request_shutdown("stdin closed"),
            lambda: False,
        )

    async def serve_stream(self, stream: anyio.abc.ByteStream, name: str = "stream") -> None:
        """Serve one connection on any byte stream (tests, embedding)."""
        await self._serve_connection(stream, name, None, lambda: True)

    async def _serve_connection(
        self,
        stream: anyio.abc.ByteStream,
        name: str,
        on_eof: Callable[[], None] | None,
        peer_gone: Callable[[], bool],
    ) -> None:
        conn = Connection(
            stream,
            self.dispatcher,
            name=name,
            max_frame_bytes=self.max_frame_bytes,
            max_inflight=self.max_inflight,
            max_inflight_bytes=self.max_inflight_bytes,
            accepting=self.accepting,
            on_eof=on_eof,
            peer_gone=peer_gone,
            load=self.inline,
            quick=self.quick,
        )
        self.connections.add(conn)
        log.debug("%s: connected", name)
        try:
            await conn.run()
        except Exception:
            # Never through the listener's task group: that would drop every client.
            log.exception("%s: the connection failed", name)
        finally:
            self.connections.discard(conn)
            log.debug("%s: closed", name)

    # -- calls from worker threads -------------------------------------------------------

    def run_in_loop(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run a quick, non-blocking ``fn(*args)`` on the event loop, from any thread."""
        if threading.get_ident() == self._loop_thread:
            fn(*args)
            return
        try:
            anyio.from_thread.run_sync(fn, *args, token=self._token)
        except RuntimeError:
            pass  # the loop has stopped: nobody is left to tell

    def workspaces_changed(self) -> None:
        for fn in list(self.workspace_listeners):
            fn()

    def broadcast(self, workspace: str, method: str, params: Any) -> None:
        """Notify every connection subscribed to ``workspace`` (from any thread)."""

        def send() -> None:
            for conn in list(self.connections):
                if not conn.closed and conn.subscription.wants(workspace):
                    conn.notify_nowait(method, params)

        self.run_in_loop(send)

    # -- the change feed ------------------------------------------------------------------

    def _add_change_listener(self) -> None:
        self.service.add_change_listener(self._on_change)

    def _remove_change_listener(self) -> None:
        try:
            self.service.remove_change_listener(self._on_change)
        except Exception:
            log.debug("removing the change listener failed", exc_info=True)

    def _on_change(self, workspace: str, changes: list[dict] | dict) -> None:
        """Service's change listener (called from the writing thread, after a
        commit) with one change or a list of them."""
        items = changes if isinstance(changes, list) else [changes]
        with self._changes_lock:
            self._pending_changes.extend((workspace, c) for c in items)
            if self._wakeup_pending:
                return
            self._wakeup_pending = True
        self.run_in_loop(self._wake_fan_out)

    def _wake_fan_out(self) -> None:
        try:
            self._fanout_send.send_nowait(None)
        except (anyio.WouldBlock, anyio.ClosedResourceError):
            pass

    async def _fan_out_changes(self) -> None:
        async for _ in self._fanout_recv:
            with self._changes_lock:
                batch, self._pending_changes = self._pending_changes, []
                self._wakeup_pending = False
            subscribers = [c for c in self.connections if c.subscription.active and not c.closed]
            if not subscribers or not batch:
                continue
            by_workspace: dict[str, list[dict]] = defaultdict(list)
            for workspace, change in batch:
                item = dict(change)
                item.setdefault("workspace", workspace)
                by_workspace[workspace].append(item)
            for workspace, changes in by_workspace.items():
                for conn in subscribers:
                    if not conn.subscription.wants(workspace):
                        continue
                    for i in range(0, len(changes), CHANGES_PER_NOTIFICATION):
                        conn.notify_nowait(
                            "changes.changed",
                            {"workspace": workspace, "changes": changes[i : i + CHANGES_PER_NOTIFICATION]},
                        )
