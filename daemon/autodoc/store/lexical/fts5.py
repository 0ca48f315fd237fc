"""FTS5's own reading of text and of its index, which every lexical module shares: its tokenizer
(the store's on SQLite; on PostgreSQL, which has no FTS5, the same C code from an in-memory SQLite),
a query term's tokens as FTS5 reads them, a chunk's row as it was indexed, and the index's state
(how many rows, how many tokens, a key that changes with every write). A leaf: the modules that
count (ftsterms.py), read postings (postread.py) and evaluate queries (bm25.py) all sit on it.

Runs on: the caller's thread, on the snapshot it passes (one tokenizer per thread on PostgreSQL).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import cast

import apsw

from ..interface import Snapshot
from ..pg import lexical as pg_lexical
from ..sql import POSTGRES, dialect, in_ids
from .ftstext import fts_text, meta_text

# must name the tokenizer chunks_fts was created with (migrations.py; a test compares them)
TOKENIZER = ("porter", ["unicode61", "remove_diacritics", "2"])
_AVERAGES_ID, _STRUCTURE_ID = 1, 10  # fts5_index.c: FTS5_AVERAGES_ROWID, FTS5_STRUCTURE_ROWID


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
    if dialect(db) == POSTGRES:  # no FTS5: the index's own statistics row (store/pg/lexical.py)
        rows, tokens, key = pg_lexical.state(db)
        return IndexState(key, rows, tokens)
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


def _sqlite(db: Snapshot) -> apsw.Connection:
    return cast(apsw.Connection, db)  # FTS5 is SQLite's alone: these readers run on the SQLite store only


_local = threading.local()


def _tokenizer(db: Snapshot):
    """FTS5's tokenizer: the store's own on SQLite; on PostgreSQL the same C code, from an in-memory
    SQLite of this thread's (the tokens, and so every count and score, are the SQLite store's)."""
    if dialect(db) != POSTGRES:
        return _sqlite(db).fts5_tokenizer(*TOKENIZER)  # under a microsecond: made per call, never kept past it
    tok = getattr(_local, "tok", None)
    if tok is None:
        _local.db = apsw.Connection(":memory:")
        tok = _local.tok = _local.db.fts5_tokenizer(*TOKENIZER)
    return tok


def parse_expr(db: Snapshot, expr: str) -> Expr:
    """A term as FTS5 reads it: the quoted string's tokens, the last a prefix when a `*` follows."""
    prefix = expr.endswith("*")
    body = expr[:-1] if prefix else expr
    inner = body[1:-1].replace('""', '"') if len(body) >= 2 and body[0] == body[-1] == '"' else body
    flags = apsw.FTS5_TOKENIZE_QUERY | (apsw.FTS5_TOKENIZE_PREFIX if prefix else 0)
    toks = _tokenizer(db)(inner.encode("utf-8"), flags, None, include_offsets=False, include_colocated=False)
    return Expr(tuple(toks), prefix)


@dataclass(frozen=True)
class Row:
    columns: tuple[list[str], ...]  # the tokens of title, breadcrumb, meta, body
    vocab: frozenset[str]  # every token of the row


def indexed_texts(
    db: Snapshot, chunk_ids: list[int], columns: frozenset[int] = frozenset(range(4))
) -> dict[int, tuple[str, ...]]:
    """chunk id → the four strings its FTS row was indexed from (title, breadcrumb, meta, body: what
    store/documents.py writes through fts_text); a column not in `columns` is left "" (not built)."""
    if not chunk_ids:
        return {}
    ids_in, ids = in_ids(db, "c.id", chunk_ids)
    out: dict[int, tuple[str, ...]] = {}
    for cid, title, crumb, tags, aliases, path, text in db.execute(
        "SELECT c.id, d.title, c.breadcrumb, d.tags, d.aliases, d.path, c.text FROM chunks c "
        f"JOIN documents d ON d.id = c.document_id WHERE {ids_in}",
        (ids,),
    ).fetchall():
        meta = meta_text(json.loads(aliases), json.loads(tags), path) if 2 in columns else ""
        raw = (title, crumb, meta, text)
        out[cid] = tuple("" if c not in columns else s if s.isascii() else fts_text(s) for c, s in enumerate(raw))
    return out


def tokens(db: Snapshot, text: str) -> list[str]:
    """A column's tokens as FTS5 indexed them (its positions are their places in the list)."""
    flags = apsw.FTS5_TOKENIZE_DOCUMENT
    return _tokenizer(db)(text.encode("utf-8"), flags, None, include_offsets=False, include_colocated=False)


def indexed_rows(db: Snapshot, chunk_ids: list[int]) -> dict[int, Row]:
    """chunk id → its FTS row's tokens, from the text it was indexed with (store/documents.py
    writes the same four fields through fts_text; the tokenizer is FTS5's own)."""
    out: dict[int, Row] = {}
    for cid, texts in indexed_texts(db, chunk_ids).items():
        cols = tuple(tokens(db, s) for s in texts)
        out[cid] = Row(cols, frozenset(cols[3]).union(cols[0], cols[1], cols[2]))
    return out
