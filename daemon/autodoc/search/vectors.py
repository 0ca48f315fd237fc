"""Vector search math (pure numpy, no I/O): 1-bit sign codes and a two-phase
top-k cosine search.

Phase 1 (only for large candidate sets): score every row from its 1-bit sign
code and keep a shortlist. Phase 2: exact float32 cosine on the shortlist.
Below EXACT_BELOW candidate rows the exact scan is both faster and exact, so
it is used directly.

Two phase-1 scorers are implemented (spec 004 §3 describes the Hamming one):

* "asym" (default): the float query against the documents' sign codes,
  score = Σ_j q_j·s_ij with s = ±1, computed per code byte through a 256-entry
  lookup table. Measured recall is far better than Hamming at the same
  shortlist (bench/vectors_search.py, report figures), for a small cost.
* "hamming": XOR + popcount of the query's own sign code against the
  documents', as in the spec.

Codes are kept column-major ([code bytes, n]) so every pass reads one
contiguous column; rows are processed in blocks that stay in cache.

Vectors are expected L2-normalised (the providers guarantee it), so cosine =
dot product; the query is normalised here. Results are (id, cosine) sorted by
cosine descending then id ascending, including at the cut-off (ties on the
top-th score are resolved by id too), so the answer is deterministic.
"""

from __future__ import annotations

import threading
from typing import Iterable, Sequence

import numpy as np

# Candidate-set size from which the 1-bit prefilter is used (measured: the
# exact float32 scan wins below, see the report / bench/vectors_search.py).
EXACT_BELOW = 100_000
# Shortlist size for exact rescoring: max(SHORTLIST_MIN, SHORTLIST_FACTOR*top).
SHORTLIST_MIN = 500
SHORTLIST_FACTOR = 10
BLOCK_ROWS = 1 << 15
PREFILTERS = ("asym", "hamming")

# _BITS[v] = the 8 bits of byte v, most significant first (np.packbits order).
_BITS = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).astype(np.float32)


def sign_codes(vecs: np.ndarray) -> np.ndarray:
    """1-bit codes: bit j of row i is set when vecs[i, j] > 0; packed with
    np.packbits (big-endian bit order), uint8 [n, ceil(dim/8)]."""
    v = np.asarray(vecs)
    if v.ndim == 1:
        v = v[None, :]
    if v.ndim != 2:
        raise ValueError("vecs must be 2-D [n, dim]")
    return np.packbits(v > 0, axis=1)


def normalise_rows(vecs: np.ndarray) -> np.ndarray:
    v = np.array(vecs, dtype=np.float32, copy=True)
    n = np.linalg.norm(v, axis=1, keepdims=True)
    n[n == 0] = 1.0
    v /= n
    return v


