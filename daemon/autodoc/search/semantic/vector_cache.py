"""The vectors the semantic leg scans, held in memory per workspace.

Loaded from the store on a workspace's first semantic search; afterwards only
the documents a write touched are read again (`mark_dirty`, called by the
index job and the embed queue with the documents they changed). A document
enters only once every one of its chunks has a vector, so it answers whole.

Keyed by (workspace, model fingerprint): while the instant tier answers and
the model's own vectors fill, `search.similar` and the search read different
fingerprints' vectors, and one key per workspace reloaded the whole index
each time they alternated. A workspace keeps at most MODELS_PER_WORKSPACE
fingerprints, the least recently used going first (the tier's vectors once
the model has filled).

Every vector is held rounded to float16 precision, whatever the dtype it is
kept in: an index above HALF_ABOVE rows keeps float16 (search/semantic/vectors.py),
its delta and smaller indexes float32, and a vector's cosine must not depend
on which of them holds it today (a merge, a restart or a workspace growing
past the threshold would otherwise move scores in their 6th place, and with
them the order of ties). The rounding moves a cosine by about 1e-4; SciFact
nDCG@10 is the same to four places (docs/benchmarks/daemon_overhead.md).

Shared bases (readers/shared_vectors.py): in the daemon, while a reader pool
runs (``sharing`` set), every new base (a load, a merge) is written to shared
memory and searched from there; each reader is told of it in its call
frames, in order with the invalidations (``offer``), and maps it on its next
search of that workspace and model, refreshing what changed after it from its
own snapshot. A reader does not merge a borrowed base (that would be a private
copy); once its delta outgrows twice the merge threshold, or when it has no
base to borrow and more than ``private_rows`` chunks to load, the call raises
NotShared and the daemon runs it, which merges or loads and shares anew.

On a PostgreSQL store with pgvector, `searchable` answers the store's own search instead
(store_side.py): nothing is loaded or held here, and a reader process holds no vectors.

Runs on: any thread. One lock guards the table; loads and refreshes read on
the connection the caller passes (the search's own snapshot).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ...embed.memory import release_free_heap
from ...store import vectors as stored
from ...store.interface import Snapshot
from ...store.workspaces import chunk_count
from . import vectors as vector_math
from .store_side import StoreVectors
from .vectors import VectorIndex

MODELS_PER_WORKSPACE = 2


class Searchable(Protocol):
    """What a search reads of a workspace's vectors: WorkspaceVectors (in memory) or StoreVectors."""

    @property
    def doc_chunks(self) -> Any: ...  # .get(document id) → its chunk ids, when all have vectors

    def __len__(self) -> int: ...

    def search(self, q: np.ndarray, top: int, allowed_ids: np.ndarray | None) -> list[tuple[int, float]]: ...


class NotShared(Exception):
    """A reader cannot search these vectors without a private copy it may not
    make (too many rows, and no base shared): the daemon runs the call, and
    shares anew what ``key`` (workspace id, fingerprint) names."""

    def __init__(self, message: str, key: tuple[int, str]):
        super().__init__(message)
        self.key = key


class Shared(Protocol):
    """A base the daemon shared (readers/shared_vectors.py ``Shared``), as a reader maps it."""

    @property
    def path(self) -> str: ...

    def borrow(self) -> tuple[VectorIndex, dict[int, np.ndarray]]: ...


class Sharing(Protocol):
    """The daemon's side of sharing bases (readers/shared_vectors.py ``Sharing``), set while it has readers."""

    @property
    def failed(self) -> bool: ...

    def publish(
        self,
        ws_id: int,
        fp: str,
        base: VectorIndex,
        doc_chunks: dict[int, np.ndarray],
        dirty: Sequence[int] = ...,
        keep: np.ndarray | None = None,
        added: VectorIndex | None = None,
    ) -> VectorIndex | None: ...

    def drop(self, ws_id: int, fp: str | None = None) -> None: ...


