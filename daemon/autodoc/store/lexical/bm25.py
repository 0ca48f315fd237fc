"""FTS5's MATCH and its bm25() computed from the postings index, for the PostgreSQL store, which
has no FTS5 (docs/dev/postgres.md, section 2): the rows a query matches, their scores and their
order as FTS5 gives them on the SQLite store, to the bit.

The queries are the ones search/lexical/fts.py and maxscore.py write: phrases (quoted strings, a
trailing `*` making the last token a prefix) joined by AND, OR and NOT, with parentheses; NOT binds
tightest, then AND, then OR, as in FTS5. Each phrase's rows and its instances per column:

- one token: its live records (store/lexical/postread.py);
- a prefix (`"wo"*`): every stored token in the range [wo, wp) (the terms compare bytewise on both
  stores), their counts summed per row (each position holds one token, so this is FTS5's count of
  the phrase's instances);
- several tokens: the rows holding each of them (the necessary condition), then each candidate's
  columns tokenized as they were indexed (fts5.indexed_rows: FTS5's tokenizer over the same
  strings) and the phrase's occurrences counted by position, within a column, as FTS5 matches it.

The score is fts5_aux.c's fts5Bm25Function (`idf`, `weight`: search/lexical/impact.py's too), with N and the
average length from the index's statistics (store/pg/lexical.py), every phrase's IDF from the rows
holding it in the whole index, and the per-phrase terms added in phrase order (a phrase a row does
not hold adds 0.0, which changes no bit). Rows rank by score, then id.

Runs on: the search's thread, on its snapshot (the caches are keyed by the index's state).
"""

from __future__ import annotations

import math
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..interface import Snapshot
from . import fts5, postread

K1, B = 1.2, 0.75  # fts5_aux.c


def idf(rows: int, n: int) -> float:
    """fts5Bm25Function's IDF of a phrase `n` of the index's `rows` rows hold: clamped to 1e-6 when ≤ 0."""
    x = math.log((rows - n + 0.5) / (n + 0.5))
    return 1e-6 if x <= 0.0 else x


def weight(idf: float, tf: np.ndarray, d: np.ndarray, w: np.ndarray, avgdl: float) -> np.ndarray:
    """fts5Bm25Function's term of one phrase for rows holding it: `tf` its instances per column, `d`
    the rows' lengths, `w` the columns' weights (search/lexical/impact.py sums these in phrase order)."""
    f = tf.astype(np.float64) @ w  # integers times integer weights: exact in any order
    return idf * ((f * (K1 + 1.0)) / (f + K1 * (1 - B + B * d.astype(np.float64) / avgdl)))


@dataclass(frozen=True)
class Phrase:
    """A phrase's rows in the whole index: ids (sorted), the row's length, its instances per column."""

    ids: np.ndarray  # int64
    d: np.ndarray  # int64
    tf: np.ndarray  # int64, (rows, 4)


_EMPTY = Phrase(np.empty(0, np.int64), np.empty(0, np.int64), np.empty((0, 4), np.int64))

# -- the query -----------------------------------------------------------------------------------

_LEX = re.compile(r'\s*(?:(?P<q>"(?:[^"]|"")*"\*?)|(?P<op>AND|OR|NOT)(?![\w"])|(?P<p>[()]))')

Node = tuple  # ("phrase", text) | ("and" | "or" | "not", left, right)


def parse(match: str) -> Node:
    """A MATCH expression as FTS5 reads the ones this product writes (ValueError for any other)."""
    toks: list[tuple[str, str]] = []
    i = 0
    while i < len(match):
        m = _LEX.match(match, i)
        if m is None or m.end() == i:
            if match[i:].strip():
                raise ValueError(f"not a query this store evaluates: {match!r}")
            break
        kind = m.lastgroup or ""
        toks.append((kind, m.group(kind)))
        i = m.end()
    pos = 0

    def peek() -> tuple[str, str] | None:
        return toks[pos] if pos < len(toks) else None

    def take() -> tuple[str, str]:
        nonlocal pos
        pos += 1
        return toks[pos - 1]

    def primary() -> Node:
        t = take() if peek() else ("", "")
        if t == ("p", "("):
            node = either()
            if take() != ("p", ")"):
                raise ValueError(f"unbalanced parentheses: {match!r}")
            return node
        if t[0] != "q":
            raise ValueError(f"a phrase expected: {match!r}")
        return ("phrase", t[1])

    def binary(op: str, sub) -> Node:
        node = sub()
        while peek() == ("op", op):
            take()
            node = (op.lower(), node, sub())
        return node

    def negated() -> Node:
        return binary("NOT", primary)

    def both() -> Node:
        return binary("AND", negated)

    def either() -> Node:
        return binary("OR", both)

    node = either()
    if pos != len(toks):
        raise ValueError(f"not a query this store evaluates: {match!r}")
    return node


