"""FTS5's own tokenizer (porter over unicode61), for marking words the way the
index matched them. An in-memory SQLite per thread: no store I/O, but apsw,
so it lives apart from the pure snippet code, which takes it as a parameter.

Measured: 0.02–0.03 ms a hit against 1.0–1.3 ms for a Python Snowball
stemmer on cold words (docs/benchmarks/speed.md), and the same stems as the
index, so what is marked is what matched.

Runs on: any thread (one FTS5 tokenizer per thread).
"""

from __future__ import annotations

import re
import threading
from bisect import bisect_right
from collections import Counter
from functools import lru_cache

import apsw

_local = threading.local()


def _tokenizer():
    tok = getattr(_local, "tok", None)
    if tok is None:
        _local.db = apsw.Connection(":memory:")
        tok = _local.tok = _local.db.fts5_tokenizer("porter", ["unicode61", "remove_diacritics", "2"])
    return tok


_NON_ASCII = re.compile(r"[^\x00-\x7f]")


def tokenize(text: str) -> list[tuple[int, int, str]]:
    """(start, end, stem) for each word of `text`, offsets in characters."""
    data = text.encode("utf-8")
    raw = _tokenizer()(data, apsw.FTS5_TOKENIZE_DOCUMENT, None)  # (byte start, byte end, stem); porter never colocates
    if len(data) == len(text):
        return raw
    # Byte offsets → character offsets. Only the non-ASCII characters shift
    # them, and prose has few, so step over those rather than every character.
    after: list[int] = []  # byte offset just past each non-ASCII character
    shift: list[int] = []  # extra bytes up to and including it
    extra = 0
    for m in _NON_ASCII.finditer(text):
        extra += len(m.group().encode("utf-8")) - 1
        after.append(m.start() + extra + 1)
        shift.append(extra)

    def char(b: int) -> int:
        i = bisect_right(after, b)
        return b - shift[i - 1] if i else b

    return [(char(t[0]), char(t[1]), t[2]) for t in raw]


@lru_cache(maxsize=8192)  # tag and query words repeat from search to search
def stem(word: str) -> str:
    toks = tokenize(word)
    return toks[0][2] if toks else word.lower()


def stems(text: str) -> set[str]:
    """The distinct stems of `text`, no offsets (a hit's coverage needs only which words it holds)."""
    raw = _tokenizer()(text.encode("utf-8"), apsw.FTS5_TOKENIZE_DOCUMENT, None, include_offsets=False)
    return {t[0] for t in raw}


def stem_counts(text: str) -> Counter[str]:
    """How often each stem occurs in `text`: FTS5's term frequency, as a column holding it counts."""
    raw = _tokenizer()(text.encode("utf-8"), apsw.FTS5_TOKENIZE_DOCUMENT, None, include_offsets=False)
    return Counter(t[0] for t in raw)
