"""Reading documents back: content, problems, links and backlinks, skips.

Runs on: the caller's thread, on the read snapshot it passes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .interface import Snapshot
from .sql import dialect, no_limit, row_key, scalar


@dataclass(frozen=True)
class Content:
    data: bytes
    generation: int
    line_count: int
    title: str = ""


def content(db: Snapshot, ws_id: int, path: str) -> Content | None:
    row = db.execute(
        "SELECT content, generation, line_count, title FROM documents WHERE workspace_id=? AND path=?", (ws_id, path)
    ).fetchone()
    return None if row is None else Content(data=row[0], generation=row[1], line_count=row[2], title=row[3])


def document_names(
    db: Snapshot, ws_id: int, pieces: list[str] | None = None, limit: int = -1
) -> list[tuple[str, str, list[str]]]:
    """(path, title, aliases) of the workspace's documents, by path; with `pieces` (lowercase),
    only those whose path, title or aliases contain the most of them (at most `limit`)."""
    if not pieces:
        return [
            (p, t, json.loads(a))
            for p, t, a in db.execute(
                "SELECT path, title, aliases FROM documents WHERE workspace_id=? ORDER BY path LIMIT ?",
                (ws_id, no_limit(db, limit)),
            )
        ]
    # SQLite's lower() folds ASCII letters only: Postgres's folds every script, so it is spelt out
    names = "path || ' ' || title || ' ' || aliases"
    if dialect(db) == "postgres":
        lowered = f"strpos(translate({names}, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz'), ?)"
    else:
        lowered = f"instr(lower({names}), ?)"
    hits = " + ".join([f"(CASE WHEN {lowered} > 0 THEN 1 ELSE 0 END)"] * len(pieces))
    rows = db.execute(
        f"""SELECT path, title, aliases FROM (SELECT path, title, aliases, {hits} AS n FROM documents
            WHERE workspace_id=?) AS named WHERE n > 0 ORDER BY n DESC, path LIMIT ?""",
        (*pieces, ws_id, no_limit(db, limit)),
    )
    return [(p, t, json.loads(a)) for p, t, a in rows]


def document_count(db: Snapshot, ws_id: int) -> int:
    return scalar(db, "SELECT COUNT(*) FROM documents WHERE workspace_id=?", (ws_id,))


def document_id(db: Snapshot, ws_id: int, path: str) -> int | None:
    row = db.execute("SELECT id FROM documents WHERE workspace_id=? AND path=?", (ws_id, path)).fetchone()
    return None if row is None else row[0]


def document_problems(db: Snapshot, ws_id: int, path: str | None = None) -> list[dict[str, Any]]:
    """Each document's problems (parse, then schema by line), by path: [{path, line, message, code}]."""
    sql = (
        "SELECT path, problems, schema_problems FROM documents WHERE workspace_id=? "
        "AND (problems != '[]' OR schema_problems != '[]')"
    )
    args: tuple = (ws_id,)
    if path is not None:
        sql += " AND path=?"
        args += (path,)
    out: list[dict[str, Any]] = []
    for p, parse, schema in db.execute(sql + " ORDER BY path", args):
        ordered = sorted(json.loads(schema), key=lambda x: (x["line"], x["code"], x["message"]))
        out += [{"path": p, **x} for x in json.loads(parse) + ordered]
    return out


def skipped(db: Snapshot, ws_id: int) -> list[dict[str, str]]:
    return [
        {"path": p, "reason": r}
        for p, r in db.execute("SELECT path, reason FROM skipped WHERE workspace_id=? ORDER BY path", (ws_id,))
    ]


def broken_links(db: Snapshot, ws_id: int) -> list[dict[str, Any]]:
    return [
        {"path": s, "target": t, "line": ln, "kind": k}
        for s, t, ln, k in db.execute(
            "SELECT d.path, l.target, l.line, l.kind FROM links l JOIN documents d ON d.id = l.source_id "
            "WHERE l.workspace_id=? AND l.target_path IS NULL ORDER BY d.path, l.line",
            (ws_id,),
        )
    ]


def links_of(db: Snapshot, doc_id: int) -> list[dict[str, Any]]:
    """Outgoing links in file order; target_path (and its title) null when broken."""
    return [
        {"target": t, "kind": k, "line": ln, "label": lb, "anchor": an, "target_path": tp, "target_title": tt}
        for t, k, ln, lb, an, tp, tt in db.execute(
            f"""SELECT l.target, l.kind, l.line, l.label, l.anchor, l.target_path, d.title FROM links l
               LEFT JOIN documents d ON d.workspace_id = l.workspace_id AND d.path = l.target_path
               WHERE l.source_id=? ORDER BY l.line, l.{row_key(db)}""",
            (doc_id,),
        )
    ]


def backlinks_of(db: Snapshot, ws_id: int, path: str) -> list[dict[str, Any]]:
    """Links that resolve to `path`, by source path and line."""
    return [
        {"source_path": sp, "source_title": st, "target": t, "kind": k, "line": ln, "label": lb, "anchor": an}
        for sp, st, t, k, ln, lb, an in db.execute(
            f"""SELECT s.path, s.title, l.target, l.kind, l.line, l.label, l.anchor FROM links l
               JOIN documents s ON s.id = l.source_id
               WHERE l.workspace_id=? AND l.target_path=? ORDER BY s.path, l.line, l.{row_key(db)}""",
            (ws_id, path),
        )
    ]
