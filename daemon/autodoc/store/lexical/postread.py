"""Reading the postings index (store/lexical/postings.py) for a search: a token's live
records (its segments minus the dead, plus its delta), whole or only in the
segments holding some ids, and its live row count without its records.

Runs on: the search's thread, on its snapshot.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from ..interface import Snapshot
from ..sql import POSTGRES, all_rows, dialect, in_ids
from .postings import NARROW, SEG_BITS, WIDE, _dead, _widen, decode

_lock = threading.Lock()
_dead_cache: OrderedDict[tuple, np.ndarray] = OrderedDict()


def cache_key(db: Snapshot, fts_key: tuple) -> tuple:
    """What a reader's caches of the postings are keyed by: FTS5's state (every write changes it) and
    the maintenance generation (a merge, compaction or build slice changes the tables, not FTS5). On
    PostgreSQL the index state's key holds both already (store/pg/lexical.state)."""
    if dialect(db) == POSTGRES:
        return fts_key
    row = db.execute("SELECT value FROM meta WHERE key='postings_gen'").fetchone()
    return (*fts_key, row[0] if row else "0")


def dead_ids(db: Snapshot, key: tuple) -> np.ndarray:
    """The dead list, sorted, cached per FTS index state (every delete changes it)."""
    with _lock:
        got = _dead_cache.get(key)
    if got is None:
        got = np.sort(_dead(db))
        with _lock:
            _dead_cache[key] = got
            while len(_dead_cache) > 8:
                _dead_cache.popitem(last=False)
    return got


def read_terms(db: Snapshot, terms: list[str], key: tuple) -> dict[str, np.ndarray]:
    """token → its live records (WIDE dtype or NARROW, sorted by id): segments minus dead, plus delta.
    A term's narrow segments are joined as bytes (one copy; concatenating structured arrays cost
    more than reading them at 1M chunks), the dead found by searchsorted and the delta inserted in
    place, never a sort of the whole list."""
    cond, wanted = in_ids(db, "term", dict.fromkeys(terms))
    parts: dict[str, list[tuple[int, bytes]]] = {t: [] for t in terms}
    for term, wide, data in db.execute(
        f"SELECT term, wide, data FROM postings WHERE {cond} ORDER BY term, seg", (wanted,)
    ).fetchall():
        parts[term].append((wide, data))
    dead = dead_ids(db, key).astype(np.uint32)
    delta: dict[str, list[tuple]] = {}
    for r in db.execute(
        f"SELECT term, chunk, d, t0, t1, t2, t3 FROM postings_delta WHERE {cond}", (wanted,)
    ).fetchall():
        delta.setdefault(r[0], []).append(r[1:])
    return {t: _live(segs, dead, delta.get(t)) for t, segs in parts.items()}


def read_at(db: Snapshot, term: str, ids: np.ndarray, key: tuple) -> np.ndarray:
    """A token's live records in the segments holding these ids only (a common word checked for a
    few rows reads a few of its segments, not its whole list)."""
    segs = sorted({int(i) >> SEG_BITS for i in ids})
    in_segs, arg = in_ids(db, "seg", segs)
    rows = all_rows(db, f"SELECT wide, data FROM postings WHERE term=? AND {in_segs} ORDER BY seg", (term, arg))
    in_segs, arg = in_ids(db, f"(chunk >> {SEG_BITS})", segs)
    delta = db.execute(
        f"SELECT chunk, d, t0, t1, t2, t3 FROM postings_delta WHERE term=? AND {in_segs}", (term, arg)
    ).fetchall()
    return _live(rows, dead_ids(db, key).astype(np.uint32), delta or None)


