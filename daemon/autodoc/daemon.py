"""The daemon process: one Service, the RPC transports, the live index and
the embed queue, in one task group.

Input: Settings and which transports to serve. Output: a process exit status.

- The store is a file or a PostgreSQL database (Settings.store); a database reached as
  a role that may not write is served read-only: searches and reads, no watching,
  embedding nor indexing (the indexer, e.g. CI, does those).
- The Service takes the store's writer lease; if another daemon holds it, a
  stdio-only daemon becomes a bridge to that daemon's socket (rpc/bridge.py);
  otherwise, or when the holder has no socket, it exits 1 naming the holder
  (its pid and socket are in the lease).
- Transports: JSON-RPC on stdin/stdout and/or one Unix socket (rpc/server.py).
  In stdio mode file descriptor 1 is the RPC channel only: anything else that
  prints (a library, a stray print) is sent to stderr, where the logs go.
- The live index (index/live.py) keeps every workspace in step with its folder.
- The embed queue (embed/queue.py) fills vectors on its own thread; its
  progress is pushed to subscribed connections as ``embedding.progress``.
- The reader pool (readers/pool.py), one reader per core unless AUTODOC_READERS=0,
  handed to the server's route (rpc/route.py):
  searches in reader processes, one per core, once clients overlap.
- Shutdown on SIGTERM/SIGINT, stdin EOF (stdio) or server.shutdown: stop
  accepting, drain in-flight requests within the deadline, cancel the rest,
  then Service.close(). A second signal during shutdown ends the process at
  once.

Settings from the environment are read in config.py (env_settings).

Runs on: the event loop; store and model work on worker threads.
"""

from __future__ import annotations

import faulthandler
import logging
import os
import signal
import sys
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from .config import Settings, WorkspaceConfig, env_settings
from .config.logs import configure_logging
from .errors import AutodocError, StoreLocked
from .index.live import LiveIndex
from .readers.pool import ReaderPool, pool_size
from .rpc.bridge import bridge_stdio
from .rpc.methods import announce
from .rpc.server import RpcServer
from .rpc.transport import SocketInUse, SocketPathError
from .service import Service

log = logging.getLogger("autodoc.daemon")

EXIT_OK = 0
EXIT_FAILED = 1


def run_daemon(
    settings: Settings,
    *,
    stdio: bool,
    socket_path: Path | None,
    max_frame_bytes: int | None = None,
    shutdown_deadline: float | None = None,
    watch: bool = True,
) -> int:
    """Run the daemon until it is told to stop; return the exit status
    (0, or 1 after a startup failure already explained on stderr)."""
    configure_logging()
    # `kill -USR1 PID` prints every thread's stack to the log: what a daemon that will not stop waits in
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    if not stdio and socket_path is None:
        print("autodoc: error: nothing to serve: give --stdio, --socket or both", file=sys.stderr)
        return EXIT_FAILED
    fds = (0, 1)
    if stdio:
        fds = (0, _claim_stdout())
    try:
        return anyio.run(
            partial(
                serve_daemon,
                settings,
                stdio=stdio,
                socket_path=socket_path,
                stdio_fds=fds,
                max_frame_bytes=max_frame_bytes,
                shutdown_deadline=shutdown_deadline,
                watch=watch,
            )
        )
    except KeyboardInterrupt:
        return 130


