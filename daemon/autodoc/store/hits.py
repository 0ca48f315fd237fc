"""What a search reads besides its legs' matches: the facts fusion needs
for every candidate, the rows of the page it shows, and the link graph.

Runs on: the caller's thread, on the search's one read snapshot.
"""

from __future__ import annotations

import heapq
import json
from typing import NamedTuple

from .filters import CHUNKLESS_ROWS, Filter
from .interface import Snapshot
from .sessions import chunk_events, is_session_path, origin
from .sql import all_rows, in_ids


class Candidate(NamedTuple):
    # a tuple, not a dataclass: a search makes one for each of its ~100 candidates, at a third of the cost
    document_id: int
    path: str
    tags: list[str]  # shared by the candidates of one document: read, never changed
    ordinal: int = 0  # the chunk's place in its document: with path, what orders equal scores (search/ties.py)


def candidates(db: Snapshot, ids: list[int]) -> dict[int, Candidate]:
    """chunk id → what boosts, the per-document cap and demotion need; whole
    rows are read for the page only. A chunk retired since a leg found it is absent."""
    if not ids:
        return {}
    tags_of: dict[
        str, list[str]
    ] = {}  # each distinct tags text parsed once (most are "[]"; a document's chunks share one)
    out: dict[int, Candidate] = {}
    cond, arg = in_ids(db, "c.id", ids)
    for cid, did, path, tags, ordinal in db.execute(
        f"""SELECT c.id, c.document_id, d.path, d.tags, c.ordinal FROM chunks c JOIN documents d ON d.id = c.document_id
           WHERE {cond}""",
        (arg,),
    ):
        parsed = tags_of.get(tags)
        if parsed is None:
            parsed = tags_of[tags] = json.loads(tags)
        out[cid] = Candidate(did, path, parsed, ordinal)
    return out


def hit_rows(db: Snapshot, ids: list[int]) -> dict[int, dict]:
    """chunk id → the chunk and its document as a hit shows them, with its origin (a file, or a
    session's event: store/sessions.py)."""
    if not ids:
        return {}
    out: dict[int, dict] = {}
    tags: dict[int, list[str]] = {}
    cond, arg = in_ids(db, "c.id", ids)
    for r in db.execute(
        f"""SELECT c.id, c.document_id, c.kind, c.breadcrumb, c.byte_start, c.byte_end, c.line_start,
           c.line_end, d.path, d.title, d.generation, d.tags, c.text
           FROM chunks c JOIN documents d ON d.id = c.document_id WHERE {cond}""",
        (arg,),
    ):
        t = tags.get(r[1])
        if t is None:
            t = tags[r[1]] = json.loads(r[11])
        out[r[0]] = {
            "chunk_id": r[0],
            "document_id": r[1],
            "kind": r[2],
            "breadcrumb": r[3],
            "byte_start": r[4],
            "byte_end": r[5],
            "line_start": r[6],
            "line_end": r[7],
            "path": r[8],
            "title": r[9],
            "generation": r[10],
            "tags": t,
            "text": r[12],
        }
    events = chunk_events(
        db, [(c, r["document_id"], r["byte_start"]) for c, r in out.items() if is_session_path(r["path"])]
    )
    for cid, r in out.items():
        r["origin"] = origin(r["path"], r["title"], events.get(cid))
    return out


def document_paths(db: Snapshot, ids: list[int]) -> dict[int, str]:
    """document id → path."""
    if not ids:
        return {}
    cond, arg = in_ids(db, "id", ids)
    return dict(db.execute(f"SELECT id, path FROM documents WHERE {cond}", (arg,)))


def chunk_texts(db: Snapshot, ids: list[int]) -> dict[int, str]:
    if not ids:
        return {}
    cond, arg = in_ids(db, "id", ids)
    return dict(db.execute(f"SELECT id, text FROM chunks WHERE {cond}", (arg,)))


def chunk_heads(db: Snapshot, ids: list[int]) -> dict[int, tuple[str, str]]:
    """chunk id → (breadcrumb, text): what tells a table of contents from a section (search/choice.py)."""
    if not ids:
        return {}
    cond, arg = in_ids(db, "id", ids)
    return {r[0]: (r[1], r[2]) for r in db.execute(f"SELECT id, breadcrumb, text FROM chunks WHERE {cond}", (arg,))}


def chunk_documents(db: Snapshot, ids: list[int]) -> dict[int, int]:
    """chunk id → document id."""
    cond, arg = in_ids(db, "id", ids)
    return dict(db.execute(f"SELECT id, document_id FROM chunks WHERE {cond}", (arg,)))


def filtered_chunk_ids(db: Snapshot, workspace_id: int, filt: Filter) -> list[int]:
    """Every chunk of the workspace the filter admits."""
    return [
        cid
        for (cid,) in db.execute(
            f"SELECT c.id FROM chunks c WHERE c.workspace_id=? AND {filt.sql}", (workspace_id, *filt.params)
        )
    ]


