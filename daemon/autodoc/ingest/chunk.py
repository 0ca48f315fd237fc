"""Ingest, stage 2: a parsed document → heading-scoped chunks.

Input: the document text and its ParsedDocument (from parse_markdown on the
same text). Output: Chunks — an optional abstract chunk, then one chunk per
section under the token budget and several for larger sections, each an exact
byte slice of the file with its breadcrumb, spans and text hash.
Pure: no I/O.
"""

from __future__ import annotations

import hashlib
from typing import Callable

from .lines import SETEXT_LINE, ByteMap, Line, fence_blocks, split_lines
from .pieces import Piece, block_pieces, sub_pieces
from .tokens import estimate_tokens
from .types import Chunk, ParsedDocument, Problem

__all__ = ["chunk_document", "estimate_tokens", "SEP"]

SEP = " › "


def chunk_document(
    text: str,
    doc: ParsedDocument,
    *,
    section_tokens: int = 350,
    count_tokens: Callable[[str], int] | None = None,
    abstract_chunk: bool = True,
    fallback_title: str = "",
) -> list[Chunk]:
    """Cut text into chunks; fallback_title (e.g. the file stem) stands in for an empty doc.title.

    Never raises: should cutting at the document's structure fail (a defect, or
    a doc parsed from other text), the body is cut into plain windows of the
    budget and doc.problems says so (code "chunk").
    """
    count = count_tokens or estimate_tokens
    budget = max(1, section_tokens)
    try:
        return _chunks(text, doc, budget, count, abstract_chunk, fallback_title)
    except Exception as e:  # noqa: BLE001 — one file's structure must not stop its text being indexed
        doc.problems.append(Problem(1, f"could not cut the document at its headings ({type(e).__name__}: {e}); "
                                       "cut into plain windows", "chunk"))
        return _windows(text, doc.title or fallback_title, budget, count)


def _chunks(text, doc, budget, count, abstract_chunk, fallback_title) -> list[Chunk]:
    lines = split_lines(text)
    bmap = ByteMap(text, lines)
    title = doc.title or fallback_title
    out: list[Chunk] = []

    if abstract_chunk and doc.abstract:
        crumb = SEP.join(p for p in (title, "Abstract") if p)
        bs, be, ls, le = doc.abstract_span or (0, doc.body_byte, 1, max(1, doc.body_line - 1))
        out.append(_chunk(0, "abstract", crumb, doc.abstract, bs, be, ls, le, count))

    body = min(max(doc.body_line - 1, 0), len(lines))
    fences = {a: b for a, b in fence_blocks(lines, body)}
    heads = {h.line - 1 for h in doc.headings if h.line - 1 >= body}
    for crumb, first, last in _sections(lines, doc, body, title):
        for s, e in _split(text, lines, fences, heads, first, last, budget, count):
            piece = text[s:e]
            ls, le = bmap.line_of(s), bmap.line_of(e - 1)
            out.append(_chunk(len(out), "section", crumb, piece, bmap.byte(s), bmap.byte(e), ls, le, count))
    return out


def _windows(text: str, title: str, budget: int, count) -> list[Chunk]:
    """The whole text cut at word boundaries into pieces of about the budget: structure-free."""
    lines = split_lines(text)
    bmap = ByteMap(text, lines)
    whole = Piece(0, len(text), "para")
    spans = [(p.start, p.end) for p in _fit(text, whole, budget, count)] if text.strip() else []
    out: list[Chunk] = []
    for s, e in spans:
        s, e = _trim(text, s, e)
        if s < e:
            out.append(_chunk(len(out), "section", title, text[s:e], bmap.byte(s), bmap.byte(e),
                              bmap.line_of(s), bmap.line_of(e - 1), count))
    return out


def _chunk(ordinal, kind, crumb, text, bs, be, ls, le, count) -> Chunk:
    # surrogatepass: str input may hold lone surrogates (not from a file, which is UTF-8); hash them, don't fail
    digest = hashlib.sha256((crumb + "\n" + text).encode("utf-8", "surrogatepass")).hexdigest()
    return Chunk(ordinal, kind, crumb, text, bs, be, ls, le, digest, count(text))


def _norm(s: str) -> str:
    return " ".join(s.split()).casefold()


