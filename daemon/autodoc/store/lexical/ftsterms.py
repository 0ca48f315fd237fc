"""What the FTS index knows about itself and about a query's terms, read
without walking the index: how many rows it holds (the averages record bm25
reads, not a COUNT over a million chunks), a key that changes with every
write to it, each term's document count (fts5vocab, cached per key), and
whether a given chunk holds a term (the FTS5 tokenizer over the text the
chunk was indexed with, instead of a pass over the term's whole doclist).

Each term is one FTS5 expression as search/lexical/fts.py writes them: a quoted
string, its tokens a phrase, a trailing `*` making the last a prefix.

Runs on: the caller's thread, on the read snapshot it passes (the caches are
shared by every thread and keyed by the index's state, so a snapshot only
ever reads counts of its own state).
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import cast

import apsw

from ..interface import Snapshot
from ..sql import scalar
from .ftstext import fts_text, meta_text

# must name the tokenizer chunks_fts was created with (migrations.py; a test compares them)
TOKENIZER = ("porter", ["unicode61", "remove_diacritics", "2"])
VOCAB_SQL = "CREATE VIRTUAL TABLE IF NOT EXISTS temp.chunks_vocab USING fts5vocab(main, 'chunks_fts', 'row')"
_AVERAGES_ID, _STRUCTURE_ID = 1, 10  # fts5_index.c: FTS5_AVERAGES_ROWID, FTS5_STRUCTURE_ROWID
_KEEP = 8  # index states whose counts stay cached (one per store a process has open, and a few behind)
_TERMS = 50_000  # terms a state keeps counted: a daemon that never writes still asks for new words


@dataclass(frozen=True)
class IndexState:
    key: tuple  # changes with every write to chunks_fts: the structure record changes with each
    rows: int  # FTS5's own row count: the N of its bm25 IDF (one row per chunk)
    tokens: int  # every column's tokens, all rows


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    """SQLite's varint (what FTS5's records use): 7 bits a byte, high bit first, a 9th byte whole."""
    v = 0
    for n in range(9):
        b = buf[i]
        i += 1
        if n == 8:
            return (v << 8) | b, i
        v = (v << 7) | (b & 0x7F)
        if b < 0x80:
            return v, i
    return v, i  # pragma: no cover (the loop returns)


def index_state(db: Snapshot) -> IndexState:
    blocks = dict(db.execute("SELECT id, block FROM chunks_fts_data WHERE id IN (?, ?)", (_AVERAGES_ID, _STRUCTURE_ID)))
    avg = blocks.get(_AVERAGES_ID) or b""
    rows, tokens, i = 0, 0, 0
    if avg:
        rows, i = _varint(avg, 0)
        while i < len(avg):
            n, i = _varint(avg, i)
            tokens += n
    return IndexState((_sqlite(db).filename, bytes(blocks.get(_STRUCTURE_ID) or b""), bytes(avg)), rows, tokens)


def chunk_total(db: Snapshot) -> int:
    """How many chunks the store holds (every workspace): FTS5 keeps the count, so it is one read."""
    return index_state(db).rows


@dataclass(frozen=True)
class Expr:
    tokens: tuple[str, ...]  # as the index holds them (stemmed)
    prefix: bool  # the last token is a prefix


_lock = threading.Lock()
_docs: OrderedDict[tuple, dict[str, int]] = OrderedDict()


def _sqlite(db: Snapshot) -> apsw.Connection:
    return cast(apsw.Connection, db)  # FTS5 is SQLite's alone: these readers run on the SQLite store only


def _tokenizer(db: Snapshot):
    return _sqlite(db).fts5_tokenizer(*TOKENIZER)  # under a microsecond: made per call, never kept past its connection


def parse_expr(db: Snapshot, expr: str) -> Expr:
    """A term as FTS5 reads it: the quoted string's tokens, the last a prefix when a `*` follows."""
    prefix = expr.endswith("*")
    body = expr[:-1] if prefix else expr
    inner = body[1:-1].replace('""', '"') if len(body) >= 2 and body[0] == body[-1] == '"' else body
    flags = apsw.FTS5_TOKENIZE_QUERY | (apsw.FTS5_TOKENIZE_PREFIX if prefix else 0)
    toks = _tokenizer(db)(inner.encode("utf-8"), flags, None, include_offsets=False, include_colocated=False)
    return Expr(tuple(toks), prefix)


