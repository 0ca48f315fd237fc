"""Ingest, a session: conversation events → one Markdown document and its chunks.

Input: a session's events (id, kind, text, time) in order and its title.
Output: the rendered document (bytes), a ParsedDocument for it, its chunks
(the Markdown chunker run on each event's text, so a long event is cut at its
own headings and paragraphs), and each event's byte and line span.

Only conversation is indexed — the human's messages and the agent's
responses. Tool calls and results, status and errors are mechanism: indexing
them would make a search answer with a JSON payload or cite a failure as if
it were what the session was about (seed 000). `classify` says which events
are kept and why the others are not.

The document reads as a transcript:

    # <title>

    ## User · <time> · <event id>

    <the event's text, verbatim>

    ## Agent · …

Every chunk is an exact slice of an event's text, so a hit's line span read
back with document.read is the event's words.

Runs on: any thread (pure: no I/O, no shared state).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from .chunk import SEP, chunk_document
from .markdown import parse_markdown
from .types import Chunk, ParsedDocument

CONVERSATION = {"message": "User", "response": "Agent"}  # kind → how the transcript names the speaker
SKIP_REASONS = {
    "tool_call": "tool_call",
    "tool_result": "tool_result",
    "status": "status",
    "error": "error",
    "other": "other",
}
# Seed 000's event log names its kinds by type; each is an alias of a documented kind.
KIND_ALIASES = {
    "chat.message": "message",
    "agent.response": "response",
    "tool.call": "tool_call",
    "tool.result": "tool_result",
    "agent.status": "status",
    "agent.error": "error",
}
TITLE_CHARS = 80


@dataclass(frozen=True)
class Event:
    id: str
    kind: str  # message | response
    text: str
    time: str | None = None


@dataclass(frozen=True)
class EventSpan:
    id: str
    kind: str
    time: str | None
    byte_start: int  # of the event's text in the rendered document
    byte_end: int
    line_start: int  # 1-based, inclusive
    line_end: int
    chunk_key: str = ""


# event id → (the chunk key they were cut with, its chunks with spans relative to the event's text)
Reuse = dict[str, tuple[str, list[Chunk]]]


@dataclass
class Rendered:
    data: bytes
    doc: ParsedDocument
    chunks: list[Chunk]
    spans: list[EventSpan]


def clean_text(text: str) -> str:
    """The event's text as stored: newlines normalised, blank lines around it dropped."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text.strip("\n").rstrip()


def canonical_kind(kind: str) -> str:
    """A kind as documented: seed 000's names (chat.message, tool.call, ...) mapped, others as given."""
    return KIND_ALIASES.get(kind, kind)


def event_kind(event: dict) -> tuple[str | None, str | None]:
    """(the documented kind of an event sent with `kind`, `type` or both, None when it has neither),
    and the field that disagrees when both are given and name different kinds (else None)."""
    kind, typ = event.get("kind"), event.get("type")
    kind = canonical_kind(kind) if isinstance(kind, str) else None
    typ = canonical_kind(typ) if isinstance(typ, str) else None
    if kind is not None and typ is not None and kind != typ:
        return kind, "type"
    return kind or typ, None


def classify(kind: str, text: str | None) -> str | None:
    """None when the event is conversation to index, else the reason it is skipped."""
    if kind not in CONVERSATION:
        return SKIP_REASONS.get(kind, "other")
    if not clean_text(text or "").strip():
        return "empty"
    return None


