"""A workspace's vectors searched by the store itself: PostgreSQL with pgvector (store/pg/vectors.py).

The store answers candidates, this module decides: the nearest max(CANDIDATES_MIN,
CANDIDATES_FACTOR × top) texts by the HNSW index, with the index's own distance; the float32 bytes
of those that can reach the top (within MARGIN of the top-th distance: a few past `top`, not all
of them) are fetched and rescored exactly here as the in-memory index scores every row (rounded to float16 precision, a float32 dot
product, ties by chunk id: vector_cache.py, vectors.py). A cosine reported is therefore the very
one the SQLite store's search reports for that chunk; only a neighbour the graph walk misses can
differ, which the SciFact bench measures (docs/benchmarks/postgres.md).

A filter narrows the candidates in the store (HNSW filters after its walk): a narrow filter
(at most FILTER_EXACT_BELOW chunks) is scanned exactly from those chunks' rows; a wide one asks
the index for more texts until `top` pass it, up to pgvector's ef_search ceiling (1,000, also the
most a deep `top` asks for); beyond it the workspace's rows are scanned exactly, streamed (as is
a `top` above 1,000).
Either way the answer is exact on what it reads, and nothing is held between searches: a reader
daemon's memory does not grow with the store (issue 34).

Runs on: the leg's thread, on the search's snapshot (psycopg serialises a connection's
statements; the snapshot is one REPEATABLE READ transaction, so both legs read the same rows).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable

import numpy as np

from ...store import vectors as stored
from ...store.interface import Snapshot
from .vectors import VectorIndex

CANDIDATES_MIN = 100
CANDIDATES_FACTOR = 4
FILTER_EXACT_BELOW = 5_000  # a filter of at most this many chunks is scanned exactly
SCAN_ROWS = 20_000  # rows rescored at once when scanning a workspace
# How far past the index's top-th distance a candidate is still fetched and rescored: the exact
# cosine is of the float16-rounded vector (≤ 2^-11 relative per component, so within 4.9e-4 of
# the float32 one) and pgvector's is float32 arithmetic (~1e-6); twice their sum.
MARGIN = 2e-3


def _half_precision(vecs: np.ndarray) -> np.ndarray:
    """As the in-memory index holds every vector (vector_cache.py's docstring): float16's values."""
    return vecs.astype(np.float16).astype(np.float32)


def rescore(rows: list[tuple[int, bytes, bytes]], q: np.ndarray, top: int, dim: int) -> list[tuple[int, float]]:
    """The exact top `top` of (chunk id, f32, bits) rows by cosine with `q`, ties by chunk id."""
    if not rows:
        return []
    vecs = np.frombuffer(b"".join(r[1] for r in rows), dtype="<f4").reshape(len(rows), dim)
    codes = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.uint8).reshape(len(rows), -1)
    index = VectorIndex([r[0] for r in rows], _half_precision(vecs), codes)
    return index.search(q, top=top, exact=True)


class _DocChunks:
    """document id → its chunk ids, when every one of them has a vector (WorkspaceVectors.doc_chunks)."""

    def __init__(self, db: Snapshot, ws_id: int, fp: str):
        self.db, self.ws_id, self.fp = db, ws_id, fp

    def get(self, doc_id: int, default: np.ndarray | None = None) -> np.ndarray | None:
        ids = [cid for cid, _, _, _ in stored.complete_vectors(self.db, self.ws_id, self.fp, [doc_id])]
        return np.array(ids, dtype=np.int64) if ids else default


class StoreVectors:
    """The `search` of WorkspaceVectors, answered by the store's index and rescored here."""

    def __init__(self, db: Snapshot, ws_id: int, fp: str, dim: int, schema: str):
        self.db, self.ws_id, self.fp, self.dim, self.schema = db, ws_id, fp, dim, schema
        self.doc_chunks = _DocChunks(db, ws_id, fp)

    def __len__(self) -> int:
        # the rows this process holds and scans: none (the engine moves the lexical leg to its helper
        # process only beside a large scan in this one; this leg mostly waits on the database)
        return 0

    def search(self, q: np.ndarray, top: int, allowed_ids: np.ndarray | None) -> list[tuple[int, float]]:
        # rescored from the query as given: VectorIndex.search normalises it as the in-memory search
        # does (normalising twice could move a cosine in its last bit); the index needs no norm
        q = np.asarray(q, dtype=np.float32).reshape(-1)
        norm = float(np.linalg.norm(q))
        if top <= 0 or not math.isfinite(norm) or norm == 0.0:
            return []
        allowed = None if allowed_ids is None else np.unique(np.asarray(allowed_ids, dtype=np.int64))
        if allowed is not None and len(allowed) <= FILTER_EXACT_BELOW:
            if not len(allowed):
                return []
            return rescore(stored.chunk_vectors(self.db, self.ws_id, self.fp, allowed.tolist()), q, top, self.dim)
        k = min(stored.EF_SEARCH_MAX, max(CANDIDATES_MIN, CANDIDATES_FACTOR * top))
        # past ef_search's ceiling the index still gives up to 1,000 texts: enough for a deep fetch
        # (a run of equal cosines followed past the page, engine.py), where a scan would read every row
        if top <= k:
            while True:
                ids = None if allowed is None else allowed.tolist()
                found, answered = stored.nearest(self.db, self.schema, self.ws_id, self.fp, q, k, ids)
                near = self._complete(found, top)
                if len(near) >= top or answered < k:  # enough, or the index has nothing more
                    return rescore(self._survivors(near, top), q, top, self.dim)
                if k >= stored.EF_SEARCH_MAX:
                    break
                k = min(stored.EF_SEARCH_MAX, k * CANDIDATES_FACTOR)
        return self._scan(q, top, allowed)

    def _complete(self, near: list[tuple[int, str, float, int]], top: int) -> list[tuple[int, str, float]]:
        """The candidates of complete documents (every chunk with a vector, as the in-memory index
        holds) as far as `_survivors` reads them: all of them while `top` or fewer are left, else
        those within MARGIN of the top-th. Only those candidates' documents are checked (waiting
        ones are rare: each one found moves the cut past another candidate, checked in turn)."""
        checked: set[int] = set()
        gone: set[int] = set()
        while True:
            kept = [n for n in near if n[3] not in gone]
            if len(kept) > top:
                cut = kept[top - 1][2] + MARGIN
                kept = [n for n in kept if n[2] <= cut]
            docs = {n[3] for n in kept} - checked
            if not docs:
                return [(cid, h, d) for cid, h, d, _ in kept]
            gone |= stored.waiting(self.db, self.ws_id, self.fp, docs)
            checked |= docs

    def _survivors(self, near: list[tuple[int, str, float]], top: int) -> list[tuple[int, bytes, bytes]]:
        """The rows of the candidates that can be in the exact top `top`: those the index puts within
        MARGIN of its top-th distance (its order and the exact one differ by less: see MARGIN)."""
        if len(near) > top:
            cut = near[top - 1][2] + MARGIN
            near = [n for n in near if n[2] <= cut]
        vecs = stored.text_vectors(self.db, self.ws_id, self.fp, {h for _, h, _ in near})
        return [(cid, *vecs[h]) for cid, h, _ in near if h in vecs]

    def _scan(self, q: np.ndarray, top: int, allowed: np.ndarray | None) -> list[tuple[int, float]]:
        """Exact over every complete document's rows, a block at a time (rare: see the module's docstring)."""
        best: list[tuple[int, float]] = []
        for block in _blocks(stored.complete_vectors(self.db, self.ws_id, self.fp, None), SCAN_ROWS):
            rows = [(cid, f32, bits) for cid, _, f32, bits in block]
            if allowed is not None:
                keep = np.isin(np.array([r[0] for r in rows], dtype=np.int64), allowed)
                rows = [r for r, k in zip(rows, keep.tolist()) if k]
            best = heapq.nsmallest(top, best + rescore(rows, q, top, self.dim), key=lambda h: (-h[1], h[0]))
        return best


def _blocks(rows: Iterable[tuple[int, int, bytes, bytes]], size: int) -> Iterable[list[tuple[int, int, bytes, bytes]]]:
    block: list[tuple[int, int, bytes, bytes]] = []
    for r in rows:
        block.append(r)
        if len(block) == size:
            yield block
            block = []
    if block:
        yield block
