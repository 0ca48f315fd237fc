"""The one service object: owns the store, the embed queue and the searcher.

RPC, LSP and CLI are thin adapters over it. Every public method validates its
arguments (raising InvalidParams naming the field) and returns JSON-safe data
shaped as schemas/<method>.result.json. Methods are synchronous and
thread-safe: reads use a per-thread read connection (one snapshot per read
transaction), writes are serialised through the single writer connection,
which exists only while this process holds the store's lease.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
from pathlib import Path
from typing import Any, Callable

import apsw

from . import PROTOCOL_VERSION, __version__
from .config import Settings, WorkspaceConfig
from .errors import (
    DocumentNotFound, InvalidParams, PathOutsideWorkspace, WorkspaceExists, WorkspaceNotFound,
)
from .ingest.chunk import chunk_document
from .ingest.markdown import parse_markdown
from .ingest.scan import SkipFile, is_ignored, is_markdown_path, read_document, scan_workspace
from .search import engine
from .search.options import parse_options
from .store import changes as changelog
from .store.db import open_reader, open_writer
from .store.documents import (
    Workspace, content_hash, delete_document, record_skip, rename_document, write_document,
)
from .store.lease import Lease
from .store.links import LinkResolver
from .store.facets import active_schema, schema_row, sync_schema
from .store.documents import next_generation
from .fmschema import SCHEMA_RELPATH
from .embed.runtime import SemanticRuntime
from concurrent.futures import ThreadPoolExecutor

log = logging.getLogger("autodoc.service")

Progress = Callable[[int, int, str], None]
ChangeListener = Callable[[str, list[dict[str, Any]]], None]

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_WRITE_BATCH = 64


def _check_name(field: str, name: Any) -> str:
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise InvalidParams(field, "must be 1–64 letters, digits, '.', '_' or '-', starting with a letter or digit")
    return name


class Service:
    def __init__(self, settings: Settings, *, writer: bool = True, holder: dict[str, Any] | None = None):
        self.settings = settings
        self.store_path = settings.store
        self._lease: Lease | None = None
        self._db: apsw.Connection | None = None
        self._write_lock = threading.RLock()
        self._local = threading.local()
        self._readers: list[tuple[threading.Thread, apsw.Connection]] = []
        self._readers_lock = threading.Lock()
        self._listeners: list[ChangeListener] = []
        # (what, workspace) → (store generation, value): facts readers derive once per generation
        self._per_generation: dict[tuple[str, int], tuple[int, Any]] = {}
        self.closed = False
        self.semantic = SemanticRuntime(self)
        self._rankers: dict[str, Any] = {}
        self._links = LinkResolver()
        self._rankers_lock = threading.Lock()
        # the semantic leg runs beside the lexical one, on its own thread and connection
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="autodoc-leg")
        if writer:
            self._lease = Lease(self.store_path, holder)
            try:
                self._db = open_writer(self.store_path)
            except BaseException:
                self._lease.release()
                raise
        elif not self.store_path.exists():
            raise WorkspaceNotFound(f"no store at {self.store_path}: add a workspace first (autodoc workspace add NAME PATH)")

    # -- plumbing ------------------------------------------------------------

    @property
    def writable(self) -> bool:
        return self._db is not None

    def _writer(self) -> apsw.Connection:
        if self._db is None:
            raise RuntimeError("this service was opened read-only")
        return self._db

    def _reader(self) -> apsw.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            db = open_reader(self.store_path)
            self._local.db = db
            me = threading.current_thread()
            with self._readers_lock:
                # worker threads come and go (anyio retires idle ones): close the
                # connections of threads that are gone instead of leaking them
                alive = []
                for t, conn in self._readers:
                    if t.is_alive():
                        alive.append((t, conn))
                    else:
                        try:
                            conn.close()
                        except Exception:
                            pass
                alive.append((me, db))
                self._readers = alive
        return db

    def set_holder(self, holder: dict[str, Any]) -> None:
        if self._lease:
            self._lease.update(holder)

    def add_change_listener(self, fn: ChangeListener) -> None:
        self._listeners.append(fn)

    def remove_change_listener(self, fn: ChangeListener) -> None:
        if fn in self._listeners:
            self._listeners.remove(fn)

    def _emit(self, workspace: str, changes: list[dict]) -> None:
        if not changes:
            return
        for fn in list(self._listeners):
            try:
                fn(workspace, changes)
            except Exception:  # a listener's failure must not undo a committed write
                log.exception("change listener failed")

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._pool.shutdown(wait=True, cancel_futures=True)
        with self._readers_lock:
            for _, db in self._readers:
                try:
                    db.close()
                except Exception:
                    pass
            self._readers.clear()
        for r in list(self._rankers.values()):
            try:
                r.close()
            except Exception:
                pass
        if self._db is not None:
            with self._write_lock:
                self._db.close()
                self._db = None
        if self._lease is not None:
            self._lease.release()
            self._lease = None

    # -- workspaces ------------------------------------------------------------

    def _ws(self, name: Any, db: apsw.Connection | None = None, field: str = "workspace") -> Workspace:
        if not isinstance(name, str) or not name:
            raise InvalidParams(field, "must be a workspace name")
        db = db or self._reader()  # the writer is only ever used under the write lock
        row = db.execute("SELECT id, name, root, config, created FROM workspaces WHERE name=?", (name,)).fetchone()
        if not row:
            raise WorkspaceNotFound(f"no workspace named {name!r}", {"workspace": name})
        return Workspace(row[0], row[1], row[2], json.loads(row[3]), row[4])

    def _ws_json(self, ws: Workspace, db: apsw.Connection) -> dict[str, Any]:
        docs, chunks = db.execute(
            "SELECT (SELECT COUNT(*) FROM documents WHERE workspace_id=?), (SELECT COUNT(*) FROM chunks WHERE workspace_id=?)",
            (ws.id, ws.id),
        ).fetchone()
        return {
            "name": ws.name,
            "root": ws.root,
            "config": WorkspaceConfig.from_json(ws.config).to_json(),
            "documents": docs,
            "chunks": chunks,
            "created": ws.created,
        }

    def workspace_add(self, name: Any, root: Any, config: Any = None) -> dict[str, Any]:
        _check_name("name", name)
        if not isinstance(root, str) or not root:
            raise InvalidParams("root", "must be a folder path")
        path = Path(root).expanduser()
        if not path.is_dir():
            raise InvalidParams("root", f"{root} is not a folder")
        if config is not None and not isinstance(config, dict):
            raise InvalidParams("config", "must be an object")
        cfg = WorkspaceConfig().merged(config or {}, prefix="config")
        db = self._writer()
        with self._write_lock, db:
            if db.execute("SELECT 1 FROM workspaces WHERE name=?", (name,)).fetchone():
                raise WorkspaceExists(f"a workspace named {name!r} already exists", {"workspace": name})
            db.execute(
                "INSERT INTO workspaces(name, root, config, created) VALUES (?,?,?,?)",
                (name, str(path.resolve()), json.dumps(cfg.to_json()), time.time()),
            )
            return self._ws_json(self._ws(name, db), db)

    def workspace_remove(self, name: Any) -> dict[str, Any]:
        db = self._writer()
        with self._write_lock, db:
            ws = self._ws(name, db, "name")
            n = db.execute("SELECT COUNT(*) FROM documents WHERE workspace_id=?", (ws.id,)).fetchone()[0]
            db.execute("DELETE FROM chunks_fts WHERE rowid IN (SELECT id FROM chunks WHERE workspace_id=?)", (ws.id,))
            db.execute("DELETE FROM chunks WHERE workspace_id=?", (ws.id,))
            db.execute("DELETE FROM workspaces WHERE id=?", (ws.id,))
        self.semantic.forget(ws.id)
        self._links.forget(ws.id)
        return {"removed": ws.name, "documents": n}

    def workspace_list(self) -> dict[str, Any]:
        db = self._reader()
        with db:
            rows = db.execute("SELECT name FROM workspaces ORDER BY name").fetchall()
            return {"workspaces": [self._ws_json(self._ws(r[0], db), db) for r in rows]}

    def workspace_configure(self, name: Any, options: Any) -> dict[str, Any]:
        if not isinstance(options, dict):
            raise InvalidParams("options", "must be an object")
        db = self._writer()
        with self._write_lock:
            with db:
                ws = self._ws(name, db)
                old = WorkspaceConfig.from_json(ws.config)
                new = old.merged(options)
                db.execute("UPDATE workspaces SET config=? WHERE id=?", (json.dumps(new.to_json()), ws.id))
            if new.embedding != old.embedding:
                self.semantic.forget(ws.id)
                self.semantic.wake.set()
            if new.section_tokens != old.section_tokens or new.abstract_chunk != old.abstract_chunk:
                # chunk boundaries depend on these: re-chunk (unchanged chunks keep their rows)
                self.index(ws.name, full=True)
            return self._ws_json(self._ws(ws.name, db), db)

    def workspace_section_size(self, name: Any, tokens: Any) -> dict[str, Any]:
        return self.workspace_configure(name, {"section_tokens": tokens})

    def workspace_tags(self, name: Any, prefix: Any = None, limit: Any = 1000) -> dict[str, Any]:
        """{workspace, tags: [{tag, documents}]}: every tag (frontmatter and inline, lowercased)
        with how many documents carry it, most used first; `prefix` keeps those beginning with it."""
        if prefix is not None and not isinstance(prefix, str):
            raise InvalidParams("prefix", "must be a string")
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 100_000:
            raise InvalidParams("limit", "must be an integer in 1..100000")
        db = self._reader()
        with db:
            ws = self._ws(name, db)
            low = (prefix or "").lower()
            rows = db.execute(
                """SELECT value, COUNT(DISTINCT document_id) AS n FROM facets
                   WHERE workspace_id=? AND field='tag' AND substr(value, 1, length(?)) = ?
                   GROUP BY value ORDER BY n DESC, value LIMIT ?""", (ws.id, low, low, limit)).fetchall()
        return {"workspace": ws.name, "tags": [{"tag": t, "documents": n} for t, n in rows]}

    def workspace_status(self, name: Any) -> dict[str, Any]:
        db = self._reader()
        with db:  # one snapshot for every count
            ws = self._ws(name, db)
            cfg = WorkspaceConfig.from_json(ws.config)
            indexed, chunks, generation = db.execute(
                "SELECT COUNT(*), (SELECT COUNT(*) FROM chunks WHERE workspace_id=?), COALESCE(MAX(generation), 0) "
                "FROM documents WHERE workspace_id=?",
                (ws.id, ws.id),
            ).fetchone()
            skipped = [{"path": p, "reason": r} for p, r in db.execute(
                "SELECT path, reason FROM skipped WHERE workspace_id=? ORDER BY path", (ws.id,))]
            problems = self._problems(db, ws)
            applied = schema_row(db, ws.id)
            schema = applied[1] if applied else None
            broken = [{"path": s, "target": t, "line": ln} for s, t, ln in db.execute(
                "SELECT d.path, l.target, l.line FROM links l JOIN documents d ON d.id = l.source_id "
                "WHERE l.workspace_id=? AND l.target_path IS NULL ORDER BY d.path, l.line", (ws.id,))]
            cursor = changelog.head(db)
        on_disk = sum(1 for e in scan_workspace(Path(ws.root), max_bytes=cfg.max_file_bytes)) if Path(ws.root).is_dir() else 0
        return {
            "name": ws.name,
            "root": ws.root,
            "root_exists": Path(ws.root).is_dir(),
            "files": {"on_disk": on_disk, "indexed": indexed, "skipped": skipped},
            "chunks": chunks,
            "generation": generation,
            "problems": problems,
            "broken_links": broken,
            # the frontmatter schema in force (protocol/SCHEMA.md): what a facet picker can offer
            "schema": None if schema is None else {
                "path": SCHEMA_RELPATH, "fields": schema.kinds, "types": sorted(schema.types),
                "type_field": schema.type_field, "link_fields": schema.link_fields()},
            "embedding": self.embedding_status(ws),
            "ranker": self.ranker_status(ws),
            "change_cursor": cursor,
        }

    # -- indexing ----------------------------------------------------------------

    def _prepare(self, ws: Workspace, cfg: WorkspaceConfig, relpath: str, data: bytes):
        text = data.decode("utf-8")
        doc = parse_markdown(text)
        if not doc.title:  # no frontmatter title and no H1: the file name stands in, breadcrumbs too
            doc.title = relpath.rsplit("/", 1)[-1].rsplit(".", 1)[0]
        chunks = chunk_document(text, doc, section_tokens=cfg.section_tokens, abstract_chunk=cfg.abstract_chunk,
                                count_tokens=self.semantic.token_counter(ws))
        return doc, chunks

    def index(self, name: Any, *, full: bool = False, progress: Progress | None = None,
              embed: bool = False) -> dict[str, Any]:
        """Scan the workspace and bring the store in line with the disk.

        Files are read and parsed outside the write transaction; each batch of
        documents is written in one transaction, each document atomically.
        `full` re-chunks every file even when its bytes are unchanged (after a
        chunking setting changed); unchanged chunks still keep their rows.
        """
        started = time.monotonic()
        db = self._writer()
        ws = self._ws(name)
        cfg = WorkspaceConfig.from_json(ws.config)
        root = Path(ws.root)
        if not root.is_dir():
            raise InvalidParams("workspace", f"the workspace root {ws.root} is not a folder any more")
        self._sync_schema(ws)
        entries = list(scan_workspace(root, max_bytes=cfg.max_file_bytes))
        with self._write_lock:
            known = {p: (h, s, m) for p, h, s, m in db.execute(
                "SELECT path, content_hash, size, mtime_ns FROM documents WHERE workspace_id=?", (ws.id,))}
        report = {"workspace": ws.name, "scanned": len(entries), "added": 0, "modified": 0, "deleted": 0,
                  "renamed": 0, "unchanged": 0, "skipped": [], "chunks": 0, "seconds": 0.0}
        on_disk: set[str] = set()
        pending: list[tuple[str, bytes, Any, Any, int]] = []
        skips: list[tuple[str, str]] = []
        renamed: set[str] = set()  # paths whose names changed in this job's batches
        total = len(entries)
        try:
            for i, e in enumerate(entries):
                if e.skip:
                    skips.append((e.relpath, e.skip))
                    continue
                on_disk.add(e.relpath)
                old = known.get(e.relpath)
                if old and not full and old[1] == e.size and old[2] == e.mtime_ns:
                    report["unchanged"] += 1
                    continue
                try:
                    data = read_document(e.path, max_bytes=cfg.max_file_bytes)
                except SkipFile as s:
                    skips.append((e.relpath, str(s)))
                    on_disk.discard(e.relpath)
                    continue
                except OSError as err:  # vanished or unreadable between scan and read
                    skips.append((e.relpath, f"unreadable: {err.strerror or err}"))
                    on_disk.discard(e.relpath)
                    continue
                if old and not full and old[0] == content_hash(data):
                    report["unchanged"] += 1
                    pending.append((e.relpath, b"", None, None, e.mtime_ns))  # refresh mtime only
                    continue
                doc, chunks = self._prepare(ws, cfg, e.relpath, data)
                pending.append((e.relpath, data, doc, chunks, e.mtime_ns))
                if len(pending) >= _WRITE_BATCH:
                    renamed |= self._flush(ws, pending, report, full, defer_links=True)
                    pending = []
                if progress:
                    progress(i + 1, total, e.relpath)
            gone = [p for p in known if p not in on_disk]
            self._flush(ws, pending, report, full, gone=gone, skips=skips, renamed=renamed)
        except BaseException:
            # batches already committed never reached the cached name tables: read them all next time
            self._links.forget(ws.id)
            raise
        if progress:
            progress(total, total, "done")
        report["skipped"] = [{"path": p, "reason": r} for p, r in skips]
        with self._write_lock:
            report["chunks"] = db.execute("SELECT COUNT(*) FROM chunks WHERE workspace_id=?", (ws.id,)).fetchone()[0]
        if embed:
            report["embedding"] = self.embed_pending(ws.name, progress)
        else:
            st = self.embedding_status(ws)
            report["embedding"] = {"available": st["available"], "embedded": st["embedded"],
                                   "skipped": st["pending"] if st["available"] else st["total"],
                                   "reason": st["reason"] if st["state"] != "ready" else None}
        report["seconds"] = round(time.monotonic() - started, 3)
        return report

    def _flush(self, ws: Workspace, pending: list, report: dict, full: bool, *,
               gone: list[str] | None = None, skips: list[tuple[str, str]] | None = None,
               defer_links: bool = False, renamed: set[str] | None = None) -> set[str]:
        """Write one batch. Returns the paths whose names (path, title, aliases,
        frontmatter) changed. With defer_links the batch's links stay unresolved
        for the job's last batch to resolve in one pass (`renamed`: the earlier
        batches' paths): resolving after every batch re-read every document's
        names each time, quadratic in the workspace."""
        db = self._writer()
        emitted: list[dict] = []
        touched: set[int] = set()
        names_changed: set[str] = set()

        def doc_id(path: str) -> None:
            r = db.execute("SELECT id FROM documents WHERE workspace_id=? AND path=?", (ws.id, path)).fetchone()
            if r:
                touched.add(r[0])

        def names_of(path: str):
            r = db.execute("SELECT title, aliases, frontmatter FROM documents WHERE workspace_id=? AND path=?",
                           (ws.id, path)).fetchone()
            return None if r is None else (r[0], json.loads(r[1]), json.loads(r[2]))

        with self._write_lock:
            with db:
                for path in gone or ():
                    doc_id(path)
                for path, _, _, _, _ in pending:
                    doc_id(path)
                for path, _ in skips or ():
                    doc_id(path)
                if gone:
                    # a deleted file whose bytes reappear under a new path is a rename
                    new_by_hash = {content_hash(d): p for p, d, doc, _, _ in pending if doc is not None}
                    for path in gone:
                        h = db.execute("SELECT content_hash FROM documents WHERE workspace_id=? AND path=?",
                                       (ws.id, path)).fetchone()
                        target = new_by_hash.pop(h[0], None) if h else None
                        if target and not db.execute("SELECT 1 FROM documents WHERE workspace_id=? AND path=?",
                                                     (ws.id, target)).fetchone():
                            ch = rename_document(db, ws, path, target)
                            report["renamed"] += 1
                            names_changed.add(target)
                        else:
                            ch = delete_document(db, ws, path)
                            report["deleted"] += 1
                        if ch:
                            emitted.append(ch)
                            names_changed.add(path)
                for path, data, doc, chunks, mtime_ns in pending:
                    if doc is None:
                        db.execute("UPDATE documents SET mtime_ns=? WHERE workspace_id=? AND path=?",
                                   (mtime_ns, ws.id, path))
                        continue
                    fm = json.loads(json.dumps(doc.frontmatter, default=str))
                    if names_of(path) != (doc.title, doc.aliases, fm):
                        names_changed.add(path)
                    ch = write_document(db, ws, path, data=data, doc=doc, chunks=chunks, mtime_ns=mtime_ns, force=full)
                    if ch is None:
                        report["unchanged"] += 1
                    else:
                        report["added" if ch["op"] == "add" else "renamed" if ch["op"] == "rename" else "modified"] += 1
                        emitted.append(ch)
                for path, reason in skips or ():
                    ch = delete_document(db, ws, path)  # a file that became unreadable leaves the index
                    if ch:
                        emitted.append(ch)
                        names_changed.add(path)
                    record_skip(db, ws, path, reason)
                if skips is not None:
                    keep = {p for p, _ in skips}
                    for (p,) in db.execute("SELECT path FROM skipped WHERE workspace_id=?", (ws.id,)).fetchall():
                        if p not in keep:
                            db.execute("DELETE FROM skipped WHERE workspace_id=? AND path=?", (ws.id, p))
                if (emitted or gone is not None) and not defer_links:
                    try:
                        relinked = self._links.update(db, ws.id, changed=None if full else names_changed | (renamed or set()))
                    except BaseException:
                        self._links.forget(ws.id)  # the transaction rolls back; the cached names must too
                        raise
                    if relinked and not emitted:
                        next_generation(db)  # readers' caches (supersede chains) are keyed by it
                    changelog.trim(db)
                for path, _, doc, _, _ in pending:
                    if doc is not None:
                        doc_id(path)
        if emitted:
            self.semantic.mark_dirty(ws.id, sorted(touched))
        self._emit(ws.name, emitted)
        return names_changed

    def index_paths(self, name: Any, relpaths: list[str]) -> dict[str, Any]:
        """Live index: bring just these workspace-relative paths up to date."""
        ws = self._ws(name)
        cfg = WorkspaceConfig.from_json(ws.config)
        root = Path(ws.root).resolve()
        if root.is_dir():
            self._sync_schema(ws)  # the watcher hands us _schema/frontmatter.yaml too
        report = {"workspace": ws.name, "scanned": 0, "added": 0, "modified": 0, "deleted": 0, "renamed": 0,
                  "unchanged": 0, "skipped": [], "chunks": 0, "seconds": 0.0}
        pending, gone, skips = [], [], []
        for rel in sorted(set(relpaths)):
            if not is_markdown_path(rel):
                continue
            path = root / rel
            report["scanned"] += 1
            if not path.exists():
                gone.append(rel)
                continue
            if is_ignored(root, rel):
                continue
            try:
                if not path.resolve().is_relative_to(root):
                    raise SkipFile("symlink points outside the workspace")
                data = read_document(path, max_bytes=cfg.max_file_bytes)
            except SkipFile as s:
                skips.append((rel, str(s)))
                continue
            except OSError:
                gone.append(rel)
                continue
            doc, chunks = self._prepare(ws, cfg, rel, data)
            pending.append((rel, data, doc, chunks, path.stat().st_mtime_ns))
        self._flush(ws, pending, report, False, gone=gone or None, skips=skips or None)
        report["skipped"] = [{"path": p, "reason": r} for p, r in skips]
        return report

    # -- embeddings ----------------------------------------------------------------

    def embedding_status(self, ws: Workspace) -> dict[str, Any]:
        """{available, state, model, embedded, pending, skipped, reason}: what semantic coverage really is."""
        provider, reason = self.semantic.target(ws)
        db = self._reader()
        total = db.execute("SELECT COUNT(*) FROM chunks WHERE workspace_id=?", (ws.id,)).fetchone()[0]
        if provider is None:
            state = "failed" if reason else "off"
            return {"available": False, "state": state, "model": None, "embedded": 0, "pending": 0,
                    "skipped": total, "total": total, "reason": reason or engine.NO_MODEL_REASON}
        try:
            fp = provider.fingerprint
        except Exception as e:
            return {"available": False, "state": "failed", "model": provider.name, "embedded": 0, "pending": 0,
                    "skipped": total, "total": total, "reason": str(e)}
        done, pending = self.semantic.counts(db, ws.id, fp)
        active = self.semantic._state(db, ws.id)[0]
        state = "switching" if active not in (None, fp) else ("partial" if pending else "ready")
        waiting = "1 chunk waits for its vector" if pending == 1 else f"{pending} chunks wait for vectors"
        return {"available": True, "state": state, "model": provider.name, "fingerprint": fp, "embedded": done,
                "pending": pending, "skipped": 0, "total": total,
                "reason": None if state == "ready" else (
                    "a new embedding model is filling" if state == "switching" else waiting)}

    def embedding_status_by_name(self, name: Any) -> dict[str, Any]:
        return self.embedding_status(self._ws(name))

    def embed_step(self, name: Any, batch: int = 16) -> dict[str, Any]:
        """One batch of the embed queue for a workspace (the daemon's worker calls this)."""
        return self.semantic.embed_step(self._ws(name), batch)

    def embed_pending(self, name: Any, progress: Progress | None = None) -> dict[str, Any]:
        """Embed everything pending for a workspace now (the CLI's in-process path)."""
        ws = self._ws(name)
        total_done = 0
        status = self.embedding_status(ws)
        total = status["pending"]
        while True:
            # large steps: the provider sorts each by length into batches, so less padding
            step = self.semantic.embed_step(ws, 256)
            total_done += step["embedded"]
            if progress and total:
                progress(min(total_done, total), total, "embedding")
            if step["embedded"] == 0:
                break
        final = self.embedding_status(ws)
        return {"available": final["available"], "embedded": total_done, "skipped": final["pending"] if final["available"] else final["total"],
                "reason": final["reason"] if final["state"] != "ready" else None}

    def workspaces(self) -> list[str]:
        db = self._reader()
        return [r[0] for r in db.execute("SELECT name FROM workspaces ORDER BY name")]

    # -- reading -----------------------------------------------------------------

    def _cached(self, what: str, ws: Workspace, gen: int, compute: Callable[[], Any]) -> Any:
        hit = self._per_generation.get((what, ws.id))
        if hit and hit[0] == gen:
            return hit[1]
        value = compute()
        self._per_generation[(what, ws.id)] = (gen, value)
        return value

    def _known_fields(self, db: apsw.Connection, ws: Workspace, gen: int) -> set[str]:
        return self._cached("fields", ws, gen, lambda: {r[0] for r in db.execute(
            "SELECT DISTINCT field FROM facets WHERE workspace_id=?", (ws.id,))})

    def _successors(self, db: apsw.Connection, ws: Workspace, gen: int):
        """The workspace's supersede chains."""
        return self._cached("successors", ws, gen, lambda: engine._successors(db, ws.id))

    # -- ranking -------------------------------------------------------------------

    def ranker(self, cfg: dict[str, Any]):
        """The ranker a workspace config names (shared by equal configs), or None."""
        from .rerank.base import make_ranker, validate_config

        norm = validate_config(cfg)
        norm.pop("window", None)
        if norm["provider"] == "none":
            return None
        key = json.dumps(norm, sort_keys=True)
        with self._rankers_lock:
            r = self._rankers.get(key)
            if r is None:
                r = self._rankers[key] = make_ranker(norm)
            return r

    def ranker_status(self, ws: Workspace) -> dict[str, Any]:
        """{state, model, reason}: off (none configured), ready (loaded), failed (cannot load,
        or its last call failed: reason says why)."""
        cfg = WorkspaceConfig.from_json(ws.config).ranker
        try:
            ranker = self.ranker(cfg)
        except InvalidParams as e:
            return {"state": "failed", "model": cfg.get("model") or cfg.get("path") or cfg.get("url"), "reason": e.message}
        if ranker is None:
            return {"state": "off", "model": None, "reason": "no ranker is configured for this workspace"}
        # loaded is ready; a failure of its last call is worth showing, not hiding
        last_error = ranker.describe().get("meter", {}).get("last_error") or None
        return {"state": "ready", "model": ranker.name, "reason": last_error and f"last call failed: {last_error}"}

    def _rank_fn(self, ws: Workspace, cancel: threading.Event | None):
        from .rerank.base import RankerCancelled, RankerDown, default_timeout

        cfg = WorkspaceConfig.from_json(ws.config).ranker
        try:
            ranker = self.ranker(cfg)
        except InvalidParams as e:  # a model folder that vanished since it was configured
            why, model = e.message, cfg.get("model") or cfg.get("path") or cfg.get("url")

            def broken(query: str, passages: list[str]) -> engine.RankOutcome:
                return engine.RankOutcome(None, "failed", model, why)
            return broken, model
        if ranker is None:
            return None, None

        def rank(query: str, passages: list[str]) -> engine.RankOutcome:
            timeout = cfg.get("timeout") or default_timeout(len(passages))
            try:
                scores = ranker.score(query, passages, timeout=timeout, cancel=cancel)
            except RankerCancelled as e:
                return engine.RankOutcome(None, "failed", ranker.name, f"cancelled: {e}")
            except RankerDown as e:
                return engine.RankOutcome(None, "failed", ranker.name, str(e))
            return engine.RankOutcome(list(scores), "ready", ranker.name)

        return rank, ranker.name

    def search(self, name: Any, query: Any, opts: Any = None, *, cancel: threading.Event | None = None) -> dict[str, Any]:
        if not isinstance(query, str):
            raise InvalidParams("query", "must be a string")
        if len(query) > 4096:
            raise InvalidParams("query", "must be at most 4096 characters")
        db = self._reader()
        with db:  # one read snapshot for the whole search
            ws = self._ws(name, db)
            options = parse_options(opts, WorkspaceConfig.from_json(ws.config))
            rank, rank_model = self._rank_fn(ws, cancel)
            schema = active_schema(db, ws.id)
            gen = int(db.execute("SELECT value FROM meta WHERE key='generation'").fetchone()[0])
            ctx = engine.Context(db=db, ws=ws,
                                 known_fields=schema.declared if schema else self._known_fields(db, ws, gen),
                                 semantic=self.semantic.leg, pool=self._pool, rank=rank, rank_model=rank_model,
                                 facet_kinds=schema.kinds if schema else None,
                                 successors=lambda: self._successors(db, ws, gen))
            return engine.search(ctx, query, options)

    def document_read(self, name: Any, path: Any, opts: Any = None) -> dict[str, Any]:
        if not isinstance(path, str) or not path:
            raise InvalidParams("path", "must be a workspace-relative path")
        if opts is not None and not isinstance(opts, dict):
            raise InvalidParams("opts", "must be an object")
        opts = opts or {}
        db = self._reader()
        with db:
            ws = self._ws(name, db)
            rel = _safe_relpath(ws, path)
            row = db.execute(
                "SELECT content, generation, line_count FROM documents WHERE workspace_id=? AND path=?", (ws.id, rel)
            ).fetchone()
        if not row:
            raise DocumentNotFound(f"{rel} is not an indexed document of workspace {ws.name!r}", {"path": rel})
        data: bytes = row[0]
        start, end = 0, len(data)
        for k in opts:
            if k not in ("byte_start", "byte_end", "line_start", "line_end"):
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
        return {"workspace": ws.name, "path": rel, "generation": row[1], "text": text, "byte_start": start,
                "byte_end": end, "line_start": line_start, "line_end": max(line_start, line_end),
                "total_bytes": len(data), "total_lines": row[2]}

    def changes_since(self, name: Any, cursor: Any, limit: Any = 1000) -> dict[str, Any]:
        if not isinstance(cursor, int) or isinstance(cursor, bool) or cursor < 0:
            raise InvalidParams("cursor", "must be a non-negative integer")
        if not isinstance(limit, int) or isinstance(limit, bool) or not (1 <= limit <= 10000):
            raise InvalidParams("limit", "must be an integer in 1..10000")
        db = self._reader()
        with db:
            ws = self._ws(name, db)
            return changelog.since(db, ws.name, cursor, limit)

    def info(self) -> dict[str, Any]:
        db = self._reader()
        names = [r[0] for r in db.execute("SELECT name FROM workspaces ORDER BY name")]
        return {
            "name": "autodoc",
            "version": __version__,
            "protocol_version": PROTOCOL_VERSION,
            "store": str(self.store_path),
            "pid": os.getpid(),
            "writable": self.writable,
            "stages": {"lexical": True, "semantic": bool(self.semantic.describe()), "rerank": bool(self._rankers)},
            "models": {"embedding": self.semantic.describe(),
                       "ranker": [r.describe() for r in list(self._rankers.values())]},
            "workspaces": names,
        }

    # -- schema, problems and the link graph (issue 7) ----------------------------------

    def _sync_schema(self, ws: Workspace) -> bool:
        """Apply _schema/frontmatter.yaml if it changed: every document's facets and
        problems are derived again from the stored frontmatter (no re-chunk, no re-embed)."""
        db = self._writer()
        with self._write_lock:
            with db:
                changed = sync_schema(db, ws.id, Path(ws.root))
                if changed:
                    self._links.update(db, ws.id, changed=None)  # link fields may have changed
                    next_generation(db)  # readers' cached field sets are keyed by it
        if changed:
            log.info("workspace %s: frontmatter schema applied", ws.name)
        return changed

    def _problems(self, db: apsw.Connection, ws: Workspace, path: str | None = None) -> list[dict[str, Any]]:
        """Problems with the schema file, then each document's (parse, then schema), by path and line."""
        out: list[dict[str, Any]] = []
        row = schema_row(db, ws.id)
        if row is not None and path in (None, SCHEMA_RELPATH):
            out += [{"path": SCHEMA_RELPATH, **p} for p in row[2]]
        sql = ("SELECT path, problems, schema_problems FROM documents WHERE workspace_id=? "
               "AND (problems != '[]' OR schema_problems != '[]')")
        args: tuple = (ws.id,)
        if path is not None:
            sql += " AND path=?"
            args += (path,)
        for p, probs, sprobs in db.execute(sql + " ORDER BY path", args):
            parse = json.loads(probs)
            schema = sorted(json.loads(sprobs), key=lambda x: (x["line"], x["code"], x["message"]))
            out += [{"path": p, **x} for x in parse + schema]
        return out

    def document_problems(self, name: Any, path: Any = None) -> dict[str, Any]:
        """{workspace, path, problems: [{path, line, message, code}]}: why a document (or every
        document, and the schema file) breaks the parser or the workspace schema."""
        if path is not None and (not isinstance(path, str) or not path):
            raise InvalidParams("path", "must be a workspace-relative path")
        db = self._reader()
        with db:
            ws = self._ws(name, db)
            rel = None
            if path is not None:
                rel = _safe_relpath(ws, path)
                if rel != SCHEMA_RELPATH and not db.execute(
                        "SELECT 1 FROM documents WHERE workspace_id=? AND path=?", (ws.id, rel)).fetchone():
                    raise DocumentNotFound(f"{rel} is not an indexed document of workspace {ws.name!r}", {"path": rel})
            return {"workspace": ws.name, "path": rel, "problems": self._problems(db, ws, rel)}

    def _doc_row(self, db: apsw.Connection, ws: Workspace, path: Any) -> tuple[int, str]:
        if not isinstance(path, str) or not path:
            raise InvalidParams("path", "must be a workspace-relative path")
        rel = _safe_relpath(ws, path)
        row = db.execute("SELECT id FROM documents WHERE workspace_id=? AND path=?", (ws.id, rel)).fetchone()
        if not row:
            raise DocumentNotFound(f"{rel} is not an indexed document of workspace {ws.name!r}", {"path": rel})
        return row[0], rel

    def document_links(self, name: Any, path: Any) -> dict[str, Any]:
        """Outgoing links of one document, in file order: {workspace, path, links: [{target, kind,
        line, label, anchor, target_path, target_title}]}; target_path is null for a broken link."""
        db = self._reader()
        with db:
            ws = self._ws(name, db)
            doc_id, rel = self._doc_row(db, ws, path)
            links = [
                {"target": t, "kind": k, "line": ln, "label": lb, "anchor": an, "target_path": tp, "target_title": tt}
                for t, k, ln, lb, an, tp, tt in db.execute(
                    """SELECT l.target, l.kind, l.line, l.label, l.anchor, l.target_path, d.title FROM links l
                       LEFT JOIN documents d ON d.workspace_id = l.workspace_id AND d.path = l.target_path
                       WHERE l.source_id=? ORDER BY l.line, l.rowid""", (doc_id,))
            ]
        return {"workspace": ws.name, "path": rel, "links": links}

    def document_backlinks(self, name: Any, path: Any) -> dict[str, Any]:
        """Links to one document from the others (and itself): {workspace, path, backlinks:
        [{source_path, source_title, target, kind, line, label, anchor}]}, by source path and line."""
        db = self._reader()
        with db:
            ws = self._ws(name, db)
            _, rel = self._doc_row(db, ws, path)
            back = [
                {"source_path": sp, "source_title": st, "target": t, "kind": k, "line": ln, "label": lb, "anchor": an}
                for sp, st, t, k, ln, lb, an in db.execute(
                    """SELECT s.path, s.title, l.target, l.kind, l.line, l.label, l.anchor FROM links l
                       JOIN documents s ON s.id = l.source_id
                       WHERE l.workspace_id=? AND l.target_path=? ORDER BY s.path, l.line, l.rowid""", (ws.id, rel))
            ]
        return {"workspace": ws.name, "path": rel, "backlinks": back}


def _int_opt(opts: dict, key: str, default: int, lo: int, hi: int) -> int:
    v = opts.get(key, default)
    if not isinstance(v, int) or isinstance(v, bool) or not (lo <= v <= hi):
        raise InvalidParams(f"opts.{key}", f"must be an integer in {lo}..{hi}")
    return v


def _safe_relpath(ws: Workspace, path: str) -> str:
    """A workspace-relative path that cannot escape the root (.., absolute, symlinks out)."""
    root = Path(ws.root).resolve()
    p = Path(path)
    candidate = p if p.is_absolute() else root / p
    if ".." in Path(path).parts:
        raise PathOutsideWorkspace(f"{path} leaves the workspace", {"path": path})
    try:
        resolved = candidate.resolve()
    except OSError:
        resolved = candidate
    if not resolved.is_relative_to(root):
        raise PathOutsideWorkspace(f"{path} is outside the workspace root {root}", {"path": path})
    lexical = candidate.absolute()
    return lexical.relative_to(root).as_posix() if lexical.is_relative_to(root) else resolved.relative_to(root).as_posix()
