"""Ingest, outline: a document's heading tree with each section's spans and size.

Input: the document's bytes (what the index stored) and its parsed headings.
Output: one node per heading — level, title, the section's 1-based inclusive
line span and byte span (from the heading line to the next heading of the
same or a higher level, or the end of the file, so a section includes its
subsections), its token count, and its children. A heading that skips a
level (# then ###) nests under the nearest shallower one.

Tokens are `wordpiece_tokens` (ingest/tokens.py): the calibrated estimate of
the bundled MiniLM tokenizer's WordPiece count (within ~4 % on tests/corpora/kb),
which is also close to what an LLM's tokenizer counts for English prose. It
needs no model, so an outline answers before the model loads.

Runs on: any thread (pure: no I/O, no shared state).
"""

from __future__ import annotations

from typing import Any

from .markdown import parse_markdown
from .tokens import wordpiece_tokens
from .types import Heading


def _line_of(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1


def build_outline(data: bytes, headings: list[Heading] | None = None) -> list[dict[str, Any]]:
    """The heading tree of `data` (headings parsed from it when not given)."""
    text = data.decode("utf-8", errors="replace")
    if headings is None:
        headings = parse_markdown(text).headings
    total_lines = len(data.split(b"\n")) - (1 if data.endswith(b"\n") else 0)
    roots: list[dict[str, Any]] = []
    stack: list[dict[str, Any]] = []
    for i, h in enumerate(headings):
        end = len(data)
        for later in headings[i + 1 :]:
            if later.level <= h.level:
                end = later.byte_start
                break
        line_end = _line_of(data, end - 1) if end > h.byte_start else h.line
        if end == len(data):
            line_end = max(h.line, total_lines)
        section = data[h.byte_start : end].decode("utf-8", errors="replace")
        node = {
            "level": h.level,
            "title": h.text,
            "anchor": h.anchor,
            "line_start": h.line,
            "line_end": line_end,
            "byte_start": h.byte_start,
            "byte_end": end,
            "tokens": wordpiece_tokens(section),
            "children": [],
        }
        while stack and stack[-1]["level"] >= h.level:
            stack.pop()
        (stack[-1]["children"] if stack else roots).append(node)
        stack.append(node)
    return roots
