"""Ingest, stage 1: Markdown text → ParsedDocument.

Input: the decoded text of one file. Output: a ParsedDocument — frontmatter
(JSON-safe), title, tags (frontmatter + inline), aliases, abstract, status,
supersession, links, the heading tree, where the body starts, problems.
Pure: no I/O. Byte offsets are into text.encode("utf-8").
"""

from __future__ import annotations

import re
from typing import Any

from .frontmatter import read_frontmatter
from .inline import line_links, line_tags, mask_code_spans, plain_text
from .lines import SETEXT_LINE, ByteMap, fence_mask, split_lines
from .types import Heading, Link, ParsedDocument

_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
_ATX_CLOSE = re.compile(r"(?:^|[ \t]+)#+$")
_THEMATIC = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
# Lines that open a list item, quote, table row or HTML block: they are not
# paragraph text, so a following --- is a thematic break, not a setext heading.
_NOT_PARA = re.compile(r"^(?: {0,3}(?:[-*+][ \t]|\d{1,9}[.)][ \t]|[-*+]$|\d{1,9}[.)]$|>|\||<)| {4,}|\t)")


def parse_markdown(text: str) -> ParsedDocument:
    """Parse one Markdown document (see the module docstring)."""
    lines = split_lines(text)
    fm = read_frontmatter(text, lines)
    bmap = ByteMap(text, lines)
    code = fence_mask(lines, fm.body_index)

    headings: list[Heading] = []
    links: list[Link] = []
    inline_tags: list[str] = []
    para_first: int | None = None  # index of the first line of the current paragraph
    in_block = False  # inside a list/quote/table run, where --- never makes a heading

    for i in range(fm.body_index, len(lines)):
        ln = lines[i]
        if code[i]:
            para_first, in_block = None, False
            continue
        s = ln.text
        if not s.strip():
            para_first, in_block = None, False
            continue
        setext = SETEXT_LINE.match(s)
        if setext and para_first is not None and not in_block:
            first = lines[para_first]
            words = " ".join(lines[k].text.strip() for k in range(para_first, i))
            level = 1 if setext.group(1)[0] == "=" else 2
            headings.append(Heading(level, plain_text(words), first.no, bmap.byte(first.start)))
            para_first = None
            continue
        masked = mask_code_spans(s)
        found, masked = line_links(masked, ln.no)
        links.extend(found)
        atx = _ATX.match(s)
        if atx:
            content = _ATX_CLOSE.sub("", atx.group(2) or "")
            headings.append(Heading(len(atx.group(1)), plain_text(content), ln.no, bmap.byte(ln.start)))
            para_first, in_block = None, False
        elif _THEMATIC.match(s):
            para_first, in_block = None, False
        elif in_block or _NOT_PARA.match(s):
            para_first, in_block = None, True
        elif para_first is None:
            para_first = i
        inline_tags.extend(line_tags(masked))

    data = fm.data
    title = _text(data.get("title")) or next((h.text for h in headings if h.level == 1), "")
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
        problems=list(fm.problems),
    )


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
