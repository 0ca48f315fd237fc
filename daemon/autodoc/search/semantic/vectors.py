"""Vector search math (pure numpy, no I/O): 1-bit sign codes and a top-k
cosine search that prefilters on the codes and rescores exactly.

Below EXACT_BELOW candidate rows, one exact float32 scan (a matrix-vector
product) is fast and exact, so it is all that runs. Above it, the prefilter
(PREFILTER, "hamming+asym"):

  1a. Hamming: XOR + popcount of the query's sign code against every row's
      code (the design's Hamming prefilter), over uint64 words stored column-major and scanned in
      cache-sized blocks (~8 ms per million rows here) -> a coarse shortlist
      of max(COARSE_MIN, COARSE_FRACTION·n) rows, cut through a histogram of
      the distances (ties at the cut in row order: _closest_codes);
  1b. asymmetric: the float query against those rows' sign codes,
      Σ_j q_j·s_j with s = ±1, through a per-query 256-entry lookup table per
      code byte -> a shortlist of max(SHORTLIST_MIN, SHORTLIST_FACTOR·top);
  2.  exact float32 cosine on the shortlist.

The asymmetric score is much closer to the cosine than Hamming (recall@50
at the same shortlist, measured by the scratch bench/vectors_search.py, since deleted) but costs
~8x Hamming per row in numpy, hence the coarse Hamming pass first.

Memory: an index of more than HALF_ABOVE rows (those the prefilter serves)
holds its vectors as float16 and rescores the shortlist in float32 from
them: 2 bytes a dimension instead of 4, 768 MB instead of 1.5 GB at 1M
384-d rows. The rounding (≤ 2^-11 relative per component) moves a cosine by
about 1e-4; recall@50 against the float32 index and SciFact nDCG@10 are
measured in docs/benchmarks/daemon_overhead.md. Smaller indexes stay float32:
their exact scan reads every row on every query, and numpy has no fast
float16 dot product (each block would be converted first). The shortlist's
rows are converted by search/semantic/halfcast.py (numpy's own cast is software here). The sign codes
are held once, as the column-major uint64 words the Hamming pass scans; the
asymmetric pass gathers its rows' bytes from those words.

Vectors are expected L2-normalised (the providers guarantee it), so cosine =
dot product; the query is normalised here. Results are (id, cosine) sorted by
cosine descending then id ascending, including at the cut-off (rows tied on
the top-th score are chosen by id), so the answer is deterministic.

Runs on: any thread (an index is immutable once built; a search only reads it).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

from ...embed.codes import sign_codes
from .halfcast import to_float32

__all__ = ["VectorIndex", "sign_codes"]

# Candidate-set size above which the prefilter runs (measured; see report).
EXACT_BELOW = 100_000
# Rows above which an index holds float16 vectors (see the module's docstring).
HALF_ABOVE = EXACT_BELOW
# Phase 1a shortlist: max(COARSE_MIN, COARSE_FRACTION * candidates).
COARSE_MIN = 20_000
COARSE_FRACTION = 0.05
# Phase 1b / final shortlist for exact rescoring: max(SHORTLIST_MIN, SHORTLIST_FACTOR * top).
SHORTLIST_MIN = 4_000
SHORTLIST_FACTOR = 50
BLOCK_ROWS = 1 << 15
GATHER_ROWS = 1 << 14  # float rows copied at once when rescoring a subset (24 MiB at 384-d)
# float16 rows gathered, converted and scored at once: a block's float16 and float32 copies
# (0.75 + 1.5 MiB at 384-d) stay in this core's cache from the gather to the dot product; the
# whole 4,000-row shortlist in one block spilled them (the rescoring 0.3-0.7 ms slower at 100k,
# same cosines: /tmp-free check in tests/unit/test_vectors.py), and ONNX Runtime's arena keeps less
HALF_ROWS = 1 << 10
PREFILTER = "hamming+asym"  # the one prefilter: its name in reports (bench/speed.py)
# The coarse cut's distance is guessed from every SAMPLE_STEP-th row above SAMPLE_ABOVE rows (_cut).
SAMPLE_ABOVE = 1 << 18
SAMPLE_STEP = 16

# _BITS[v] = the 8 bits of byte v, most significant first (np.packbits order).
_BITS = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).astype(np.float32)


def normalise_rows(vecs: np.ndarray) -> np.ndarray:
    """A float32 copy with L2-normalised rows (zero rows stay zero)."""
    v = np.array(vecs, dtype=np.float32, copy=True)
    n = np.linalg.norm(v, axis=1, keepdims=True)
    n[n == 0] = 1.0
    v /= n
    return v


def asym_lut(q: np.ndarray, nbytes: int) -> np.ndarray:
    """lut[b, v] = Σ_k q[8b+k]·bit_k(v): the query's dot product with the set
    bits of byte value v at code byte b. Ranking rows by Σ_b lut[b, code[b]] is
    ranking by q·s (s = ±1), since q·s = 2·q·bits − Σq."""
    qp = np.zeros(nbytes * 8, dtype=np.float32)
    qp[: q.shape[0]] = q
    return np.einsum("bk,vk->bv", qp.reshape(nbytes, 8), _BITS)


def asym_scores_columns(lut: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Σ_b lut[b, cols[b]] for column-major codes [nbytes, m], float32 [m]."""
    nb, m = cols.shape
    out = np.empty(m, dtype=np.float32)
    tmp = np.empty(m, dtype=np.float32)
    np.take(lut[0], cols[0], out=out, mode="clip")  # mode: see asym_scores_rows
    for b in range(1, nb):
        np.take(lut[b], cols[b], out=tmp, mode="clip")
        out += tmp
    return out


