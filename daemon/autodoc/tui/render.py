"""How hits, documents and previews look in the pickers, and what leaves them
(a ref, quickfix lines, an editor's argv).

Input: search.query hits (snippets with matched words between « and »,
1-based inclusive line spans), document.read text, the query. Output: Rich
`Text` for the list and the preview, plain strings for the rest. Marks use
bold, underline and reverse as well as colour, so they still show under
NO_COLOR. Pure functions.

Runs on: the TUI's event loop (the app's main thread).
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from rich.text import Text

from .. import refs

OPEN, CLOSE = "«", "»"
MATCH = "bold underline #ffd75f"
SPAN = "on #303a4a"
GUTTER_SPAN = "bold reverse"
PATH = "bold #87afff"
CRUMB = "italic #a8a8a8"
DIM = "#808080"

_WORD = re.compile(r"\w", re.UNICODE)
_OPERATORS = {"AND", "OR", "NOT", "NEAR"}


def clean_snippet(snippet: str | None) -> tuple[str, list[tuple[int, int]], list[str]]:
    """The snippet without its marks, the marked ranges (0-based, end exclusive) and the marked words."""
    text = (snippet or "").replace("\r", " ").replace("\n", " ").replace("\t", " ")
    out: list[str] = []
    ranges: list[tuple[int, int]] = []
    words: list[str] = []
    pos = 0
    length = 0
    while True:
        o = text.find(OPEN, pos)
        c = text.find(CLOSE, o + 1) if o >= 0 else -1
        if o < 0 or c < 0:
            out.append(text[pos:])
            break
        before, word = text[pos:o], text[o + 1 : c]
        out.append(before)
        length += len(before)
        ranges.append((length, length + len(word)))
        out.append(word)
        length += len(word)
        if word:
            words.append(word)
        pos = c + 1
    return "".join(out), ranges, words


def query_words(query: str) -> list[str]:
    """The plain words of a query, lower-cased: facets, negations and operators left out;
    a trailing * kept to mean a prefix."""
    words = []
    for token in query.split():
        if token.startswith("-") or re.match(r"^[\w.]+:.", token) or token.upper() in _OPERATORS:
            continue
        for w in re.split(r'["()]+', token):
            if len(w.rstrip("*")) >= 2 or (w and not w.isascii()):  # "a", "I": marked everywhere, telling nothing
                words.append(w.lower())
    return words


def match_words(hit: dict[str, Any], query: str) -> list[str]:
    """The words to mark in a hit's preview: its snippet's marked words, then the query's."""
    seen: list[str] = []
    for w in clean_snippet(hit.get("snippet"))[2] + query_words(query):
        w = w.lower()
        if w and w != "*" and w not in seen:
            seen.append(w)
    return seen


def find_words(line: str, words: Iterable[str]) -> list[tuple[int, int]]:
    """Where the words occur in a line (case-insensitive; whole words, or a prefix for `word*`)."""
    lower = line.lower()
    found = []
    for w in words:
        prefix = w.endswith("*")
        w = w.rstrip("*")
        if not w:
            continue
        start = 0
        while (i := lower.find(w, start)) >= 0:
            end = i + len(w)
            start = end
            if i > 0 and _WORD.match(lower[i - 1]) and _WORD.match(w[0]):
                continue
            if prefix:
                while end < len(lower) and _WORD.match(lower[end]):
                    end += 1
            elif end < len(lower) and _WORD.match(lower[end]) and _WORD.match(w[-1]):
                continue
            found.append((i, end))
    return sorted(found)


def hit_label(hit: dict[str, Any]) -> Text:
    """Two lines: `path:line  breadcrumb`, then the snippet with its matched words marked."""
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append(hit["path"], PATH)
    t.append(f":{hit.get('line_start') or 1}", DIM)
    if hit.get("superseded_by"):
        t.append("  (superseded)", DIM)
    crumb = (hit.get("breadcrumb") or "").replace("\n", " ")
    if crumb:
        t.append("  " + crumb, CRUMB)
    snippet, ranges, _ = clean_snippet(hit.get("snippet"))
    body = Text("  " + snippet, no_wrap=True, overflow="ellipsis")
    for a, b in ranges:
        body.stylize(MATCH, a + 2, b + 2)
    return Text("\n", no_wrap=True).join([t, body])


def doc_label(doc: dict[str, Any]) -> Text:
    """Two lines: the title (or path), then the path; the fuzzy-matched characters
    (`title_marks`, `path_marks`: document.find's, or fuzzy.find's) marked."""
    title = doc.get("title") or doc["path"]
    title_marks = (doc.get("title_marks") if doc.get("title") else doc.get("path_marks")) or []
    line1 = Text(title, "bold", no_wrap=True, overflow="ellipsis")
    line2 = Text("  " + doc["path"], DIM, no_wrap=True, overflow="ellipsis")
    for m in title_marks:
        line1.stylize(MATCH, m, m + 1)
    for m in doc.get("path_marks") or []:
        line2.stylize(MATCH, m + 2, m + 3)  # after line 2's indent
    return Text("\n", no_wrap=True).join([line1, line2])


def preview(text: str, first_line: int, span: tuple[int, int] | None, words: list[str]) -> Text:
    """Numbered lines from `first_line`; the hit's span shaded, with a marked gutter
    (visible without colour); the words marked."""
    out = Text(no_wrap=True, overflow="ellipsis")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    width = len(str(first_line + len(lines)))
    for i, line in enumerate(lines):
        n = first_line + i
        inside = span is not None and span[0] <= n <= span[1]
        out.append(f"{n:>{width}}", GUTTER_SPAN if inside else DIM)
        out.append("▌" if inside else " ", "bold" if inside else DIM)
        start = len(out)
        out.append(line.replace("\t", "    ") + "\n")
        if inside:
            out.stylize(SPAN, start, len(out) - 1)
        for a, b in find_words(line, words):
            out.stylize(MATCH, start + a, start + b)
    return out


def ref(hit: dict[str, Any]) -> str:
    """The hit's ref as the CLI prints it and `autodoc read` takes it (refs.py), shell-quoted when needed."""
    start, end = hit.get("line_start") or 1, hit.get("line_end") or hit.get("line_start") or 1
    return refs.shown(refs.ref(hit["workspace"], hit["path"], start, end))


def quickfix_lines(hits: list[dict[str, Any]], root: str) -> list[str]:
    """`file:line:col: text`, one a hit (Vim's `-q`, Emacs's compilation mode, `:cfile`)."""
    out = []
    for h in hits:
        snippet = clean_snippet(h.get("snippet"))[0]
        text = (h.get("breadcrumb") or "") + (f"  {snippet}" if snippet else "")
        out.append(f"{Path(root) / h['path']}:{h.get('line_start') or 1}:1: {text.strip()}")
    return out


def editor_argv(path: str, line: int, env: Mapping[str, str] | None = None) -> list[str]:
    """$EDITOR (else $VISUAL, else vi) with its own arguments, `+LINE` and the file:
    what vi, vim, nvim, nano, emacs, micro and kak understand."""
    env = os.environ if env is None else env
    cmd = shlex.split(env.get("EDITOR") or env.get("VISUAL") or "vi")
    return [*cmd, f"+{max(1, line)}", path]