def _half_precision(vecs: np.ndarray) -> np.ndarray:
    """float32 values rounded to what float16 holds (see the module's docstring)."""
    return vecs.astype(np.float16).astype(np.float32)


# A delta (or the dead rows) is merged into the base past a twentieth (a tenth) of it, and
# never before this many rows: small workspaces would otherwise merge on every save.
MERGE_MIN_ROWS = 2000


@dataclass
class WorkspaceVectors:
    """One workspace's searchable vectors: a large base plus a small delta.

    Edits land in the delta and retire base rows by marking them dead, so a
    saved file costs a copy of the delta, not of every vector (1.5 GB at 1M
    chunks); the two are merged when the delta grows past a twentieth of the
    base. Searches read both and merge by (cosine desc, id).
    """

    fp: str
    base: VectorIndex
    delta: VectorIndex
    doc_chunks: dict[int, np.ndarray] = field(default_factory=dict)  # document → its chunk ids in the index
    dirty: set[int] = field(default_factory=set)  # documents to refresh before the next search
    all_dirty: bool = False
    dead: set[int] = field(default_factory=set)  # base ids retired since the last merge
    alive: np.ndarray | None = None  # bool mask over base rows; None while nothing is dead
    shared: VectorIndex | None = None  # the daemon: the base it last shared (merges replace it)
    borrowed: bool = False  # a reader: the base is the daemon's shared one, never merged here

    def __len__(self) -> int:
        return len(self.base) - len(self.dead) + len(self.delta)

    def retire(self, ids: np.ndarray) -> None:
        in_delta = self.delta.mask_for(ids)
        if in_delta.any():
            self.delta = self.delta.without(self.delta.ids[in_delta])
        for i in ids.tolist():
            pos = self.base.position(i)
            if pos is not None and i not in self.dead:
                if self.alive is None:
                    self.alive = np.ones(len(self.base), dtype=bool)
                self.alive[pos] = False
                self.dead.add(i)

    def add(self, ids: list[int], vecs: np.ndarray, codes: np.ndarray) -> None:
        # merged once outgrown, by VectorCache.get (into the next shared file when the daemon shares)
        self.delta = self.delta.with_added(ids, vecs, codes)

    def outgrown(self, times: int) -> bool:
        """Whether the delta or the dead rows are past ``times`` the merge threshold."""
        return len(self.delta) > times * max(MERGE_MIN_ROWS, len(self.base) // 20) or len(self.dead) > times * max(
            MERGE_MIN_ROWS, len(self.base) // 10
        )

    def merge(self) -> None:
        base = self.base.without(np.fromiter(self.dead, dtype=np.int64)) if self.dead else self.base
        self.merged_into(
            base.with_added(self.delta.ids, self.delta.vecs, self.delta.codes) if len(self.delta) else base
        )

    def merge_parts(self) -> tuple[np.ndarray | None, VectorIndex]:
        """What merge() keeps of the base (a row mask; None: every row) and what it adds."""
        keep = None if self.alive is None else self.alive.copy()
        if len(self.delta):
            replaced = self.base.mask_for(self.delta.ids)  # with_added replaces an id present
            if replaced.any():
                keep = ~replaced if keep is None else keep & ~replaced
        return keep, self.delta

    def merged_into(self, base: VectorIndex) -> None:
        """``base`` holds the old base and the delta merged (merge(), or a shared file's copy)."""
        self.base = base
        self.delta = VectorIndex.empty(base.dim)
        self.dead.clear()
        self.alive = None
        self.borrowed = False  # the merged base is this process's own

    def search(self, q: np.ndarray, top: int, allowed_ids: np.ndarray | None) -> list[tuple[int, float]]:
        mask = self.alive
        if allowed_ids is not None:
            m = self.base.mask_for(allowed_ids)
            mask = m if mask is None else (m & mask)
        hits = self.base.search(q, top=top, allowed=mask)
        if len(self.delta):
            dm = None if allowed_ids is None else self.delta.mask_for(allowed_ids)
            hits = sorted(hits + self.delta.search(q, top=top, allowed=dm), key=lambda h: (-h[1], h[0]))[:top]
        return hits