def counts(db: Snapshot, terms: list[str]) -> dict[str, int]:
    """token → its records in the segments (the delta and dead aside: an order, not a statistic),
    from the blobs' lengths, which SQLite reads without their content."""
    cond, arg = in_ids(db, "term", dict.fromkeys(terms))
    got = dict(
        db.execute(
            "SELECT term, SUM(LENGTH(data) / CASE WHEN wide <> 0 THEN ? ELSE ? END) FROM postings "
            f"WHERE {cond} GROUP BY term",
            (WIDE.itemsize, NARROW.itemsize, arg),
        ).fetchall()
    )
    return {t: int(got.get(t) or 0) for t in terms}


def live_count(db: Snapshot, term: str, key: tuple) -> int:
    """How many live chunks hold a token (what FTS5 counts for its IDF) without reading its
    records: the segments' lengths, less its dead records (the dead ids' segments read), plus its
    delta rows (a deleted chunk's leave the delta with it)."""
    return live_counts(db, [term], key)[term]


def live_counts(db: Snapshot, terms: list[str], key: tuple) -> dict[str, int]:
    """live_count of each token, in three reads whatever their number (fts5vocab's counts, on a
    store that has no FTS5: store/lexical/ftsterms.py)."""
    n = counts(db, terms)
    cond, arg = in_ids(db, "term", dict.fromkeys(terms))
    dead = dead_ids(db, key).astype(np.uint32)
    if len(dead):
        in_segs, segs = in_ids(db, "seg", sorted({int(i) >> SEG_BITS for i in dead}))
        for term, wide, data in db.execute(
            f"SELECT term, wide, data FROM postings WHERE {cond} AND {in_segs}", (arg, segs)
        ).fetchall():
            n[term] -= int(np.isin(decode(wide, data)["id"], dead).sum())
    for term, c in db.execute(
        f"SELECT term, COUNT(*) FROM postings_delta WHERE {cond} GROUP BY term", (arg,)
    ).fetchall():
        n[term] += int(c)
    return n


def _live(segs: list[tuple[int, bytes]], dead: np.ndarray, delta: list[tuple] | None) -> np.ndarray:
    """One token's records from its segment rows (wide, data), minus the dead, plus its delta rows."""
    if not segs:
        rec = np.empty(0, NARROW)
    elif len(segs) == 1:
        rec = decode(*segs[0])
    elif not any(w for w, _ in segs):
        rec = np.frombuffer(b"".join(d for _, d in segs), NARROW)
    else:
        rec = np.concatenate([_widen(decode(w, d)) for w, d in segs])
    if len(dead) and len(rec):
        rec = _without(rec, dead)
    if delta:
        rec = _inserted(rec, sorted(delta))
    return rec


def _without(rec: np.ndarray, dead: np.ndarray) -> np.ndarray:
    """`rec` minus the records of these (sorted) ids."""
    ids = rec["id"]
    inside = dead[(dead >= ids[0]) & (dead <= ids[-1])]
    if not len(inside):
        return rec
    pos = np.searchsorted(ids, inside)
    pos = pos[ids[np.minimum(pos, len(ids) - 1)] == inside]
    if not len(pos):
        return rec
    keep = np.ones(len(rec), bool)
    keep[pos] = False
    return rec[keep]


def _inserted(rec: np.ndarray, rows: list[tuple]) -> np.ndarray:
    """`rec` with the delta's records (chunk, d, t0..t3; sorted by chunk, ids it does not hold)
    placed at their ids' positions."""
    a = np.array(rows, dtype=np.int64)
    wide = rec.dtype == WIDE or int(a[:, 1].max()) > 0xFFFF or int(a[:, 2:].max()) > 0xFF
    dt = WIDE if wide else NARROW
    out = np.empty(len(rec) + len(a), dt)
    at = np.searchsorted(rec["id"], a[:, 0]) + np.arange(len(a))
    mask = np.zeros(len(out), bool)
    mask[at] = True
    out[~mask] = rec if rec.dtype == dt else _widen(rec)
    new = out[at]
    new["id"], new["d"], new["tf"] = a[:, 0], a[:, 1], a[:, 2:]
    out[at] = new
    return out
