"""Compact, citable answers and the `answerable` signal, over the full answer.

search.query's `answer`, `budget_tokens` and `per_document` options are read
here, not by the engine: the engine answers as always (asked for enough hits
to fill `limit` documents when one entry per document is wanted), and this
module shapes its answer. A compact hit is `{ref, workspace, path, title,
section, line_start, line_end, text, confidence, superseded_by, changed,
origin}`: the passage whole, sliced from the indexed document by the hit's
byte span, so the ref's lines are exactly the text. The answer is held to
`budget_tokens` (estimated as characters / 4 of the answer's JSON); when the
budget bites, the later passages are cut at a line end, or at a word within a
long line, each listed document keeping at least its first lines; when even
that does not fit, the last documents are dropped. `truncated` says so. A cut
passage keeps the run of its lines holding the most of the query's rarer words
(budget.line_weights; the MCP tool cuts the same way).

Every answer, full or compact, carries the engine's `answerable`, `held_back` and each hit's
`confidence` (search/answerable.py, search/shape.py).

Runs on: the search's thread, on its read snapshot (store/passages.py); the
shaping is pure, apart from one stat per cited file for `changed`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..budget import ELLIPSIS, fit_budget
from ..config import PER_DOCUMENT
from ..refs import ref
from ..store import passages
from ..store.interface import Snapshot
from ..store.workspaces import Workspace

DEFAULT_BUDGET = 1200
DEFAULT_LIMIT = 10
SEP = " › "  # the breadcrumb's separator (ingest/chunk.py)
WIDEN = 240  # bytes of a line a passage takes in beyond its chunk, each side, to start and end on whole lines


@dataclass(frozen=True)
class Request:
    compact: bool
    budget: int
    per_document: bool
    limit: int  # what the caller asked for: documents with per_document, else hits


def request(opts: Mapping[str, Any] | None) -> Request:
    """The answer's shape from search.query's opts (types and ranges checked by its schema)."""
    opts = opts or {}
    compact = opts.get("answer", "full") == "compact"
    return Request(
        compact=compact,
        budget=opts.get("budget_tokens", DEFAULT_BUDGET),
        per_document=opts.get("per_document", compact),
        limit=opts.get("limit", DEFAULT_LIMIT),
    )


def engine_opts(opts: Mapping[str, Any] | None, req: Request) -> dict[str, Any]:
    """The engine keeps at most PER_DOCUMENT chunks a document, so this many hits fill `limit` documents."""
    out = dict(opts or {})
    out["per_document"] = req.per_document  # the engine leads with the leading document's top passages
    if req.per_document:
        out["limit"] = req.limit * PER_DOCUMENT
    return out


def finish(db: Snapshot, ws: Workspace, full: dict[str, Any], req: Request) -> dict[str, Any]:
    """The answer the caller asked for, from the engine's: reads what it needs on the search's snapshot."""
    hits = full["hits"]
    if req.per_document:
        hits = one_per_document(hits, req.limit)
    if not req.compact:
        return {**full, "hits": hits}
    docs = passages.documents(db, ws.id, [h["path"] for h in hits])
    entries = [compact_hit(h, h["confidence"], docs.get(h["path"]), ws.root) for h in hits]
    return fit_budget(envelope(full, full["answerable"]), entries, req.budget, full.get("query") or "")


def one_per_document(hits: list[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    """Each document's first (best) hit, in answer order, up to `limit` documents; the leading
    document's hits that directly follow its first stay with it (the engine puts there the others
    it shows: search/passages.py)."""
    seen: set[tuple[str, str]] = set()
    out = []
    for i, h in enumerate(hits):
        key = (h["workspace"], h["path"])
        if key not in seen:
            if len(seen) == limit:
                break
            seen.add(key)
            out.append(h)
        elif len(seen) == 1 and len(out) == i:  # the leading document's run
            out.append(h)
    return out


def envelope(full: dict[str, Any], found: bool) -> dict[str, Any]:
    return {
        "workspace": full["workspace"],
        "query": full["query"],
        "answer": "compact",
        "answerable": found,
        "held_back": full["held_back"],
        "truncated": False,
        "tokens": 0,
        "hits": [],
        "mode_used": full["mode_used"],
        "lexical_match": full["lexical_match"],
        **({"corrections": full["corrections"]} if "corrections" in full else {}),
        "semantic": full["semantic"],
        "semantic_tier": full["semantic_tier"],
        "rank": full["rank"],
        "stages": full["stages"],
        "facet_counts": full["facet_counts"],
    }


def section_of(breadcrumb: str, title: str) -> str:
    """The breadcrumb below the title: "" for a passage at the top of its document."""
    parts = breadcrumb.split(SEP)
    if parts and parts[0] == title:
        parts = parts[1:]
    return SEP.join(parts)


def file_changed(root: str, path: str, doc: passages.Indexed | None) -> bool:
    """The file on disk is not the one indexed (by size and mtime, as the index job tells)."""
    if doc is None:
        return True
    try:
        st = os.stat(os.path.join(root, path))
    except OSError:
        return True
    return st.st_size != doc.size or st.st_mtime_ns != doc.mtime_ns


def compact_hit(h: dict[str, Any], conf: float | None, doc: passages.Indexed | None, root: str) -> dict[str, Any]:
    origin = h.get("origin") or {"kind": "file", "path": h["path"], "title": h["title"]}
    text = whole_lines(doc.data, h["byte_start"], h["byte_end"]) if doc else ""
    return {
        "ref": ref(h["workspace"], h["path"], h["line_start"], h["line_end"]),
        "workspace": h["workspace"],
        "path": h["path"],
        "title": h["title"],
        "section": section_of(h["breadcrumb"], h["title"]),
        "line_start": h["line_start"],
        "line_end": h["line_end"],
        "text": text,
        "confidence": conf,
        "superseded_by": h["superseded_by"],
        "changed": False if origin.get("kind") != "file" else file_changed(root, h["path"], doc),
        "origin": origin,
    }


def whole_lines(data: bytes, start: int, end: int) -> str:
    """The chunk's bytes start..end, widened to the whole lines they touch where the rest of a
    line is short (WIDEN bytes at most each side); a chunk inside a long line (a paragraph
    written as one line, chunked at sentences) keeps its own text and says it begins or ends
    inside its line with ELLIPSIS."""
    ls = data.rfind(b"\n", 0, start) + 1
    head = ELLIPSIS if start - ls > WIDEN else ""
    start = start if head else ls
    tail = ""
    if end and data[end - 1 : end] != b"\n":
        nl = data.find(b"\n", end)
        le = len(data) if nl < 0 else nl
        if le - end > WIDEN:
            tail = ELLIPSIS
        else:
            end = le
    text = data[start:end].decode("utf-8", "replace")
    return head + (text.lstrip() if head else text).rstrip() + tail
