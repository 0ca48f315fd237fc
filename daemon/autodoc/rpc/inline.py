"""RPC stage, the short way for cheap reads: run one on the event loop itself
when the daemon has nothing else to do.

Handing a read to a worker thread and back costs two thread wake-ups (the
worker's, then the loop's) and 0.15–0.35 ms of CPU per call
(docs/benchmarks/daemon_overhead.md): the largest piece of what the socket
adds to a call. A read that is known to be quick and finds the daemon idle
skips that round trip.

Input: the kind of a read (method, workspace, search stages) and how long its
recent runs took. Output: whether the next one may run inline.

The rule, and what it costs the others:

- Only when nothing else is asked of the daemon: this is the one request
  admitted on any connection (``admitted``, counted from the moment a frame
  is read until its answer is out, so requests pipelined or batched never
  run inline), and no read or write runs or waits for a slot on any thread
  (``running``: the live index's, an index run). Under load every read
  still goes to the worker threads, as before.
- Only a kind whose last ``WINDOW`` runs took under ``BELOW_S`` of CPU
  and ``WALL_BELOW_S`` of wall time at the median; a kind never seen runs on
  a thread first. CPU time, because on a busy machine the wall time of the
  same read swings with what the other processes do (the daemon's own cost
  does not); the wall cap keeps out a read that waits (I/O, a lock) more
  than it computes.
- While an inline read runs the loop reads nothing: a request from another
  connection, or a cancel, waits for it — up to about ``WALL_BELOW_S`` (a
  search whose query embedding runs on ONNX's own threads costs this thread
  little CPU but still that wall time), longer only for a run slower than its
  kind's recent median. That is how long one client can hold up another
  through this path.

Runs on: the event loop (``record`` also from worker threads, under a lock;
``may_run`` reads one dict entry, atomic under the GIL).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from functools import cache
from typing import Any

from . import schemas

# A read whose kind's last WINDOW runs took under this at the median may run inline:
# a lexical search at 10k-100k chunks (2-4 ms), not a hybrid one (the query's
# embedding alone takes longer).
BELOW_S = 0.005
WALL_BELOW_S = 0.01
WINDOW = 8


def read_kind(method: str, params: Any) -> Hashable:
    """What makes a read's cost comparable between calls: its method, its
    workspace, for searches which stages run, and coarse sizes of what it asks
    (how many words, how many hits, whether it filters): eight quick two-word
    searches must not let a 600-word or heavily filtered one onto the loop.
    Params as sent (positional or named, not yet checked) and as bound give
    the same kind, so the quick lane (rpc/quick.py) can decide before binding."""
    if isinstance(params, list):
        params = dict(zip(_names(method), params))
    if not isinstance(params, dict):
        return method
    opts = params.get("opts")
    stages = rerank = None
    size: tuple = ()
    if isinstance(opts, dict):
        raw = opts.get("stages")
        stages = tuple(sorted(str(s) for s in raw)) if isinstance(raw, list) else None
        rerank = opts.get("rerank")
        rerank = rerank if isinstance(rerank, (bool, str, type(None))) else "other"
        limit = opts.get("limit")
        size = (
            _bucket(limit if isinstance(limit, int) else 0),
            any(opts.get(k) for k in ("facets", "paths", "tags", "after")),
        )
    query = params.get("query")
    words = _bucket(len(query.split())) if isinstance(query, str) else None
    workspace = params.get("workspace")
    return (method, workspace if isinstance(workspace, str) else None, stages, rerank, words, *size)


@cache
def _names(method: str) -> tuple[str, ...]:
    try:
        return tuple(schemas.param_names(method))
    except KeyError:  # a method with no schema: no names, so no sizes either
        return ()


def _bucket(n: int) -> int:
    """0, 1-3, 4-15, 16-63, …: sizes a quarter apart cost alike."""
    return 0 if n <= 0 else (n.bit_length() + 1) // 2


class _Counted:
    """``with``: one more read or write running (and, with ``admitted``, one more request
    admitted) for as long as the block runs (or from ``begin`` to ``end``, for a read whose
    end is a callback: the thread lane's). One object per InlineReads, reused: no
    allocation per call."""

    __slots__ = ("_admitted", "_reads")

    def __init__(self, reads: InlineReads, admitted: bool):
        self._reads = reads
        self._admitted = admitted

    def begin(self) -> None:
        self._reads.running += 1
        if self._admitted:
            self._reads.admitted += 1

    def end(self) -> None:
        self._reads.running -= 1
        if self._admitted:
            self._reads.admitted -= 1

    def __enter__(self) -> None:
        self.begin()

    def __exit__(self, *exc: object) -> None:
        self.end()


class InlineReads:
    def __init__(self, below_s: float = BELOW_S, window: int = WINDOW, wall_below_s: float = WALL_BELOW_S):
        self.below_s = below_s
        self.wall_below_s = wall_below_s
        self.window = window
        self.admitted = 0  # requests read on any connection and not yet answered
        self.running = 0  # reads and writes asked for and not yet over, on any thread
        self.counting = _Counted(self, admitted=False)  # with: one more running
        self.serving = _Counted(self, admitted=True)  # with: one more running and admitted (the quick lane)
        self._recent: dict[Hashable, deque[tuple[float, float]]] = {}  # (CPU, wall) seconds
        self._quick: dict[Hashable, bool] = {}  # whether each kind's recent runs were quick
        self._recording = threading.Lock()

    def may_run(self, kind: Hashable) -> bool:
        return not self.running and self.admitted <= 1 and self._quick.get(kind, False)

    def measured(self, kind: Hashable, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)``, its CPU and wall time recorded for ``kind`` (on any thread)."""
        c0, t0 = time.thread_time(), time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            self.record(kind, time.thread_time() - c0, time.perf_counter() - t0)

    def record(self, kind: Hashable, cpu_s: float, wall_s: float) -> None:
        with self._recording:  # two threads recording one kind: the decision is the last window's
            recent = self._recent.get(kind)
            if recent is None:
                recent = self._recent.setdefault(kind, deque(maxlen=self.window))
            recent.append((cpu_s, wall_s))
            # decided here, once a run, rather than on every may_run (two or three a request)
            quick = False
            if len(recent) >= self.window:
                runs = list(recent)
                mid = len(runs) // 2
                quick = (
                    sorted(c for c, _ in runs)[mid] < self.below_s
                    and sorted(w for _, w in runs)[mid] < self.wall_below_s
                )
            self._quick[kind] = quick
