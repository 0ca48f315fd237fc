"""The daemon process: one Service, the RPC transports and the live index, in
one task group.

Input: Settings and which transports to serve. Output: a process exit status.

- The Service takes the store's writer lease; if another daemon holds it, the
  daemon exits 1 naming the holder (its pid and socket are in the lease).
- Transports: JSON-RPC on stdin/stdout and/or one Unix socket (rpc/server.py).
  In stdio mode file descriptor 1 is the RPC channel only: anything else that
  prints (a library, a stray print) is sent to stderr, where the logs go.
- The live index: watchfiles over every workspace root (restarted when
  workspaces are added or removed); a saved .md/.markdown file is handed to
  Service.index_paths on the writer slot after a ~50 ms debounce (and so is
  _schema/frontmatter.yaml, which re-derives every document's facets). A changed
  folder (a rename, say) gets an incremental Service.index of its workspace.
  At start each workspace gets one incremental index, to catch edits made
  while no daemon ran.
- The embed queue (embed/queue.py) fills vectors in the background; its
  progress is pushed to subscribed connections as ``embedding.progress``.
- Shutdown on SIGTERM/SIGINT, stdin EOF (stdio) or server.shutdown: stop
  accepting, drain in-flight requests within the deadline, cancel the rest,
  then Service.close(). A second signal during shutdown ends the process at
  once.

Knobs for tests and debugging (environment): AUTODOC_LOG (a logging level,
when nothing configured logging before), AUTODOC_MAX_FRAME_BYTES,
AUTODOC_SHUTDOWN_DEADLINE (seconds), AUTODOC_CHECK_RESULTS=1 (every answer is
checked against its schemas/*.result.json; a mismatch answers -32603 with
data.problems).
"""

from __future__ import annotations

import inspect
import logging
import os
import signal
import sys
from collections import defaultdict
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from .config import MAX_FRAME_BYTES, Settings
from .errors import AutodocError, StoreLocked, WorkspaceNotFound
from .rpc.methods import run_write
from .fmschema import SCHEMA_RELPATH
from .rpc.server import SHUTDOWN_DEADLINE_S, RpcServer
from .rpc.transport import SocketInUse, SocketPathError

try:  # the ingest stage's answers for a single path, when present
    from .ingest.scan import is_ignored, is_markdown_path
except ImportError:  # pragma: no cover - only while ingest is being written
    def is_markdown_path(relpath: str) -> bool:
        return relpath.lower().endswith((".md", ".markdown"))

    def is_ignored(root: Path, relpath: str) -> bool:
        return any(p.startswith(".") or p == "node_modules" for p in relpath.split("/"))

log = logging.getLogger("autodoc.daemon")

EXIT_OK = 0
EXIT_FAILED = 1
WATCH_DEBOUNCE_MS = 50
WATCH_STEP_MS = 25


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
    _configure_logging()
    if not stdio and socket_path is None:
        print("autodoc: error: nothing to serve: give --stdio, --socket or both", file=sys.stderr)
        return EXIT_FAILED
    fds = (0, 1)
    if stdio:
        fds = (0, _claim_stdout())
    try:
        return anyio.run(partial(
            serve_daemon, settings, stdio=stdio, socket_path=socket_path, stdio_fds=fds,
            max_frame_bytes=max_frame_bytes, shutdown_deadline=shutdown_deadline, watch=watch,
        ))
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
        print(f"autodoc: error: {exc.message}", file=sys.stderr)
        return EXIT_FAILED
    except AutodocError as exc:
        print(f"autodoc: error: {exc.message}", file=sys.stderr)
        return EXIT_FAILED
    server = RpcServer(
        service,
        max_frame_bytes=max_frame_bytes or _env_int("AUTODOC_MAX_FRAME_BYTES", MAX_FRAME_BYTES),
        shutdown_deadline=shutdown_deadline or _env_float("AUTODOC_SHUTDOWN_DEADLINE", SHUTDOWN_DEADLINE_S),
        check_results=os.environ.get("AUTODOC_CHECK_RESULTS", "") not in ("", "0"),
    )
    try:
        async with anyio.create_task_group() as tg:
            try:
                await tg.start(partial(server.run, stdio=stdio, socket_path=socket_path, stdio_fds=stdio_fds))
            except (SocketInUse, SocketPathError, OSError) as exc:
                print(f"autodoc: error: {exc}", file=sys.stderr)
                return EXIT_FAILED
            log.info("serving (pid %d, store %s%s%s)", os.getpid(), settings.store,
                     f", socket {socket_path}" if socket_path else "", ", stdio" if stdio else "")
            task_status.started(server)
            async with anyio.create_task_group() as aux:
                if handle_signals:
                    aux.start_soon(_watch_signals, server)
                live = LiveIndex(server)
                if watch:
                    aux.start_soon(live.run)
                aux.start_soon(run_embed_queue_for, server)
                await server.shutdown_requested.wait()
                # Release the threads they wait in now, not at their next timeout:
                # a worker thread still waiting would hold the process open.
                live.stop()
                aux.cancel_scope.cancel()
                _release_embed_queue(server)
            log.debug("background tasks stopped")
        log.debug("transports closed")
        return EXIT_OK
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(service.close)
        log.info("stopped")


def _open_service(settings: Settings, holder: dict[str, Any]) -> Any:
    from .service import Service

    params = inspect.signature(Service).parameters
    if "holder" in params:
        return Service(settings, writer=True, holder=holder)
    if "holder_info" in params:
        return Service(settings, writer=True, holder_info=holder)
    service = Service(settings, writer=True)
    if hasattr(service, "set_holder"):
        service.set_holder(holder)
    return service


