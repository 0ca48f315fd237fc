"""What the index job does to each file, up to the store: scan, read, parse, chunk.

Kept beside the tests (not imported from the index job, which is being moved)
so the ingest layer's own promises are checked on real files: every file is
either skipped with a reason or parsed and chunked, and nothing raises.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass
from pathlib import Path

from autodoc.ingest import SkipFile, chunk_document, parse_markdown, read_document, scan_workspace
from autodoc.ingest.text import prepared_text
from autodoc.ingest.types import Chunk, ParsedDocument

PROBLEM_CODES = {"frontmatter", "limit", "encoding", "parse", "chunk", "secret"}


@dataclass
class Outcome:
    relpath: str
    skip: str | None = None
    doc: ParsedDocument | None = None
    chunks: list[Chunk] | None = None


def ingest_file(text: str, relpath: str = "x.md") -> tuple[ParsedDocument, list[Chunk]]:
    doc = parse_markdown(text)
    if not doc.title:  # as the index job does: the file name stands in
        doc.title = relpath.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    return doc, chunk_document(text, doc, count_tokens=None)


def ingest_tree(root: Path, *, max_bytes: int) -> dict[str, Outcome]:
    out: dict[str, Outcome] = {}
    for e in scan_workspace(root, max_bytes=max_bytes):
        if e.skip:
            out[e.relpath] = Outcome(e.relpath, skip=e.skip)
            continue
        try:
            data = read_document(e.path, max_bytes=max_bytes)
        except SkipFile as s:
            out[e.relpath] = Outcome(e.relpath, skip=s.reason)
            continue
        except OSError as err:  # the index job's wording for a file it could not open
            out[e.relpath] = Outcome(e.relpath, skip=f"unreadable: {err.strerror or err}")
            continue
        text, problems = prepared_text(e.relpath, data)  # as the index job reads it (index/prepare.py)
        doc, chunks = ingest_file(text, e.relpath)
        doc.problems = problems + doc.problems
        out[e.relpath] = Outcome(e.relpath, doc=doc, chunks=chunks)
    return out


def check_document(text: str, doc: ParsedDocument, chunks: list[Chunk]) -> None:
    """The contract of a parse and its chunks, checked in time linear in the text."""
    raw = text.encode("utf-8", "surrogatepass")
    newlines = [m.start() for m in re.finditer(b"\n", raw)]
    n_lines = len(newlines) + 1
    for p in doc.problems:
        assert 1 <= p.line <= n_lines, p
        assert p.code in PROBLEM_CODES, p
        assert p.message, p
    for h in doc.headings:
        assert 1 <= h.line <= n_lines and 1 <= h.level <= 6
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    if not chunks:
        return  # a parse checked alone
    prev_end = doc.body_byte
    for c in (c for c in chunks if c.kind == "section"):
        assert prev_end <= c.byte_start < c.byte_end <= len(raw), (prev_end, c.byte_start, c.byte_end)
        gap = raw[prev_end : c.byte_start].decode("utf-8", "surrogatepass")
        assert not gap.strip(), f"text outside every chunk: {gap.strip()[:80]!r}"
        assert raw[c.byte_start : c.byte_end].decode("utf-8", "surrogatepass") == c.text
        assert c.line_start == bisect_right(newlines, c.byte_start - 1) + 1
        assert c.line_end == bisect_right(newlines, c.byte_end - 2) + 1
        prev_end = c.byte_end
    tail = raw[prev_end:].decode("utf-8", "surrogatepass")
    assert not tail.strip(), f"text after the last chunk: {tail.strip()[:80]!r}"
