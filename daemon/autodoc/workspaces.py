"""The workspace methods' answers, for the service (service.py): finding a workspace by the
name a client sent (with the names it might have meant), checking a root and options before
they are stored, and the workspace.list / workspace.status shapes.

Input: a read snapshot (store/interface.py) and a workspace row (store/workspaces.py), or what a
client sent. Output: the JSON of schemas/workspace.*.result.json, or the errors the schemas
cannot raise (a root that is not a folder, a provider that cannot be built from its options).

Runs on: the caller's thread, on the snapshot it passes.
"""

from __future__ import annotations

import posixpath
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .config import WorkspaceConfig
from .errors import InvalidParams, WorkspaceNotFound
from .fmschema import SCHEMA_RELPATH
from .ingest.scan import LeftOut, MarkdownRule, scan_workspace
from .store import changes as changelog
from .store import reads
from .store import sessions as stored_sessions
from .store import workspaces as wsrows
from .store.facets import schema_row
from .store.interface import Snapshot
from .store.sql import dialect
from .store.workspaces import Workspace
from .suggest import workspace_not_found


def config_of(ws: Workspace) -> WorkspaceConfig:
    return WorkspaceConfig.from_json(ws.config)


def find(db: Snapshot, name: Any, field: str = "workspace") -> Workspace:
    """The workspace a client named; unknown, the error names the ones it might have meant."""
    try:
        return wsrows.get_workspace(db, name, field)
    except WorkspaceNotFound:
        raise workspace_not_found(name, wsrows.workspace_names(db)) from None


def check_root(root: str, force: bool) -> Path:
    """The folder a new workspace indexes, resolved; refused when it is not one, or is / or home without force."""
    try:
        path = Path(root).expanduser().resolve()
        is_dir = path.is_dir()
    except (OSError, RuntimeError) as e:  # a name too long for the file system, ~nosuchuser
        raise InvalidParams("root", f"{root} cannot be used as a folder: {e}") from None
    if not is_dir:
        raise InvalidParams("root", f"{root} is not a folder")
    if not force and path in (Path("/"), Path.home().resolve()):
        raise InvalidParams(
            "root",
            f"{path} would index every Markdown file under it: name a folder of notes, or pass force to mean it",
        )
    return path


def configured(cfg: WorkspaceConfig, options: dict[str, Any], prefix: str = "options") -> WorkspaceConfig:
    """These options over `cfg`, once a provider can be built from each: the checks a schema cannot
    make, the providers' own (embed/factory.py, rerank/factory.py), then fusion's (config/)."""
    # deferred: the provider factories import numpy and httpx, which a CLI command that
    # never configures a workspace (--version, search through a daemon) need not load
    from .embed.factory import validate_config as validate_embedding
    from .rerank.factory import validate_config as validate_ranker

    if "embedding" in options:
        validate_embedding(options["embedding"], f"{prefix}.embedding")
    if "ranker" in options:
        validate_ranker(options["ranker"], f"{prefix}.ranker")
    return cfg.merged(options, prefix=prefix)


def describe(db: Snapshot, ws: Workspace) -> dict[str, Any]:
    """A workspace as workspace.list and workspace.add answer it."""
    counts = wsrows.counts(db, ws)
    return {
        "name": ws.name,
        "root": ws.root,
        "config": config_of(ws).to_json(),
        "documents": counts.documents,
        "chunks": counts.chunks,
        "created": ws.created,
    }


def problems(db: Snapshot, ws: Workspace, path: str | None = None) -> list[dict[str, Any]]:
    """Problems with the schema file, then each document's (parse, then schema), by path and line."""
    out: list[dict[str, Any]] = []
    row = schema_row(db, ws.id)
    if row is not None and path in (None, SCHEMA_RELPATH):
        out += [{"path": SCHEMA_RELPATH, **p} for p in row[2]]
    return out + reads.document_problems(db, ws.id, path)