async def _watch_signals(server: RpcServer) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            server.request_shutdown(f"signal {signal.Signals(signum).name}")
            return  # leaving restores the default handlers: a second signal ends the process


class LiveIndex:
    """Keeps every workspace's index in step with its folder while the daemon runs."""

    def __init__(self, server: RpcServer, *, debounce_ms: int = WATCH_DEBOUNCE_MS, step_ms: int = WATCH_STEP_MS):
        self.server = server
        self.service = server.service
        self.debounce_ms = debounce_ms
        self.step_ms = step_ms
        self._restart = anyio.Event()
        self._stopping = False

    def roots_changed(self) -> None:
        self._restart.set()

    def stop(self) -> None:
        self._stopping = True
        self._restart.set()

    async def run(self) -> None:
        self.server.workspace_listeners.append(self.roots_changed)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._watch_loop)
                await self._catch_up()
        finally:
            self.server.workspace_listeners.remove(self.roots_changed)
            self.server.watching = []

    async def _roots(self) -> dict[str, Path]:
        listed = await anyio.to_thread.run_sync(self.service.workspace_list, limiter=self.server.readers)
        return {w["name"]: Path(w["root"]) for w in listed["workspaces"] if Path(w["root"]).is_dir()}

    async def _catch_up(self) -> None:
        for name in await self._roots():
            try:
                report = await run_write(self.server, self.service.index, name)
                log.info("caught up %s: %s", name, _summary(report))
            except Exception:
                log.exception("catching up workspace %s failed", name)

    async def _watch_loop(self) -> None:
        from watchfiles import awatch

        while not self._stopping:
            self._restart = anyio.Event()
            roots = await self._roots()
            if not roots:
                self.server.watching = []
                await self._restart.wait()
                continue
            # awatch creates its watcher synchronously on the first step of the
            # loop, before any other task runs: once `watching` is visible to a
            # request, the roots are watched.
            self.server.watching = sorted(roots)
            log.info("watching %s", ", ".join(f"{n}={r}" for n, r in sorted(roots.items())))
            try:
                async for changes in awatch(
                    *roots.values(), watch_filter=None, debounce=self.debounce_ms, step=self.step_ms,
                    stop_event=self._restart, ignore_permission_denied=True,
                ):
                    await self._apply(changes, roots)
            except (FileNotFoundError, OSError) as exc:  # a root vanished under the watcher
                log.warning("the watcher stopped (%s); restarting", exc)
                with anyio.move_on_after(1.0):
                    await self._restart.wait()

    async def _apply(self, changes: set[tuple[Any, str]], roots: dict[str, Path]) -> None:
        paths: dict[str, set[str]] = defaultdict(set)
        rescan: set[str] = set()
        for _, raw in changes:
            for name, root in roots.items():
                rel = _relative(raw, root)
                if rel is None:
                    continue
                if is_markdown_path(rel):
                    if not is_ignored(root, rel):
                        paths[name].add(rel)
                elif rel == SCHEMA_RELPATH:  # index_paths applies a changed frontmatter schema
                    paths[name].add(rel)
                elif _maybe_folder(root / rel) and not is_ignored(root, rel):
                    rescan.add(name)
        for name in sorted(set(paths) | rescan):
            try:
                if name in rescan:
                    report = await run_write(self.server, self.service.index, name)
                else:
                    report = await run_write(self.server, self.service.index_paths, name, sorted(paths[name]))
                log.debug("live index %s: %s", name, _summary(report))
            except WorkspaceNotFound:
                self.roots_changed()
            except Exception:
                log.exception("live index of workspace %s failed", name)


async def run_embed_queue_for(server: RpcServer) -> None:
    """The embed queue (embed/queue.py) on its own slot; its progress goes to
    connections subscribed to the workspace's changes as ``embedding.progress``."""
    try:
        from .embed.queue import run_embed_queue
    except ImportError:  # pragma: no cover - only while embed is being written
        return
    if getattr(server.service, "semantic", None) is None:
        return

    def notify(workspace: str, progress: dict[str, Any]) -> None:
        server.broadcast(workspace, "embedding.progress", {"workspace": workspace, **progress})

    await run_embed_queue(server.service, notify, limiter=anyio.CapacityLimiter(1))


def _release_embed_queue(server: RpcServer) -> None:
    """Wake the queue's idle wait so its thread ends now, not at its next poll."""
    wake = getattr(getattr(server.service, "semantic", None), "wake", None)
    if wake is not None:
        wake.set()


def _relative(raw: str, root: Path) -> str | None:
    try:
        rel = Path(raw).relative_to(root)
    except ValueError:
        try:
            rel = Path(raw).relative_to(root.resolve())
        except ValueError:
            return None
    text = rel.as_posix()
    return None if text in ("", ".") else text


def _maybe_folder(path: Path) -> bool:
    """A path that is a folder now, or was gone and had no suffix (a folder
    moved or removed: the files inside it got no event of their own)."""
    if path.is_dir():
        return True
    return not path.exists() and not path.suffix


def _summary(report: dict) -> str:
    keys = ("added", "modified", "deleted", "renamed", "unchanged")
    return ", ".join(f"{k} {report[k]}" for k in keys if report.get(k))


def _claim_stdout() -> int:
    """Keep fd 1 for RPC alone: return a private copy of it and point fd 1
    (and sys.stdout) at stderr."""
    sys.stdout.flush()
    rpc_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return rpc_fd


def _configure_logging() -> None:
    root = logging.getLogger()
    if root.handlers:
        return
    level = os.environ.get("AUTODOC_LOG", "INFO").upper()
    logging.basicConfig(
        stream=sys.stderr, level=getattr(logging, level, logging.INFO),
        format="autodoc[%(process)d] %(relativeCreated)d %(levelname)s %(name)s: %(message)s",
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
