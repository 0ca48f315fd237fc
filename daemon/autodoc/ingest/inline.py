"""Ingest, inline syntax of a block of body lines: tags, links, plain heading text.

Input: the lines of one paragraph (or list, table, heading) outside fenced code,
code spans blanked. Output: the inline #tags, the wikilinks, Markdown links and
reference links in it (a label may wrap over lines), and (for headings) its
text with markup removed. Links (label and destination), reference
definitions, URLs, HTML tags, template tags ({{< >}}, {% %}) and attribute
lists ({#id}, {: #id}) are blanked before tags are read, so only a #tag that
Obsidian or zk would show is one: never a foo.md#anchor, a [label](#anchor),
a heading id or a `#code`.

Runs on: any thread (pure: no I/O, no shared state).
"""

from __future__ import annotations

import posixpath
import re
from bisect import bisect_right
from urllib.parse import unquote

from .types import Link

_WIKI = re.compile(r"(!?)\[\[([^\[\]\n]+?)\]\]")
# [label](dest "title") — dest may be <wrapped>; labels may hold one level of [brackets].
# Possessive quantifiers (*+, ++) because backtracking between the spaces before
# the destination, before the title and before ")" made "[a](" followed by
# 20,000 spaces quadratic; nothing those give back could complete a match.
# A label may wrap onto the next lines of its paragraph (a block never holds a blank line);
# a destination may be a Liquid tag ({% link _docs/x.md %}), spaces and all.
_MDLINK = re.compile(
    r"(!?)\[((?:[^\[\]]|\[[^\[\]]*\])*+)\]\(\s*+(<[^<>\n]*>|\{%[^%\n]*%\}|[^\s()<>]*+)"
    r"\s*+(?:(?:\"[^\"]*\"|'[^']*'|\([^()]*\))\s*+)?\)"
)
# [label]: destination "title" — a footnote ([^1]: text) is not one
_REFDEF = re.compile(r"^ {0,3}\[(?!\^)([^\]\n]+)\]:[ \t]*(<[^<>\n]*>|\S+)[^\n]*", re.M)
# [text][label], [label][] and [label]: a link only where the document defines label
_REFUSE = re.compile(r"\[((?:[^\[\]]|\[[^\[\]]*\])*+)\](?:\[([^\[\]]*)\])?")
# Jekyll's {% link path %}: the site's file at that path
_LIQUID_LINK = re.compile(r"^\{%-?\s*link\s+(\S+?)\s*-?%\}$")
# what is markup, not prose, for tags: HTML tags, templates, attribute lists (HTML comments:
# _blank_comments). No part can run past a character that would start another match, so a
# block of many unclosed "{{" or "<" stays linear (".*?" made 40,000 "{{" take 57 s).
_NOT_PROSE = re.compile(r"</?[A-Za-z][^<>]*>|\{\{[^{}]*\}\}|\{%[^%]*%\}|\{:?[ \t]*[#.][^{}\n]*\}")
# A bare scheme starts where a run of scheme characters starts: "a.a.a.…" would
# otherwise be tried from every letter after a dot, each try reading to the end.
_URL = re.compile(r"<[A-Za-z][A-Za-z0-9+.-]*+:[^<>\s]*>|(?<![\w+.-])[A-Za-z][A-Za-z0-9+.-]*+://\S+|\bwww\.\S+")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
# A tag starts at a word start with a letter (any script), then letters, digits, _ / -.
# Not after a word char (foo.md#x, issue#1), '&' (&#123;), '\' (escaped), '#', '/' or '{' (an id).
_TAG = re.compile(r"(?<![\w&#/\\{])#([^\W\d_][\w/-]*)")
_DOC_EXT = (".md", ".markdown")
# a site's page written by its address: "guide.html" is the page guide.md renders to
_PAGE_EXT = (".html", ".htm")


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


def _blank_links(masked: str, line_of, found: list[tuple[int, int, Link]]) -> str:
    """Collect the wikilinks and Markdown links of a code-masked text into found; return the text
    with them blanked, labels too (one pass each: blanking match by match copied the text per link)."""

    def wiki(m: re.Match) -> str:
        link = _wiki_link(m.group(2), line_of(m.start()), embed=bool(m.group(1)))
        if link:
            found.append((m.start(), m.end(), link))
        return _blank(m.group(0))

    def md(m: re.Match) -> str:
        link = None if m.group(1) else _md_link(m.group(3), m.group(2), line_of(m.start()))
        if link:
            found.append((m.start(), m.end(), link))
        return _blank(m.group(0))

    masked = _WIKI.sub(wiki, masked)
    return _MDLINK.sub(md, masked)


def _blank(s: str) -> str:
    """Spaces for s, its line breaks kept (positions and line numbers stay put)."""
    return re.sub(r"[^\n]", " ", s)


def _blank_comments(s: str) -> str:
    """<!-- HTML comments --> blanked, by search rather than a regex: one pass however many
    comments are left open."""
    start = s.find("<!--")
    if start < 0:
        return s
    parts, pos = [], 0
    while start >= 0:
        end = s.find("-->", start + 4)
        if end < 0:
            break  # open to the end of the block: not closed here, so not a comment we know
        parts += [s[pos:start], _blank(s[start : end + 3])]
        pos = end + 3
        start = s.find("<!--", pos)
    parts.append(s[pos:])
    return "".join(parts)


def _ref_key(label: str) -> str:
    return " ".join(label.lower().split())  # CommonMark matches labels case- and space-insensitively