def time_text(value: object) -> str | None:
    """A time as the transcript shows it: ISO strings as given, unix seconds as ISO (UTC)."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        try:
            return datetime.fromtimestamp(value, UTC).isoformat().replace("+00:00", "Z")
        except (OverflowError, OSError, ValueError):
            return str(value)
    return " ".join(str(value).split()) or None


def derive_title(events: list[Event], session_id: str) -> str:
    """The first line of the human's first message, or the session's id."""
    for e in events:
        if e.kind == "message":
            for line in e.text.splitlines():
                line = line.strip().lstrip("#").strip()
                if line:
                    return one_line(line)
    return f"Session {session_id}"


def one_line(title: str) -> str:
    title = " ".join(title.split())
    if len(title) <= TITLE_CHARS:
        return title
    cut = title[:TITLE_CHARS].rsplit(" ", 1)[0] or title[:TITLE_CHARS]
    return cut + "…"


def _heading(e: Event) -> str:
    parts = [CONVERSATION[e.kind], *([e.time] if e.time else []), e.id]
    return "## " + " · ".join(p.replace("\n", " ") for p in parts)


def chunk_key(title: str, e: Event, chunking: str) -> str:
    """What an event's chunks depend on: the title (their breadcrumb), its kind and text, and the
    chunking settings (`chunking`: the section budget and the token counter's identity)."""
    h = hashlib.sha256()
    for part in (chunking, title, e.kind, e.text):
        h.update(part.encode("utf-8", "surrogatepass") + b"\0")
    return h.hexdigest()[:32]


def relative_chunks(spans: list[EventSpan], chunks: list[Chunk]) -> Reuse:
    """Stored chunks regrouped by event, their spans made relative to the event's text (for `render`'s reuse)."""
    out: Reuse = {}
    i = 0
    for sp in sorted(spans, key=lambda x: x.byte_start):
        mine: list[Chunk] = []
        while i < len(chunks) and chunks[i].byte_start < sp.byte_end:
            c = chunks[i]
            if c.byte_start >= sp.byte_start:
                mine.append(
                    replace(
                        c,
                        byte_start=c.byte_start - sp.byte_start,
                        byte_end=c.byte_end - sp.byte_start,
                        line_start=c.line_start - sp.line_start + 1,
                        line_end=c.line_end - sp.line_start + 1,
                    )
                )
            i += 1
        out[sp.id] = (sp.chunk_key, mine)
    return out


def render(
    title: str,
    events: list[Event],
    *,
    section_tokens: int,
    count_tokens: Callable[[str], int] | None = None,
    chunking: str = "",
    reuse: Reuse | None = None,
) -> Rendered:
    """The session's document, its chunks and its events' spans (module docstring). An event whose
    chunk key is the one `reuse` holds for its id keeps those chunks instead of being cut again:
    appending to a long session re-cuts only what changed."""
    out: list[str] = [f"# {title}\n"]
    nbytes = len(out[0].encode("utf-8"))
    nlines = 1
    chunks: list[Chunk] = []
    spans: list[EventSpan] = []
    for e in events:
        head = f"\n{_heading(e)}\n\n"
        out.append(head)
        nbytes += len(head.encode("utf-8"))
        nlines += 3
        text = e.text
        raw = text.encode("utf-8")
        first_line = nlines + 1
        last_line = first_line + text.count("\n")
        key = chunk_key(title, e, chunking)
        spans.append(EventSpan(e.id, e.kind, e.time, nbytes, nbytes + len(raw), first_line, last_line, key))
        stored = (reuse or {}).get(e.id)
        mine = stored[1] if stored and stored[0] == key else _event_chunks(title, e, section_tokens, count_tokens)
        for c in mine:
            chunks.append(
                replace(
                    c,
                    ordinal=len(chunks),
                    byte_start=c.byte_start + nbytes,
                    byte_end=c.byte_end + nbytes,
                    line_start=c.line_start + first_line - 1,
                    line_end=c.line_end + first_line - 1,
                )
            )
        out.append(text + "\n")
        nbytes += len(raw) + 1
        nlines = last_line
    data = "".join(out).encode("utf-8")
    doc = ParsedDocument(
        title=title,
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
    )
    return Rendered(data, doc, chunks, spans)


def _event_chunks(title: str, e: Event, section_tokens: int, count_tokens) -> list[Chunk]:
    """The Markdown chunker on one event's text: the whole text is body (a message that opens
    with `---` is not frontmatter), and the breadcrumb says whose words these are."""
    parsed = parse_markdown(e.text)
    parsed.body_line, parsed.body_byte = 1, 0
    parsed.abstract = None
    parsed.title = title + SEP + CONVERSATION[e.kind]
    return chunk_document(
        e.text, parsed, section_tokens=section_tokens, count_tokens=count_tokens, abstract_chunk=False
    )
