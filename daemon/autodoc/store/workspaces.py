"""Workspace rows: a name, a root folder and a stored configuration.

Runs on: the caller's thread, on the connection it passes (a reader's
snapshot, or the writer inside `Store.write()`).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidParams, WorkspaceExists, WorkspaceNotFound
from .interface import Snapshot
from .lexical import writes as lexical_rows
from .sessions import NOT_SESSION
from .sql import all_rows, one, scalar


@dataclass(frozen=True)
class Workspace:
    id: int
    name: str
    root: str
    config: dict[str, Any]
    created: float


def get_workspace(db: Snapshot, name: Any, field: str = "workspace") -> Workspace:
    """The workspace named `name`. Unknown, a plain WorkspaceNotFound: the names it might have
    meant are added above the store (workspaces.find), which answers clients."""
    if not isinstance(name, str) or not name:
        raise InvalidParams(field, "must be a workspace name")
    row = db.execute("SELECT id, name, root, config, created FROM workspaces WHERE name=?", (name,)).fetchone()
    if not row:
        raise WorkspaceNotFound(f"no workspace named {name!r}", {"workspace": name})
    wid, wname, root, config, created = row
    return Workspace(id=wid, name=wname, root=root, config=json.loads(config), created=created)


def all_workspaces(db: Snapshot) -> list[Workspace]:
    """Every workspace, by name, in one read."""
    rows = all_rows(db, "SELECT id, name, root, config, created FROM workspaces ORDER BY name")
    return [Workspace(id=i, name=n, root=r, config=json.loads(c), created=t) for i, n, r, c, t in rows]


def workspace_names(db: Snapshot) -> list[str]:
    return [name for (name,) in db.execute("SELECT name FROM workspaces ORDER BY name")]


def workspace_roots(db: Snapshot) -> list[tuple[str, str]]:
    """(name, root) of every workspace, by name (doctor checks each root)."""
    return [(name, root) for name, root in db.execute("SELECT name, root FROM workspaces ORDER BY name")]


def add_workspace(db: Snapshot, name: str, root: str, config: dict[str, Any]) -> Workspace:
    if db.execute("SELECT 1 FROM workspaces WHERE name=?", (name,)).fetchone():
        raise WorkspaceExists(f"a workspace named {name!r} already exists", {"workspace": name})
    db.execute(
        "INSERT INTO workspaces(name, root, config, created) VALUES (?,?,?,?)",
        (name, root, json.dumps(config), time.time()),
    )
    return get_workspace(db, name)


def remove_workspace(db: Snapshot, ws: Workspace) -> int:
    """Delete the workspace and everything in it; returns how many documents it had."""
    documents: int = scalar(db, "SELECT COUNT(*) FROM documents WHERE workspace_id=?", (ws.id,))
    lexical_rows.delete_workspace(db, ws.id)  # before the chunks they index (FTS5's is an external-content table)
    db.execute("DELETE FROM chunks WHERE workspace_id=?", (ws.id,))
    db.execute("DELETE FROM workspaces WHERE id=?", (ws.id,))
    db.execute("DELETE FROM meta WHERE key=?", (_chunking_key(ws.id),))
    return documents


def _chunking_key(ws_id: int) -> str:
    return f"chunking:{ws_id}"


def chunking(db: Snapshot, ws_id: int) -> str | None:
    """What the workspace's stored chunks were cut with (index/job.py), None before the first index."""
    row = db.execute("SELECT value FROM meta WHERE key=?", (_chunking_key(ws_id),)).fetchone()
    return row[0] if row else None


def set_chunking(db: Snapshot, ws_id: int, value: str) -> None:
    db.execute(
        "INSERT INTO meta(key, value) VALUES (?,?) ON CONFLICT(key) DO UPDATE SET value=excluded.value",
        (_chunking_key(ws_id), value),
    )


def set_config(db: Snapshot, ws: Workspace, config: dict[str, Any]) -> None:
    db.execute("UPDATE workspaces SET config=? WHERE id=?", (json.dumps(config), ws.id))


def set_root(db: Snapshot, ws: Workspace, root: str) -> None:
    """The folder the workspace's relative paths are under (workspace.configure's `root`)."""
    db.execute("UPDATE workspaces SET root=? WHERE id=?", (root, ws.id))


@dataclass(frozen=True)
class Counts:
    documents: int  # files: sessions (store/sessions.py) are counted apart
    chunks: int  # of files and sessions
    generation: int  # the newest generation of any of its documents (0: none yet)


def counts(db: Snapshot, ws: Workspace) -> Counts:
    documents, chunks, generation = one(
        db,
        f"SELECT COALESCE(SUM(CASE WHEN {NOT_SESSION} THEN 1 ELSE 0 END), 0) AS documents, "
        "(SELECT COUNT(*) FROM chunks WHERE workspace_id=?) AS chunks, "
        "COALESCE(MAX(generation), 0) AS generation FROM documents WHERE workspace_id=?",
        (ws.id, ws.id),
    )
    return Counts(documents=documents, chunks=chunks, generation=generation)


def chunk_count(db: Snapshot, ws_id: int) -> int:
    return scalar(db, "SELECT COUNT(*) FROM chunks WHERE workspace_id=?", (ws_id,))


def chunk_ids(db: Snapshot, ws_id: int) -> list[int]:
    """Every chunk id of the workspace, ascending (search/evidence.py counts a word's chunks in it)."""
    return [r[0] for r in db.execute("SELECT id FROM chunks WHERE workspace_id=? ORDER BY id", (ws_id,))]


def tag_counts(db: Snapshot, ws: Workspace, prefix: str, limit: int) -> list[tuple[str, int]]:
    """(tag, documents carrying it), most used first, for tags starting with `prefix` (lowercase)."""
    return [
        (tag, n)
        for tag, n in db.execute(
            """SELECT value AS tag, COUNT(DISTINCT document_id) AS documents FROM facets
               WHERE workspace_id=? AND field='tag' AND substr(value, 1, ?) = ?
               GROUP BY value ORDER BY documents DESC, value LIMIT ?""",
            (ws.id, len(prefix), prefix, limit),
        )
    ]


def known_fields(db: Snapshot, ws_id: int) -> set[str]:
    """Every frontmatter field some document of the workspace has."""
    return {f for (f,) in db.execute("SELECT DISTINCT field FROM facets WHERE workspace_id=?", (ws_id,))}


def store_generation(db: Snapshot) -> int:
    """Bumped by every write that changes what a reader could derive (the one cache key)."""
    return int(scalar(db, "SELECT value FROM meta WHERE key='generation'"))
