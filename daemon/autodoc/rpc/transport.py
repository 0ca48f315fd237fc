"""RPC stage, the transports' plumbing: a byte stream over two file
descriptors (stdin/stdout), the Unix socket's reads, and its path rules.

The socket is created mode 0600 in a folder of mode 0700 that this user owns.
A socket file left by a dead daemon is removed; one that still answers a
connect belongs to a live daemon and is refused (SocketInUse). No TCP.

Runs on: the event loop (prepare_socket_path: once, before serving).
"""

from __future__ import annotations

import asyncio
import errno
import os
import select
import socket
import stat
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel


class SocketInUse(RuntimeError):
    """Another live process answers on the socket path."""


class SocketPathError(RuntimeError):
    """The socket path cannot be used safely (not ours, not a socket…)."""


def prepare_socket_path(path: Path) -> None:
    """Make ``path``'s folder (0700, ours) and clear a stale socket file, or
    raise SocketInUse / SocketPathError with a message a person can act on."""
    path = Path(path)
    folder = path.parent
    if not folder.exists():
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(folder, 0o700)  # mkdir's mode is filtered by the umask
    st = folder.stat()
    if st.st_uid != os.getuid():
        raise SocketPathError(
            f"the socket folder {folder} belongs to another user (uid {st.st_uid}); choose another --socket"
        )
    if len(os.fsencode(str(path))) >= 104:
        raise SocketPathError(f"the socket path {path} is too long for a Unix socket (at most 103 bytes)")
    try:
        info = path.lstat()
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(info.st_mode):
        raise SocketPathError(f"{path} exists and is not a socket; refusing to replace it")
    if socket_answers(path):
        raise SocketInUse(f"another AutoDoc daemon is already listening on {path}; talk to it, or stop it first")
    path.unlink()  # stale: nothing listens any more


def socket_answers(path: Path, timeout: float = 1.0) -> bool:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(str(path))
        return True
    except OSError as exc:
        if exc.errno in (errno.ECONNREFUSED, errno.ENOENT):
            return False
        if isinstance(exc, (socket.timeout, TimeoutError)) or exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK):
            return True  # a backlog that is full still means somebody is there
        raise
    finally:
        s.close()


def same_file(path: Path, ino: int | None) -> bool:
    try:
        return ino is not None and path.lstat().st_ino == ino
    except OSError:
        return False


def read_fd(stream: anyio.abc.ByteStream) -> int | None:
    """The descriptor ``stream`` reads from, to poll (None: a stream of another kind)."""
    if isinstance(stream, FdStream):
        return stream.read_fd
    sock = stream.extra(anyio.abc.SocketAttribute.raw_socket, None)
    return None if sock is None else sock.fileno()


def nowait_writer(stream: anyio.abc.ByteStream) -> Callable[[bytes], int] | None:
    """For ``stream``, a function writing what the stream takes of some bytes
    without waiting (the count written, 0 when it would block; raises
    anyio.BrokenResourceError when the peer is gone), or None when the stream
    cannot say (a stream of another kind)."""
    if isinstance(stream, FdStream):
        return stream.send_nowait
    sock = stream.extra(anyio.abc.SocketAttribute.raw_socket, None)
    if sock is None:
        return None

    def send(data: bytes) -> int:
        try:
            return sock.send(data)  # anyio keeps its sockets non-blocking
        except BlockingIOError:
            return 0
        except OSError as exc:
            raise anyio.BrokenResourceError from exc

    return send


