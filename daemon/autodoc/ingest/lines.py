"""Ingest helpers shared by parsing and chunking: lines, fences, byte offsets.

Input: a document's text. Output: its lines (with character offsets), the
fenced code blocks of its body, and a char-index → UTF-8 byte-offset map.
markdown.py and chunk.py must agree on what is code and what is a heading, so
both read the text through these functions.

Runs on: any thread (pure: no I/O, no shared state).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass


@dataclass(frozen=True)
class Line:
    no: int  # 1-based line number
    start: int  # char index of the line's first character
    end: int  # char index just past the line's newline (or end of text)
    text: str  # the line without its "\n" / "\r\n"


def split_lines(text: str) -> list[Line]:
    """Split at "\n" only: editors and clients count lines that way, not by str.splitlines()."""
    out: list[Line] = []
    pos = 0
    no = 1
    n = len(text)
    while pos < n:
        nl = text.find("\n", pos)
        end = n if nl < 0 else nl + 1
        body = text[pos:end].rstrip("\n")
        if body.endswith("\r"):
            body = body[:-1]
        out.append(Line(no, pos, end, body))
        pos = end
        no += 1
    return out


# Any indentation is accepted (not CommonMark's 0–3) so that fences nested in
# list items are still code; a ``` info string may not contain a backtick,
# otherwise ```inline``` at the start of a line would open a fence.
_FENCE_OPEN = re.compile(r"^[ \t]*(?:(`{3,})([^`]*)|(~{3,})(.*))$")
_FENCE_CLOSE = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*$")
# A setext underline; it makes a heading only right after paragraph text.
SETEXT_LINE = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")


def fence_blocks(lines: list[Line], first: int = 0) -> list[tuple[int, int]]:
    """Fenced code blocks in lines[first:] as (open, close) list indices, inclusive.

    An unclosed fence runs to the end of the document, as in CommonMark.
    """
    blocks: list[tuple[int, int]] = []
    i = first
    n = len(lines)
    while i < n:
        m = _FENCE_OPEN.match(lines[i].text)
        if not m:
            i += 1
            continue
        marker = m.group(1) or m.group(3)
        j = i + 1
        while j < n:
            c = _FENCE_CLOSE.match(lines[j].text)
            if c and c.group(1)[0] == marker[0] and len(c.group(1)) >= len(marker):
                break
            j += 1
        close = min(j, n - 1)
        blocks.append((i, close))
        i = close + 1
    return blocks


def fence_mask(lines: list[Line], first: int = 0) -> list[bool]:
    """True for every line that belongs to a fenced block (fence lines included)."""
    mask = [False] * len(lines)
    for a, b in fence_blocks(lines, first):
        for k in range(a, b + 1):
            mask[k] = True
    return mask


_NON_ASCII_RUN = re.compile(r"[^\x00-\x7f]+")


class ByteMap:
    """Char index → UTF-8 byte offset into text.encode("utf-8"), and line lookup."""

    def __init__(self, text: str, lines: list[Line] | None = None):
        # Only non-ASCII characters shift byte offsets. Keep each run of them
        # (its start, end and the extra bytes before it), not one entry per
        # character: CJK prose is almost all non-ASCII, and a per-character
        # table was the largest cost of parsing it. An offset inside a run is
        # measured on demand (lookups are per heading and chunk, not per character).
        self._text = text
        self._starts: list[int] = []
        self._ends: list[int] = []
        self._before: list[int] = []  # extra bytes before each run
        if not text.isascii():
            extra = 0
            for m in _NON_ASCII_RUN.finditer(text):
                self._starts.append(m.start())
                self._ends.append(m.end())
                self._before.append(extra)
                extra += _extra(m.group())
            self._total = extra
        self._line_starts = [ln.start for ln in (lines if lines is not None else split_lines(text))]

    def byte(self, i: int) -> int:
        if not self._starts:
            return i
        k = bisect_right(self._starts, i) - 1
        if k < 0:
            return i
        if i >= self._ends[k]:
            after = self._before[k + 1] if k + 1 < len(self._before) else self._total
            return i + after
        return i + self._before[k] + _extra(self._text[self._starts[k] : i])

    def line_of(self, i: int) -> int:
        """1-based line containing char index i (an index at the very end maps to the last line)."""
        return max(1, bisect_right(self._line_starts, i))


def _extra(run: str) -> int:
    """UTF-8 bytes beyond one per character (surrogatepass: str input may hold lone surrogates)."""
    return len(run.encode("utf-8", "surrogatepass")) - len(run)
