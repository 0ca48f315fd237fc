"""What the FTS index knows about itself and about a query's terms, read
without walking the index: how many rows it holds (the averages record bm25
reads, not a COUNT over a million chunks), a key that changes with every
write to it, each term's document count (fts5vocab, cached per key; on the
PostgreSQL store, which has no FTS5, the postings' and bm25.py's), and
whether a given chunk holds a term (the FTS5 tokenizer over the text the
chunk was indexed with, instead of a pass over the term's whole doclist).
The reading of text and of the index's state is fts5.py's.

Each term is one FTS5 expression as search/lexical/fts.py writes them: a quoted
string, its tokens a phrase, a trailing `*` making the last a prefix.

Runs on: the caller's thread, on the read snapshot it passes (the caches are
shared by every thread and keyed by the index's state, so a snapshot only
ever reads counts of its own state).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

from ..interface import Snapshot
from ..sql import POSTGRES, dialect, scalar
from . import bm25, postread

# FTS5's own reading of text and of its index (a leaf module the others share), under their old names here
from .fts5 import TOKENIZER as TOKENIZER
from .fts5 import Expr as Expr
from .fts5 import IndexState as IndexState
from .fts5 import Row as Row
from .fts5 import _tokenizer as _tokenizer
from .fts5 import chunk_total as chunk_total
from .fts5 import index_state as index_state
from .fts5 import indexed_rows as indexed_rows
from .fts5 import parse_expr as parse_expr

VOCAB_SQL = "CREATE VIRTUAL TABLE IF NOT EXISTS temp.chunks_vocab USING fts5vocab(main, 'chunks_fts', 'row')"
_KEEP = 8  # index states whose counts stay cached (one per store a process has open, and a few behind)
_TERMS = 50_000  # terms a state keeps counted: a daemon that never writes still asks for new words


_lock = threading.Lock()
_docs: OrderedDict[tuple, dict[str, int]] = OrderedDict()  # index state's key → cached counts


def term_docs(db: Snapshot, exprs: list[str], state: IndexState | None = None) -> dict[str, int]:
    """expression → how many chunks match it (every workspace: BM25's IDF counts them all).
    A single token is counted as token_docs counts it; a phrase or a prefix by FTS5 itself (on
    PostgreSQL, by bm25.py from the postings)."""
    return _cached(db, exprs, state, "", _expr_counts)


def token_docs(db: Snapshot, tokens: list[str], state: IndexState | None = None) -> dict[str, int]:
    """token, as the tokenizer gave it (already stemmed) → how many chunks hold it: fts5vocab's count
    (on PostgreSQL, the postings'). Not through term_docs: it would stem the token again, and the
    stemmer is not idempotent ("decis" → "deci"). Cached beside term_docs' expressions, under keys
    no expression has."""
    return _cached(db, tokens, state, "\x00", _token_counts)


def _cached(
    db: Snapshot,
    names: list[str],
    state: IndexState | None,
    mark: str,
    count: Callable[[Snapshot, list[str], IndexState], dict[str, int]],
) -> dict[str, int]:
    """name → its count under this index state: those cached (under `mark` + name), the rest counted."""
    state = state or index_state(db)
    keys = {n: mark + n for n in dict.fromkeys(names)}
    with _lock:
        known = _docs.get(state.key) or {}
        got = {n: known[k] for n, k in keys.items() if k in known}
        if known:
            _docs.move_to_end(state.key)
    missing = [n for n in keys if n not in got]
    if missing:
        got.update(count(db, missing, state))
        with _lock:
            merged = _docs.setdefault(state.key, {})
            if len(merged) + len(missing) > _TERMS:
                merged.clear()
            merged.update((keys[n], got[n]) for n in missing)
            _docs.move_to_end(state.key)
            while len(_docs) > _KEEP:
                _docs.popitem(last=False)
    return {n: got[n] for n in names}


def _token_counts(db: Snapshot, tokens: list[str], state: IndexState) -> dict[str, int]:
    """What fts5vocab counts of each token; from the postings on PostgreSQL, which has no FTS5."""
    if dialect(db) == POSTGRES:
        return postread.live_counts(db, tokens, postread.cache_key(db, state.key))
    db.execute(VOCAB_SQL)
    counts = {}
    for t in tokens:
        row = db.execute("SELECT doc FROM temp.chunks_vocab WHERE term=?", (t,)).fetchone()
        counts[t] = row[0] if row else 0
    return counts


def _expr_counts(db: Snapshot, exprs: list[str], state: IndexState) -> dict[str, int]:
    """A word's count from _token_counts; a phrase's or a prefix's from its rows: FTS5's count of
    a MATCH of it, or bm25.py's on PostgreSQL."""
    parsed = {e: parse_expr(db, e) for e in exprs}
    single = {e: p.tokens[0] for e, p in parsed.items() if len(p.tokens) == 1 and not p.prefix}
    counts = _token_counts(db, list(dict.fromkeys(single.values())), state) if single else {}
    out = {}
    for e in exprs:
        if e in single:
            out[e] = counts[single[e]]
        elif dialect(db) == POSTGRES:
            out[e] = bm25.docs(db, e, state)
        else:
            out[e] = scalar(db, "SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?", (e,))
    return out


def holds(row: Row, expr: Expr) -> bool:
    """FTS5's match of one phrase against one row: its tokens in a row within one column."""
    want = expr.tokens
    if not want:
        return False
    if len(want) == 1:
        return want[0] in row.vocab if not expr.prefix else any(t.startswith(want[0]) for t in row.vocab)
    if not all(t in row.vocab for t in want[:-1]):
        return False
    head, m = list(want[:-1]), len(want)
    for col in row.columns:
        for i in range(len(col) - m + 1):
            if (
                col[i] == head[0]
                and col[i : i + m - 1] == head
                and (col[i + m - 1].startswith(want[-1]) if expr.prefix else col[i + m - 1] == want[-1])
            ):
                return True
    return False
