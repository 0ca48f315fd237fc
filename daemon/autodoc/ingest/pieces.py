"""Ingest, chunking helper: cut a section into ever finer pieces.

Input: the text and the line range of one section. Output: Pieces — char
spans with a kind — at the coarsest level (blocks: headings, paragraphs,
fenced code) and, on request, one level finer (paragraph → sentences →
words → halves of a word; code block → lines → words). Pieces never include
surrounding whitespace, so packing them never loses a non-space character.

Runs on: any thread (pure: no I/O, no shared state).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .lines import SETEXT_LINE, Line

# A sentence ends at . ! ? … (plus closing quotes/brackets) before whitespace,
# or at a CJK full stop / ! / ? whether or not a space follows.
# A match starts only at the start of a run of stops: tried from inside a
# run of 100,000 dots, each try re-read the rest of the run (quadratic).
_SENTENCE_END = re.compile(r"(?<![.!?…])[.!?…]++[\"'”’)\]]*+(?=\s)|[。！？]+[」』”’）]*")
_WORD = re.compile(r"\S+")


@dataclass(frozen=True)
class Piece:
    start: int  # char index, inclusive
    end: int  # char index, exclusive
    kind: str  # heading | para | code | sentence | line | word


def block_pieces(text: str, lines: list[Line], fences: dict[int, int], heads: set[int], first: int, last: int):
    """Headings, paragraphs (blank-line separated) and fenced blocks of lines first..last."""
    i = first
    while i <= last:
        ln = lines[i]
        if not ln.text.strip():
            i += 1
            continue
        if i in fences:
            j = min(fences[i], last)
            kind = "code"
        elif i in heads:
            j = i
            if not ln.text.lstrip().startswith("#"):  # setext: runs to its underline
                while j < last and not SETEXT_LINE.match(lines[j + 1].text):
                    j += 1
                j = min(j + 1, last)
            kind = "heading"
        else:
            j = i
            while j < last and lines[j + 1].text.strip() and j + 1 not in fences and j + 1 not in heads:
                j += 1
            kind = "para"
        p = _trimmed(text, lines[i].start, lines[j].end, kind)
        if p:
            yield p
        i = j + 1


def sub_pieces(text: str, p: Piece) -> list[Piece]:
    """The next finer level of p, or [] when p is a single character."""
    if p.kind == "code":
        finer = _lines(text, p)
        if len(finer) > 1:
            return finer
    if p.kind == "para":
        finer = _sentences(text, p)
        if len(finer) > 1:
            return finer
    if p.kind != "word":
        finer = [Piece(m.start(), m.end(), "word") for m in _WORD.finditer(text, p.start, p.end)]
        if len(finer) > 1:
            return finer
    if p.end - p.start <= 1:
        return []
    # A "word" over budget (a long hash, a CJK run without spaces): halve it;
    # packing glues the halves back together up to the budget.
    mid = (p.start + p.end) // 2
    return [Piece(p.start, mid, "word"), Piece(mid, p.end, "word")]


def _sentences(text: str, p: Piece) -> list[Piece]:
    out = []
    start = p.start
    for m in _SENTENCE_END.finditer(text, p.start, p.end):
        q = _trimmed(text, start, m.end(), "sentence")
        if q:
            out.append(q)
        start = m.end()
    q = _trimmed(text, start, p.end, "sentence")
    if q:
        out.append(q)
    return out


def _lines(text: str, p: Piece) -> list[Piece]:
    out = []
    pos = p.start
    while pos < p.end:
        nl = text.find("\n", pos, p.end)
        end = p.end if nl < 0 else nl
        q = _trimmed(text, pos, end, "line", keep_indent=True)
        if q:
            out.append(q)
        pos = end + 1
    return out


def _trimmed(text: str, a: int, b: int, kind: str, keep_indent: bool = False) -> Piece | None:
    while b > a and text[b - 1].isspace():
        b -= 1
    s = a
    while s < b and text[s].isspace():
        s += 1
    if s >= b:
        return None
    return Piece(a if keep_indent else s, b, kind)