def phrases(node: Node) -> list[str]:
    """The phrases in the order FTS5 numbers them (left to right)."""
    if node[0] == "phrase":
        return [node[1]]
    return phrases(node[1]) + phrases(node[2])


def _rows(node: Node, got: dict[str, Phrase]) -> np.ndarray:
    if node[0] == "phrase":
        return got[node[1]].ids
    a, b = _rows(node[1], got), _rows(node[2], got)
    if node[0] == "and":
        return np.intersect1d(a, b, assume_unique=True)
    if node[0] == "or":
        return np.union1d(a, b)
    return np.setdiff1d(a, b, assume_unique=True)


# -- a phrase's rows -----------------------------------------------------------------------------


def _of(rec: np.ndarray) -> Phrase:
    return Phrase(rec["id"].astype(np.int64), rec["d"].astype(np.int64), rec["tf"].astype(np.int64))


def prefix_range(prefix: str) -> tuple[str, str]:
    """The range [lo, hi) of the strings starting with `prefix` (not empty): `prefix`, and the least
    string above every one of them. The stored tokens compare bytewise on both stores, so an index
    range scan of it reads those tokens only (here, and the fuzzy fallback's store/lexical/vocab.py)."""
    return prefix, prefix[:-1] + chr(ord(prefix[-1]) + 1)


def _prefixed(db: Snapshot, prefix: str, key: tuple) -> Phrase:
    """Every stored token beginning with `prefix`, as one phrase: each row's counts summed."""
    terms = [
        r[0]
        for r in db.execute(
            "SELECT DISTINCT term FROM postings WHERE term >= ?1 AND term < ?2 "
            "UNION SELECT DISTINCT term FROM postings_delta WHERE term >= ?1 AND term < ?2",
            prefix_range(prefix),
        ).fetchall()
    ]
    recs = [_of(r) for r in postread.read_terms(db, terms, key).values() if len(r)]
    if not recs:
        return _EMPTY
    ids = np.concatenate([r.ids for r in recs])
    order = np.argsort(ids, kind="stable")
    ids, d, tf = ids[order], np.concatenate([r.d for r in recs])[order], np.concatenate([r.tf for r in recs])[order]
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    return Phrase(ids[starts], d[starts], np.add.reduceat(tf, starts, axis=0))


def _token(db: Snapshot, token: str, prefix: bool, key: tuple) -> Phrase:
    if prefix:
        return _prefixed(db, token, key)
    return _of(postread.read_terms(db, [token], key)[token])


def _instances(col: list[str], want: tuple[str, ...], prefix: bool) -> int:
    """How many positions of a column the phrase starts at (FTS5's instances of it there); the
    first token is found by list.index (a scan in C), the rest compared only there."""
    m, first, middle, last = len(want), want[0], list(want[1:-1]), want[-1]
    end, n, i = len(col) - m + 1, 0, -1
    if end <= 0:
        return 0  # (a shorter column; and list.index would read a negative end from the back)
    while True:
        try:
            i = col.index(first, i + 1, end)
        except ValueError:
            return n
        tail = col[i + m - 1]
        if col[i + 1 : i + m - 1] == middle and (tail.startswith(last) if prefix else tail == last):
            n += 1


