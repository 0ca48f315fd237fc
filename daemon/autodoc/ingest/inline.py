"""Ingest, inline syntax of one body line: tags, links, plain heading text.

Input: a line of Markdown outside fenced code. Output: the inline #tags, the
wikilinks and relative Markdown links in it, and (for headings) its text with
markup removed. Code spans, link targets and URLs are masked first so a
`#not-a-tag` in code or a foo.md#anchor is never read as a tag.

Runs on: any thread (pure: no I/O, no shared state).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from urllib.parse import unquote

from .types import Link

_WIKI = re.compile(r"(!?)\[\[([^\[\]\n]+?)\]\]")
# [label](dest "title") — dest may be <wrapped>; labels may hold one level of [brackets].
# Possessive quantifiers (*+, ++) because backtracking between the spaces before
# the destination, before the title and before ")" made "[a](" followed by
# 20,000 spaces quadratic; nothing those give back could complete a match.
_MDLINK = re.compile(
    r"(!?)\[((?:[^\[\]\n]|\[[^\[\]\n]*\])*+)\]\(\s*+(<[^<>\n]*>|[^\s()<>]*+)"
    r"\s*+(?:(?:\"[^\"]*\"|'[^']*'|\([^()]*\))\s*+)?\)"
)
_REFDEF = re.compile(r"^ {0,3}\[([^\]\n]+)\]:\s*(<[^<>\n]*>|\S+)")
# A bare scheme starts where a run of scheme characters starts: "a.a.a.…" would
# otherwise be tried from every letter after a dot, each try reading to the end.
_URL = re.compile(r"<[A-Za-z][A-Za-z0-9+.-]*+:[^<>\s]*>|(?<![\w+.-])[A-Za-z][A-Za-z0-9+.-]*+://\S+|\bwww\.\S+")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
# A tag starts at a word start with a letter (any script), then letters, digits, _ / -.
# Not after a word char (foo.md#x, issue#1), '&' (&#123;), '\' (escaped), '#' or '/'.
_TAG = re.compile(r"(?<![\w&#/\\])#([^\W\d_][\w/-]*)")
_DOC_EXT = (".md", ".markdown")


_TICKS = re.compile(r"`+")


def code_spans(s: str) -> list[tuple[int, int, int, int]]:
    """(open start, open end, close start, close end) of each `code span` of a line.

    A run of n backticks opens a span closed by the next run of exactly n
    (CommonMark); a run with no partner is literal. Runs are paired through a
    per-length index, so a line of many unmatched runs of different lengths
    stays linear instead of searching the rest of the line from each one.
    """
    if "`" not in s:  # most lines: no walk over their characters
        return []
    runs = [(m.start(), m.end()) for m in _TICKS.finditer(s)]
    by_len: dict[int, list[int]] = {}
    for k, (a, b) in enumerate(runs):
        by_len.setdefault(b - a, []).append(k)
    spans = []
    i = 0
    while i < len(runs):
        a, b = runs[i]
        same = by_len[b - a]
        nxt = bisect_right(same, i)
        if nxt == len(same):
            i += 1  # an unmatched run is literal backticks
            continue
        j = same[nxt]
        spans.append((a, b, runs[j][0], runs[j][1]))
        i = j + 1
    return spans


def _replace_code_spans(s: str, by) -> str:
    """Each code span (a, b, c, d: opening run a..b, closing run c..d) replaced by by(a, b, c, d)."""
    spans = code_spans(s)
    if not spans:
        return s
    parts, pos = [], 0
    for a, b, c, d in spans:
        parts += [s[pos:a], by(a, b, c, d)]
        pos = d
    parts.append(s[pos:])
    return "".join(parts)


def mask_code_spans(s: str) -> str:
    """Blank out `code spans` (any backtick-run length), keeping string positions."""
    return _replace_code_spans(s, lambda a, b, c, d: " " * (d - a))


def _blank_links(masked: str, line_no: int, found: list[tuple[int, int, Link]], *, keep_labels: bool) -> str:
    """Collect the wikilinks and Markdown links of a code-masked line into found; return the line
    with them blanked (one pass each: blanking match by match copied the line per link)."""

    def wiki(m: re.Match) -> str:
        link = _wiki_link(m.group(2), line_no, embed=bool(m.group(1)))
        if link:
            found.append((m.start(), m.end(), link))
        return " " * (m.end() - m.start())

    def md(m: re.Match) -> str:
        link = None if m.group(1) else _md_link(m.group(3), m.group(2), line_no)
        if link:
            found.append((m.start(), m.end(), link))
        if keep_labels and not m.group(1):
            # Keep the label: it is prose and may carry a #tag; blank "](dest)".
            return m.group(0)[: m.end(2) - m.start()] + " " * (m.end() - m.end(2))
        return " " * (m.end() - m.start())

    masked = _WIKI.sub(wiki, masked)
    return _MDLINK.sub(md, masked)


def line_links(masked: str, line_no: int) -> tuple[list[Link], str]:
    """Links in a code-masked line, and the line with links and URLs blanked for tag search."""
    if "[" not in masked and ":" not in masked and "www." not in masked:  # no link, reference or URL here
        return [], masked
    found: list[tuple[int, int, Link]] = []
    masked = _blank_links(masked, line_no, found, keep_labels=True)
    m = _REFDEF.match(masked)
    if m:
        link = _md_link(m.group(2), m.group(1), line_no)
        if link:
            found.append((m.start(), m.end(), link))
        masked = masked[: m.start()] + " " * (m.end() - m.start()) + masked[m.end() :]
    masked = _URL.sub(lambda u: " " * len(u.group(0)), masked)
    found.sort(key=lambda t: t[0])
    return [link for _, _, link in found], masked


def link_spans(line: str, line_no: int = 1) -> list[tuple[int, int, Link]]:
    """(start, end, link) for each document link written in one line, as the indexer reads it
    (code spans skipped, wikilinks before Markdown links): what an editor's cursor can be on."""
    found: list[tuple[int, int, Link]] = []
    _blank_links(mask_code_spans(line), line_no, found, keep_labels=False)
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
    if path.startswith("/") and not path.startswith("//"):
        # site-absolute ("/adr/ADR-51", "/guide/setup/"): a page of the site, whose path
        # is the document's without its extension; resolved against the workspace root
        path = path.rstrip("/")
        last = path.rsplit("/", 1)[-1]
        if not last or ("." in last and not last.lower().endswith(_DOC_EXT)):
            return None  # the site root, or an asset (/img/logo.png)
    elif not path.lower().endswith(_DOC_EXT):
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
_ESC = re.compile(r"\\([!-/:-@\[-`{-~])")