def reference_definitions(masked: str) -> dict[str, str]:
    """Each reference definition of a code-masked text: label (normalised) -> destination.
    The first definition of a label wins (CommonMark)."""
    out: dict[str, str] = {}
    if "]:" in masked:
        for m in _REFDEF.finditer(masked):
            out.setdefault(_ref_key(m.group(1)), m.group(2))
    return out


def block_links(masked: str, first_line: int = 1, defs: dict[str, str] | None = None) -> tuple[list[Link], str]:
    """The links of a block of code-masked lines starting at first_line, and the block with every
    link, reference definition, URL and markup blanked: what is left is prose, for tag search.
    defs: the document's reference definitions, for its [text][label] and [label] uses."""
    if "[" not in masked and ":" not in masked and "www." not in masked and "<" not in masked and "{" not in masked:
        return [], masked  # no link, reference, URL or markup here
    breaks = [i for i, c in enumerate(masked) if c == "\n"] if "\n" in masked else []

    def line_of(pos: int) -> int:
        return first_line + bisect_right(breaks, pos - 1)

    found: list[tuple[int, int, Link]] = []
    masked = _blank_links(masked, line_of, found)
    if "]:" in masked:

        def definition(m: re.Match) -> str:
            link = _md_link(m.group(2), m.group(1), line_of(m.start()))
            if link:
                found.append((m.start(), m.end(), link))
            return _blank(m.group(0))

        masked = _REFDEF.sub(definition, masked)
    if "[" in masked:
        defs = defs or {}

        def use(m: re.Match) -> str:
            dest = defs.get(_ref_key(m.group(2) or m.group(1)))
            if dest is None:  # brackets in prose, a task box, a citation; "[text][label]"'s label is a name
                return m.group(0) if m.group(2) is None else m.group(0)[: m.start(2) - m.start()] + _blank(m.group(2))
            link = _md_link(dest, m.group(1), line_of(m.start()))
            if link:
                found.append((m.start(), m.end(), link))
            return _blank(m.group(0))

        masked = _REFUSE.sub(use, masked)
    masked = _NOT_PROSE.sub(lambda u: _blank(u.group(0)), _blank_comments(masked))
    masked = _URL.sub(lambda u: " " * len(u.group(0)), masked)
    found.sort(key=lambda t: t[0])
    return [link for _, _, link in found], masked


def link_spans(line: str, line_no: int = 1, defs: dict[str, str] | None = None) -> list[tuple[int, int, Link]]:
    """(start, end, link) for each document link written in one line, as the indexer reads it
    (code spans skipped, wikilinks before Markdown links, then a reference definition and, with
    the document's defs, its uses): what an editor's cursor can be on."""
    found: list[tuple[int, int, Link]] = []
    masked = _blank_links(mask_code_spans(line), lambda _: line_no, found)
    m = _REFDEF.match(masked)
    if m:
        link = _md_link(m.group(2), m.group(1), line_no)
        if link:
            found.append((m.start(), m.end(), link))
    elif defs:
        for u in _REFUSE.finditer(masked):
            dest = defs.get(_ref_key(u.group(2) or u.group(1)))
            link = _md_link(dest, u.group(1), line_no) if dest is not None else None
            if link:
                found.append((u.start(), u.end(), link))
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
    """A Markdown link's destination as a document link, or None when it names no document:
    an external URL, an in-page #anchor, an image or other file, a template expression."""
    dest = dest.strip()
    if dest.startswith("<") and dest.endswith(">"):
        dest = dest[1:-1].strip()
    liquid = _LIQUID_LINK.match(dest)
    if liquid:
        dest = "/" + liquid.group(1).lstrip("/")  # {% link _docs/x.md %}: from the site's root
    if not dest or dest.startswith("#") or _SCHEME.match(dest) or "{" in dest or "}" in dest:
        return None
    path, _, anchor = dest.partition("#")
    path = unquote(path.split("?", 1)[0])
    if not path or path.startswith("//"):
        return None
    last = path.rstrip("/").rsplit("/", 1)[-1]
    ext = posixpath.splitext(last)[1].lower() if last not in ("", ".", "..") else ""
    if ext and ext not in _DOC_EXT + _PAGE_EXT:
        return None  # an image, a PDF, a source file: not a document
    if path.startswith("/") and not path.strip("/"):
        return None  # the site's home page
    path = path.rstrip("/")  # "guides/upgrade/": the page of that folder, as "guides/upgrade"
    # Relative ("guide.md", "guides/upgrade/", "../ADR006-rds-broker") or site-absolute
    # ("/docs/concepts/"): resolved as the site renders it (store/links.py).
    return Link(target=path, kind="markdown", line=line_no, label=" ".join(label.split()), anchor=unquote(anchor))


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


_ATTR_ID = re.compile(r"\{:?[ \t]*#([^\s{}]+)[^{}]*\}[ \t]*$")
_SLUG_DROP = re.compile(r"[^\w\- ]")


def heading_id(raw: str) -> str | None:
    """The explicit id of a heading line's text ("Next steps {#next-steps}") or of a kramdown
    attribute line ("{: #v4-4-1}"), else None."""
    m = _ATTR_ID.search(raw) if raw.rstrip().endswith("}") else None
    return m.group(1) if m else None


def slug(text: str) -> str:
    """A heading's anchor as GitHub and Hugo make it: lowercased, punctuation dropped, spaces
    to hyphens ("Next steps: 2" -> "next-steps-2")."""
    return _SLUG_DROP.sub("", text.strip().lower()).replace(" ", "-")


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
