"""The stdio bridge: `autodoc serve` on stdio when another daemon holds the store.

Input: the holder's socket path and this process's stdio descriptors.
Output: an exit status. Bytes are forwarded unchanged both ways — stdin to
the daemon's socket, the socket to stdout — so the client talks to the one
daemon that holds the store (either framing; the daemon detects it) and
every agent session or editor window shares it instead of dying on the lease.

Shutdown mirrors a stdio daemon's: at the end of stdin the bridge shuts the
socket's sending side, relays what the daemon still answers, and exits 0
once the daemon closes the connection. If the daemon goes away first (it
was shut down), the bridge says so on stderr and exits 0 as well; a holder
whose socket never answers is an error (exit 1).

Runs on: the event loop (two relay tasks).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio

from .transport import FdStream

CONNECT_WAIT_S = 10.0  # a daemon that has just taken the lease may not listen yet


async def _connect(socket_path: Path, pid: int | None) -> anyio.abc.SocketStream | None:
    with anyio.move_on_after(CONNECT_WAIT_S):
        while True:
            if socket_path.exists():
                try:
                    return await anyio.connect_unix(str(socket_path))
                except OSError:
                    pass
            if pid is not None and not _alive(pid):
                return None
            await anyio.sleep(0.05)
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


async def bridge_stdio(socket_path: Path, pid: int | None, stdio_fds: tuple[int, int], store: str) -> int:
    """Relay stdio to the daemon's socket until either side ends; the exit status. `store` is the
    store as it may be shown (Settings.store_shown: a connection string without its password)."""
    remote = await _connect(socket_path, pid)
    if remote is None:
        print(
            f"autodoc: error: the store {store} is held by pid {pid}, and its socket {socket_path} does not answer",
            file=sys.stderr,
        )
        return 1
    print(
        f"autodoc: the store {store} is held by the daemon pid {pid}; bridging stdio to its socket {socket_path}",
        file=sys.stderr,
        flush=True,
    )
    local = FdStream(*stdio_fds)
    stdin_ended = anyio.Event()

    async def upstream() -> None:  # stdin → daemon; at stdin's end, half-close so answers still come back
        try:
            while True:
                await remote.send(await local.receive())
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass
        stdin_ended.set()
        try:
            await remote.send_eof()
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass

    async def downstream(tg: anyio.abc.TaskGroup) -> None:  # daemon → stdout, until the daemon closes
        try:
            while True:
                await local.send(await remote.receive())
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass
        if not stdin_ended.is_set():
            print(f"autodoc: the daemon pid {pid} closed the connection", file=sys.stderr)
        tg.cancel_scope.cancel()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(upstream)
            tg.start_soon(downstream, tg)
    finally:
        await remote.aclose()
        await local.aclose()
    return 0
