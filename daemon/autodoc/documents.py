"""Workspace paths and document spans (pure, but for resolving symlinks).

`safe_relpath` turns what a client sends into a workspace-relative path that
cannot leave the root (`relpath`: on a PostgreSQL store by the path's text alone, as
the root is a folder on the indexer's machine, never opened here: a read returns the
stored text); `slice_span` cuts a stored document to the byte or
line span a client asked for; `check_generation` refuses a read of a
generation the index no longer keeps; `not_found` is the error for a path
that is not an indexed document, with the documents it might have meant
(read on the caller's snapshot). Below them, the document methods' answers
the service composes from them (document.read, document.outline, document.find).

Runs on: any thread.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from . import fuzzy
from .errors import DocumentNotFound, GenerationGone, InvalidParams, PathOutsideWorkspace
from .ingest.outline import build_outline
from .ingest.tokens import wordpiece_tokens
from .store import reads
from .store.interface import Snapshot
from .store.sql import dialect
from .store.workspaces import Workspace
from .suggest import CANDIDATES, SCAN_ALL, close_documents, pieces


def check_generation(path: str, current: int, wanted: int | None) -> None:
    """A hit's spans point into its generation's bytes; the index keeps only a
    document's latest, so reading an older one must not serve the newer text."""
    if wanted is None or wanted == current:
        return
    raise GenerationGone(
        f"generation {wanted} of {path} is gone: the index keeps only a document's latest generation, and "
        f"{path} is now at generation {current}; search again, or read it without a generation",
        {"path": path, "generation": wanted, "current": current},
    )


def safe_relpath(root: str, path: str) -> str:
    """A workspace-relative path that cannot escape the root (.., absolute, symlinks out)."""
    base = Path(root).resolve()
    p = Path(path)
    candidate = p if p.is_absolute() else base / p
    if ".." in Path(path).parts:
        raise PathOutsideWorkspace(f"{path} leaves the workspace", {"path": path})
    try:
        resolved = candidate.resolve()
    except (OSError, RuntimeError):  # RuntimeError: a symlink loop, before Python 3.13 (ELOOP after)
        resolved = candidate
    if not resolved.is_relative_to(base):
        raise PathOutsideWorkspace(f"{path} is outside the workspace root {base}", {"path": path})
    lexical = candidate.absolute()
    return (
        lexical.relative_to(base).as_posix() if lexical.is_relative_to(base) else resolved.relative_to(base).as_posix()
    )


def stored_relpath(root: str, path: str) -> str:
    """safe_relpath by the text alone: for a workspace whose root is a folder on another machine
    (a PostgreSQL store's, indexed elsewhere), where nothing on this machine may be resolved."""
    if ".." in PurePosixPath(path).parts:
        raise PathOutsideWorkspace(f"{path} leaves the workspace", {"path": path})
    base = PurePosixPath(posixpath.normpath(root))
    p = PurePosixPath(posixpath.normpath(path))
    if p.is_absolute():
        if not p.is_relative_to(base):
            raise PathOutsideWorkspace(f"{path} is outside the workspace root {base}", {"path": path})
        p = p.relative_to(base)
    return p.as_posix()


def relpath(db: Snapshot, ws: Workspace, path: str) -> str:
    """The workspace-relative path a client's `path` names, checked to stay inside the root: resolved
    on this machine for a store file, by its text for a database (whose roots are the indexer's)."""
    if dialect(db) == "sqlite":
        return safe_relpath(ws.root, path)
    return stored_relpath(ws.root, path)


SPAN_KEYS = ("byte_start", "byte_end", "line_start", "line_end")


@dataclass(frozen=True)
class Span:
    text: str
    byte_start: int
    byte_end: int
    line_start: int
    line_end: int


def _int_opt(opts: dict, key: str, default: int, lo: int, hi: int) -> int:
    v = opts.get(key, default)
    if not isinstance(v, int) or isinstance(v, bool) or not (lo <= v <= hi):
        raise InvalidParams(f"opts.{key}", f"must be an integer in {lo}..{hi}")
    return v


