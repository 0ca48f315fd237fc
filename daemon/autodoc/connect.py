"""Daemon or in-process: the one place that decides where a call runs.

When a daemon holds the store's lease and listens on a socket, calls go to it
(`Remote`); otherwise they run on a Service in this process (`Local`), bound
and checked exactly as the daemon binds and checks them (api.py,
rpc/schemas.py). The CLI, the language server and the other adapters all
connect here.

Runs on: the caller's thread. A Local backend's reads may run on several
threads at once; its writes serialise on the store's write lock.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .api import METHODS, Method
from .config import Settings
from .errors import MethodNotFound, StoreLocked, from_rpc
from .store.lease import read_holder

if TYPE_CHECKING:
    from .service import Service

REMOTE_TIMEOUT_S = 3600.0


def daemon_socket(settings: Settings) -> Path | None:
    """The socket of the daemon holding this store's lease, if one does and it is there."""
    holder = read_holder(settings.store)
    if not holder:
        return None
    sock = holder.get("socket")
    if sock and Path(sock).exists():
        return Path(sock)
    return None


class Remote:
    """Calls on the daemon's socket, one connection per call."""

    def __init__(self, socket: Path, timeout: float = REMOTE_TIMEOUT_S):
        self.socket = socket
        self.timeout = timeout

    def call(self, method: str, params: Any, **_: Any) -> Any:
        """The answer, or the daemon's error raised as this package's own class."""
        from autodoc_client import RemoteError, call_socket

        try:
            return call_socket(self.socket, method, params, timeout=self.timeout)
        except RemoteError as e:
            raise from_rpc({"code": e.code, "message": e.message, "data": e.data}) from None

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
    """Calls on a Service in this process."""

    def __init__(self, settings: Settings, *, writer: bool):
        from .service import Service

        self.service = Service(settings, writer=writer)

    @property
    def writable(self) -> bool:
        return self.service.writable

    def call(self, method: str, params: Any, *, progress: Progress | None = None, embed: bool = False) -> Any:
        return run_bound(self.service, *bind(method, params), progress=progress, embed=embed)

    def close(self) -> None:
        self.service.close()


Backend = Remote | Local


def connect(settings: Settings, *, writer: bool, fall_back_to_reader: bool = False) -> Backend:
    """The daemon when one serves this store, else a Service here: a writer when
    `writer` (with `fall_back_to_reader`, a reader when another process writes)."""
    sock = daemon_socket(settings)
    if sock is not None:
        return Remote(sock)
    try:
        return Local(settings, writer=writer)
    except StoreLocked:
        if not fall_back_to_reader:
            raise
        return Local(settings, writer=False)


def call(settings: Settings, method: str, params: Any, *, progress: bool = False) -> Any:
    """One call, wherever it runs. In-process, an index run embeds what it
    indexed before answering (no daemon will), with a progress bar on stderr."""
    sock = daemon_socket(settings)
    if sock is not None:
        return Remote(sock).call(method, params)
    m, bound = bind(method, params)
    local = Local(settings, writer=m.write)
    bar = (ProgressBar() if sys.stderr.isatty() else ProgressLines()) if progress and m.progress else None
    try:
        return run_bound(local.service, m, bound, progress=bar, embed=True)
    finally:
        if bar:
            bar.close()
        local.close()


class ProgressLines:
    """Where stderr is not a terminal (a script, CI, an agent's log): a plain line when a phase
    starts and at most every EVERY_S within it, so a long run (minutes of embedding) does not
    look hung; tqdm's bar turns itself off there."""

    EVERY_S = 10.0

    def __init__(self) -> None:
        self._phase: str | None = None
        self._said = 0.0
        self._ended = False  # this phase's last line (done = total) is out

    def __call__(self, done: int, total: int, message: str) -> None:
        phase = "embedding" if message == "embedding" else "indexing"
        now = time.monotonic()
        starts = phase != self._phase
        if starts:
            self._phase, self._ended = phase, False
        ends = bool(total) and done >= total and not self._ended
        if starts or ends or now - self._said >= self.EVERY_S:
            self._said, self._ended = now, self._ended or ends
            unit = "chunks" if phase == "embedding" else "files"
            print(f"autodoc: {phase} {done}/{total} {unit}", file=sys.stderr, flush=True)

    def close(self) -> None:
        pass


class ProgressBar:
    """tqdm on stderr, fed by an index run's progress callback."""

    def __init__(self) -> None:
        from tqdm import tqdm

        self._bar = tqdm(total=0, unit="file", file=sys.stderr, disable=None, leave=False)

    def __call__(self, done: int, total: int, message: str) -> None:
        if self._bar.total != total:
            self._bar.total = total
        self._bar.n = done
        self._bar.set_postfix_str(message[-40:], refresh=False)
        self._bar.refresh()

    def close(self) -> None:
        self._bar.close()
