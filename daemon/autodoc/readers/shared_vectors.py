"""The vectors the daemon shares with its reader processes (readers/pool.py).

A workspace's vector index at 1M chunks is ~800 MB (float16 vectors, sign
codes, ids). A reader holding its own copy, one reader per core, would
double or triple the daemon's memory, so without sharing the readers took
no semantic searches above 300,000 chunks and 8 clients got 1.04x one
client's hybrid requests/s at 1M (docs/benchmarks/concurrency.md). Here the
daemon writes its index's large, immutable part (the base: see
vector_cache.WorkspaceVectors) once into a file in /dev/shm (RAM), searches
that mapped copy itself, and the readers map the same pages read-only: one
copy resident, however many processes search it. Each reader keeps its own
small delta on top, from its own snapshot, as it does for a base it loaded.

Input: a base VectorIndex and the document of each of its rows. Output: a
file, its description (``Shared``: small, it travels in a reader's call
frame), and VectorIndex objects over maps of the file.

A file's life: written when the daemon's base changes (a load or a merge)
while a reader pool runs; unlinked when a newer base of the same workspace
and model replaces it, when that workspace or model goes, and when the
daemon stops (a process that still maps it keeps the pages until it lets
go). A daemon killed before it could unlink leaves its files: the next one
removes them at start (their pid no longer runs).

Space is reserved with posix_fallocate before a byte is written: a full
tmpfs fails the write with ENOSPC here, where writing into a sparse map
would kill the daemon with SIGBUS. Sharing then pauses for RETRY_S.

Runs on: the thread that loads or merges a base (under the vector cache's
lock), in the daemon; the search's thread in a reader.
"""

from __future__ import annotations

import itertools
import logging
import mmap
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..search.semantic.vectors import VectorIndex

log = logging.getLogger("autodoc.search")

# A reader loads at most this many rows into a private copy (≈ 300 MB of float16
# vectors at 384 dimensions); above it, it searches only a base the daemon shared.
PRIVATE_ROWS = 300_000
SHM_DIR = Path("/dev/shm")
# After a base could not be written (no room in /dev/shm), no sharing for this long: the room may
# come back (another program's files go), and each try writes up to a whole base in vain.
RETRY_S = 300.0
PREFIX = "autodoc-vectors-"
_ALIGN = 64


@dataclass(frozen=True)
class Shared:
    """Where a shared base is and how its arrays lie in the file."""

    path: str
    n: int
    dim: int
    vec_dtype: str  # "float16" | "float32"
    word_rows: int
    options: dict[str, Any] = field(default_factory=dict)

    def layout(self) -> tuple[list[tuple[str, int, np.dtype, tuple[int, ...]]], int]:
        """(name, byte offset, dtype, shape) of ids, docs, vecs, words; and the file's size."""
        parts = [
            ("ids", np.dtype(np.int64), (self.n,)),
            ("docs", np.dtype(np.int64), (self.n,)),
            ("vecs", np.dtype(self.vec_dtype), (self.n, self.dim)),
            ("words", np.dtype(np.uint64), (self.word_rows, self.n)),
        ]
        out, offset = [], 0
        for name, dtype, shape in parts:
            out.append((name, offset, dtype, shape))
            size = int(np.prod(shape)) * dtype.itemsize
            offset += (size + _ALIGN - 1) // _ALIGN * _ALIGN
        return out, max(offset, _ALIGN)

    def borrow(self) -> tuple[VectorIndex, dict[int, np.ndarray]]:
        """A reader's read-only map of this base: (the index, document → its chunk ids).
        Raises OSError when the file is gone (the daemon replaced or dropped it)."""
        base, docs = attach(self)
        return base, document_chunks(base.ids, docs)


def available() -> bool:
    return sys.platform.startswith("linux") and SHM_DIR.is_dir() and os.access(SHM_DIR, os.W_OK | os.X_OK)


def _views(mm: mmap.mmap, desc: Shared) -> dict[str, np.ndarray]:
    parts, _ = desc.layout()
    out = {}
    for name, offset, dtype, shape in parts:
        a = np.frombuffer(mm, dtype=dtype, count=int(np.prod(shape)), offset=offset).reshape(shape)
        out[name] = a
    return out


