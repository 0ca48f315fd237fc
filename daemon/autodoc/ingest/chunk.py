"""Ingest, the chunking: a parsed document → heading-scoped chunks.

Input: the document text and its ParsedDocument (from parse_markdown on the
same text). Output: Chunks — an optional abstract chunk, then one chunk per
section under the token budget and several for larger sections, each an exact
byte slice of the file with its breadcrumb, spans and text hash.
Pure: no I/O.

Runs on: any thread (pure: no I/O, no shared state).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from .lines import SETEXT_LINE, ByteMap, Line, fence_blocks, split_lines
from .pieces import Piece, block_pieces, sub_pieces
from .tokens import wordpiece_tokens
from .types import Chunk, ParsedDocument, Problem

__all__ = ["SEP", "chunk_document", "wordpiece_tokens"]

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
    count = count_tokens or wordpiece_tokens
    budget = max(1, section_tokens)
    try:
        return _chunks(text, doc, budget, count, abstract_chunk, fallback_title)
    except Exception as e:
        doc.problems.append(
            Problem(
                1,
                f"could not cut the document at its headings ({type(e).__name__}: {e}); cut into plain windows",
                "chunk",
            )
        )
        return _windows(text, doc.title or fallback_title, budget, count)


def _chunks(text, doc, budget, count, abstract_chunk, fallback_title) -> list[Chunk]:
    lines = split_lines(text)
    bmap = ByteMap(text, lines)
    title = doc.title or fallback_title
    out: list[Chunk] = []

    if abstract_chunk and doc.abstract:
        crumb = SEP.join(p for p in (title, "Abstract") if p)
        bs, be, ls, le = doc.abstract_span or (0, doc.body_byte, 1, max(1, doc.body_line - 1))
        out.append(_chunk(0, "abstract", crumb, doc.abstract, bs, be, ls, le, count(doc.abstract)))

    body = min(max(doc.body_line - 1, 0), len(lines))
    fences = dict(fence_blocks(lines, body))
    heads = {h.line - 1 for h in doc.headings if h.line - 1 >= body}
    for crumb, first, last in _sections(lines, doc, body, title):
        for s, e, tokens in _split(text, lines, fences, heads, first, last, budget, count):
            piece = text[s:e]
            ls, le = bmap.line_of(s), bmap.line_of(e - 1)
            out.append(_chunk(len(out), "section", crumb, piece, bmap.byte(s), bmap.byte(e), ls, le, tokens))
    return out


def _windows(text: str, title: str, budget: int, count) -> list[Chunk]:
    """The whole text cut at word boundaries into pieces of about the budget: structure-free."""
    lines = split_lines(text)
    bmap = ByteMap(text, lines)
    whole = Piece(0, len(text), "para")
    spans = [(p.start, p.end) for p, _ in _fit(text, whole, budget, count)] if text.strip() else []
    out: list[Chunk] = []
    for s, e in spans:
        s, e = _trim(text, s, e)
        if s < e:
            out.append(
                _chunk(
                    len(out),
                    "section",
                    title,
                    text[s:e],
                    bmap.byte(s),
                    bmap.byte(e),
                    bmap.line_of(s),
                    bmap.line_of(e - 1),
                    count(text[s:e]),
                )
            )
    return out


def _chunk(ordinal, kind, crumb, text, bs, be, ls, le, tokens: int) -> Chunk:
    # surrogatepass: str input may hold lone surrogates (not from a file, which is UTF-8); hash them, don't fail
    digest = hashlib.sha256((crumb + "\n" + text).encode("utf-8", "surrogatepass")).hexdigest()
    return Chunk(ordinal, kind, crumb, text, bs, be, ls, le, digest, tokens)


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


def _split(text, lines, fences, heads, first, last, budget, count) -> list[tuple[int, int, int]]:
    """(start, end, tokens) of the chunks of one section (lines first..last), trimmed, in order.

    Every count made on the way is kept (a chunk's tokens are the count that
    admitted it): counting was most of chunking's time.
    """
    if first > last:
        return []
    a, b = lines[first].start, lines[last].end
    s, e = _trim(text, a, b)
    if s >= e:
        return []
    whole = count(text[s:e])
    if whole <= budget:
        return [(s, e, whole)]
    fitted = [
        q for blk in block_pieces(text, lines, fences, heads, first, last) for q in _fit(text, blk, budget, count)
    ]
    pieces = [p for p, _ in fitted]
    costs = [c for _, c in fitted]
    out: list[tuple[int, int, int]] = []
    i = 0
    while i < len(pieces):
        j, tokens = _last_fitting(text, pieces, costs, i, budget, count)
        if j == i and pieces[i].kind == "heading" and i + 1 < len(pieces) and pieces[i + 1].kind != "code":
            # A heading alone makes a useless chunk: open up the next piece so
            # the heading can travel with its first sentence (never open a
            # code block that fits: those are only cut when they alone overflow).
            finer = sub_pieces(text, pieces[i + 1])
            if len(finer) > 1:
                pieces[i + 1 : i + 2] = finer
                costs[i + 1 : i + 2] = [count(text[f.start : f.end]) for f in finer]
                continue
        out.append((pieces[i].start, pieces[j].end, tokens))
        i = j + 1
    return out


def _last_fitting(text: str, pieces: list[Piece], costs: list[int], i: int, budget: int, count) -> tuple[int, int]:
    """The last j such that pieces i..j fit the budget together (at least i), and their count.

    Same answer as adding pieces one by one (for a count that grows with the
    text), in few counts: the pieces' own counts, summed, guess j (they add up
    nearly exactly for word-based counters); one count checks the guess and one
    that the next piece would not fit; only a wrong guess gallops or bisects,
    so a paragraph of 100,000 words without a full stop is not counted 100,000 times.
    """
    start = pieces[i].start

    def fits(j: int) -> int | None:
        c = count(text[start : pieces[j].end])
        return c if c <= budget else None

    guess = _guess(costs, i, budget)
    lo, lo_c, hi = i, costs[i], len(pieces)  # pieces[lo] is in (lo_c its count); hi: the first known not to fit
    if guess > i:
        c = fits(guess)
        if c is None:
            hi = guess
        else:
            lo, lo_c = guess, c
    step = 1
    while True:  # gallop up from lo
        j = min(lo + step, hi - 1)
        if j <= lo:
            break
        c = fits(j)
        if c is None:
            hi = j
            break
        lo, lo_c, step = j, c, step * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        c = fits(mid)
        if c is None:
            hi = mid
        else:
            lo, lo_c = mid, c
    return lo, lo_c


def _guess(costs: list[int], i: int, budget: int) -> int:
    """The last j whose pieces' counts from i sum within the budget (at least i)."""
    j, acc = i, costs[i]
    far = i + 4 * budget + 16  # bounded even for a counter that calls pieces free
    while j + 1 < len(costs) and j < far and acc + costs[j + 1] <= budget:
        j += 1
        acc += costs[j]
    return j


def _fit(text: str, p: Piece, budget: int, count) -> list[tuple[Piece, int]]:
    """p and its count if it fits, else its finer pieces, recursively (down to single characters)."""
    c = count(text[p.start : p.end])
    if c <= budget:
        return [(p, c)]
    if p.kind == "word" and p.end - p.start > 2 * budget:
        # A huge unbroken run (minified data, CJK without punctuation): cut it
        # in budget-sized character slices first instead of halving log(n) times.
        finer = [Piece(k, min(k + budget, p.end), "word") for k in range(p.start, p.end, budget)]
        return [q for f in finer for q in _fit(text, f, budget, count)]
    finer = sub_pieces(text, p)
    if len(finer) <= 1:
        return [(f, count(text[f.start : f.end])) for f in finer] or [(p, c)]
    return [q for f in finer for q in _fit(text, f, budget, count)]


def _trim(text: str, a: int, b: int) -> tuple[int, int]:
    while a < b and text[a].isspace():
        a += 1
    while b > a and text[b - 1].isspace():
        b -= 1
    return a, b
