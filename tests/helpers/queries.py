"""Sentence-length queries cut from a store's own chunks, for tests that compare two rankings."""

from __future__ import annotations

import re


def sentence_queries(db, n: int, every: int, extra: list[str]) -> list[str]:
    """The first 14 words of every `every`-th chunk with at least 8, up to n, then `extra`."""
    out = []
    for (text,) in db.execute(f"SELECT text FROM chunks WHERE id % {int(every)} = 0 ORDER BY id"):
        words = re.findall(r"[^\W_][\w'-]*", text)
        if len(words) >= 8:
            out.append(" ".join(words[:14]))
        if len(out) >= n:
            break
    return out + extra