def asym_scores_rows(lut: np.ndarray, words: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Σ_b lut[b, code byte b] of these rows of column-major words [nw, n], float32 [m]. The
    rows' words are gathered once and each code byte read in place through a strided view:
    no byte-transposed copy (_code_columns), the same sums in the same order."""
    nb, m = lut.shape[0], rows.shape[0]
    g8 = np.take(words, rows, axis=1).view(np.uint8).reshape(words.shape[0], m, 8)  # g8[w, r, k]: byte 8w+k
    out = np.empty(m, dtype=np.float32)
    tmp = np.empty(m, dtype=np.float32)
    # mode="clip": with `out`, the default mode="raise" copies through a buffer (numpy's docs); a
    # byte is always a valid index into a 256-entry row, so clipping changes nothing but the time
    np.take(lut[0], g8[0, :, 0], out=out, mode="clip")
    for b in range(1, nb):
        np.take(lut[b], g8[b >> 3, :, b & 7], out=tmp, mode="clip")
        out += tmp
    return out


def hamming_distances(words: np.ndarray, qwords: np.ndarray) -> np.ndarray:
    """Hamming distances between a query code (uint64 [nw]) and column-major
    codes (uint64 [nw, n]), uint16 [n]."""
    nw, n = words.shape
    out = np.empty(n, dtype=np.uint16)
    for s in range(0, n, BLOCK_ROWS):
        e = min(n, s + BLOCK_ROWS)
        acc = out[s:e]
        acc[:] = np.bitwise_count(words[0, s:e] ^ qwords[0])
        for w in range(1, nw):
            acc += np.bitwise_count(words[w, s:e] ^ qwords[w])
    return out


def _words_of(codes: np.ndarray) -> np.ndarray:
    """Row-major byte codes [n, nb] -> column-major uint64 words [ceil(nb/8), n]."""
    n, nb = codes.shape
    nw = (nb + 7) // 8
    if nw * 8 != nb:
        codes = np.concatenate([codes, np.zeros((n, nw * 8 - nb), np.uint8)], axis=1)
    return np.ascontiguousarray(np.ascontiguousarray(codes).view(np.uint64).T)


def _codes_of(words: np.ndarray, nbytes: int, rows: np.ndarray | None = None) -> np.ndarray:
    """Column-major uint64 words [nw, n] -> row-major byte codes [m, nbytes] of these rows (all when None)."""
    nw, n = words.shape
    w8 = words.view(np.uint8).reshape(nw, n, 8)  # w8[w, r, k] = code byte 8w+k of row r
    sel = w8 if rows is None else w8[:, rows, :]
    return np.ascontiguousarray(sel.transpose(1, 0, 2)).reshape(sel.shape[1], nw * 8)[:, :nbytes]


def _code_columns(words: np.ndarray, nbytes: int, rows: np.ndarray | None) -> np.ndarray:
    """Column-major byte codes [nbytes, m] of these rows (all when None), for the asymmetric pass."""
    sel = np.ascontiguousarray(words) if rows is None else np.take(words, rows, axis=1)  # [nw, m] uint64
    nw, m = sel.shape
    return np.ascontiguousarray(sel.view(np.uint8).reshape(nw, m, 8).transpose(0, 2, 1)).reshape(nw * 8, m)[:nbytes]


def matvec(m: np.ndarray, q: np.ndarray) -> np.ndarray:
    """m @ q without BLAS: numpy's own single-threaded loop. OpenBLAS's
    threaded gemv waits for a descheduled sibling thread whenever the two
    cores are busy (indexing, embedding): measured here under load, a 10k-row
    search took 12 ms median with it vs 0.7 ms single-threaded, and at 100k-1M
    rows the scan is memory-bound so one thread loses nothing (einsum 1M x 384:
    121 ms min / 129 median vs BLAS 118 / 137)."""
    return np.einsum("ij,j->i", m, q)


def _cut(dist: np.ndarray, k: int) -> tuple[int, int]:
    """(d, m): the smallest distance d with at least k rows at d or under, and m the rows under d.
    Above SAMPLE_ABOVE rows a histogram of every SAMPLE_STEP-th row guesses d and exact counts
    around the guess settle it (usually two: 0.2 ms each at 1M rows, against 3.6 ms for the
    histogram of every row, which numpy casts to intp first); a guess off by more than a few
    steps falls back to that histogram."""
    n = dist.shape[0]
    if n > SAMPLE_ABOVE:
        sample = dist[::SAMPLE_STEP]
        d = int(np.searchsorted(np.cumsum(np.bincount(sample)), max(1, k * sample.shape[0] // n)))
        counts: dict[int, int] = {}

        def at_most(x: int) -> int:
            if x not in counts:
                counts[x] = int(np.count_nonzero(dist <= x)) if x >= 0 else 0
            return counts[x]

        for _ in range(4):
            if at_most(d) < k:
                d += 1
            elif at_most(d - 1) >= k:
                d -= 1
            else:
                return d, at_most(d - 1)
    cum = np.cumsum(np.bincount(dist))
    d = int(np.searchsorted(cum, k))
    return d, int(cum[d - 1]) if d else 0


def _closest_codes(dist: np.ndarray, k: int) -> np.ndarray:
    """Ascending positions of the k smallest Hamming distances (uint16), the ties at the
    k-th distance taken in row order. The distances are small integers: the cut is found
    by counting (_cut), and one pass collects the rows under it. ~2x cheaper than
    argpartition plus a sort (5 against 11 ms at 1M rows), and the same rows whatever the
    platform's selection algorithm (argpartition's choice among ties is unspecified)."""
    n = dist.shape[0]
    if k >= n:
        return np.arange(n)
    cut, under = _cut(dist, k)
    if under == 0:
        return np.flatnonzero(dist == cut)[:k]
    rows = np.flatnonzero(dist <= cut)
    if rows.shape[0] == k:
        return rows
    keep = np.ones(rows.shape[0], dtype=bool)
    keep[np.flatnonzero(dist[rows] == cut)[k - under :]] = False  # the cut's rows past the first k - under
    return rows[keep]


def _smallest(values: np.ndarray, k: int) -> np.ndarray:
    """Positions of the k smallest values (any order); all when k >= len."""
    if k >= values.shape[0]:
        return np.arange(values.shape[0])
    return np.argpartition(values, k - 1)[:k]


class VectorIndex:
    """An immutable index over one workspace's chunk vectors.

    ids: int64 [n] (chunk ids, unique, any order); vecs: float32 [n, dim],
    L2-normalised rows; codes: uint8 [n, ceil(dim/8)] from sign_codes
    (computed when omitted). Arrays already float32/int64/uint8 and
    C-contiguous are used without a copy. `allowed` masks in search() are
    aligned with `ids` (mask_for(chunk_ids) builds one).

    Memory: the vectors (4·dim B/row, 2·dim above half_above rows) + ids (8 B)
    + the codes once, as column-major words (dim/8 B). For 384-d: ~1.6 KB/row
    in float32, ~0.82 KB/row (820 MB per million rows) in float16.

    To change it build a new one (with_added / without return new indexes)
    and swap the reference: readers never see a half-updated index, and a
    search never takes a lock.
    """

    def __init__(
        self,
        ids: np.ndarray | Sequence[int],
        vecs: np.ndarray,
        codes: np.ndarray | None = None,
        *,
        exact_below: int = EXACT_BELOW,
        coarse_min: int = COARSE_MIN,
        coarse_fraction: float = COARSE_FRACTION,
        shortlist_min: int = SHORTLIST_MIN,
        shortlist_factor: int = SHORTLIST_FACTOR,
        half_above: int | None = None,
        words: np.ndarray | None = None,
    ):
        ids = np.ascontiguousarray(ids, dtype=np.int64).reshape(-1)
        n = ids.shape[0]
        half_above = HALF_ABOVE if half_above is None else half_above  # read now: a study may change it
        if codes is None and words is None and np.ndim(vecs) == 2:
            codes = sign_codes(vecs)  # from the vectors as given: float16 would round tiny positives to 0
        vecs = np.ascontiguousarray(vecs, dtype=np.float16 if n > half_above else np.float32)
        if vecs.ndim != 2:
            raise ValueError("vecs must be 2-D [n, dim]")
        if vecs.shape[0] != n:
            raise ValueError(f"{n} ids for {vecs.shape[0]} vectors")
        dim = vecs.shape[1]
        nbytes = (dim + 7) // 8
        if words is None:
            if codes is None:
                codes = sign_codes(vecs)
            else:
                codes = np.ascontiguousarray(codes, dtype=np.uint8)
                if codes.shape != (n, nbytes):
                    raise ValueError(f"codes shape {codes.shape}, expected {(n, nbytes)}")
            words = _words_of(codes)
        elif words.shape != ((nbytes + 7) // 8, n) or words.dtype != np.uint64:
            raise ValueError(f"words shape {words.shape}, expected {((nbytes + 7) // 8, n)}")
        self.ids = ids
        self.vecs = vecs
        self.dim = dim
        self.exact_below = int(exact_below)
        self.coarse_min = int(coarse_min)
        self.coarse_fraction = float(coarse_fraction)
        self.shortlist_min = int(shortlist_min)
        self.shortlist_factor = int(shortlist_factor)
        self.half_above = int(half_above)
        self._words = np.ascontiguousarray(words)
        self._by_id: tuple[np.ndarray, np.ndarray] | None = None  # (ids sorted, their rows), for position()

    @property
    def codes(self) -> np.ndarray:
        """Row-major sign codes uint8 [n, ceil(dim/8)] (a copy made from the words)."""
        return _codes_of(self._words, (self.dim + 7) // 8)

    # -- construction helpers ---------------------------------------------------

    @classmethod
    def empty(cls, dim: int, **kw) -> VectorIndex:
        return cls(np.zeros(0, np.int64), np.zeros((0, dim), np.float32), **kw)

    @classmethod
    def from_blobs(
        cls,
        ids: Iterable[int],
        f32_blobs: Iterable[bytes],
        bits_blobs: Iterable[bytes] | None = None,
        *,
        dim: int,
        **kw,
    ) -> VectorIndex:
        """Build from per-chunk byte strings as a store keeps them (float32
        little-endian; packbits codes). bits_blobs None: recomputed."""
        ids_a = np.fromiter(ids, dtype=np.int64)
        vecs = np.frombuffer(b"".join(f32_blobs), dtype="<f4").astype(np.float32, copy=False).reshape(-1, dim)
        codes = None
        if bits_blobs is not None:
            codes = np.frombuffer(b"".join(bits_blobs), dtype=np.uint8).reshape(-1, (dim + 7) // 8)
        return cls(ids_a, vecs, codes, **kw)

    def options(self) -> dict:
        return {
            "exact_below": self.exact_below,
            "coarse_min": self.coarse_min,
            "coarse_fraction": self.coarse_fraction,
            "shortlist_min": self.shortlist_min,
            "shortlist_factor": self.shortlist_factor,
            "half_above": self.half_above,
        }

    def with_added(
        self, ids: np.ndarray | Sequence[int], vecs: np.ndarray, codes: np.ndarray | None = None
    ) -> VectorIndex:
        """A new index with these rows added (an id already present is replaced)."""
        ids = np.ascontiguousarray(ids, dtype=np.int64).reshape(-1)
        vecs = np.asarray(vecs).reshape(len(ids), self.dim)
        codes = sign_codes(vecs) if codes is None else np.ascontiguousarray(codes, dtype=np.uint8)
        base = self.without(ids)
        n = len(base) + len(ids)
        # concatenated straight into the dtype the new index keeps: no float32 copy of a float16 base
        dtype = np.float16 if n > self.half_above else np.float32
        words = np.concatenate([base._words, _words_of(codes)], axis=1) if len(ids) else base._words
        return VectorIndex(
            np.concatenate([base.ids, ids]),
            np.concatenate([base.vecs, vecs], dtype=dtype),
            words=words,
            **self.options(),
        )

    def without(self, ids: Iterable[int]) -> VectorIndex:
        """A new index without these ids (unknown ids are ignored)."""
        drop = ids.astype(np.int64) if isinstance(ids, np.ndarray) else np.fromiter(ids, dtype=np.int64)
        keep = ~np.isin(self.ids, drop)
        if keep.all():
            return self
        return VectorIndex(self.ids[keep], self.vecs[keep], words=self._words[:, keep], **self.options())

    # -- properties -------------------------------------------------------------

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    @property
    def nbytes(self) -> int:
        """Memory held by the index arrays."""
        return self.vecs.nbytes + self.ids.nbytes + self._words.nbytes

    def mask_for(self, allowed_ids: Iterable[int]) -> np.ndarray:
        """bool [n] aligned with self.ids: True where the id is in allowed_ids."""
        a = allowed_ids if isinstance(allowed_ids, np.ndarray) else np.fromiter(allowed_ids, dtype=np.int64)
        return np.isin(self.ids, a)

    def position(self, chunk_id: int) -> int | None:
        """Row of a chunk id (None if absent)."""
        # a sorted copy of the ids, not a dict: 16 B a row instead of ~100 (100 MB at 1M chunks)
        if self._by_id is None:
            order = np.argsort(self.ids, kind="stable")
            self._by_id = (self.ids[order], order)
        ids, rows = self._by_id
        k = int(np.searchsorted(ids, chunk_id))
        return int(rows[k]) if k < len(ids) and ids[k] == chunk_id else None

    def _hamming_words(self) -> np.ndarray:
        return self._words

    # -- search -----------------------------------------------------------------

    def search(
        self, query_vec: np.ndarray, *, top: int = 50, allowed: np.ndarray | None = None, exact: bool | None = None
    ) -> list[tuple[int, float]]:
        """Top `top` (id, cosine), cosine desc then id asc. `allowed`: bool [n]
        aligned with ids, None for all rows. exact=True forces the exact scan,
        False the prefilter, None decides by the number of candidate rows."""
        n = len(self)
        if top <= 0 or n == 0:
            return []
        q = np.asarray(query_vec, dtype=np.float32).reshape(-1)
        if q.shape[0] != self.dim:
            raise ValueError(f"query has {q.shape[0]} dimensions, index has {self.dim}")
        norm = float(np.linalg.norm(q))
        if not math.isfinite(norm) or norm == 0.0:
            return []
        q = q / norm
        rows: np.ndarray | None = None  # candidate rows; None = all
        if allowed is not None:
            allowed = np.asarray(allowed, dtype=bool)
            if allowed.shape != (n,):
                raise ValueError(f"allowed mask has shape {allowed.shape}, expected ({n},)")
            rows = np.flatnonzero(allowed)
            if rows.shape[0] == 0:
                return []
            if rows.shape[0] == n:
                rows = None
        count = n if rows is None else int(rows.shape[0])
        shortlist = max(self.shortlist_min, self.shortlist_factor * top)
        if exact is None:
            exact = count <= self.exact_below or count <= shortlist
        if not exact:
            rows = self._shortlist(q, rows, count, shortlist)
        return self._top(rows, self._dot(rows, q), top)

    def _dot(self, rows: np.ndarray | None, q: np.ndarray) -> np.ndarray:
        """Exact cosines of the given rows (all when None), without copying
        more than GATHER_ROWS vectors at a time."""
        if self.vecs.dtype != np.float32:  # float16: rescored in float32, a block at a time
            return self._dot_half(rows, q)
        if rows is None:
            return matvec(self.vecs, q)
        m = rows.shape[0]
        if m > len(self) // 3:  # most rows: one pass over the matrix beats gathering
            return matvec(self.vecs, q)[rows]
        if m <= GATHER_ROWS:
            return matvec(self.vecs[rows], q)
        out = np.empty(m, dtype=np.float32)
        for s in range(0, m, GATHER_ROWS):
            out[s : s + GATHER_ROWS] = matvec(self.vecs[rows[s : s + GATHER_ROWS]], q)
        return out

    def _dot_half(self, rows: np.ndarray | None, q: np.ndarray) -> np.ndarray:
        m = len(self) if rows is None else rows.shape[0]
        out = np.empty(m, dtype=np.float32)
        for s in range(0, m, HALF_ROWS):
            # np.take, not fancy indexing: the same rows, gathered in two thirds of the time
            block = (
                self.vecs[s : s + HALF_ROWS] if rows is None else np.take(self.vecs, rows[s : s + HALF_ROWS], axis=0)
            )
            out[s : s + HALF_ROWS] = matvec(to_float32(block), q)  # the same float32 values as astype, ~15x faster
        return out

    def _shortlist(self, q: np.ndarray, rows: np.ndarray | None, count: int, shortlist: int) -> np.ndarray:
        """Phase 1: candidate rows (sorted) for exact rescoring."""
        k = max(self.coarse_min, math.ceil(self.coarse_fraction * count))
        if k < count:  # 1a
            qwords = _words_of(np.packbits(q > 0)[None, :])[:, 0]
            dist = hamming_distances(self._hamming_words(), qwords)
            rows = _closest_codes(dist, k) if rows is None else rows[_closest_codes(dist[rows], k)]
            count = len(rows)
        if shortlist < count:  # 1b
            nbytes = (self.dim + 7) // 8
            lut = asym_lut(q, nbytes)
            if rows is None:  # every row (fewer than the coarse pass keeps): a block of columns at a time
                scores = np.concatenate(
                    [
                        asym_scores_columns(lut, _code_columns(self._words[:, s : s + BLOCK_ROWS], nbytes, None))
                        for s in range(0, count, BLOCK_ROWS)
                    ]
                )
            else:
                scores = asym_scores_rows(lut, self._words, rows)
            pick = _smallest(-scores, shortlist)
            rows = pick if rows is None else rows[pick]
            rows.sort()  # ascending rows: the float gather walks memory forward
        return rows if rows is not None else np.arange(count)

    def _top(self, rows: np.ndarray | None, scores: np.ndarray, top: int) -> list[tuple[int, float]]:
        """Best `top` of (rows, scores) by score desc then id asc; rows None = all."""
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