class FdStream(anyio.abc.ByteStream):
    """A byte stream over a readable and a writable file descriptor (stdio).

    Pipes, sockets and terminals are switched to non-blocking mode and waited
    on with the event loop; a regular file (``< requests.jsonl``) never blocks,
    so it is read directly. The descriptors' blocking modes are restored on
    close; the descriptors themselves are closed only if ``close_fds``.
    """

    def __init__(self, read_fd: int, write_fd: int, *, close_fds: bool = False):
        self.read_fd = read_fd
        self.write_fd = write_fd
        self._close_fds = close_fds
        self._restore: list[tuple[int, bool]] = []
        self._read_waitable = self._make_nonblocking(read_fd)
        self._write_waitable = self._make_nonblocking(write_fd) if write_fd != read_fd else self._read_waitable
        self._closed = False
        self._eof_sent = False

    def _make_nonblocking(self, fd: int) -> bool:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        was = os.get_blocking(fd)
        if was:
            os.set_blocking(fd, False)
            self._restore.append((fd, was))
        return True

    async def receive(self, max_bytes: int = 65536) -> bytes:
        while True:
            if self._closed:
                raise anyio.ClosedResourceError
            try:
                data = os.read(self.read_fd, max_bytes)
            except BlockingIOError:
                await anyio.wait_readable(self.read_fd)
                continue
            except OSError as exc:
                raise anyio.BrokenResourceError from exc
            await anyio.lowlevel.checkpoint()
            if not data:
                raise anyio.EndOfStream
            return data

    async def send(self, item: bytes) -> None:
        view = memoryview(item)
        while view:
            if self._closed or self._eof_sent:
                raise anyio.ClosedResourceError
            try:
                n = os.write(self.write_fd, view)
            except BlockingIOError:
                await anyio.wait_writable(self.write_fd)
                continue
            except (BrokenPipeError, ConnectionError) as exc:
                raise anyio.BrokenResourceError from exc
            view = view[n:]
        await anyio.lowlevel.checkpoint()

    def send_nowait(self, item: bytes) -> int:
        if self._closed or self._eof_sent:
            return 0
        try:
            return os.write(self.write_fd, item)
        except BlockingIOError:
            return 0
        except (BrokenPipeError, ConnectionError) as exc:
            raise anyio.BrokenResourceError from exc

    async def send_eof(self) -> None:
        self._eof_sent = True

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        for fd, was in self._restore:
            try:
                os.set_blocking(fd, was)
            except OSError:
                pass
        if self._close_fds:
            for fd in {self.read_fd, self.write_fd}:
                try:
                    os.close(fd)
                except OSError:
                    pass
        await anyio.lowlevel.checkpoint()


class SocketStream(anyio.abc.ByteStream):
    """An accepted Unix socket (anyio's stream), read through a reader kept
    registered with the event loop.

    anyio's own receive, per call: a turn of the loop before reading, a
    ``recv`` that would block, a reader added to the loop (asyncio's lookup
    formats the socket's repr for a KeyError: two syscalls) and removed again
    once readable (two ``epoll_ctl``), and one more turn to resume: most of the
    time between a request's arrival and its frame reaching the connection
    (docs/benchmarks/daemon_overhead.md). Here the reader stays registered while
    someone reads; one that fires twice with nobody waiting and no read between
    (the connection paused on a full outbox) is removed until the next wait, so an
    unread socket never spins the loop. Writing and closing are anyio's.
    """

    def __init__(self, stream: anyio.abc.ByteStream):
        self._stream = stream
        self._sock: socket.socket = stream.extra(anyio.abc.SocketAttribute.raw_socket)
        self._fd = self._sock.fileno()
        self._loop = asyncio.get_running_loop()
        self._waiter: asyncio.Future | None = None
        self._registered = False
        self._closed = False
        self._reads = self._reads_seen = 0  # reads made; as of the last time it fired with nobody waiting

    @property
    def extra_attributes(self) -> Mapping[Any, Callable[[], Any]]:
        return self._stream.extra_attributes

    async def receive(self, max_bytes: int = 65536) -> bytes:
        waited = False
        while True:
            if self._closed:
                raise anyio.ClosedResourceError
            try:
                data = self._sock.recv(max_bytes)
            except BlockingIOError:
                await self._readable()
                waited = True
                continue
            except OSError as exc:
                raise anyio.BrokenResourceError from exc
            self._reads += 1
            if not waited:
                # data at once (a client sending faster than we read): let the others in too;
                # shielded, as the bytes are ours now and a cancel here would lose them
                await anyio.lowlevel.cancel_shielded_checkpoint()
            if not data:
                raise anyio.EndOfStream
            return data

    async def _readable(self) -> None:
        if not self._registered:
            self._loop.add_reader(self._fd, self._on_readable)
            self._registered = True
        self._waiter = self._loop.create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None

    def _on_readable(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        elif self._reads == self._reads_seen:
            # nobody read since the last time either: the connection is paused, and a
            # level-triggered reader would fire every turn until it reads again
            self._unregister()
        else:
            # a read since the last time: readiness reported before that read took the bytes
            # (or new bytes the next receive will take); stay registered
            self._reads_seen = self._reads

    def _unregister(self) -> None:
        if self._registered:
            self._registered = False
            self._loop.remove_reader(self._fd)

    def peer_gone(self) -> bool:
        """After reading EOF: has the peer closed entirely, or only shut down its sending
        side (``printf … | nc -U`` waits for the answer)? Linux reports POLLHUP on an
        AF_UNIX stream only once both directions are shut down."""
        try:
            poller = select.poll()
            poller.register(self._fd, select.POLLHUP | getattr(select, "POLLRDHUP", 0))
            return any(mask & select.POLLHUP for _, mask in poller.poll(0))
        except Exception:
            return True

    async def send(self, item: bytes) -> None:
        await self._stream.send(item)

    async def send_eof(self) -> None:
        await self._stream.send_eof()

    async def aclose(self) -> None:
        self._closed = True
        self._unregister()
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)
        await self._stream.aclose()