def _index(arrays: dict[str, np.ndarray], desc: Shared) -> VectorIndex:
    # the arrays already have the dtype and layout VectorIndex keeps: it takes them without a copy
    return VectorIndex(arrays["ids"], arrays["vecs"], words=arrays["words"], **desc.options)


def write(path: Path, base: VectorIndex, docs: np.ndarray) -> tuple[Shared, VectorIndex, np.ndarray]:
    """Write a base into a new file; (its description, an index over the mapped
    copy, the mapped row → document array). Raises OSError (ENOSPC: no room)."""
    return write_merged(path, base, None, VectorIndex.empty(base.dim), docs)


# Rows copied at a time when a merge selects the base's kept rows: the selection's
# temporary stays a few MB, not a second copy of the base.
COPY_ROWS = 16_384


def write_merged(
    path: Path, base: VectorIndex, keep: np.ndarray | None, added: VectorIndex, docs: np.ndarray | dict[int, np.ndarray]
) -> tuple[Shared, VectorIndex, np.ndarray]:
    """Write the rows of ``base`` where ``keep`` (None: all), then ``added``'s, into a new
    file: what ``base.without(…).with_added(…)`` holds, row for row, without building it in
    private memory first (at 1M chunks that copy was 0.8 GB beside the old base and the new
    file). ``docs``: the row → document array, or document → chunk ids to derive it from.
    Returns as write() does; raises OSError (ENOSPC: no room)."""
    kept = len(base) if keep is None else int(np.count_nonzero(keep))
    n = kept + len(added)
    if keep is None and not len(added):
        dtype = base.vecs.dtype
    else:  # as with_added decides
        dtype = np.dtype(np.float16 if n > base.half_above else np.float32)
    words = base._hamming_words()
    desc = Shared(str(path), n, base.dim, str(dtype), int(words.shape[0]), base.options())
    _, size = desc.layout()
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        try:
            os.posix_fallocate(fd, 0, size)
            mm = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        arrays = _views(mm, desc)
        if keep is None:
            arrays["ids"][:kept] = base.ids
            arrays["vecs"][:kept] = base.vecs
            arrays["words"][:, :kept] = words
        else:
            arrays["ids"][:kept] = base.ids[keep]
            arrays["words"][:, :kept] = words[:, keep]
            at = 0
            for start in range(0, len(base), COPY_ROWS):
                rows = base.vecs[start : start + COPY_ROWS][keep[start : start + COPY_ROWS]]
                arrays["vecs"][at : at + len(rows)] = rows
                at += len(rows)
        arrays["ids"][kept:] = added.ids
        arrays["vecs"][kept:] = added.vecs
        arrays["words"][:, kept:] = added._hamming_words()
        arrays["docs"][:] = row_documents(arrays["ids"], docs) if isinstance(docs, dict) else docs
        for a in arrays.values():
            a.flags.writeable = False
    except BaseException:
        _unlink(str(path))
        raise
    return desc, _index(arrays, desc), arrays["docs"]


def attach(desc: Shared) -> tuple[VectorIndex, np.ndarray]:
    """A reader's read-only map of a shared base: (the index, row → document).
    Raises OSError when the file is gone (the daemon replaced or dropped it)."""
    _, size = desc.layout()
    fd = os.open(desc.path, os.O_RDONLY)
    try:
        if os.fstat(fd).st_size < size:
            raise OSError(f"{desc.path} is shorter than its description")
        mm = mmap.mmap(fd, size, access=mmap.ACCESS_READ)
    finally:
        os.close(fd)
    arrays = _views(mm, desc)
    return _index(arrays, desc), arrays["docs"]


def row_documents(ids: np.ndarray, doc_chunks: dict[int, np.ndarray]) -> np.ndarray:
    """The document of each row (aligned with ids) from document → chunk ids."""
    if not doc_chunks or not len(ids):
        return np.full(len(ids), -1, dtype=np.int64)
    chunks = list(doc_chunks.values())
    cid = np.concatenate(chunks).astype(np.int64, copy=False)
    did = np.repeat(np.fromiter(doc_chunks.keys(), dtype=np.int64, count=len(chunks)), [len(c) for c in chunks])
    order = np.argsort(cid, kind="stable")
    cid, did = cid[order], did[order]
    pos = np.minimum(np.searchsorted(cid, ids), len(cid) - 1)
    return np.where(cid[pos] == ids, did[pos], -1)


