"""Ingest, inline syntax of one body line: tags, links, plain heading text.

Input: a line of Markdown outside fenced code. Output: the inline #tags, the
wikilinks and relative Markdown links in it, and (for headings) its text with
markup removed. Code spans, link targets and URLs are masked first so a
`#not-a-tag` in code or a foo.md#anchor is never read as a tag.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

from .types import Link

_WIKI = re.compile(r"(!?)\[\[([^\[\]\n]+?)\]\]")
# [label](dest "title") — dest may be <wrapped>; labels may hold one level of [brackets].
_MDLINK = re.compile(
    r"(!?)\[((?:[^\[\]\n]|\[[^\[\]\n]*\])*)\]\(\s*(<[^<>\n]*>|[^\s()<>]*)(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^()]*\)))?\s*\)"
)
_REFDEF = re.compile(r"^ {0,3}\[([^\]\n]+)\]:\s*(<[^<>\n]*>|\S+)")
_URL = re.compile(r"<[A-Za-z][A-Za-z0-9+.-]*:[^<>\s]*>|\b[A-Za-z][A-Za-z0-9+.-]*://\S+|\bwww\.\S+")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
# A tag starts at a word start with a letter (any script), then letters, digits, _ / -.
# Not after a word char (foo.md#x, issue#1), '&' (&#123;), '\' (escaped), '#' or '/'.
_TAG = re.compile(r"(?<![\w&#/\\])#([^\W\d_][\w/-]*)")
_DOC_EXT = (".md", ".markdown")


def mask_code_spans(s: str) -> str:
    """Blank out `code spans` (any backtick-run length), keeping string positions."""
    if "`" not in s:  # most lines: no walk over their characters
        return s
    out = list(s)
    i = 0
    n = len(s)
    while i < n:
        if s[i] != "`":
            i += 1
            continue
        j = i
        while j < n and s[j] == "`":
            j += 1
        run = j - i
        k = j
        while True:
            k = s.find("`" * run, k)
            if k < 0:
                break
            if (k + run >= n or s[k + run] != "`") and s[k - 1] != "`":
                break
            while k < n and s[k] == "`":
                k += 1
        if k < 0:
            i = j  # an unmatched run is literal backticks
            continue
        for p in range(i, k + run):
            out[p] = " "
        i = k + run
    return "".join(out)


def _blank(s: str, a: int, b: int) -> str:
    return s[:a] + " " * (b - a) + s[b:]


def line_links(masked: str, line_no: int) -> tuple[list[Link], str]:
    """Links in a code-masked line, and the line with links and URLs blanked for tag search."""
    found: list[tuple[int, Link]] = []
    if "[" not in masked and ":" not in masked and "www." not in masked:  # no link, reference or URL here
        return [], masked
    for m in _WIKI.finditer(masked):
        link = _wiki_link(m.group(2), line_no, embed=bool(m.group(1)))
        if link:
            found.append((m.start(), link))
        masked = _blank(masked, m.start(), m.end())
    for m in _MDLINK.finditer(masked):
        if not m.group(1):
            link = _md_link(m.group(3), m.group(2), line_no)
            if link:
                found.append((m.start(), link))
            # Keep the label: it is prose and may carry a #tag; blank "](dest)".
            masked = _blank(masked, m.start(3) - 2, m.end())
        else:
            masked = _blank(masked, m.start(), m.end())
    m = _REFDEF.match(masked)
    if m:
        link = _md_link(m.group(2), m.group(1), line_no)
        if link:
            found.append((m.start(), link))
        masked = _blank(masked, m.start(), m.end())
    masked = _URL.sub(lambda u: " " * len(u.group(0)), masked)
    found.sort(key=lambda t: t[0])
    return [link for _, link in found], masked


def link_spans(line: str, line_no: int = 1) -> list[tuple[int, int, Link]]:
    """(start, end, link) for each document link written in one line, as the indexer reads it
    (code spans skipped, wikilinks before Markdown links): what an editor's cursor can be on."""
    masked = mask_code_spans(line)
    found: list[tuple[int, int, Link]] = []
    for m in _WIKI.finditer(masked):
        link = _wiki_link(m.group(2), line_no, embed=bool(m.group(1)))
        if link:
            found.append((m.start(), m.end(), link))
        masked = _blank(masked, m.start(), m.end())
    for m in _MDLINK.finditer(masked):
        link = None if m.group(1) else _md_link(m.group(3), m.group(2), line_no)
        if link:
            found.append((m.start(), m.end(), link))
    return sorted(found, key=lambda t: t[0])


def _wiki_link(inner: str, line_no: int, *, embed: bool) -> Link | None:
    inner = inner.replace("\\|", "|")  # Obsidian escapes | inside tables
    target, _, label = inner.partition("|")
    target, _, anchor = target.partition("#")
    target = target.strip()
    if not target:
        return None  # [[#Section]] points into the same document
    if embed and "." in target.rsplit("/", 1)[-1] and not target.lower().endswith(_DOC_EXT):
        return None  # ![[diagram.png]] embeds an attachment, not a document
    return Link(target=target, kind="wiki", line=line_no, label=label.strip(), anchor=anchor.strip())


def _md_link(dest: str, label: str, line_no: int) -> Link | None:
    dest = dest.strip()
    if dest.startswith("<") and dest.endswith(">"):
        dest = dest[1:-1].strip()
    if not dest or dest.startswith("#") or _SCHEME.match(dest):
        return None
    path, _, anchor = dest.partition("#")
    path = unquote(path.split("?", 1)[0])
    if not path.lower().endswith(_DOC_EXT):
        return None  # images, PDFs and folders are not documents
    return Link(target=path, kind="markdown", line=line_no, label=label.strip(), anchor=unquote(anchor))


def line_tags(link_masked: str) -> list[str]:
    """Inline #tags of a line whose code, links and URLs are already blanked."""
    tags = []
    for m in _TAG.finditer(link_masked):
        tag = m.group(1).rstrip("/-").lower()
        if tag:
            tags.append(tag)
    return tags


_EMPH = re.compile(r"\*\*|__|~~|\*|(?<!\w)_+|_+(?!\w)")
_HTML = re.compile(r"<[^<>\n]+>")
_ATTR = re.compile(r"\s*\{#[^}]*\}\s*$")
_ESC = re.compile(r"\\([!-/:-@\[-`{-~])")


def plain_text(s: str) -> str:
    """Heading text without inline markup: links → their labels, code → its content."""
    escaped: list[str] = []

    def hide(m: re.Match) -> str:
        escaped.append(m.group(1))
        return "\ue000"  # a private-use placeholder no markup rule touches

    s = _ESC.sub(hide, _ATTR.sub("", s))
    s = _WIKI.sub(lambda m: _wiki_label(m.group(2)), s)
    s = _MDLINK.sub(lambda m: m.group(2), s)
    s = re.sub(r"(`+)(.+?)\1", lambda m: m.group(2).strip(), s)
    s = _HTML.sub("", s)
    s = _EMPH.sub("", s)
    chars = iter(escaped)
    s = re.sub("\ue000", lambda m: next(chars, ""), s)
    return " ".join(s.split())


def _wiki_label(inner: str) -> str:
    target, _, label = inner.replace("\\|", "|").partition("|")
    return label.strip() or target.replace("#", " › ").strip()