def plain_text(s: str) -> str:
    """Heading text without inline markup: links → their labels, code → its content."""
    escaped: list[str] = []

    def hide(m: re.Match) -> str:
        escaped.append(m.group(1))
        return "\ue000"  # a private-use placeholder no markup rule touches

    s = _ESC.sub(hide, _strip_attr(s))
    s = _WIKI.sub(lambda m: _wiki_label(m.group(2)), s)
    s = _MDLINK.sub(lambda m: m.group(2), s)
    s = _unwrap_code(s)
    s = _HTML.sub("", s)
    s = _EMPH.sub("", s)
    chars = iter(escaped)
    s = re.sub("\ue000", lambda m: next(chars, ""), s)
    return " ".join(s.split())


def _strip_attr(s: str) -> str:
    """Drop a trailing {#custom-id} attribute (a regex that allowed leading spaces was
    tried from every space of a long run, which made such a heading quadratic)."""
    t = s.rstrip()
    if not t.endswith("}"):
        return s
    k = t.find("{#", t.rfind("}", 0, len(t) - 1) + 1)
    return t[:k].rstrip() if k >= 0 else s


def _unwrap_code(s: str) -> str:
    """`code` → code (stripped); unmatched backticks stay."""
    return _replace_code_spans(s, lambda a, b, c, d: s[b:c].strip())


def _wiki_label(inner: str) -> str:
    target, _, label = inner.replace("\\|", "|").partition("|")
    return label.strip() or target.replace("#", " › ").strip()
