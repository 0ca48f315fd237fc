"""Index stage, preparing: a changed file's bytes → its parse and chunks (a Parsed), or why not.

Parsing and chunking are pure and were over half of a first index (29 of
53 s profiled for the 1,981 files of ../shared/data/corpora, the rest being
the store's writes). When a job has many files to prepare and there are cores
to spare, worker processes prepare them while this process writes the batches
before them: the GIL leaves threads no room to overlap pure Python. Answers
come back in the order the files went in, so the store is written exactly as
an inline run writes it, and at most WINDOW files are in flight (memory stays
bounded for a knowledge base of any size).

A worker that dies takes no file with it: the file it held is prepared here
instead, and so is every file after it.

Runs on: the index job's thread; the workers are `spawn`ed (the daemon has
threads, which fork would copy mid-lock), and end with the job, or with
their parent when it is killed (a parent-death signal, _die_with). Like any
`spawn`, a worker imports the main module again: a script that embeds the
Service and indexes 100 files or more needs its `if __name__ == "__main__"`
guard (the product's entry points have theirs).
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import pickle
import signal
import sys
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from typing import Generic, TypeVar

from ..config.settings import reader_processes
from ..ingest.chunk import chunk_document
from ..ingest.markdown import parse_markdown
from ..ingest.text import prepared_text
from ..ingest.types import Chunk, ParsedDocument

log = logging.getLogger("autodoc.index")

# Below this many files a worker's start (~0.5 s to import the parser) costs more than it saves.
MIN_FILES = 100
WINDOW_PER_WORKER = 16

Count = Callable[[str], int] | None


@dataclass
class Parsed:
    """A file whose bytes changed: the next generation of its document."""

    path: str
    data: bytes
    doc: ParsedDocument
    chunks: list[Chunk]
    mtime_ns: int
    ctime_ns: int | None = None  # the rest of the file's change signal (None: not known)
    inode: int | None = None
    size: int | None = None  # the file's own bytes (None: len(data)); data is the indexed text


def prepare(
    relpath: str, data: bytes, section_tokens: int, abstract_chunk: bool, count: Count, redact: bool = True
) -> Parsed:
    """Parse and chunk one file's bytes: the text indexed is ingest/text.py's (decoded, bad bytes
    replaced, secrets masked), and Parsed.data its UTF-8, which chunk offsets point into."""
    text, problems = prepared_text(relpath, data, redact=redact)
    data = text.encode("utf-8")
    doc = parse_markdown(text)
    doc.problems = problems + doc.problems
    if not doc.title:  # no frontmatter title and no H1: the file name stands in, breadcrumbs too
        doc.title = relpath.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    chunks = chunk_document(text, doc, section_tokens=section_tokens, abstract_chunk=abstract_chunk, count_tokens=count)
    return Parsed(relpath, data, doc, chunks, 0)


def prepare_or_reason(
    relpath: str, data: bytes, section_tokens: int, abstract_chunk: bool, count: Count, redact: bool = True
) -> Parsed | str:
    """One file never fails the rest: whatever goes wrong parsing it skips it, with the reason."""
    try:
        return prepare(relpath, data, section_tokens, abstract_chunk, count, redact)
    except Exception as e:
        log.exception("%s could not be parsed", relpath)
        return f"could not be parsed ({type(e).__name__}: {e}); the log has the details"


_count: Count = None  # a worker's token counter, set once by _start


_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _die_with(parent: int) -> None:
    """End this worker when its parent dies, however it dies (a SIGKILLed `autodoc index` or
    daemon used to leave its workers, and so multiprocessing's resource_tracker, which waits for
    every holder of its pipe, running for good). Linux: a parent-death signal, then a check that
    the parent did not die before it was set. Elsewhere the worker ends when its queue breaks."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            log.warning("a parsing worker could not ask to die with its parent (errno %d)", ctypes.get_errno())
    except (OSError, AttributeError) as e:
        log.warning("a parsing worker could not ask to die with its parent (%s)", e)
    if os.getppid() != parent:  # the parent is already gone: its death signal was never sent to us
        os._exit(1)