def term_docs(db: Snapshot, exprs: list[str], state: IndexState | None = None) -> dict[str, int]:
    """expression → how many chunks match it (every workspace: BM25's IDF counts them all).
    A single token is one fts5vocab row; a phrase or a prefix is counted by FTS5 itself."""
    state = state or index_state(db)
    wanted = list(dict.fromkeys(exprs))
    with _lock:
        known = _docs.get(state.key) or {}
        got = {e: known[e] for e in wanted if e in known}
        if known:
            _docs.move_to_end(state.key)
    missing = [e for e in wanted if e not in got]
    if missing:
        vocab = False
        for e in missing:
            p = parse_expr(db, e)
            if len(p.tokens) == 1 and not p.prefix:
                if not vocab:
                    db.execute(VOCAB_SQL)
                    vocab = True
                row = db.execute("SELECT doc FROM temp.chunks_vocab WHERE term=?", (p.tokens[0],)).fetchone()
                got[e] = row[0] if row else 0
            else:
                got[e] = scalar(db, "SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?", (e,))
        _remember(state, {e: got[e] for e in missing})
    return {e: got[e] for e in exprs}


def _remember(state: IndexState, counts: dict[str, int]) -> None:
    """Cache counts under this index state (term_docs' expressions, token_docs' keys)."""
    with _lock:
        merged = _docs.setdefault(state.key, {})
        if len(merged) + len(counts) > _TERMS:
            merged.clear()
        merged.update(counts)
        _docs.move_to_end(state.key)
        while len(_docs) > _KEEP:
            _docs.popitem(last=False)


def token_docs(db: Snapshot, tokens: list[str], state: IndexState | None = None) -> dict[str, int]:
    """token, as the tokenizer gave it (already stemmed) → how many chunks hold it. Not through
    term_docs: it would stem the token again, and the stemmer is not idempotent ("decis" →
    "deci"). Cached beside term_docs' expressions, under keys no expression has."""
    state = state or index_state(db)
    keys = {t: "\x00" + t for t in dict.fromkeys(tokens)}
    with _lock:
        known = _docs.get(state.key) or {}
        got = {t: known[k] for t, k in keys.items() if k in known}
    missing = [t for t in keys if t not in got]
    if missing:
        db.execute(VOCAB_SQL)
        for t in missing:
            row = db.execute("SELECT doc FROM temp.chunks_vocab WHERE term=?", (t,)).fetchone()
            got[t] = row[0] if row else 0
        _remember(state, {keys[t]: got[t] for t in missing})
    return {t: got[t] for t in tokens}


@dataclass(frozen=True)
class Row:
    columns: tuple[list[str], ...]  # the tokens of title, breadcrumb, meta, body
    vocab: frozenset[str]  # every token of the row


def indexed_rows(db: Snapshot, chunk_ids: list[int]) -> dict[int, Row]:
    """chunk id → its FTS row's tokens, from the text it was indexed with (store/documents.py
    writes the same four fields through fts_text; the tokenizer is FTS5's own)."""
    if not chunk_ids:
        return {}
    tok = _tokenizer(db)
    flags = apsw.FTS5_TOKENIZE_DOCUMENT
    out: dict[int, Row] = {}
    for cid, title, crumb, tags, aliases, path, text in db.execute(
        "SELECT c.id, d.title, c.breadcrumb, d.tags, d.aliases, d.path, c.text FROM chunks c "
        "JOIN documents d ON d.id = c.document_id WHERE c.id IN (SELECT value FROM json_each(?))",
        (json.dumps(list(chunk_ids)),),
    ):
        meta = meta_text(json.loads(aliases), json.loads(tags), path)
        cols = tuple(
            tok(
                (s if s.isascii() else fts_text(s)).encode("utf-8"),
                flags,
                None,
                include_offsets=False,
                include_colocated=False,
            )
            for s in (title, crumb, meta, text)
        )
        out[cid] = Row(cols, frozenset(cols[3]).union(cols[0], cols[1], cols[2]))
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
