"""Snippets (pure): the best short window of a chunk, the matched words marked.

Words match the query the way FTS5 matched them: case-folded, Snowball-stemmed
(close to FTS5's Porter), or by prefix for a trailing `prefix*` term. CJK
query runs are matched as substrings.
"""

from __future__ import annotations

import re
from functools import lru_cache

import snowballstemmer

from .fts import _CJK_RUN, STOPWORDS
from .query import Term

MARK_OPEN, MARK_CLOSE = "«", "»"
SNIPPET_CHARS = 240
_WORD = re.compile(r"\w+", re.UNICODE)
_stemmer = snowballstemmer.stemmer("english")


@lru_cache(maxsize=4096)
def stem(word: str) -> str:
    return _stemmer.stemWord(word.lower())


def query_matchers(terms: list[Term]) -> tuple[set[str], list[str], list[str]]:
    """(stems, prefixes, cjk substrings) that mark a word as matched."""
    stems: set[str] = set()
    prefixes: list[str] = []
    cjk: list[str] = []
    # stopwords are marked only when the query is nothing but stopwords ("to be or not to be")
    content = [t for t in terms if t.phrase or t.text.lower() not in STOPWORDS] or terms
    for t in content:
        for run in _CJK_RUN.findall(t.text):
            cjk.append(run)
        words = [w for w in _WORD.findall(t.text) if not _CJK_RUN.fullmatch(w)]
        for i, w in enumerate(words):
            if t.prefix and i == len(words) - 1:
                prefixes.append(w.lower())
            else:
                stems.add(stem(w))
    return stems, prefixes, cjk


@lru_cache(maxsize=256)
def _matchers(terms: tuple[Term, ...]) -> tuple[frozenset[str], tuple[str, ...], tuple[str, ...]]:
    stems, prefixes, cjk = query_matchers(list(terms))
    return frozenset(stems), tuple(prefixes), tuple(cjk)


def _spans(text: str, terms: list[Term]) -> list[tuple[int, int]]:
    stems, prefixes, cjk = _matchers(tuple(terms))
    spans: list[tuple[int, int]] = []
    seen: dict[str, bool] = {}  # a word's verdict, once per call: prose repeats its words
    for m in _WORD.finditer(text):
        lw = m.group(0).lower()
        hit = seen.get(lw)
        if hit is None:
            hit = seen[lw] = (lw.isascii() or not _CJK_RUN.search(lw)) and (
                stem(lw) in stems or bool(prefixes and lw.startswith(prefixes)))
        if hit:
            spans.append((m.start(), m.end()))
    for run in cjk:
        for m in re.finditer(re.escape(run), text):
            spans.append((m.start(), m.end()))
    spans.sort()
    merged: list[tuple[int, int]] = []
    for s, e in spans:
        if merged and s <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(e, merged[-1][1]))
        else:
            merged.append((s, e))
    return merged


def make_snippet(text: str, terms: list[Term], width: int = SNIPPET_CHARS) -> str:
    """A window of about `width` characters around the densest cluster of matches."""
    flat = " ".join(text.split())
    spans = _spans(flat, terms)
    if not spans:
        return _clip(flat, 0, width)
    best_start, best_count = spans[0][0], 0
    for i, (s, _) in enumerate(spans):
        count = sum(1 for s2, _ in spans[i:] if s2 < s + width)
        if count > best_count:
            best_start, best_count = s, count
    start = max(0, best_start - width // 4)
    # begin on a word boundary
    if start > 0:
        sp = flat.rfind(" ", 0, start)
        start = sp + 1 if sp >= 0 and start - sp < 20 else start
    end = min(len(flat), start + width)
    if end < len(flat):
        sp = flat.rfind(" ", start, end)
        end = sp if sp > start + width // 2 else end
    out, pos = [], start
    for s, e in spans:
        if e <= start or s >= end:
            continue
        s, e = max(s, start), min(e, end)
        out.append(flat[pos:s])
        out.append(MARK_OPEN + flat[s:e] + MARK_CLOSE)
        pos = e
    out.append(flat[pos:end])
    prefix = "…" if start > 0 else ""
    suffix = "…" if end < len(flat) else ""
    return prefix + "".join(out) + suffix


def _clip(flat: str, start: int, width: int) -> str:
    if len(flat) <= width:
        return flat
    end = flat.rfind(" ", 0, width)
    end = end if end > width // 2 else width
    return flat[:end] + "…"