def inbound_links(db: Snapshot, workspace_id: int, path_to_doc: dict[str, int]) -> dict[int, int]:
    """Distinct documents linking (wiki or markdown) to each candidate document."""
    if not path_to_doc:
        return {}
    out: dict[int, int] = {}
    cond, arg = in_ids(db, "l.target_path", path_to_doc)
    for target, n in db.execute(
        f"""SELECT l.target_path, COUNT(DISTINCT l.source_id) FROM links l JOIN documents s ON s.id = l.source_id
           WHERE l.workspace_id=? AND l.kind IN ('wiki','markdown') AND {cond}
           AND s.path != l.target_path GROUP BY l.target_path""",
        (workspace_id, arg),
    ):
        out[path_to_doc[target]] = n
    return out


def successors(db: Snapshot, workspace_id: int) -> tuple[dict[int, int], dict[int, str]]:
    """Direct successor of each document (superseded_by, or the reverse of supersedes), and their paths."""
    rows = all_rows(
        db,
        """SELECT s.id, s.path, l.kind, t.id, t.path FROM links l
           JOIN documents s ON s.id = l.source_id
           JOIN documents t ON t.workspace_id = l.workspace_id AND t.path = l.target_path
           WHERE l.workspace_id=? AND l.kind IN ('supersedes','superseded_by') AND s.id != t.id""",
        (workspace_id,),
    )
    successor: dict[int, int] = {}
    path_of: dict[int, str] = {}
    for sid, spath, kind, tid, tpath in sorted(rows):
        path_of[sid], path_of[tid] = spath, tpath
        if kind == "superseded_by":
            successor.setdefault(sid, tid)
        else:
            successor.setdefault(tid, sid)
    return successor, path_of


def link_edges(db: Snapshot, workspace_id: int, doc_ids: list[int]) -> list[tuple[int, int]]:
    """(source document, target document) of every resolved link touching one of doc_ids."""
    source, arg = in_ids(db, "l.source_id", doc_ids)
    target, _ = in_ids(db, "t.id", doc_ids)
    return all_rows(
        db,
        f"""SELECT l.source_id, t.id FROM links l
           JOIN documents t ON t.workspace_id = l.workspace_id AND t.path = l.target_path
           WHERE l.workspace_id = ? AND l.target_path IS NOT NULL AND ({source} OR {target})""",
        (workspace_id, arg, arg),
    )


def first_chunks(db: Snapshot, workspace_id: int, doc_ids: list[int], filt: Filter) -> dict[int, int]:
    """document id → its first chunk the filter admits."""
    where = f" AND {filt.sql}" if filt.sql else ""
    first: dict[int, int] = {}
    cond, arg = in_ids(db, "c.document_id", doc_ids)
    for cid, doc in db.execute(
        f"""SELECT c.id, c.document_id FROM chunks c
            WHERE c.workspace_id = ? AND {cond}{where}
            ORDER BY c.document_id, c.ordinal""",
        (workspace_id, arg, *filt.params),
    ):
        first.setdefault(doc, cid)
    return first


def matching_documents(db: Snapshot, workspace_id: int, filt: Filter, limit: int) -> list[tuple]:
    """(path, title, generation, tags JSON, size, line count, first chunk id) of the documents the
    filter admits, in path order: a query of facets only. A document with no chunk (frontmatter
    and no body) is listed too, with no first chunk (None)."""
    where = f" AND {filt.sql}" if filt.sql else ""
    with_chunks = all_rows(
        db,
        f"""SELECT d.path, d.title, d.generation, d.tags, d.size, d.line_count, MIN(c.id)
            FROM chunks c JOIN documents d ON d.id = c.document_id
            WHERE c.workspace_id = ?{where} GROUP BY d.id ORDER BY d.path LIMIT ?""",
        (workspace_id, *filt.params, limit),
    )
    # apart, then merged: one ORDER BY over a UNION ALL sorted the whole grouped set (+30 %)
    without = all_rows(
        db,
        f"""SELECT d.path, d.title, d.generation, d.tags, d.size, d.line_count, NULL
            FROM ({CHUNKLESS_ROWS}) c JOIN documents d ON d.id = c.document_id
            WHERE c.workspace_id = ?{where} ORDER BY d.path LIMIT ?""",
        (workspace_id, workspace_id, *filt.params, limit),
    )
    if not without:
        return with_chunks
    # UTF-8's byte order (SQLite's BINARY collation) is the code points' order (Python's)
    return list(heapq.merge(with_chunks, without, key=lambda r: r[0]))[:limit]


def document_passages(
    db: Snapshot, workspace_id: int, doc_id: int, filt: Filter, limit: int
) -> list[tuple[int, str, str]]:
    """(chunk id, breadcrumb, text) of one document's first `limit` chunks the filter admits, in
    document order (search/passages.py scores them all)."""
    where = f" AND {filt.sql}" if filt.sql else ""
    return [
        (int(r[0]), r[1], r[2])
        for r in db.execute(
            f"""SELECT c.id, c.breadcrumb, c.text FROM chunks c
                WHERE c.workspace_id = ? AND c.document_id = ?{where} ORDER BY c.ordinal LIMIT ?""",
            (workspace_id, doc_id, *filt.params, limit),
        )
    ]