def _sections(lines: list[Line], doc: ParsedDocument, body: int, title: str):
    """(breadcrumb, first line index, last line index) per section, in order.

    A section that is only its heading, followed by a deeper heading (an H1
    title over "## Context", "## Decision" over "### Queue rows"), joins that
    next section: the next breadcrumb names it anyway, and a chunk holding
    nothing but a heading would only add noise to search.
    """
    heads = sorted((h for h in doc.headings if h.line - 1 >= body), key=lambda h: h.line)
    starts = [body] + [h.line - 1 for h in heads]
    ends = [s - 1 for s in starts[1:]] + [len(lines) - 1]
    if starts[0] <= ends[0]:
        yield title, starts[0], ends[0]
    stack: list = []
    carry: int | None = None
    for k, (h, first, last) in enumerate(zip(heads, starts[1:], ends[1:])):
        while stack and stack[-1].level >= h.level:
            stack.pop()
        stack.append(h)
        if carry is not None:
            first, carry = carry, None
        nxt = heads[k + 1] if k + 1 < len(heads) else None
        if nxt is not None and nxt.level > h.level and _heading_only(lines, h.line - 1, last):
            carry = first
            continue
        path = [x.text for x in stack if x.text]
        if path and title and _norm(path[0]) == _norm(title):
            path = path[1:]  # the H1 *is* the title: don't say it twice
        yield SEP.join(p for p in [title, *path] if p), first, last


def _heading_only(lines: list[Line], first: int, last: int) -> bool:
    after = first + 1
    if not lines[first].text.lstrip().startswith("#"):  # setext: skip to the underline
        while after <= last and not SETEXT_LINE.match(lines[after - 1].text):
            after += 1
    return all(not ln.text.strip() for ln in lines[after : last + 1])


def _split(text, lines, fences, heads, first, last, budget, count) -> list[tuple[int, int]]:
    """Char spans of the chunks of one section (lines first..last), trimmed, in order."""
    if first > last:
        return []
    a, b = lines[first].start, lines[last].end
    s, e = _trim(text, a, b)
    if s >= e:
        return []
    if count(text[s:e]) <= budget:
        return [(s, e)]
    pieces = [q for blk in block_pieces(text, lines, fences, heads, first, last) for q in _fit(text, blk, budget, count)]
    out: list[tuple[int, int]] = []
    i = 0
    while i < len(pieces):
        j = _last_fitting(text, pieces, i, budget, count)
        if j == i and pieces[i].kind == "heading" and i + 1 < len(pieces) and pieces[i + 1].kind != "code":
            # A heading alone makes a useless chunk: open up the next piece so
            # the heading can travel with its first sentence (never open a
            # code block that fits: those are only cut when they alone overflow).
            finer = sub_pieces(text, pieces[i + 1])
            if len(finer) > 1:
                pieces[i + 1 : i + 2] = finer
                continue
        out.append((pieces[i].start, pieces[j].end))
        i = j + 1
    return out


def _last_fitting(text: str, pieces: list[Piece], i: int, budget: int, count) -> int:
    """The last j such that pieces i..j fit the budget together (at least i).

    Same answer as adding pieces one by one, but galloping then bisecting keeps
    the number of (whole-slice) counts logarithmic per chunk, so a paragraph of
    100,000 words without a full stop is not counted 100,000 times.
    """
    start = pieces[i].start
    lo, hi, step = i, len(pieces), 1  # pieces[lo] is in; hi is the first known not to fit
    while True:
        j = min(lo + step, hi - 1)
        if j <= lo:
            break
        if count(text[start : pieces[j].end]) <= budget:
            lo, step = j, step * 2
        else:
            hi = j
            break
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if count(text[start : pieces[mid].end]) <= budget:
            lo = mid
        else:
            hi = mid
    return lo


def _fit(text: str, p: Piece, budget: int, count) -> list[Piece]:
    """p itself if it fits, else its finer pieces, recursively (down to single characters)."""
    if count(text[p.start : p.end]) <= budget:
        return [p]
    if p.kind == "word" and p.end - p.start > 2 * budget:
        # A huge unbroken run (minified data, CJK without punctuation): cut it
        # in budget-sized character slices first instead of halving log(n) times.
        finer = [Piece(k, min(k + budget, p.end), "word") for k in range(p.start, p.end, budget)]
        return [q for f in finer for q in _fit(text, f, budget, count)]
    finer = sub_pieces(text, p)
    if len(finer) <= 1:
        return finer or [p]
    return [q for f in finer for q in _fit(text, f, budget, count)]


def _trim(text: str, a: int, b: int) -> tuple[int, int]:
    while a < b and text[a].isspace():
        a += 1
    while b > a and text[b - 1].isspace():
        b -= 1
    return a, b