class VectorIndex:
    """An immutable index over one workspace's chunk vectors.

    ids: int64 [n] (chunk ids, any order, unique); vecs: float32 [n, dim];
    codes: uint8 [n, ceil(dim/8)] from sign_codes (computed when omitted).
    The arrays are used as given when already float32/int64 and C-contiguous
    (no copy). `allowed` masks in search() are aligned with `ids` (use
    mask_for(ids) to build one from a set of chunk ids).

    To change it, build a new one (with_added / without return new indexes)
    and swap the reference: readers never see a half-updated index.
    """

    def __init__(self, ids: np.ndarray | Sequence[int], vecs: np.ndarray, codes: np.ndarray | None = None, *,
                 exact_below: int = EXACT_BELOW, prefilter: str = "asym",
                 shortlist_min: int = SHORTLIST_MIN, shortlist_factor: int = SHORTLIST_FACTOR):
        ids = np.ascontiguousarray(ids, dtype=np.int64).reshape(-1)
        vecs = np.ascontiguousarray(vecs, dtype=np.float32)
        if vecs.ndim != 2:
            raise ValueError("vecs must be 2-D [n, dim]")
        if vecs.shape[0] != ids.shape[0]:
            raise ValueError(f"{ids.shape[0]} ids for {vecs.shape[0]} vectors")
        if prefilter not in PREFILTERS:
            raise ValueError(f"prefilter must be one of {PREFILTERS}")
        n, dim = vecs.shape
        nbytes = (dim + 7) // 8
        if codes is not None:
            codes = np.asarray(codes, dtype=np.uint8)
            if codes.shape != (n, nbytes):
                raise ValueError(f"codes shape {codes.shape}, expected {(n, nbytes)}")
        self.ids = ids
        self.vecs = vecs
        self.dim = dim
        self.exact_below = int(exact_below)
        self.prefilter = prefilter
        self.shortlist_min = int(shortlist_min)
        self.shortlist_factor = int(shortlist_factor)
        self._codes_in = codes          # row-major, dropped once the column layout exists
        self._cols: np.ndarray | None = None
        self._cols_lock = threading.Lock()
        self._pos: dict[int, int] | None = None

    # -- construction helpers ---------------------------------------------------

    @classmethod
    def empty(cls, dim: int, **kw) -> "VectorIndex":
        return cls(np.zeros(0, np.int64), np.zeros((0, dim), np.float32), **kw)

    @classmethod
    def from_blobs(cls, ids: Iterable[int], f32_blobs: Iterable[bytes], bits_blobs: Iterable[bytes] | None = None,
                   *, dim: int, **kw) -> "VectorIndex":
        """Build from per-chunk byte strings as a store keeps them (float32
        little-endian; packbits codes). bits_blobs may be None (recomputed)."""
        ids_a = np.fromiter(ids, dtype=np.int64)
        vecs = np.frombuffer(b"".join(f32_blobs), dtype="<f4").astype(np.float32, copy=False)
        vecs = vecs.reshape(-1, dim)
        codes = None
        if bits_blobs is not None:
            codes = np.frombuffer(b"".join(bits_blobs), dtype=np.uint8).reshape(-1, (dim + 7) // 8)
        return cls(ids_a, vecs, codes, **kw)

    def _options(self) -> dict:
        return {"exact_below": self.exact_below, "prefilter": self.prefilter,
                "shortlist_min": self.shortlist_min, "shortlist_factor": self.shortlist_factor}

    def with_added(self, ids: np.ndarray | Sequence[int], vecs: np.ndarray, codes: np.ndarray | None = None) -> "VectorIndex":
        """A new index with these rows added (an id already present is replaced)."""
        ids = np.ascontiguousarray(ids, dtype=np.int64).reshape(-1)
        vecs = np.ascontiguousarray(vecs, dtype=np.float32).reshape(len(ids), self.dim)
        if codes is None:
            codes = sign_codes(vecs)
        base = self.without(ids)
        return VectorIndex(np.concatenate([base.ids, ids]), np.concatenate([base.vecs, vecs]),
                           np.concatenate([base.codes, codes]), **self._options())

    def without(self, ids: Iterable[int]) -> "VectorIndex":
        """A new index without these ids (unknown ids are ignored)."""
        drop = np.fromiter(ids, dtype=np.int64) if not isinstance(ids, np.ndarray) else ids.astype(np.int64)
        keep = ~np.isin(self.ids, drop)
        if keep.all():
            return self
        return VectorIndex(self.ids[keep], self.vecs[keep], self.codes[keep], **self._options())

    # -- properties -------------------------------------------------------------

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    @property
    def codes(self) -> np.ndarray:
        """Row-major codes [n, nbytes] (a view of the column layout if built)."""
        if self._codes_in is not None:
            return self._codes_in
        if self._cols is not None:
            if self.prefilter == "hamming":
                return np.ascontiguousarray(self._cols.T).view(np.uint8)[:, : (self.dim + 7) // 8]
            return self._cols.T
        return sign_codes(self.vecs)

    @property
    def nbytes(self) -> int:
        """Memory held by the index arrays (vectors, ids, codes)."""
        total = self.vecs.nbytes + self.ids.nbytes
        if self._cols is not None:
            total += self._cols.nbytes
        elif self._codes_in is not None:
            total += self._codes_in.nbytes
        return total

    def mask_for(self, allowed_ids: Iterable[int]) -> np.ndarray:
        """bool [n] aligned with self.ids: True where the id is in allowed_ids."""
        a = allowed_ids if isinstance(allowed_ids, np.ndarray) else np.fromiter(allowed_ids, dtype=np.int64)
        return np.isin(self.ids, a)

    def position(self, chunk_id: int) -> int | None:
        if self._pos is None:
            self._pos = {int(i): p for p, i in enumerate(self.ids.tolist())}
        return self._pos.get(int(chunk_id))

    def _columns(self) -> np.ndarray:
        """Column-major codes, built once on first prefiltered search: byte
        columns [nbytes, n] for "asym", uint64 word columns [ceil(nbytes/8), n]
        for "hamming". The row-major copy is then dropped."""
        if self._cols is None:
            with self._cols_lock:
                if self._cols is None:
                    codes = self._codes_in if self._codes_in is not None else sign_codes(self.vecs)
                    if self.prefilter == "hamming":
                        nb = codes.shape[1]
                        nw = (nb + 7) // 8
                        if nw * 8 != nb:
                            codes = np.concatenate([codes, np.zeros((codes.shape[0], nw * 8 - nb), np.uint8)], axis=1)
                        words = np.ascontiguousarray(codes).view(np.uint64)
                        self._cols = np.ascontiguousarray(words.T)
                    else:
                        self._cols = np.ascontiguousarray(codes.T)
                    self._codes_in = None
        return self._cols

    # -- search -----------------------------------------------------------------

    def search(self, query_vec: np.ndarray, *, top: int = 50, allowed: np.ndarray | None = None,
               exact: bool | None = None) -> list[tuple[int, float]]:
        """Top `top` (id, cosine), cosine desc then id asc. `allowed`: bool [n]
        aligned with ids, or None for all rows. exact=True forces the exact
        scan, False forces the prefilter, None decides by size."""
        n = len(self)
        if top <= 0 or n == 0:
            return []
        q = np.asarray(query_vec, dtype=np.float32).reshape(-1)
        if q.shape[0] != self.dim:
            raise ValueError(f"query has {q.shape[0]} dimensions, index has {self.dim}")
        norm = float(np.linalg.norm(q))
        if not np.isfinite(norm) or norm == 0:
            return []
        q = q / norm
        if allowed is not None:
            allowed = np.asarray(allowed, dtype=bool)
            if allowed.shape != (n,):
                raise ValueError(f"allowed mask has shape {allowed.shape}, expected ({n},)")
            count = int(np.count_nonzero(allowed))
            if count == 0:
                return []
        else:
            count = n
        shortlist = max(self.shortlist_min, self.shortlist_factor * top)
        use_exact = exact if exact is not None else (count <= self.exact_below or count <= shortlist)
        if use_exact:
            if allowed is None or count == n:
                rows = None
                scores = self.vecs @ q
            else:
                rows = np.flatnonzero(allowed)
                scores = self.vecs[rows] @ q
            return self._top(rows, scores, top)
        approx = self.prefilter_scores(q)
        if allowed is not None and count < n:
            approx[~allowed] = -np.inf
        k = min(shortlist, count)
        rows = np.argpartition(-approx, k - 1)[:k] if k < n else np.arange(n)
        rows.sort()  # ascending row order: a sequential gather
        scores = self.vecs[rows] @ q
        return self._top(rows, scores, top)

    def prefilter_scores(self, q: np.ndarray) -> np.ndarray:
        """Phase-1 scores for every row (higher = closer), float32 [n]."""
        cols = self._columns()
        n = len(self)
        out = np.empty(n, dtype=np.float32)
        if self.prefilter == "asym":
            nb = cols.shape[0]
            qp = np.zeros(nb * 8, dtype=np.float32)
            qp[: self.dim] = q
            # lut[b, v] = Σ_k q[8b+k]·bit_k(v): the query's dot product with the
            # set bits of byte value v at byte position b. Ranking by Σ_b lut is
            # ranking by q·s (s = ±1) since q·s = 2·q·bits − Σq.
            lut = qp.reshape(nb, 8) @ _BITS.T
            for s in range(0, n, BLOCK_ROWS):
                e = min(n, s + BLOCK_ROWS)
                acc = out[s:e]
                np.take(lut[0], cols[0, s:e], out=acc)
                tmp = np.empty(e - s, dtype=np.float32)
                for b in range(1, nb):
                    np.take(lut[b], cols[b, s:e], out=tmp)
                    acc += tmp
        else:
            nw = cols.shape[0]
            qc = np.zeros(nw * 8, dtype=np.uint8)
            qb = np.packbits(q > 0)
            qc[: qb.shape[0]] = qb
            qw = qc.view(np.uint64)
            for s in range(0, n, BLOCK_ROWS):
                e = min(n, s + BLOCK_ROWS)
                acc = np.zeros(e - s, dtype=np.uint16 if nw * 64 > 255 else np.uint8)
                for w in range(nw):
                    acc += np.bitwise_count(cols[w, s:e] ^ qw[w])
                out[s:e] = acc
            np.negative(out, out=out)  # smaller distance = higher score
        return out

    def _top(self, rows: np.ndarray | None, scores: np.ndarray, top: int) -> list[tuple[int, float]]:
        """Best `top` of (rows, scores) by score desc, id asc; rows None = all."""
        m = scores.shape[0]
        if top < m:
            part = np.argpartition(-scores, top - 1)[:top]
            cut = scores[part].min()
            sel = np.flatnonzero(scores >= cut)  # every row tied at the cut-off
        else:
            sel = np.arange(m)
        r = sel if rows is None else rows[sel]
        ids = self.ids[r]
        sc = scores[sel]
        order = np.lexsort((ids, -sc))[:top]
        return [(int(i), float(x)) for i, x in zip(ids[order].tolist(), sc[order].tolist())]