def redacted(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """[{path, count}]: the documents (files and sessions) with secrets masked, and how many each."""
    counts: dict[str, int] = {}
    for p in found:
        if p["code"] == "secret":
            counts[p["path"]] = counts.get(p["path"], 0) + 1
    return [{"path": k, "count": v} for k, v in sorted(counts.items())]


def stored_status(
    db: Snapshot, ws: Workspace, embedding_status: Callable[[Snapshot, Workspace], dict[str, Any]]
) -> dict[str, Any]:
    """What workspace.status reads from the store, every count from the one snapshot `db`."""
    counts = wsrows.counts(db, ws)
    skipped = reads.skipped(db, ws.id)
    found = problems(db, ws)
    applied = schema_row(db, ws.id)
    broken = reads.broken_links(db, ws.id)
    cursor = changelog.head(db)
    embedding = embedding_status(db, ws)
    sessions = stored_sessions.counts(db, ws.id)
    shared = dialect(db) == "postgres"
    host = None
    if shared:  # a shared store's workspace is indexed from one machine: the host its last run held the lock on
        from .store.pg.indexlock import indexed_from  # loads psycopg: a SQLite daemon may not have it

        host = indexed_from(db, ws.id)
    return {
        "indexed_from": host,
        "shared": shared,
        "counts": counts,
        "skipped": skipped,
        "problems": found,
        "schema": applied[1] if applied else None,
        "broken_links": broken,
        "change_cursor": cursor,
        "embedding": embedding,
        "sessions": sessions,
    }


def _names_a_file(root: Path, link: dict[str, Any], cfg: WorkspaceConfig) -> bool:
    """An unresolved Markdown link to a file or folder that is there but is no document
    (../LICENSE, ./images/, /static/app.js under a site root): not broken, so status does not
    list it. A [[wikilink]] names a note: one that names a folder still dangles."""
    target = link["target"]
    if target.startswith("/"):
        rel = target.strip("/")
        places = [rel, *(f"{r}/{rel}" for r in cfg.site_roots)]
    else:
        folder = posixpath.dirname(link["path"])
        places = [posixpath.join(folder, target), posixpath.join(posixpath.splitext(link["path"])[0], target)]
    for place in places:
        rel = posixpath.normpath(place)
        if rel != ".." and not rel.startswith("../") and "\0" not in rel and (root / rel).exists():
            return True
    return False


def reads_disk(stored: dict[str, Any], *, writable: bool) -> bool:
    """Whether workspace.status looks at the root on this machine's disk. On a SQLite store, yes. On a
    shared (PostgreSQL) store, only where this daemon is the workspace's indexer: it may write the
    store, and the workspace's last run was on this host (or none has run yet). Elsewhere a folder
    at that path is another checkout or nothing to do with it: the status is the stored state only
    (root_exists false, nothing on disk counted, broken links as stored)."""
    if not stored.get("shared"):
        return True
    return writable and stored.get("indexed_from") in (None, socket.gethostname())


def status(
    ws: Workspace,
    stored: dict[str, Any],
    ranker_status: Callable[[dict[str, Any]], dict[str, Any]],
    *,
    writable: bool = True,
) -> dict[str, Any]:
    """workspace.status: what `stored_status` read, the files on disk (after the snapshot, where this
    daemon indexes the workspace: `reads_disk`), the ranker."""
    cfg = config_of(ws)
    counts: wsrows.Counts = stored["counts"]
    schema = stored["schema"]
    local = reads_disk(stored, writable=writable)
    root = Path(ws.root)
    left_out = LeftOut()
    on_disk = (
        sum(
            1
            for e in scan_workspace(
                root, max_bytes=cfg.max_file_bytes, rule=MarkdownRule.of(cfg.markdown), left_out=left_out
            )
            if not e.relpath.endswith("/")
        )
        if local and root.is_dir()
        else 0
    )  # files: a folder entry is a skip reason (unreadable, linked), not a file
    return {
        "name": ws.name,
        "root": ws.root,
        "root_exists": local and root.is_dir(),
        "files": {
            "on_disk": on_disk,
            "indexed": counts.documents,
            "skipped": stored["skipped"],
            "left_out": left_out.to_json(),
            "redacted": redacted(stored["problems"]),
        },
        "chunks": counts.chunks,
        "sessions": stored["sessions"],
        "generation": counts.generation,
        "problems": stored["problems"],
        "broken_links": [
            {k: v for k, v in b.items() if k != "kind"}
            for b in stored["broken_links"]
            if b["kind"] != "markdown" or not (local and _names_a_file(root, b, cfg))
        ],
        # the frontmatter schema in force (protocol/SCHEMA.md): what a facet picker can offer
        "schema": None
        if schema is None
        else {
            "path": SCHEMA_RELPATH,
            "fields": schema.kinds,
            "types": sorted(schema.types),
            "type_field": schema.type_field,
            "link_fields": schema.link_fields(),
        },
        "embedding": stored["embedding"],
        "ranker": ranker_status(cfg.ranker),
        "change_cursor": stored["change_cursor"],
    }
