"""fzf-like fuzzy matching of a typed pattern against document titles and paths:
what the "open a document" picker (document.find) matches and ranks by.

Input: a pattern (words; each must match, in order of its characters,
case-insensitive) and `(path, title)` rows. Output: the matching rows, best
first, with the matched positions in the title and in the path.

Each word is one compiled regular expression anchored at the start and
free of backtracking (`[^c]*+c` per character): a row's title and path are
each tried once, in C, so a 100,000-document workspace is scanned in well
under a tenth of a second. Only the best SCORED candidates are scored in
Python: those holding the word as it is typed, then the shortest.

Runs on: the caller's thread (pure).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

SCORED = 300  # rows scored in full at most (a short pattern matches thousands)
STARTS = 16  # starting points tried per word: the first ones give the best runs in practice
SEP = "\x00"  # between title and path in the haystack: no pattern character matches it


@dataclass(frozen=True)
class Found:
    path: str
    title: str
    score: int
    title_marks: list[int]
    path_marks: list[int]


def score(word: str, text: str) -> tuple[int, list[int]] | None:
    """(score, positions) of one word in `text` (lower-cased already), or None. Runs of
    adjacent characters and characters at word starts count more; a spread-out match less."""
    if not word:
        return 0, []
    best: tuple[int, list[int]] | None = None
    starts = [i for i, ch in enumerate(text) if ch == word[0]][:STARTS]
    for start in starts:
        pos, j, got, prev = [], 0, 0, -2
        for i in range(start, len(text)):
            if text[i] == SEP:  # a word matches within the title or within the path, not across
                break
            if text[i] == word[j]:
                got += 1 + (3 if i == prev + 1 else 0) + (2 if i == 0 or not text[i - 1].isalnum() else 0)
                pos.append(i)
                prev = i
                j += 1
                if j == len(word):
                    break
        if j == len(word):
            s = got - (pos[-1] - pos[0]) // 8
            if best is None or s > best[0]:
                best = (s, pos)
    return best


class Names:
    """A workspace's `(path, title)` rows, lower-cased once (kept while the store does not change)."""

    def __init__(self, rows: Sequence[tuple[str, str]]) -> None:
        self.rows = list(rows)
        self.titles = [t.lower() for _, t in self.rows]
        self.paths = [p.lower() for p, _ in self.rows]
        self.sizes = [len(p) for p in self.paths]


def _regex(word: str) -> re.Pattern[str]:
    return re.compile("".join(f"[^{re.escape(c)}]*+{re.escape(c)}" for c in word))


def find(names: Names | Sequence[tuple[str, str]], pattern: str, limit: int) -> tuple[list[Found], int]:
    """The rows every word of `pattern` matches (each word within the title or within the
    path), best first (then by path), at most `limit`; and how many matched in all. An empty
    pattern: every row, in path order."""
    idx = names if isinstance(names, Names) else Names(names)
    words = pattern.lower().split()
    if not words:
        ordered = sorted(idx.rows)
        return [Found(p, t, 0, [], []) for p, t in ordered[:limit]], len(idx.rows)
    rows: Sequence[int] = range(len(idx.rows))
    for w in words:  # each word narrows the rows the next one is tried on
        m = _regex(w).match
        ps, ts = idx.paths, idx.titles
        rows = [i for i in rows if m(ps[i]) or m(ts[i])]
    hits = rows
    matched = len(rows)
    room = max(SCORED, limit)
    if matched > room:  # those holding every word as typed first, then the shortest paths
        ts, ps, size = idx.titles, idx.paths, idx.sizes.__getitem__
        typed = [i for i in rows if all(w in ts[i] or w in ps[i] for w in words)]
        rows = sorted(typed, key=size)[:room]
        if len(rows) < room:
            kept = set(rows)
            rows += sorted((i for i in hits if i not in kept), key=size)[: room - len(rows)]
    out: list[tuple[int, str, Found]] = []
    for i in rows:
        path, title = idx.rows[i]
        hay = f"{idx.titles[i]}{SEP}{idx.paths[i]}"
        total, marks = 0, []
        for w in words:
            got = score(w, hay)
            if got is None:  # every start the scorer tries is past STARTS: too far-fetched to show
                break
            total += got[0]
            marks += got[1]
        else:
            cut = len(title) + 1
            out.append(
                (
                    -total,
                    path,
                    Found(
                        path,
                        title,
                        total,
                        sorted({m for m in marks if m < cut - 1}),
                        sorted({m - cut for m in marks if m >= cut}),
                    ),
                )
            )
    out.sort(key=lambda t: (t[0], t[1]))
    return [f for _, _, f in out[:limit]], matched
