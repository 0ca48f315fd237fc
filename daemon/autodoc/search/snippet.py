"""Snippets (pure): the best short window of a chunk, the matched words marked.

Words match the query the way FTS5 matched them: the caller passes FTS5's own
tokenizer (search/lexical/tokens.py), so a word is marked when its stem is a query
word's stem, or begins with a trailing `prefix*`. CJK query runs are matched
as substrings, as their bigrams were.

Runs on: any thread (pure: no I/O, no shared state).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable

from ..store.lexical.ftstext import CJK_RUN, STOPWORDS
from .query import Term

MARK_OPEN, MARK_CLOSE = "«", "»"
SNIPPET_CHARS = 240
_WORD = re.compile(r"\w+", re.UNICODE)

# text → (start, end, stem) for each word, character offsets
Tokenize = Callable[[str], list[tuple[int, int, str]]]


def query_matchers(terms: list[Term], tokenize: Tokenize) -> tuple[set[str], tuple[str, ...], list[str]]:
    """(stems, prefixes, cjk substrings) that mark a word as matched."""
    stems: set[str] = set()
    prefixes: list[str] = []
    cjk: list[str] = []
    # stopwords are marked only when the query is nothing but stopwords ("to be or not to be")
    content = [t for t in terms if t.phrase or t.text.lower() not in STOPWORDS] or terms
    for t in content:
        cjk.extend(CJK_RUN.findall(t.text))
        words = [w for w in _WORD.findall(t.text) if not CJK_RUN.search(w)]
        for i, w in enumerate(words):
            if t.prefix and i == len(words) - 1:
                prefixes.append(w.lower())
            else:
                stems.update(tok for _, _, tok in tokenize(w))
    return stems, tuple(prefixes), cjk


Matchers = tuple[set[str], tuple[str, ...], list[str]]


def _spans(text: str, matchers: Matchers, tokenize: Tokenize) -> list[tuple[int, int]]:
    stems, prefixes, cjk = matchers
    spans = [
        (s, e)
        for s, e, tok in tokenize(text)
        if tok in stems
        or (prefixes and tok.startswith(prefixes))
        or (prefixes and text[s:e].lower().startswith(prefixes))
    ]
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


def snippet_maker(terms: list[Term], tokenize: Tokenize, width: int = SNIPPET_CHARS) -> Callable[[str], str]:
    """make_snippet for one query's terms, with the query's stems worked out once for all its hits."""
    matchers = query_matchers(terms, tokenize) if terms else None
    return lambda text: _snippet(text, matchers, tokenize, width)


def make_snippet(text: str, terms: list[Term], tokenize: Tokenize, width: int = SNIPPET_CHARS) -> str:
    """A window of about `width` characters around the densest cluster of matches."""
    return snippet_maker(terms, tokenize, width)(text)


def _snippet(text: str, matchers: Matchers | None, tokenize: Tokenize, width: int) -> str:
    flat = " ".join(text.split())
    spans = _spans(flat, matchers, tokenize) if matchers else []
    if not spans:
        return _clip(flat, 0, width)
    best_start, best_count = spans[0][0], 0
    starts = [s for s, _ in spans]  # ascending: the spans starting within a window are a run from i
    for i, s in enumerate(starts):
        count = bisect_left(starts, s + width, i) - i
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