def document_chunks(ids: np.ndarray, docs: np.ndarray) -> dict[int, np.ndarray]:
    """document → its chunk ids, ascending (as a load from the store lists them)."""
    if not len(ids):
        return {}
    order = np.lexsort((ids, docs))
    d, c = docs[order], np.array(ids[order])
    starts = np.concatenate([[0], np.flatnonzero(np.diff(d)) + 1])
    ends = np.concatenate([starts[1:], [len(d)]])
    return {int(d[s]): c[s:e] for s, e in zip(starts.tolist(), ends.tolist()) if d[s] >= 0}


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as e:
        log.warning("could not remove %s: %s", path, e)


def remove_stale(directory: Path = SHM_DIR) -> int:
    """Remove the files of daemons that no longer run; how many went."""
    gone = 0
    try:
        names = [p.name for p in directory.iterdir() if p.name.startswith(PREFIX)]
    except OSError:
        return 0
    for name in names:
        try:
            pid = int(name[len(PREFIX) :].split("-", 1)[0])
        except ValueError:
            continue
        if pid == os.getpid():
            continue
        try:
            os.kill(pid, 0)
            continue  # still running (or not ours to signal): its files are its own
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        _unlink(str(directory / name))
        gone += 1
    return gone


class Sharing:
    """The daemon's side: writes each new base, announces it to the readers,
    and unlinks what nothing new will map."""

    def __init__(self, announce: Callable[..., None], directory: Path = SHM_DIR):
        self.announce = announce  # ("base", workspace id, fingerprint, Shared, stale documents): to every reader
        self.directory = directory
        self._failed_at: float | None = None  # a write failed (no room): see failed
        self._files: dict[tuple[int, str], str] = {}
        self._lock = threading.Lock()
        self._seq = itertools.count(1)
        removed = remove_stale(directory)
        if removed:
            log.info("removed %d shared vector file(s) a stopped daemon left", removed)

    @property
    def failed(self) -> bool:
        """A write failed less than RETRY_S ago: no sharing meanwhile, and readers keep off big bases."""
        return self._failed_at is not None and time.monotonic() - self._failed_at < RETRY_S

    def publish(
        self,
        ws_id: int,
        fp: str,
        base: VectorIndex,
        doc_chunks: dict[int, np.ndarray],
        dirty: Sequence[int] = (),
        keep: np.ndarray | None = None,
        added: VectorIndex | None = None,
    ) -> VectorIndex | None:
        """Share a base, whose documents ``dirty`` are already stale (a reader refreshes them);
        the index over the shared copy to search from now on (None: not shared, keep the
        private one). With ``keep`` and ``added``, the base merged with them (write_merged)."""
        added = VectorIndex.empty(base.dim) if added is None else added
        if self.failed or not (len(base) if keep is None else int(np.count_nonzero(keep))) + len(added):
            return None
        path = self.directory / f"{PREFIX}{os.getpid()}-{next(self._seq)}"
        try:
            desc, index, _ = write_merged(path, base, keep, added, doc_chunks)
        except OSError as e:
            self._failed_at = time.monotonic()
            log.warning(
                "could not share %d vectors with the reader processes (%s): searches by meaning "
                "over large workspaces stay in the daemon; trying again in %.0f s",
                len(base),
                e,
                RETRY_S,
            )
            return None
        with self._lock:
            old = self._files.get((ws_id, fp))
            self._files[(ws_id, fp)] = desc.path
        self.announce("base", ws_id, fp, desc, list(dirty))
        if old:
            _unlink(old)  # readers that mapped it keep their map until they take the new one
        return index

    def drop(self, ws_id: int, fp: str | None = None) -> None:
        """A workspace (fp None) or one of its models is gone."""
        with self._lock:
            keys = [k for k in self._files if k[0] == ws_id and (fp is None or k[1] == fp)]
            paths = [self._files.pop(k) for k in keys]
        for p in paths:
            _unlink(p)

    def close(self) -> None:
        with self._lock:
            paths, self._files = list(self._files.values()), {}
        for p in paths:
            _unlink(p)
