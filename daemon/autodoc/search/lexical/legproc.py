"""Search stage, the lexical leg in a helper process: while a hybrid search's
semantic leg runs in this process, its lexical leg runs on the other core.

Why: the engine runs the semantic leg on a leg thread beside the lexical leg,
but the two barely overlap. Both are numpy calls between Python steps, and a
thread waiting for the GIL beside one running Python gets it only at the
switch interval (docs/benchmarks/semantic_path.md): measured inline and on
threads, a 100k-chunk hybrid search took the same 22-24 ms, the sum of its
legs. In a second process the lexical leg runs beside the semantic one.

- One helper per Service, started on the first hybrid search of a workspace
  of at least ``MIN_CHUNKS`` chunks (below, the hand-off costs about what the
  overlap saves). Until it says it is ready, while another search has it,
  and if it dies, the leg runs in this process as before: never an error.
- The helper opens the same store read-only and runs the same ``run_lexical``
  on a snapshot of its own. A save committed between the two snapshots can
  give the lexical leg a chunk this search's snapshot lacks (or the reverse):
  such a hit finds no candidate row and is dropped, as in a search run a
  moment earlier or later; no answer mixes two generations' rows.
- It ends when its pipe closes: the Service closed, or this process died
  (the kernel closes the pipe either way).
- ``AUTODOC_READERS=0`` turns it off with the reader processes (readers/pool.py).

    python -m autodoc.search.lexical.legproc FD

  (the store comes as the pipe's first message, never in argv: a PostgreSQL connection
  string may hold a password, and a command line is anyone's to read)

Runs on: the search's thread (one call at a time, under a lock; a busy helper
is skipped, not waited for); the helper is a process of its own.
"""

from __future__ import annotations

import logging
import multiprocessing
import subprocess
import sys
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from ...config.settings import reader_processes

log = logging.getLogger("autodoc.search")

MIN_CHUNKS = 50_000
LEG_TIMEOUT_S = 10.0  # a lexical leg takes ms (about 1 s at the 1M store's p99): past this the helper is stuck


def enabled() -> bool:
    """With the reader processes (``AUTODOC_READERS``; none on one core, where nothing overlaps)."""
    return reader_processes() > 0


class LexicalHelper:
    def __init__(self, store: Path | str):
        self.store = store
        self._lock = threading.Lock()
        self._conn: Connection | None = None
        self._proc: subprocess.Popen | None = None
        self._ready = False
        self._gone = False
        self.calls = 0  # legs the helper ran (tests and benchmarks read it)

    @property
    def usable(self) -> bool:
        """Not given up on (it may still be starting: a search then runs its leg itself)."""
        return not self._gone

    def run(self, workspace_id: int, terms: Any, filt: Any, **kw: Any) -> Any | None:
        """The leg's LexicalResult from the helper, or None: the caller runs it itself."""
        collect = self.submit(workspace_id, terms, filt, **kw)
        return collect() if collect is not None else None

    def submit(self, workspace_id: int, terms: Any, filt: Any, **kw: Any) -> Callable[[], Any | None] | None:
        """Send the leg to the helper now; the call returned waits for its LexicalResult (None: the
        caller runs it itself) and must be made, as it frees the helper. None: nothing was sent.
        A hybrid search sends before its semantic leg starts: that leg's thread holds the GIL
        between its numpy calls, and a send waiting for it lost up to a switch interval (5 ms)."""
        if self._gone or not self._lock.acquire(blocking=False):
            return None
        try:
            if self._conn is None:
                self._start()
            elif not self._ready and self._conn.poll(0):
                self._ready = self._conn.recv() == "ready"
            if not self._ready:  # starting, or still opening the store
                self._lock.release()
                return None
            conn = self._conn
            assert conn is not None  # _start() opened it
            conn.send((workspace_id, terms, filt, kw))
        except (EOFError, OSError) as exc:
            self._lost(exc)
            self._lock.release()
            return None
        except BaseException:  # nothing was sent (a leg that cannot be pickled): the helper stays free
            self._lock.release()
            raise
        return self._collect

    def _collect(self) -> Any | None:
        try:
            assert self._conn is not None
            if not self._conn.poll(LEG_TIMEOUT_S):  # stuck: this search and the later ones run here
                raise OSError(f"no answer in {LEG_TIMEOUT_S:.0f} s")
            status, value = self._conn.recv()
            if status != "ok":
                log.warning("the lexical helper failed a leg (%s); running it here", value)
                return None
            self.calls += 1
            return value
        except (EOFError, OSError) as exc:
            self._lost(exc)
            return None
        finally:
            self._lock.release()

    def _lost(self, exc: BaseException) -> None:
        log.warning("the lexical helper is gone (%s); lexical legs run here", exc)
        self._gone = True
        self._close(kill=True)

    def _start(self) -> None:
        ours, theirs = multiprocessing.Pipe()  # a socketpair: both ends read and write
        try:
            # no PR_SET_PDEATHSIG: it fires when the starting *thread* ends, and a search's
            # thread may be retired; the helper ends when its pipe closes instead
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "autodoc.search.lexical.legproc", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                close_fds=True,
            )
        except OSError as exc:
            log.warning("the lexical helper could not start (%s); lexical legs run here", exc)
            self._gone = True
            ours.close()
            return
        finally:
            theirs.close()
        try:
            ours.send(self.store)  # buffered in the socket until the helper reads it
        except OSError as exc:
            log.warning("the lexical helper could not start (%s); lexical legs run here", exc)
            self._gone = True
            ours.close()
            return
        self._conn = ours

    def close(self) -> None:
        with self._lock:
            self._gone = True
            self._close(kill=False)

    def _close(self, kill: bool) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._proc is not None:
            if kill:
                self._proc.kill()  # stuck or failing: not worth waiting for
            try:
                self._proc.wait(timeout=5)  # it sees the pipe close and exits
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc = None


def serve(conn: Connection) -> int:
    from ...store import open_store
    from .leg import LexicalResult, run_lexical

    try:
        target = conn.recv()
    except (EOFError, OSError):
        return 0
    store = open_store(target, writer=False)
    conn.send("ready")
    while True:
        try:
            workspace_id, terms, filt, kw = conn.recv()
        except (EOFError, OSError):
            return 0
        out: tuple[str, LexicalResult | str]
        try:
            with store.read() as db:
                out = ("ok", run_lexical(db, workspace_id, terms, filt, **kw))
        except Exception as exc:  # the daemon runs the leg itself and logs it
            log.exception("the lexical helper failed a leg")
            out = ("err", f"{type(exc).__name__}: {exc}")
        try:
            conn.send(out)
        except OSError:
            return 0


def main(argv: list[str] | None = None) -> int:
    from ...config.logs import configure_logging

    argv = sys.argv[1:] if argv is None else argv
    configure_logging()
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the daemon's Ctrl-C is the daemon's to handle
    return serve(Connection(int(argv[0])))


if __name__ == "__main__":
    sys.exit(main())