def slice_span(data: bytes, opts: dict[str, Any]) -> Span:
    """The part of `data` that opts name: a byte span, a 1-based inclusive line span, or all of it."""
    for k in opts:
        if k not in SPAN_KEYS:
            raise InvalidParams(f"opts.{k}", "unknown option")
    if "line_start" in opts or "line_end" in opts:
        if "byte_start" in opts or "byte_end" in opts:
            raise InvalidParams("opts", "give a byte span or a line span, not both")
        lines = data.split(b"\n")
        n = len(lines) - (1 if data.endswith(b"\n") else 0)
        ls = _int_opt(opts, "line_start", 1, 1, max(1, n))
        le = _int_opt(opts, "line_end", n, ls, max(1, n))
        start = sum(len(l) + 1 for l in lines[: ls - 1])
        end = min(len(data), sum(len(l) + 1 for l in lines[:le]))
    else:
        start = _int_opt(opts, "byte_start", 0, 0, len(data))
        end = _int_opt(opts, "byte_end", len(data), start, len(data))
    piece = data[start:end]
    try:
        text = piece.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidParams("opts.byte_start", "the span does not fall on UTF-8 character boundaries") from None
    line_start = data.count(b"\n", 0, start) + 1
    line_end = line_start + piece.count(b"\n") - (1 if piece.endswith(b"\n") and piece else 0)
    return Span(text, start, end, line_start, max(line_start, line_end))


def not_found(db: Snapshot, ws: Workspace, rel: str) -> DocumentNotFound:
    """The error for a path that is not an indexed document of the workspace."""
    few = reads.document_count(db, ws.id) <= SCAN_ALL
    names = reads.document_names(db, ws.id, None if few else pieces(rel), -1 if few else CANDIDATES)
    return DocumentNotFound(
        f"{rel} is not an indexed document of workspace {ws.name!r}",
        {"path": rel, "did_you_mean": close_documents(rel, names)},
    )


# -- the document methods' answers (service.py), on the caller's snapshot --------------------


def content(db: Snapshot, ws: Workspace, path: str) -> tuple[str, reads.Content]:
    """The stored document at `path` (workspace-relative once checked), or DocumentNotFound."""
    rel = relpath(db, ws, path)
    doc = reads.content(db, ws.id, rel)
    if doc is None:
        raise not_found(db, ws, rel)
    return rel, doc


def document_id(db: Snapshot, ws: Workspace, path: str) -> tuple[int, str]:
    """(id, workspace-relative path) of the indexed document at `path`, or DocumentNotFound."""
    rel = relpath(db, ws, path)
    doc_id = reads.document_id(db, ws.id, rel)
    if doc_id is None:
        raise not_found(db, ws, rel)
    return doc_id, rel


def read_answer(ws: Workspace, rel: str, doc: reads.Content, opts: dict[str, Any] | None) -> dict[str, Any]:
    """document.read: the span `opts` name of the generation the index keeps."""
    check_generation(rel, doc.generation, (opts or {}).get("generation"))
    span = slice_span(doc.data, {k: v for k, v in (opts or {}).items() if k != "generation"})
    return {
        "workspace": ws.name,
        "path": rel,
        "generation": doc.generation,
        "text": span.text,
        "byte_start": span.byte_start,
        "byte_end": span.byte_end,
        "line_start": span.line_start,
        "line_end": span.line_end,
        "total_bytes": len(doc.data),
        "total_lines": doc.line_count,
    }


def outline_answer(ws: Workspace, rel: str, doc: reads.Content) -> dict[str, Any]:
    """document.outline: the heading tree and the document's size."""
    return {
        "workspace": ws.name,
        "path": rel,
        "generation": doc.generation,
        "title": doc.title,
        "total_lines": doc.line_count,
        "total_bytes": len(doc.data),
        "tokens": wordpiece_tokens(doc.data.decode("utf-8", "replace")),
        "headings": build_outline(doc.data),
    }


def names_of(db: Snapshot, ws: Workspace) -> fuzzy.Names:
    """Every document's path and title, ready for document.find."""
    return fuzzy.Names([(p, t or "") for p, t, _ in reads.document_names(db, ws.id)])


def only(names: fuzzy.Names, paths: set[str]) -> fuzzy.Names:
    """The names of these documents only."""
    return fuzzy.Names([row for row in names.rows if row[0] in paths])


def find_answer(ws: Workspace, names: fuzzy.Names, pattern: str, limit: int) -> dict[str, Any]:
    """document.find: the documents whose title or path the pattern fuzzy-matches, best first."""
    found, matched = fuzzy.find(names, pattern, limit)
    return {
        "workspace": ws.name,
        "pattern": pattern,
        "total": len(names.rows),
        "matched": matched,
        "documents": [
            {
                "path": f.path,
                "title": f.title,
                "score": f.score,
                "title_marks": f.title_marks,
                "path_marks": f.path_marks,
            }
            for f in found
        ],
    }