def _load(db: Snapshot, ws_id: int, fp: str, dim: int) -> WorkspaceVectors:
    # Rows stream into arrays sized once: holding every row's blobs first
    # doubled the load's peak memory (280 MB for 156 MB of arrays at 100k).
    bound = chunk_count(db, ws_id)
    nbytes = (dim + 7) // 8
    ids = np.empty(bound, dtype=np.int64)
    # straight into the dtype the index keeps (float16 above HALF_ABOVE rows): no float32 copy at its peak
    vecs = np.empty((bound, dim), dtype=np.float16 if bound > vector_math.HALF_ABOVE else np.float32)
    codes = np.empty((bound, nbytes), dtype=np.uint8)
    per: dict[int, list[int]] = {}
    n = 0
    for cid, did, f32, bits in stored.complete_vectors(db, ws_id, fp, None):
        if n == bound:  # a chunk written since the count: grow (rare)
            bound = max(16, bound * 2)
            ids, vecs, codes = np.resize(ids, bound), np.resize(vecs, (bound, dim)), np.resize(codes, (bound, nbytes))
        ids[n] = cid
        vecs[n] = np.frombuffer(f32, dtype="<f4").astype(np.float16)
        codes[n] = np.frombuffer(bits, dtype=np.uint8)
        per.setdefault(did, []).append(cid)
        n += 1
    base = VectorIndex(ids[:n], vecs[:n], codes[:n]) if n else VectorIndex.empty(dim)
    wv = WorkspaceVectors(fp, base, VectorIndex.empty(dim))
    wv.doc_chunks = {d: np.array(c, dtype=np.int64) for d, c in per.items()}
    return wv


def _borrow(offer: _Offer, fp: str) -> WorkspaceVectors | None:
    """A reader's view of a base the daemon shared, with what changed since marked dirty;
    None when the file is gone (a newer one, or its workspace, replaced it)."""
    try:
        base, doc_chunks = offer.shared.borrow()
    except OSError:
        return None
    wv = WorkspaceVectors(fp, base, VectorIndex.empty(base.dim), borrowed=True)
    wv.doc_chunks = doc_chunks
    wv.dirty = set(offer.dirty)
    return wv


def _refresh(db: Snapshot, wv: WorkspaceVectors, ws_id: int, dim: int) -> None:
    docs = sorted(wv.dirty)
    wv.dirty.clear()
    drop = [wv.doc_chunks.pop(d) for d in docs if d in wv.doc_chunks]
    if drop:
        wv.retire(np.concatenate(drop))
    rows: list[tuple[int, int, bytes, bytes]] = []
    for i in range(0, len(docs), 500):
        rows += stored.complete_vectors(db, ws_id, wv.fp, docs[i : i + 500])
    if rows:
        vecs = _half_precision(np.frombuffer(b"".join(r[2] for r in rows), dtype="<f4").reshape(-1, dim))
        codes = np.frombuffer(b"".join(r[3] for r in rows), dtype=np.uint8).reshape(len(rows), -1)
        wv.add([r[0] for r in rows], vecs, codes)
        per: dict[int, list[int]] = {}
        for cid, did, _, _ in rows:
            per.setdefault(did, []).append(cid)
        for d, c in per.items():
            wv.doc_chunks[d] = np.array(c, dtype=np.int64)


@dataclass
class _Offer:
    """A base the daemon shared that this reader has not mapped yet, and what
    changed after it (documents, or everything)."""

    shared: Shared
    dirty: set[int] = field(default_factory=set)
    all_dirty: bool = False


MARKS_KEPT = 256  # recent marks, for a search to re-mark those its snapshot may predate (get's since)
RESHARE_S = 10.0  # at most this often per workspace and model, a reader's retry makes the daemon share anew


