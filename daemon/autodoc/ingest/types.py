"""Data that flows out of ingest: a parsed document and its chunks.

Runs on: any thread (pure: no I/O, no shared state).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Problem:
    """Something wrong with a document that did not stop it being indexed."""

    line: int  # 1-based
    message: str
    code: str = "frontmatter"


@dataclass(frozen=True)
class Link:
    """An outgoing reference as written; resolution to a document is the store's job."""

    target: str  # "../adrs/0203.md", "ADR 0203", "0203-storage" (anchor stripped)
    kind: str  # "wiki" | "markdown" | "supersedes" | "superseded_by"
    line: int  # 1-based line in the file where it appears
    label: str = ""
    anchor: str = ""  # "#section" part, without '#'


@dataclass(frozen=True)
class Heading:
    level: int  # 1..6
    text: str  # heading text, markup stripped
    line: int  # 1-based
    byte_start: int  # offset of the heading line in the file
    # what a link's #fragment names it by: its {#id} (Hugo, Pandoc, kramdown), else the
    # slug GitHub, Hugo and Obsidian's Markdown export make of its text ("next-steps")
    anchor: str = ""


@dataclass
class ParsedDocument:
    title: str
    frontmatter: dict[str, Any]  # JSON-safe (dates as ISO strings)
    tags: list[str]  # frontmatter + inline #tags, lowercase, deduplicated, in order seen
    aliases: list[str]
    abstract: str | None
    status: str | None
    supersedes: list[str]
    superseded_by: list[str]
    links: list[Link]
    headings: list[Heading]
    body_byte: int  # byte offset where the body starts (after frontmatter)
    body_line: int  # 1-based line where the body starts
    abstract_span: tuple[int, int, int, int] | None = (
        None  # byte_start, byte_end, line_start, line_end of the abstract field
    )
    problems: list[Problem] = field(default_factory=list)


@dataclass(frozen=True)
class Chunk:
    ordinal: int  # 0-based position in the document
    kind: str  # "section" | "abstract"
    breadcrumb: str  # "ADR 0203 › 4. Storage › 4.4 Constants"
    text: str  # for sections: exactly file_bytes[byte_start:byte_end].decode()
    byte_start: int
    byte_end: int
    line_start: int  # 1-based, inclusive
    line_end: int  # 1-based, inclusive
    text_hash: str  # sha256 hex of breadcrumb + "\n" + text (what is embedded)
    tokens: int
