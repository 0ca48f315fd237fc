"""Ingest, the parse: Markdown text → ParsedDocument.

Input: the decoded text of one file. Output: a ParsedDocument — frontmatter
(JSON-safe), title, tags (frontmatter + inline), aliases, abstract, status,
supersession, links, the heading tree, where the body starts, problems.
Pure: no I/O. Byte offsets are into text.encode("utf-8").

Runs on: any thread (pure: no I/O, no shared state).
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from .frontmatter import read_frontmatter
from .inline import block_links, heading_id, line_tags, mask_code_spans, plain_text, reference_definitions, slug
from .lines import SETEXT_LINE, ByteMap, Line, fence_mask, split_lines
from .types import Heading, Link, ParsedDocument, Problem

# Lines that open a list item, quote, table row or HTML block: they are not
# paragraph text, so a following --- is a thematic break, not a setext heading.
_NOT_PARA = re.compile(r"^(?: {0,3}(?:[-*+][ \t]|\d{1,9}[.)][ \t]|[-*+]$|\d{1,9}[.)]$|>|\||<)| {4,}|\t)")
_SURROGATE = re.compile("[\ud800-\udfff]")
# CommonMark's raw HTML blocks (type 1): their lines are script, style or preformatted text,
# never Markdown, so no link or #tag is read inside (a "#d78000" colour in a chart's script).
_RAW_OPEN = re.compile(r"^ {0,3}<(script|style|pre|textarea)(?:[\s>]|$)", re.I)

# Limits per file, far above real documents (the five corpora in
# ../shared/data/corpora: longest line 16,619 characters, at most 393 headings,
# longest heading 257 characters). Past them the text is still indexed; what
# is not read is reported as a problem with code "limit".
MAX_LINE_CHARS = 100_000  # a longer line is body text: not read for a heading, links or #tags
MAX_HEADINGS = 5_000  # later headings are read as body text (each heading is a chunk boundary)
MAX_HEADING_CHARS = 500  # heading text and titles are cut here: they are repeated in every breadcrumb
MAX_PROBLEMS = 100  # problems kept per document; one more line says how many were left out


def parse_markdown(text: str) -> ParsedDocument:
    """Parse one Markdown document (see the module docstring). Never raises: a defect
    met on some input costs the structure (one problem, code "parse"), never the file."""
    try:
        return _parse(text)
    except Exception as e:
        return ParsedDocument(
            title="",
            frontmatter={},
            tags=[],
            aliases=[],
            abstract=None,
            status=None,
            supersedes=[],
            superseded_by=[],
            links=[],
            headings=[],
            body_byte=0,
            body_line=1,
            problems=[
                Problem(
                    1, f"the document could not be parsed ({type(e).__name__}: {e}); indexed as plain text", "parse"
                )
            ],
        )


def _parse(text: str) -> ParsedDocument:
    lines = split_lines(text)
    fm = read_frontmatter(text, lines)
    bmap = ByteMap(text, lines)
    code = fence_mask(lines, fm.body_index)
    indented = _indented_code(lines, fm.body_index, code)
    problems = list(fm.problems) + _text_problems(text, lines)

    headings: list[Heading] = []
    links: list[Link] = []
    inline_tags: list[str] = []
    para_first: int | None = None  # index of the first line of the current paragraph
    in_block = False  # inside a list/quote/table run, where --- never makes a heading

    over: list[int] = []  # lines of headings past MAX_HEADINGS (reported once)
    anchors: dict[str, int] = {}  # anchor -> headings that had it: a repeat is "x-1", "x-2" (GitHub)
    # Runs of consecutive prose lines (code spans blanked), read for links and tags once the
    # whole document's reference definitions are known: a link's label may wrap onto the next line.
    blocks: list[tuple[int, list[str]]] = []  # (first line number, lines)

    def end_block() -> None:
        if blocks and blocks[-1][1]:
            blocks.append((0, []))

    def add_line(no: int, masked: str) -> None:
        if not blocks or not blocks[-1][1]:
            blocks[-1:] = [(no, [masked])]
        else:
            blocks[-1][1].append(masked)

    def add_heading(level: int, raw: str, ln: Line) -> None:
        if len(headings) >= MAX_HEADINGS:
            if not over:
                problems.append(
                    Problem(
                        ln.no, f"more than {MAX_HEADINGS} headings; from here on they are read as body text", "limit"
                    )
                )
            over.append(ln.no)
            return
        text = _clip(plain_text(raw), ln.no, problems)
        anchor = heading_id(raw) or slug(text)
        n = anchors.get(anchor, 0)
        anchors[anchor] = n + 1
        headings.append(Heading(level, text, ln.no, bmap.byte(ln.start), anchor if not n else f"{anchor}-{n}"))

    raw_until: str | None = None  # the closing tag of the raw HTML block we are in
    for i in range(fm.body_index, len(lines)):
        ln = lines[i]
        if raw_until is None and not code[i]:
            opened = _RAW_OPEN.match(ln.text)
            raw_until = f"</{opened.group(1).lower()}>" if opened else None
        if raw_until is not None:
            if raw_until in ln.text.lower():
                raw_until = None
            end_block()
            para_first, in_block = None, False
            continue
        if code[i]:
            end_block()
            para_first, in_block = None, False
            continue
        if indented[i]:  # code: no heading, link or #tag in it ("    #if DEBUG")
            end_block()
            para_first, in_block = None, False
            continue
        s = ln.text if ln.start else ln.text.lstrip("\ufeff")  # a BOM is not part of the first line's syntax
        if not s.strip():
            end_block()
            para_first, in_block = None, False
            continue
        if len(s) > MAX_LINE_CHARS:
            problems.append(
                Problem(
                    ln.no,
                    f"line is {len(s)} characters long (limit {MAX_LINE_CHARS}); "
                    "indexed as text, but not read for a heading, links or tags",
                    "limit",
                )
            )
            end_block()
            para_first, in_block = None, False
            continue
        setext = SETEXT_LINE.match(s)
        if setext and para_first is not None and not in_block:
            first = lines[para_first]
            words = " ".join(lines[k].text.strip() for k in range(para_first, i))
            add_heading(1 if setext.group(1)[0] == "=" else 2, words, first)
            para_first = None
            end_block()
            continue
        if headings and headings[-1].line == ln.no - 1 and s.lstrip().startswith("{:"):
            own = heading_id(s)  # kramdown: "## 4.4.1 / 2025-01-29" then "{: #v4-4-1}"
            if own:
                headings[-1] = replace(headings[-1], anchor=own)
        atx = _atx(s)
        if atx or _thematic(s):
            end_block()  # a heading is a block of its own; a break ends one
        add_line(ln.no, mask_code_spans(s))
        if atx:
            add_heading(atx[0], atx[1], ln)
            para_first, in_block = None, False
            end_block()
        elif _thematic(s):
            para_first, in_block = None, False
        elif in_block or _NOT_PARA.match(s):
            para_first, in_block = None, True
        elif para_first is None:
            para_first = i

    # reference definitions first: a [label] may be used above the line that defines it
    defs: dict[str, str] = {}
    for _, masked in blocks:
        for k, v in reference_definitions("\n".join(masked)).items():
            defs.setdefault(k, v)
    for first_no, masked in blocks:
        if masked:
            found, prose = block_links("\n".join(masked), first_no, defs)
            links.extend(found)
            inline_tags.extend(line_tags(prose))

    data = fm.data
    fm_title = _text(data.get("title"))
    title = (
        _clip(fm_title, fm.field_lines.get("title", 2), problems)
        if fm_title
        else next((h.text for h in headings if h.level == 1), "")
    )
    supersedes = _names(data.get("supersedes"))
    superseded_by = _names(data.get("superseded_by"))
    fm_links = [
        Link(target=name, kind=key, line=line)
        for key in ("supersedes", "superseded_by")
        for raw, line in fm.value_lines.get(key, [])
        if (name := _strip_wiki(str(raw)))
    ]
    abstract = _abstract(data.get("abstract"))
    span = None
    if abstract is not None and fm.abstract_chars is not None:
        a, b = fm.abstract_chars
        span = (bmap.byte(a), bmap.byte(b), bmap.line_of(a), bmap.line_of(max(a, b - 1)))
    body_start = lines[fm.body_index].start if fm.body_index < len(lines) else len(text)
    return ParsedDocument(
        title=title,
        frontmatter=data,
        tags=_dedupe(_fm_tags(data.get("tags")) + inline_tags),
        aliases=_dedupe_keep_case(_names(data.get("aliases", data.get("alias")))),
        abstract=abstract,
        status=(_text(data.get("status")) or "").lower() or None,
        supersedes=supersedes,
        superseded_by=superseded_by,
        links=fm_links + links,
        headings=headings,
        body_byte=bmap.byte(body_start),
        body_line=fm.body_index + 1,
        abstract_span=span,
        problems=_capped(problems),
    )


_LIST_ITEM = re.compile(r"^ {0,3}(?:[-*+]|\d{1,9}[.)])(?:[ \t]|$)")


def _indented_code(lines: list[Line], first: int, fenced: list[bool]) -> list[bool]:
    """Which lines are an indented code block (CommonMark): 4+ columns of indent after a blank
    line, outside any list (inside one, that indent continues an item), running on through
    blank lines while the indent holds."""
    out = [False] * len(lines)
    in_list = False
    in_code = False
    blank_before = True
    for i in range(first, len(lines)):
        if fenced[i]:
            in_code, blank_before = False, False
            continue
        t = lines[i].text
        if not t.strip():
            blank_before = True
            continue
        deep = _indent(t) >= 4
        if deep and (in_code or (blank_before and not in_list)):
            out[i] = in_code = True
        else:
            in_code = False
            if _LIST_ITEM.match(t):
                in_list = True
            elif blank_before and _indent(t) < 2:
                in_list = False  # a paragraph at the margin after a blank line ends the list
        blank_before = False
    return out


def _indent(t: str) -> int:
    """Columns of leading white space, a tab reaching the next multiple of 4."""
    col = 0
    for c in t:
        if c == " ":
            col += 1
        elif c == "\t":
            col += 4 - col % 4
        else:
            break
    return col


def _atx(s: str) -> tuple[int, str] | None:
    """(level, raw text) of an ATX heading line, closing #s removed, or None.

    By hand, not a regex: "(.*?)[ \t]*$" re-read the trailing spaces once per
    character, so a heading of 20,000 spaces took 14 s.
    """
    t = s.lstrip(" ")
    if len(s) - len(t) > 3:
        return None
    level = len(t) - len(t.lstrip("#"))
    rest = t[level:]
    if not 1 <= level <= 6 or (rest and rest[0] not in " \t"):
        return None
    content = rest.strip(" \t")
    bare = content.rstrip("#")
    if len(bare) < len(content) and (not bare or bare[-1] in " \t"):
        content = bare.rstrip(" \t")  # the optional closing sequence: "## Title ##"
    return level, content


def _thematic(s: str) -> bool:
    """A thematic break: 3+ of one of - * _ with only spaces/tabs between, indented 0-3."""
    t = s.lstrip(" ")
    if len(s) - len(t) > 3 or not t or t[0] not in "-*_":
        return False
    marks = t.replace(" ", "").replace("\t", "")
    return len(marks) >= 3 and marks.count(t[0]) == len(marks)


def _text_problems(text: str, lines: list[Line]) -> list[Problem]:
    """Characters that pass through but deserve a word: NUL, lone surrogates, CR-only line ends."""
    out = []
    for what, pos in (
        ("a NUL character", text.find("\0")),
        ("an unpaired surrogate (not Unicode text)", _first(_SURROGATE, text)),
    ):
        if pos >= 0:
            out.append(Problem(_line_at(lines, pos), f"the text holds {what}", "encoding"))
    lone_cr = text.count("\r") - text.count("\r\n")
    if lone_cr > text.count("\n"):
        out.append(
            Problem(
                1,
                "line ends are CR only (classic Mac): lines are counted at LF, so the file reads as one line",
                "encoding",
            )
        )
    return out


def _first(rx: re.Pattern, text: str) -> int:
    if text.isascii():
        return -1
    m = rx.search(text)
    return m.start() if m else -1


def _line_at(lines: list[Line], pos: int) -> int:
    lo, hi = 0, len(lines) - 1
    while lo < hi:  # the last line starting at or before pos
        mid = (lo + hi + 1) // 2
        if lines[mid].start <= pos:
            lo = mid
        else:
            hi = mid - 1
    return lines[lo].no if lines else 1


def _clip(s: str, line: int, problems: list[Problem]) -> str:
    if len(s) <= MAX_HEADING_CHARS:
        return s
    problems.append(Problem(line, f"heading or title is {len(s)} characters long; cut to {MAX_HEADING_CHARS}", "limit"))
    return s[:MAX_HEADING_CHARS].rstrip() + "…"


def _capped(problems: list[Problem]) -> list[Problem]:
    if len(problems) <= MAX_PROBLEMS:
        return problems
    rest = len(problems) - MAX_PROBLEMS
    return problems[:MAX_PROBLEMS] + [Problem(problems[MAX_PROBLEMS].line, f"{rest} more problems not listed", "limit")]


def _text(v: Any) -> str:
    if v is None or isinstance(v, (dict, list)):
        return ""
    return str(v).strip()


def _strip_wiki(s: str) -> str:
    s = s.strip()
    if s.startswith("[[") and s.endswith("]]"):
        s = s[2:-2].split("|", 1)[0].split("#", 1)[0].strip()
    return s


def _names(v: Any) -> list[str]:
    """A string or a list of them (Obsidian may write "[[Note]]") → clean list."""
    items = v if isinstance(v, list) else [] if v is None else [v]
    return [n for n in (_strip_wiki(str(x)) for x in items if x is not None) if n]


def _fm_tags(v: Any) -> list[str]:
    items = v if isinstance(v, list) else [] if v is None else [v]
    out = []
    for item in items:
        if item is None:
            continue
        for t in re.split(r"[,\s]+", str(item)):
            t = t.strip().lstrip("#").lower()
            if t:
                out.append(t)
    return out


def _abstract(v: Any) -> str | None:
    if isinstance(v, list):
        v = "\n".join(str(x) for x in v if x is not None)
    text = _text(v) if not isinstance(v, dict) else ""
    return text or None


def _dedupe(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _dedupe_keep_case(items: list[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for x in items:
        if x.lower() not in seen:
            seen.add(x.lower())
            out.append(x)
    return out