async def serve_daemon(
    settings: Settings,
    *,
    stdio: bool = False,
    socket_path: Path | None = None,
    stdio_fds: tuple[int, int] = (0, 1),
    max_frame_bytes: int | None = None,
    shutdown_deadline: float | None = None,
    watch: bool = True,
    handle_signals: bool = True,
    task_status: anyio.abc.TaskStatus[Any] = anyio.TASK_STATUS_IGNORED,
) -> int:
    """The daemon inside an event loop (run_daemon's body; tests may call it)."""
    socket_path = Path(socket_path).expanduser() if socket_path is not None else None
    holder = {"socket": str(socket_path) if socket_path else None, "stdio": stdio}
    try:
        service = await anyio.to_thread.run_sync(partial(_open_service, settings, holder))
    except StoreLocked as exc:
        held = (exc.data or {}).get("holder") or {}
        if stdio and socket_path is None and held.get("socket"):  # another daemon serves this store: share it
            return await bridge_stdio(Path(held["socket"]), held.get("pid"), stdio_fds, settings.store_shown)
        print(f"autodoc: error: {exc.message}", file=sys.stderr)
        return EXIT_FAILED
    except AutodocError as exc:
        print(f"autodoc: error: {exc.message}", file=sys.stderr)
        return EXIT_FAILED
    env = env_settings()
    pool = ReaderPool(service, size=pool_size())  # reader processes unless AUTODOC_READERS=0 (readers/pool.py)
    server = RpcServer(
        service,
        max_frame_bytes=max_frame_bytes or env.max_frame_bytes,
        shutdown_deadline=shutdown_deadline or env.shutdown_deadline,
        check_results=env.check_results,
        pool=pool,
    )
    if pool.size and pool.can_share():
        # the vector files a killed daemon left in /dev/shm (RAM) go now, not when readers next start
        await anyio.to_thread.run_sync(pool.remove_stale_files)
    try:
        async with anyio.create_task_group() as tg:
            try:
                await tg.start(partial(server.run, stdio=stdio, socket_path=socket_path, stdio_fds=stdio_fds))
            except (SocketInUse, SocketPathError, OSError) as exc:
                print(f"autodoc: error: {exc}", file=sys.stderr)
                return EXIT_FAILED
            log.info(
                "serving (pid %d, store %s%s%s)",
                os.getpid(),
                settings.store_shown,
                f", socket {socket_path}" if socket_path else "",
                ", stdio" if stdio else "",
            )
            task_status.started(server)
            async with anyio.create_task_group() as aux:
                if handle_signals:
                    aux.start_soon(_watch_signals, server)
                live = LiveIndex(
                    service,
                    read=server.route.read,
                    write=server.route.write,
                    set_watching=partial(setattr, server, "watching"),
                )
                server.workspace_listeners.append(live.roots_changed)
                # a workspace a daemon sharing the store added, removed or configured, this one too (the
                # feed is the one teller there, peers.py): the roots watched anew and the subscribers told
                service.peers.workspace_listeners.append(partial(_workspace_changed, server))
                # a daemon that may not write (a PostgreSQL store reached as a reader role) serves
                # searches and reads only: what it would watch, embed or build is the indexer's
                if watch and service.writable:
                    aux.start_soon(live.run)
                if service.writable:
                    aux.start_soon(run_embed_queue, server)
                    aux.start_soon(build_postings, server)
                aux.start_soon(pool.run)
                await server.shutdown_requested.wait()
                # Release the threads they wait in now, not at their next timeout:
                # a worker thread still waiting would hold the process open.
                live.stop()
                aux.cancel_scope.cancel()
                service.embed_queue.request_stop()
            log.debug("background tasks stopped")
        log.debug("transports closed")
        return EXIT_OK
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(service.close)
        log.info("stopped")


def _workspace_changed(server: RpcServer, op: str, name: str, ws: Any) -> None:
    """A workspace's row (None: removed) after a `workspace.*` method of any daemon sharing the store
    (the change feed's thread, peers.py), announced as that method's answer would be (rpc/methods.py)."""
    if ws is None:
        result: dict[str, Any] = {"removed": name}
    else:
        result = {"name": name, "root": ws.root, "config": WorkspaceConfig.from_json(ws.config).to_json()}
    server.run_in_loop(announce, server, op, result)


def _open_service(settings: Settings, holder: dict[str, Any]) -> Service:
    return Service(settings, writer=True, holder=holder)


async def _watch_signals(server: RpcServer) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            server.request_shutdown(f"signal {signal.Signals(signum).name}")
            return  # leaving restores the default handlers: a second signal ends the process


async def run_embed_queue(server: RpcServer) -> None:
    """The embed queue's loop on its own thread until shutdown; its progress goes to
    connections subscribed to the workspace's changes as ``embedding.progress``."""
    service = server.service

    def notify(workspace: str, progress: dict[str, Any]) -> None:  # on the queue's thread; broadcast is thread-safe
        server.broadcast(workspace, "embedding.progress", {"workspace": workspace, **progress})

    await anyio.to_thread.run_sync(
        partial(service.embed_queue.work, until_idle=False, notify=notify, status=service.embedding_status_by_name),
        abandon_on_cancel=True,
    )


async def build_postings(server: RpcServer) -> None:
    """A store that predates its postings index builds it here, a small slice per write turn,
    instead of waiting for index jobs (a 1M-chunk store needs ~15 min of them): until it is
    complete, sentence searches rank their OR query through FTS5, 5-10x slower."""
    try:
        while not await server.route.write(server.service.indexer.build_postings):
            await anyio.sleep(0.05)  # leave the writer slot and the cores to saves and searches
    except Exception:  # a bug here must not stop the daemon (nor every start after): FTS5 keeps serving
        log.exception("building the postings index failed; sentence searches stay on FTS5")


def _claim_stdout() -> int:
    """Keep fd 1 for RPC alone: return a private copy of it and point fd 1
    (and sys.stdout) at stderr."""
    sys.stdout.flush()
    rpc_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return rpc_fd


def main(argv: list[str] | None = None) -> int:
    """``python -m autodoc.daemon [--store PATH] [--socket [PATH]] [--stdio]``:
    the daemon without the CLI (tests and debugging); ``autodoc serve`` is the
    command for people."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m autodoc.daemon")
    parser.add_argument("--store")
    parser.add_argument("--socket", nargs="?", const="", default=None)
    parser.add_argument("--stdio", action="store_true")
    parser.add_argument("--no-watch", action="store_true")
    args = parser.parse_args(argv)
    settings = Settings.from_env(store=args.store, socket=args.socket or None)
    socket_path = settings.socket if args.socket is not None else None
    return run_daemon(settings, stdio=args.stdio, socket_path=socket_path, watch=not args.no_watch)


if __name__ == "__main__":
    sys.exit(main())