def _start(count: Count, parent: int) -> None:
    global _count
    _die_with(parent)
    _count = count
    # a worker of a stdio daemon inherits its stdout, the RPC channel: nothing may reach it
    sys.stdout.flush()
    os.dup2(2, 1)
    sys.stdout = sys.stderr


def _work(relpath: str, data: bytes, section_tokens: int, abstract_chunk: bool, redact: bool) -> Parsed | str:
    return prepare_or_reason(relpath, data, section_tokens, abstract_chunk, _count, redact)


def workers_for(files: int, count: Count) -> int:
    """How many worker processes a job of `files` files gets (0: it prepares them inline)."""
    n = reader_processes()
    if n < 1 or files < MIN_FILES:
        return 0
    try:  # a counter bound to a loaded model cannot cross; the bundled model's can (embed/onnx.py)
        pickle.dumps(count)
    except Exception:
        return 0
    return n


K = TypeVar("K")  # what the caller keys a file by
A = TypeVar("A")  # an answer the caller decided itself (add_ready)


@dataclass
class _File(Generic[K]):
    """A file to prepare: its future in a worker, or None to prepare it here."""

    key: K
    relpath: str
    data: bytes
    future: Future | None


@dataclass
class _Ready(Generic[K, A]):
    key: K
    answer: A


class Preparer(Generic[K, A]):
    """Files in, Parsed (or a skip reason) out, in order: `add` one, and take what `ready` yields."""

    def __init__(self, section_tokens: int, abstract_chunk: bool, count: Count, workers: int, redact: bool = True):
        self.section_tokens, self.abstract_chunk, self.count = section_tokens, abstract_chunk, count
        self.redact = redact
        self._pool: ProcessPoolExecutor | None = None
        if workers:
            self._pool = ProcessPoolExecutor(
                workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_start,
                initargs=(count, os.getpid()),
            )
        self._window = WINDOW_PER_WORKER * max(workers, 1)
        self._queue: deque[_File[K] | _Ready[K, A]] = deque()

    def add(self, key: K, relpath: str, data: bytes) -> None:
        future = None
        if self._pool is not None:
            try:
                future = self._pool.submit(_work, relpath, data, self.section_tokens, self.abstract_chunk, self.redact)
            except Exception as e:  # a broken pool (a worker died): this and later files run here
                log.warning("a parsing worker failed (%s): the index job prepares the rest itself", e)
                self._give_up()
        self._queue.append(_File(key, relpath, data, future))

    def add_ready(self, key: K, answer: A) -> None:
        """Something decided without parsing (a skip, an unchanged file), kept in its place in the order."""
        self._queue.append(_Ready(key, answer))

    def ready(self, drain: bool = False) -> Iterator[tuple[K, A | Parsed | str]]:
        """The results at the head of the queue: those beyond the window (all of them when draining)."""
        while self._queue and (drain or len(self._queue) > self._window):
            item = self._queue.popleft()
            if isinstance(item, _Ready):
                yield item.key, item.answer
            else:
                yield item.key, self._result(item.relpath, item.data, item.future)

    def close(self) -> None:
        self._queue.clear()
        self._give_up()

    def _result(self, relpath: str, data: bytes, future: Future | None) -> Parsed | str:
        if future is not None:
            try:
                return future.result()
            except Exception as e:  # the worker died (BrokenProcessPool) or its answer could not cross
                if self._pool is not None:  # once: the files queued behind it were cancelled with the pool
                    log.warning(
                        "a parsing worker failed on %s (%s): the index job prepares the rest itself", relpath, e
                    )
                    self._give_up()
        return prepare_or_reason(relpath, data, self.section_tokens, self.abstract_chunk, self.count, self.redact)

    def _give_up(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
