"""A postings index beside chunks_fts, in the same store: for each token, which
chunks hold it, how often in each column, and each chunk's length in tokens,
so an OR of single tokens is ranked by FTS5's bm25 in numpy (search/lexical/impact.py)
without FTS5 reading every matching row's position lists.

FTS5 stays the source of truth; these tables only copy what it was given:
- `postings`: one row per (token, segment of SEG ids): a blob of records
  (chunk id, length, tf per column: title, breadcrumb, meta, body) sorted by
  id, narrow (10 bytes) unless a count needs the wide form (24 bytes);
- `postings_delta`: rows of chunks written since the last merge, one per
  (token, chunk), written in the transaction that writes the chunk's FTS row;
- `postings_dead`: chunks whose FTS row was deleted since the last compaction
  (same transaction as the delete): their records in `postings` are stale. A
  chunk deleted then written again (the same id) keeps its new rows in the
  delta until a compaction removes its stale records, so "main minus dead,
  plus delta" is always the live index;
- meta `postings_built`: "complete", or the next chunk id a store that
  predates the tables still has to build from (build_slice; FTS5 serves
  until then).

The tokens are FTS5's (its own tokenizer over the very strings the store
inserts, store/documents.py) and a chunk's length is FTS5's own record of it
(chunks_fts_docsize), so the scores equal FTS5's.

Reads are store/lexical/postread.py's.

Runs on: the writer (hooks, build, merge) inside the caller's transaction.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter

import apsw
import numpy as np

from ..interface import Snapshot
from ..pg import lexical as pg_lexical
from ..sql import POSTGRES, all_rows, dialect, in_ids, scalar
from . import fts5, ftstext
from .ftstext import fts_text

log = logging.getLogger(__name__)

SEG_BITS = 15  # ids per postings row: a merge rewrites a segment's rows, a query reads a term's few segments
BODY = 3  # the body column's place in a record's tf (title, breadcrumb, meta, body: chunks_fts's order)
NARROW = np.dtype([("id", "<u4"), ("d", "<u2"), ("tf", "u1", (4,))])
WIDE = np.dtype([("id", "<u4"), ("d", "<u4"), ("tf", "<u4", (4,))])
COMPLETE = "complete"
BUILD_SLICE = 8192  # chunk ids a build transaction covers (≈1.5 s of tokenizing at 1M chunks on this machine)
MERGE_ROWS = 200_000  # delta rows above which an index job's end folds them into the segments
BUILD_BUDGET = 1.0  # seconds of building per maintain call (at least one slice)
# Slices of the background build and of an index batch's end: a save waits at most one (≈0.4 s at 1M
# chunks). Smaller ones rewrite each segment's blobs more often (a slice appends to them).
SMALL_SLICE = 2048
TAIL_CHUNKS = 256  # chunks a batch writes from which their records are built after them (open_tail), not via the delta
COMPACT_DEAD = 4096  # dead chunks above which their stale records are purged

SCHEMA = """
CREATE TABLE postings(id INTEGER PRIMARY KEY, term TEXT NOT NULL, seg INTEGER NOT NULL, wide INTEGER NOT NULL,
                      data BLOB NOT NULL);
CREATE UNIQUE INDEX postings_by_term ON postings(term, seg);
CREATE INDEX postings_by_seg ON postings(seg);
CREATE TABLE postings_delta(term TEXT NOT NULL, chunk INTEGER NOT NULL, d INTEGER NOT NULL, t0 INTEGER NOT NULL,
                            t1 INTEGER NOT NULL, t2 INTEGER NOT NULL, t3 INTEGER NOT NULL,
                            PRIMARY KEY(term, chunk)) WITHOUT ROWID;