def phrase(db: Snapshot, expr: str, key: tuple) -> Phrase:
    """The rows of the whole index holding one phrase (a quoted string, perhaps with `*`)."""
    cache = (key, expr)
    with _lock:
        got = _phrases.get(cache)
    if got is not None:
        return got
    p = fts5.parse_expr(db, expr)
    if not p.tokens:
        got = _EMPTY
    elif len(p.tokens) == 1:
        got = _token(db, p.tokens[0], p.prefix, key)
    else:
        parts = [_token(db, t, p.prefix and i == len(p.tokens) - 1, key) for i, t in enumerate(p.tokens)]
        cand = parts[0].ids
        for part in parts[1:]:
            cand = np.intersect1d(cand, part.ids, assume_unique=True)
        # a column can hold the phrase only where it holds every one of its tokens: only those are tokenized
        where = np.ones((len(cand), 4), bool)
        for part in parts:
            where &= part.tf[np.searchsorted(part.ids, cand)] > 0
        some = where.any(axis=1)
        cand, where = cand[some], where[some]
        texts = fts5.indexed_texts(db, cand.tolist(), frozenset(np.flatnonzero(where.any(axis=0)).tolist()))
        keep, tfs = [], []
        for cid, cols in zip(cand.tolist(), where.tolist()):
            row = texts.get(cid)
            counts = [
                _instances(fts5.tokens(db, row[c]), p.tokens, p.prefix) if row and cols[c] else 0 for c in range(4)
            ]
            if any(counts):
                keep.append(cid)
                tfs.append(counts)
        ids = np.array(keep, np.int64)
        first = parts[0]
        got = Phrase(ids, first.d[np.searchsorted(first.ids, ids)], np.array(tfs, np.int64).reshape(-1, 4))
    with _lock:
        _phrases.put(cache, got, len(got.ids))
    return got


# -- matching and ranking -----------------------------------------------------------------------

_lock = threading.Lock()
# What each cache keeps, in rows (a search asks for one ranking at several depths, and the counts of
# its phrases more than once): bounded in rows rather than entries, so that a few huge prefixes (`a*`
# at 1M chunks) cannot hold the memory of hundreds: at most ≈ 50 MB of phrases (48 bytes a row) and
# 16 MB of rankings.
KEEP_ROWS = 1 << 20


class _Cache:
    """Values by key, the oldest dropped while their rows exceed KEEP_ROWS (the newest always kept)."""

    def __init__(self) -> None:
        self.items: OrderedDict[tuple, tuple[Any, int]] = OrderedDict()
        self.rows = 0

    def get(self, key: tuple) -> Any:
        got = self.items.get(key)
        return None if got is None else got[0]

    def put(self, key: tuple, value: Any, rows: int) -> None:
        if key in self.items:
            return
        self.items[key] = (value, rows)
        self.rows += rows
        while self.rows > KEEP_ROWS and len(self.items) > 1:
            self.rows -= self.items.popitem(last=False)[1][1]


_phrases = _Cache()
_rankings = _Cache()


def _key(db: Snapshot, state: fts5.IndexState | None = None) -> tuple[fts5.IndexState, tuple]:
    state = state or fts5.index_state(db)
    return state, postread.cache_key(db, state.key)


def docs(db: Snapshot, expr: str, state: fts5.IndexState | None = None) -> int:
    """How many rows of the whole index hold this phrase (FTS5's count of a MATCH of it)."""
    return len(phrase(db, expr, _key(db, state)[1]).ids)


def matching(db: Snapshot, match: str) -> list[int]:
    """The ids of the rows the query matches, ascending (FTS5's rowids of the MATCH)."""
    key = _key(db)[1]
    node = parse(match)
    return _rows(node, {p: phrase(db, p, key) for p in phrases(node)}).tolist()


def ranking(db: Snapshot, match: str, weights: tuple[float, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Every row the query matches, best first, and its bm25 (negative: lower is better), ties by id."""
    state, key = _key(db)
    cache = (key, match, weights)
    with _lock:
        got = _rankings.get(cache)
    if got is not None:
        return got
    node = parse(match)
    order = phrases(node)
    rows = {p: phrase(db, p, key) for p in order}
    ids = _rows(node, rows)
    s = np.zeros(len(ids))
    if len(ids):
        avgdl = float(state.tokens) / float(state.rows)
        w = np.array([float(x) for x in weights])
        for p in order:
            r = rows[p]
            n = len(r.ids)
            if not n:
                continue
            pos = np.minimum(np.searchsorted(r.ids, ids), n - 1)
            hit = r.ids[pos] == ids
            s[hit] += weight(idf(state.rows, n), r.tf[pos[hit]], r.d[pos[hit]], w, avgdl)
    best = np.lexsort((ids, -s))
    got = (ids[best], -s[best])
    with _lock:
        _rankings.put(cache, got, len(got[0]))
    return got


def ranked(db: Snapshot, match: str, limit: int, weights: tuple[float, ...]) -> list[tuple[int, float]]:
    """FTS5's `SELECT rowid, bm25(...) ... MATCH ? ORDER BY bm25, rowid LIMIT ?`: (id, bm25) best first."""
    ids, scores = ranking(db, match, weights)
    return list(zip(ids[:limit].tolist(), scores[:limit].tolist()))