class VectorCache:
    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._by_key: dict[tuple[int, str], WorkspaceVectors] = {}  # in use order, most recent last
        self.sharing: Sharing | None = None  # the daemon, while it has readers: shares each new base
        self.private_rows: int | None = None  # a reader: loads no more rows than this itself
        self._offers: dict[tuple[int, str], _Offer] = {}  # a reader: bases shared and not yet mapped
        self._seq = 0  # marks so far
        self._marks: deque[tuple[int, int, frozenset[int] | None]] = deque(maxlen=MARKS_KEPT)  # (seq, ws, docs)
        self._reshared: dict[tuple[int, str], float] = {}  # when a retry last asked to share anew

    def marker(self) -> int:
        """Taken before a search opens its snapshot: marks after it may postdate the snapshot."""
        return self._seq

    def offer(self, ws_id: int, fp: str, shared: Shared, dirty: Sequence[int] | None = ()) -> None:
        """A reader: the daemon shared this base, with these documents (None: all) already
        changed since; what it hears after this applies on top. A borrowed copy of an older
        base goes now: an idle reader must not keep its pages alive after the daemon moved on."""
        with self._lock:
            self._offers[(ws_id, fp)] = _Offer(shared, set(dirty or ()), dirty is None)
            if (old := self._by_key.get((ws_id, fp))) is not None and old.borrowed:
                del self._by_key[(ws_id, fp)]

    def reshare(self, ws_id: int, fp: str) -> None:
        """The daemon: a reader could not use what was shared of this workspace and model (its
        file gone, its changes outgrew it): the next get shares anew (at most every RESHARE_S)."""
        now = time.monotonic()
        with self._lock:
            wv = self._by_key.get((ws_id, fp))
            if wv is None or now - self._reshared.get((ws_id, fp), -RESHARE_S) < RESHARE_S:
                return
            self._reshared[(ws_id, fp)] = now
            wv.shared = None

    def _of(self, ws_id: int) -> list[WorkspaceVectors]:
        return [wv for (w, _), wv in self._by_key.items() if w == ws_id]

    def mark_dirty(self, ws_id: int, doc_ids: list[int] | None = None) -> None:
        """These documents' chunks or vectors changed (None: any may have)."""
        with self._lock:
            self._seq += 1
            self._marks.append((self._seq, ws_id, None if doc_ids is None else frozenset(doc_ids)))
            marks = self._of(ws_id) + [o for (w, _), o in self._offers.items() if w == ws_id]
            for wv in marks:
                if doc_ids is None:
                    wv.all_dirty = True
                else:
                    wv.dirty.update(doc_ids)

    def _remark(self, wv: WorkspaceVectors, ws_id: int, since: int) -> None:
        """Mark again what was marked after ``since``: the snapshot just read may predate those
        changes (a write that committed, and marked, between the search opening its snapshot and
        this get), and the load or refresh has just cleared them."""
        if self._seq <= since:
            return
        if not self._marks or self._marks[0][0] > since + 1:
            wv.all_dirty = True  # more marks than kept since then: anything may be stale
            return
        for seq, w, docs in reversed(self._marks):
            if seq <= since:
                break
            if w != ws_id:
                continue
            if docs is None:
                wv.all_dirty = True
                return
            wv.dirty.update(docs)

    def forget(self, ws_id: int) -> None:
        with self._lock:
            for key in [k for k in self._by_key if k[0] == ws_id]:
                del self._by_key[key]
            for key in [k for k in self._offers if k[0] == ws_id]:
                del self._offers[key]
        if self.sharing is not None:
            self.sharing.drop(ws_id)

    def forget_model(self, ws_id: int, fp: str) -> None:
        """One model's vectors of a workspace (the instant tier's, once the model has filled)."""
        with self._lock:
            self._offers.pop((ws_id, fp), None)
            if self._by_key.pop((ws_id, fp), None) is not None:
                release_free_heap()
        if self.sharing is not None:
            self.sharing.drop(ws_id, fp)

    def searchable(self, db: Snapshot, ws_id: int, fp: str, dim: int, since: int | None = None) -> Searchable:
        """What a search of the workspace's vectors for fp reads: the store's own search where it has
        one (PostgreSQL with pgvector: a copy held here would only cost memory, and goes), else
        get()'s vectors in memory."""
        schema = stored.store_search(db, ws_id, fp)
        if schema is None:
            return self.get(db, ws_id, fp, dim, since)
        with self._lock:
            if self._by_key.pop((ws_id, fp), None) is not None:
                release_free_heap()
        return StoreVectors(db, ws_id, fp, dim, schema)

    def get(self, db: Snapshot, ws_id: int, fp: str, dim: int, since: int | None = None) -> WorkspaceVectors:
        """The workspace's vectors for model fp, brought up to date on `db`. ``since``: the
        marker() taken before `db`'s snapshot was opened (None: no mark can postdate it)."""
        key = (ws_id, fp)
        with self._lock:
            wv = self._by_key.pop(key, None)
            offer = self._offers.pop(key, None)
            if offer is not None and not offer.all_dirty:
                borrowed = _borrow(offer, fp)
                if borrowed is not None:
                    wv = borrowed
            if wv is None or wv.all_dirty:
                wv = None  # the old arrays can go before the new ones are read
                others = [k for k in self._by_key if k[0] == ws_id]
                for old in others[: max(0, len(others) - MODELS_PER_WORKSPACE + 1)]:
                    del self._by_key[old]
                    if self.sharing is not None:
                        self.sharing.drop(*old)
                if self.private_rows is not None and chunk_count(db, ws_id) > self.private_rows:
                    raise NotShared(f"workspace {ws_id}: no shared base, and too many vectors to copy", key)
                wv = _load(db, ws_id, fp, dim)
                release_free_heap()  # the load's row buffers, freed but kept by the C heap
            elif wv.dirty:
                _refresh(db, wv, ws_id, dim)
            if since is not None:
                self._remark(wv, ws_id, since)
            self._by_key[key] = wv
            if wv.borrowed and wv.outgrown(2):
                raise NotShared(f"workspace {ws_id}: the changes since the shared base outgrew it", key)
            if (
                self.sharing is not None
                and not self.sharing.failed
                and not wv.all_dirty
                and (wv.base is not wv.shared or wv.outgrown(1))
            ):
                self._share(ws_id, fp, wv)
            if not wv.borrowed and wv.outgrown(1):
                # additions, or deletions alone, past the threshold; not shared (no sharing, or no
                # room just now): merged in private memory
                wv.merge()
            return wv

    def _share(self, ws_id: int, fp: str, wv: WorkspaceVectors) -> None:
        """Share ``wv``'s base (a load, or one loaded before the readers came) or merge its delta
        into a new shared one, written straight into the shared file: the readers borrow it whole."""
        keep, added = wv.merge_parts() if (len(wv.delta) or wv.dead) else (None, None)
        # documents re-marked in get() are stale in this base too: the readers refresh them
        sharing = self.sharing
        assert sharing is not None  # get() shares only while a pool runs
        shared = sharing.publish(ws_id, fp, wv.base, wv.doc_chunks, sorted(wv.dirty), keep, added)
        if shared is not None:
            wv.merged_into(shared)  # the private arrays go: one copy, in shared memory
            wv.shared = shared
            release_free_heap()

    def merged(self, db: Snapshot, ws_id: int, fp: str, dim: int) -> VectorIndex:
        """The workspace's vectors as one VectorIndex (merging any delta first)."""
        with self._lock:
            wv = self.get(db, ws_id, fp, dim)
            if len(wv.delta) or wv.dead:
                wv.merge()
            return wv.base
