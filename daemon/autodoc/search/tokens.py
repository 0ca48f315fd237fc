"""FTS5's own tokenizer (porter over unicode61), for marking words the way the
index matched them. An in-memory SQLite per thread: no store I/O, but apsw,
so it lives apart from the pure snippet code, which takes it as a parameter.

Measured: 0.02–0.03 ms a hit against 1.0–1.3 ms for a Python Snowball
stemmer on cold words (docs/benchmarks/speed.md), and the same stems as the
index, so what is marked is what matched.
"""

from __future__ import annotations

import threading
from functools import lru_cache

import apsw

_local = threading.local()


def _tokenizer():
    tok = getattr(_local, "tok", None)
    if tok is None:
        _local.db = apsw.Connection(":memory:")
        tok = _local.tok = _local.db.fts5_tokenizer("porter", ["unicode61", "remove_diacritics", "2"])
    return tok


def tokenize(text: str) -> list[tuple[int, int, str]]:
    """(start, end, stem) for each word of `text`, offsets in characters."""
    data = text.encode("utf-8")
    raw = _tokenizer()(data, apsw.FTS5_TOKENIZE_DOCUMENT, None)
    if len(data) == len(text):
        return [(t[0], t[1], t[2]) for t in raw]
    char_at: dict[int, int] = {}
    b = 0
    for i, ch in enumerate(text):
        char_at[b] = i
        b += len(ch.encode("utf-8"))
    char_at[b] = len(text)
    return [(char_at[t[0]], char_at[t[1]], t[2]) for t in raw]


@lru_cache(maxsize=8192)  # tag and query words repeat from search to search
def stem(word: str) -> str:
    toks = tokenize(word)
    return toks[0][2] if toks else word.lower()