CREATE INDEX postings_delta_by_chunk ON postings_delta(chunk);
CREATE TABLE postings_dead(chunk INTEGER PRIMARY KEY);
"""


def create(db: Snapshot) -> None:
    """The tables (store/migrations.py); an empty store is complete at once, a filled one builds lazily."""
    db.execute(SCHEMA)
    empty = scalar(db, "SELECT NOT EXISTS (SELECT 1 FROM chunks)")
    db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('postings_built', ?)", (COMPLETE if empty else "0",))


def has_tables(db: Snapshot) -> bool:
    if dialect(db) == POSTGRES:
        return True  # made with its schema (store/pg/schema.py)
    return db.execute("SELECT 1 FROM sqlite_master WHERE name='postings_delta'").fetchone() is not None


def built(db: Snapshot) -> str | None:
    """COMPLETE, the next chunk id to build from, or None when the store has no postings tables."""
    if dialect(db) == POSTGRES:
        return COMPLETE  # from its schema on: every chunk's records are written with it (no build, no tail)
    row = db.execute("SELECT value FROM meta WHERE key='postings_built'").fetchone()
    return row[0] if row else None


def complete(db: Snapshot) -> bool:
    return built(db) == COMPLETE


# -- tokens --------------------------------------------------------------------------------------


def _tokens(tok, text: str) -> list[str]:
    return tok(text.encode("utf-8"), apsw.FTS5_TOKENIZE_DOCUMENT, None, include_offsets=False, include_colocated=False)


def row_terms(tok, columns: tuple[list[str], ...]) -> dict[str, list[int]]:
    """token → its count in each of the four columns."""
    out: dict[str, list[int]] = {}
    for c, toks in enumerate(columns):
        for t, n in Counter(toks).items():  # counted in C: a per-token loop was a third of an index job
            v = out.get(t)
            if v is None:
                v = out[t] = [0, 0, 0, 0]
            v[c] += n
    return out


# -- the write hooks (store/documents.py, store/workspaces.py) ------------------------------------


def added(db: Snapshot, chunk_id: int, texts: tuple[str, str, str, str]) -> list[int] | None:
    """A chunk's FTS row was inserted with these four column strings: its records go to the delta,
    unless the ids from the build's cursor on are the build's (an older store, or a large batch's tail).
    Returns the columns' sizes in tokens when it wrote the records."""
    pg = dialect(db) == POSTGRES
    state = built(db)  # COMPLETE on Postgres, whose postings are complete from the start: no build, no tail
    if state is None or (state != COMPLETE and chunk_id >= int(state)):
        return None
    tok = fts5._tokenizer(db)
    cols = tuple(_tokens(tok, s) for s in texts)
    d = sum(len(c) for c in cols)
    if pg:  # with its sizes, held until the transaction commits: a batch's chunks in a few statements
        sizes = [len(c) for c in cols]
        pg_lexical.add(db, chunk_id, d, row_terms(tok, cols), sizes, fold_rows)
        return sizes
    db.executemany(
        "INSERT INTO postings_delta(term, chunk, d, t0, t1, t2, t3) VALUES (?,?,?,?,?,?,?) ON CONFLICT(term, chunk) "
        "DO UPDATE SET d=excluded.d, t0=excluded.t0, t1=excluded.t1, t2=excluded.t2, t3=excluded.t3",
        [(t, chunk_id, d, *v) for t, v in row_terms(tok, cols).items()],
    )
    return [len(c) for c in cols]


def removed(db: Snapshot, chunk_ids: list[int]) -> None:
    """These chunks' FTS rows were deleted: their delta rows go, their main records are dead. Ids
    from the build's cursor on have no main records: marking them dead would kill the records the
    build writes when such an id is used again."""
    state = built(db) if chunk_ids else None
    if state is None:
        return
    db.executemany("DELETE FROM postings_delta WHERE chunk=?", [(c,) for c in chunk_ids])
    if state != COMPLETE:
        chunk_ids = [c for c in chunk_ids if c < int(state)]
    db.executemany("INSERT INTO postings_dead(chunk) VALUES (?) ON CONFLICT DO NOTHING", [(c,) for c in chunk_ids])


def removed_workspace(db: Snapshot, workspace_id: int) -> None:
    if has_tables(db):
        removed(
            db, [r[0] for r in db.execute("SELECT id FROM chunks WHERE workspace_id=?", (workspace_id,)).fetchall()]
        )


def open_tail(db: Snapshot) -> bool:
    """Before a large batch writes its chunks (in its transaction): the ids it is about to use are left
    to build_slice, which `close_tail` runs before the transaction ends, so readers never see the
    tail open. Building a batch's records in one sort costs a quarter of writing them row by row to
    the delta and merging that later. False (nothing opened) unless the postings are complete, and on
    PostgreSQL (its build has no FTS5 rows to read the sizes from: every chunk goes by the delta)."""
    if dialect(db) == POSTGRES or built(db) != COMPLETE:
        return False
    # past every id with records: a chunk's (dead ones' too), so the ids a batch takes from SQLite
    # (one above the largest chunk id) below that keep to the delta and their dead records stay dead
    top = scalar(
        db, "SELECT MAX(COALESCE((SELECT MAX(id) FROM chunks), 0), COALESCE((SELECT MAX(chunk) FROM postings_dead), 0))"
    )
    db.execute("UPDATE meta SET value=? WHERE key='postings_built'", (str(top + 1),))
    return True


def close_tail(db: Snapshot) -> None:
    """Build the records of the chunks written since `open_tail` (the same transaction)."""
    while not build_slice(db, 1 << SEG_BITS):
        pass


# -- segment rows -------------------------------------------------------------------------------


def _records(ids, d, tf) -> tuple[bool, bytes]:
    wide = bool(len(ids)) and (int(d.max()) > 0xFFFF or int(tf.max()) > 0xFF)
    rec = np.empty(len(ids), WIDE if wide else NARROW)
    rec["id"], rec["d"], rec["tf"] = ids, d, tf
    return wide, rec.tobytes()


def decode(wide: int, data: bytes) -> np.ndarray:
    return np.frombuffer(data, WIDE if wide else NARROW)


def _widen(rec: np.ndarray) -> np.ndarray:
    if rec.dtype == WIDE:
        return rec
    out = np.empty(len(rec), WIDE)
    out["id"], out["d"], out["tf"] = rec["id"], rec["d"], rec["tf"]
    return out


def _write_seg(db: Snapshot, term: str, seg: int, rec: np.ndarray) -> None:
    if not len(rec):
        db.execute("DELETE FROM postings WHERE term=? AND seg=?", (term, seg))
        return
    wide, data = _records(rec["id"], rec["d"], rec["tf"])
    db.execute(
        "INSERT INTO postings(term, seg, wide, data) VALUES (?,?,?,?) "
        "ON CONFLICT(term, seg) DO UPDATE SET wide=excluded.wide, data=excluded.data",
        (term, seg, int(wide), data),  # (an integer column on both stores)
    )


def _fold(db: Snapshot, seg: int, terms: list[str], rec: np.ndarray, starts: np.ndarray) -> None:
    """Append records to segment `seg`'s rows: `rec` (WIDE) holds terms[i]'s records from starts[i]
    to starts[i + 1], each term's sorted by id. A term new to the segment is one bulk insert; only
    the others read and rewrite their row (per-term numpy calls were most of a build)."""
    if not terms:
        return
    bounds = np.r_[starts, len(rec)]
    wide = (np.maximum.reduceat(rec["d"], starts) > 0xFFFF) | (
        np.maximum.reduceat(rec["tf"].max(axis=1), starts) > 0xFF
    )
    narrow = np.empty(len(rec), NARROW)
    narrow["id"], narrow["d"], narrow["tf"] = rec["id"], rec["d"], rec["tf"]  # wide terms' rows unused
    cond, arg = in_ids(db, "term", terms)
    old = {
        t: (w, d)
        for t, w, d in db.execute(
            f"SELECT term, wide, data FROM postings WHERE seg=? AND {cond}", (seg, arg)
        ).fetchall()
    }
    fresh, rewritten = [], []
    for i, term in enumerate(terms):
        a, b, w = int(bounds[i]), int(bounds[i + 1]), bool(wide[i])
        row = old.get(term)
        if row is None:
            fresh.append((term, seg, int(w), (rec if w else narrow)[a:b].tobytes()))
            continue
        have = decode(*row)
        if (len(have) and int(have["id"][-1]) < int(rec["id"][a])) and (have.dtype == WIDE) >= w:
            # new ids after the old ones (a build's slice, a batch's tail): the bytes are appended
            rewritten.append((term, seg, row[0], row[1] + (rec if row[0] else narrow)[a:b].tobytes()))
            continue
        both = np.concatenate([_widen(have), rec[a:b]])
        both = both[np.argsort(both["id"], kind="stable")]
        w, data = _records(both["id"], both["d"], both["tf"])
        rewritten.append((term, seg, int(w), data))
    db.executemany(
        "INSERT INTO postings(term, seg, wide, data) VALUES (?,?,?,?) ON CONFLICT(term, seg) DO UPDATE "
        "SET wide=excluded.wide, data=excluded.data",
        fresh + rewritten,
    )


# -- building a store's postings from its chunks (a store that predates them) ------------------


def _sizes(blob: bytes) -> list[int]:
    out, i = [], 0
    while i < len(blob):
        v, i = fts5._varint(blob, i)
        out.append(v)
    return out


def _counted(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct values of `a` sorted, with their counts (np.unique hashes first: slower here)."""
    a = np.sort(a)
    if not len(a):
        return a, a
    starts = np.flatnonzero(np.r_[True, a[1:] != a[:-1]])
    return a[starts], np.diff(np.r_[starts, len(a)])


def build_slice(db: Snapshot, size: int = BUILD_SLICE) -> bool:
    """Build the next `size` chunk ids' records (caller's transaction). True when complete."""
    state = built(db)
    if state is None or state == COMPLETE:
        return True
    lo = int(state)
    top = scalar(db, "SELECT COALESCE(MAX(id), 0) FROM chunks")
    if lo > top:
        db.execute("UPDATE meta SET value=? WHERE key='postings_built'", (COMPLETE,))
        return True
    hi = min(lo + size, ((lo >> SEG_BITS) + 1) << SEG_BITS)  # a slice never spans two segments
    tok = fts5._tokenizer(db)
    in_delta = {
        r[0] for r in db.execute("SELECT DISTINCT chunk FROM postings_delta WHERE chunk >= ? AND chunk < ?", (lo, hi))
    }
    sizes = dict(db.execute("SELECT id, sz FROM chunks_fts_docsize WHERE id >= ? AND id < ?", (lo, hi)))
    docs: dict[int, tuple[list[int], list[int], str, str]] = {}  # title, meta: codes and FTS text
    vocab: dict[str, int] = {}
    code = vocab.setdefault
    terms: list[int] = []  # per token of the slice: its term's number, its chunk's, its column
    rows: list[int] = []
    cols: list[int] = []
    ids: list[int] = []
    lengths: list[int] = []
    mismatched = 0
    for cid, doc_id, crumb, text, title, tags, aliases, path in db.execute(
        "SELECT c.id, c.document_id, c.breadcrumb, c.text, d.title, d.tags, d.aliases, d.path FROM chunks c "
        "JOIN documents d ON d.id = c.document_id WHERE c.id >= ? AND c.id < ? ORDER BY c.id",
        (lo, hi),
    ):
        if cid in in_delta or cid not in sizes:
            continue  # the delta holds its records (written since), or FTS5 has no row for it
        head = docs.get(doc_id)
        if head is None:
            meta = ftstext.meta_text(json.loads(aliases), json.loads(tags), path)
            head = docs[doc_id] = (
                [code(t, len(vocab)) for t in _tokens(tok, fts_text(title))],
                [code(t, len(vocab)) for t in _tokens(tok, meta)],
                fts_text(title),
                meta,
            )
        crumb_t = [code(t, len(vocab)) for t in _tokens(tok, fts_text(crumb))]
        body_t = [code(t, len(vocab)) for t in _tokens(tok, fts_text(text))]
        sz = _sizes(sizes[cid])
        if sz != [len(head[0]), len(crumb_t), len(head[1]), len(body_t)]:
            # indexed with an older title (before documents.py refreshed kept chunks on a retitle):
            # FTS5's row is rewritten from the store's text, so both indexes hold the same words
            mismatched += 1
            db.execute("DELETE FROM chunks_fts WHERE rowid=?", (cid,))
            db.execute(
                "INSERT INTO chunks_fts(rowid, title, breadcrumb, meta, body) VALUES (?,?,?,?,?)",
                (cid, head[2], fts_text(crumb), head[3], fts_text(text)),
            )
            sz = [len(head[0]), len(crumb_t), len(head[1]), len(body_t)]
        r = len(ids)
        ids.append(cid)
        lengths.append(sum(sz))
        for c, toks in enumerate((head[0], crumb_t, head[1], body_t)):
            terms += toks
            rows += [r] * len(toks)
            cols += [c] * len(toks)
    if terms:
        # count (term, row, column) triples in one sort: a posting per distinct (term, row)
        key = (np.array(terms, np.int64) << 22 | np.array(rows, np.int64)) << 2 | np.array(cols, np.int64)
        uniq, cnt = _counted(key)
        post, _ = _counted(uniq >> 2)  # sorted by term, then row
        rec = np.zeros(len(post), WIDE)
        rec["tf"][np.searchsorted(post, uniq >> 2), uniq & 3] = cnt
        term_of, row_of = post >> 22, post & ((1 << 22) - 1)
        rec["id"] = np.array(ids, np.int64)[row_of]
        rec["d"] = np.array(lengths, np.int64)[row_of]
        names = list(vocab)
        starts = np.flatnonzero(np.r_[True, term_of[1:] != term_of[:-1]])
        _fold(db, lo >> SEG_BITS, [names[t] for t in term_of[starts].tolist()], rec, starts)
    # FTS5 rows no chunk owns (left by a rename onto an existing path before 48191d0) count in
    # FTS5's statistics and match queries; the postings cannot hold them, so they go
    orphans = [
        r[0]
        for r in db.execute(
            "SELECT id FROM chunks_fts_docsize WHERE id >= ? AND id < ? AND id NOT IN (SELECT id FROM chunks)", (lo, hi)
        )
    ]
    for cid in orphans:
        db.execute("DELETE FROM chunks_fts WHERE rowid=?", (cid,))
    if mismatched or orphans:
        log.warning(
            "postings: in ids %d-%d, %d FTS rows held other text than the store (rewritten) and %d "
            "belonged to no chunk (deleted)",
            lo,
            hi - 1,
            mismatched,
            len(orphans),
        )
    _bump(db)
    done = hi > top  # later chunks are the delta's
    db.execute("UPDATE meta SET value=? WHERE key='postings_built'", (COMPLETE if done else str(hi),))
    return done


def build_all(db: Snapshot) -> None:
    """Every remaining slice, one transaction each (the benchmark; a daemon builds through maintain)."""
    while True:
        with db:
            if build_slice(db):
                return


# -- merge and compaction (the index job's end) ------------------------------------------------


def _dead(db: Snapshot) -> np.ndarray:
    return np.array([r[0] for r in db.execute("SELECT chunk FROM postings_dead").fetchall()], dtype=np.int64)


def compact(db: Snapshot) -> None:
    """Remove dead chunks' records from every segment holding any (caller's transaction)."""
    dead = _dead(db)
    if not len(dead):
        return
    for seg in sorted({int(x) >> SEG_BITS for x in dead}):
        for _rid, term, wide, data in all_rows(db, "SELECT id, term, wide, data FROM postings WHERE seg=?", (seg,)):
            rec = decode(wide, data)
            keep = ~np.isin(rec["id"], dead)
            if not keep.all():
                _write_seg(db, term, seg, rec[keep])
    db.execute("DELETE FROM postings_dead")
    _bump(db)


def merge(db: Snapshot) -> int:
    """Fold the delta rows of live (not dead) chunks into the segments (caller's transaction)."""
    # While an older store builds, the ids from its cursor on are the build's: it skips those the
    # delta holds, so their rows stay in the delta (merged into the segments they would duplicate)
    state = built(db)
    below = int(state) if state is not None and state != COMPLETE else 1 << 62
    rows = all_rows(  # by segment, term, id (sorted by the database: a Python sort by key cost more)
        db,
        "SELECT term, chunk, d, t0, t1, t2, t3 FROM postings_delta "
        f"WHERE chunk NOT IN (SELECT chunk FROM postings_dead) AND chunk < ? ORDER BY chunk >> {SEG_BITS}, term, chunk",
        (below,),
    )
    if not rows:
        return 0
    terms, *cols = zip(*rows)
    a = np.array(cols, dtype=np.int64)
    rec = np.empty(len(rows), WIDE)
    rec["id"], rec["d"], rec["tf"] = a[0], a[1], a[2:].T
    segs = a[0] >> SEG_BITS
    names = np.array(terms, dtype=object)
    starts = np.flatnonzero(np.r_[True, (names[1:] != names[:-1]) | (segs[1:] != segs[:-1])])
    for seg in np.unique(segs).tolist():
        lo, hi = np.searchsorted(segs, [seg, seg + 1])
        firsts = starts[(starts >= lo) & (starts < hi)]
        _fold(db, seg, names[firsts].tolist(), rec[lo:hi], firsts - lo)
    db.execute(
        "DELETE FROM postings_delta WHERE chunk NOT IN (SELECT chunk FROM postings_dead) AND chunk < ?", (below,)
    )
    _bump(db)
    return len(rows)


def maintain(db: Snapshot, *, force: bool = False, budget: float = BUILD_BUDGET, size: int = BUILD_SLICE) -> None:
    """After an index job's batch (the writer, outside a transaction): compact when many chunks are
    dead, merge when the delta is large (one transaction), and build slices of a store that predates
    the postings for about `budget` seconds (a transaction each, so saves wait at most one slice)."""
    if not has_tables(db):
        return
    with db:
        dead = scalar(db, "SELECT COUNT(*) FROM postings_dead")
        if dead and (force or dead > COMPACT_DEAD):
            compact(db)
        delta = scalar(db, "SELECT COUNT(*) FROM postings_delta")
        if delta and (force or delta > MERGE_ROWS):
            merge(db)
    end = time.monotonic() + budget
    while not complete(db):
        with db:
            build_slice(db, size)
        if time.monotonic() >= end:
            break


def _bump(db: Snapshot) -> None:
    """A maintenance step changed the tables without touching FTS5: readers' caches must not survive it."""
    db.execute(
        "INSERT INTO meta(key, value) VALUES ('postings_gen', '1') "
        "ON CONFLICT(key) DO UPDATE SET value = CAST(meta.value AS INTEGER) + 1"
    )


def fold_rows(db: Snapshot, rows: list[pg_lexical.Row]) -> list[pg_lexical.Row]:
    """Many chunks' records built into the segments at once, as SQLite's index batch builds its tail
    (open_tail), PostgreSQL's (pg_lexical.Pending). A chunk written again after a delete has stale
    records marked dead there, which would hide new ones: those go by the delta (returned)."""
    dead = {c for (c,) in db.execute("SELECT chunk FROM postings_dead WHERE chunk = ANY(?)", ([r[0] for r in rows],))}
    codes: dict[str, int] = {}
    term, chunk, length = [], [], []
    tf: list[list[int]] = []
    for chunk_id, d, counts, _ in (r for r in rows if r[0] not in dead):
        term += [codes.setdefault(t, len(codes)) for t in counts]
        chunk += [chunk_id] * len(counts)
        length += [d] * len(counts)
        tf += counts.values()
    if term:
        t, i = np.array(term, np.int64), np.array(chunk, np.int64)
        seg = i >> SEG_BITS
        order = np.lexsort((i, t, seg))  # by segment, term, id: what _fold takes
        t, seg = t[order], seg[order]
        rec = np.empty(len(t), WIDE)
        rec["id"], rec["d"], rec["tf"] = i[order], np.array(length, np.int64)[order], np.array(tf, np.int64)[order]
        names = list(codes)
        for s in np.unique(seg).tolist():
            lo, hi = np.searchsorted(seg, [s, s + 1])
            starts = np.flatnonzero(np.r_[True, t[lo + 1 : hi] != t[lo : hi - 1]])
            _fold(db, s, [names[c] for c in t[lo:hi][starts].tolist()], rec[lo:hi], starts)
    return [r for r in rows if r[0] in dead]
