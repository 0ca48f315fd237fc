"""One batch of an index job, written in one transaction.

Input: the write transaction, a workspace and a Batch: the documents parsed (or only touched: same
bytes, a new stat), the paths gone from disk and the files skipped, with their reasons. Output: the
batch written, the job's IndexReport counted, and what the job tells its listeners once the
transaction is committed (Written: change-log entries, touched document ids, paths renamed).

Each document is written in its own savepoint: one that cannot be written is recorded as a skip
with its reason and the rest of the batch is written. A deleted file whose bytes reappear under a
new path is a rename (its rows and vectors stay). Links are resolved here unless the job defers
them to its last batch.

Runs on: the index job's thread, inside the write transaction it passes (the daemon's single
writer slot).
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field
from typing import Any

from ..store import changes as changelog
from ..store import documents as stored
from ..store import reads
from ..store.interface import Snapshot
from ..store.lexical import postings
from ..store.links import LinkResolver
from ..store.workspaces import Workspace
from .prepare import Parsed

log = logging.getLogger("autodoc.index")


@dataclass
class Touched:
    """A file whose stat changed but not its bytes: only its change signal is stored."""

    path: str
    mtime_ns: int
    ctime_ns: int | None = None
    inode: int | None = None
    size: int | None = None


Pending = Parsed | Touched


@dataclass
class IndexReport:
    workspace: str
    scanned: int = 0
    added: int = 0
    modified: int = 0
    deleted: int = 0
    renamed: int = 0
    unchanged: int = 0
    skipped: list[dict[str, str]] = field(default_factory=list)
    left_out: dict[str, Any] | None = None  # what looks like Markdown but the `markdown` option leaves out
    chunks: int = 0
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Batch:
    """What one transaction writes."""

    pending: list[Pending]
    gone: list[str] | None = None  # paths no longer on disk (None: not known in this batch)
    skips: list[tuple[str, str]] | None = None  # (path, reason)
    every_skip: bool = False  # skips is the whole workspace's list (a full scan): forget the others


@dataclass
class Written:
    """What a committed batch hands back to its job."""

    emitted: list[dict]  # change-log entries, for the listeners
    touched: list[int]  # the ids of the documents it wrote or removed, sorted
    names_changed: set[str]  # paths whose names (path, title, aliases, frontmatter) changed


def write_batch(
    db: Snapshot,
    links: LinkResolver,
    ws: Workspace,
    batch: Batch,
    report: IndexReport,
    full: bool,
    failures: list[tuple[str, str]],
    *,
    defer_links: bool = False,
    renamed: set[str] | None = None,
) -> Written:
    """Write one batch in the transaction `db` is in. With defer_links the batch's links stay
    unresolved for the job's last batch to resolve in one pass (`renamed`: the earlier batches'
    paths whose names changed). A document that cannot be written is skipped with its reason,
    appended to `failures` (the job's), and the rest of the batch is written."""
    emitted: list[dict] = []
    touched: set[int] = set()
    names_changed: set[str] = set()
    failed: list[tuple[str, str]] = []
    gone, skips = batch.gone, batch.skips

    def note(path: str) -> None:
        doc_id = reads.document_id(db, ws.id, path)
        if doc_id is not None:
            touched.add(doc_id)

    for path in gone or ():
        note(path)
    for p in batch.pending:
        note(p.path)
    for path, _ in skips or ():
        note(path)
    retitled: set[str] = set()  # renamed here: rewritten below only if their chunks changed
    tail = sum(
        len(p.chunks) for p in batch.pending if isinstance(p, Parsed)
    ) >= postings.TAIL_CHUNKS and postings.open_tail(db)
    if gone:
        # a deleted file whose bytes reappear under a new path is a rename
        new_by_hash = {stored.content_hash(p.data): p.path for p in batch.pending if isinstance(p, Parsed)}
        for path in gone:
            h = stored.stored_hash(db, ws.id, path)
            target = new_by_hash.pop(h, None) if h else None
            try:
                with db:  # a savepoint, as for a written document
                    if target and reads.document_id(db, ws.id, target) is None:
                        ch = stored.rename_document(db, ws, path, target)
                    else:
                        target, ch = None, stored.delete_document(db, ws, path)
            except Exception as e:
                log.exception("workspace %s: %s could not be removed", ws.name, path)
                failed.append((path, f"could not be removed ({type(e).__name__}: {e}); the log has the details"))
                continue
            if target:
                report.renamed += 1
                retitled.add(target)  # a title taken from the file name is in every breadcrumb
                names_changed.add(target)
            else:
                report.deleted += 1
            if ch:
                emitted.append(ch)
                names_changed.add(path)
    for p in batch.pending:
        if isinstance(p, Touched):
            stored.touch_stat(db, ws.id, p.path, p.mtime_ns, p.ctime_ns, p.inode, p.size)
            continue
        try:
            with db:  # a savepoint: one document that cannot be written leaves the rest
                fm = json.loads(json.dumps(p.doc.frontmatter, default=str))
                links.check(ws.id, p.path, p.doc.title, p.doc.aliases, fm)  # its link names
                names = stored.names_of(db, ws.id, p.path)
                ch = stored.write_document(
                    db,
                    ws,
                    p.path,
                    data=p.data,
                    doc=p.doc,
                    chunks=p.chunks,
                    mtime_ns=p.mtime_ns,
                    ctime_ns=p.ctime_ns,
                    inode=p.inode,
                    size=p.size,
                    force=full or p.path in retitled,
                )
        except Exception as e:
            log.exception("workspace %s: %s could not be written", ws.name, p.path)
            reason = f"could not be written ({type(e).__name__}: {e}); the log has the details"
            failed.append((p.path, reason))
            continue
        if names != (p.doc.title, p.doc.aliases, fm):
            names_changed.add(p.path)
        if ch is None:
            report.unchanged += 1
        else:
            if ch["op"] == "add":
                report.added += 1
            elif ch["op"] == "rename":
                report.renamed += 1
            else:
                report.modified += 1
            emitted.append(ch)
    if tail:
        try:
            with db:  # a savepoint: a failing build must not fail the batch
                postings.close_tail(db)
        except Exception:
            log.exception(
                "postings: the batch's records could not be built; FTS5 ranks until the background build has them"
            )
    failures.extend(failed)
    for path, reason in failed:
        stored.record_skip(db, ws, path, reason)
    for path, reason in skips or ():
        ch = stored.delete_document(db, ws, path)  # a file that became unreadable leaves the index
        if ch:
            emitted.append(ch)
            names_changed.add(path)
        stored.record_skip(db, ws, path, reason)
    if batch.every_skip:  # a live index's few paths leave the other records be
        stored.clear_skips_except(db, ws, {p for p, _ in skips or ()} | {p for p, _ in failures})
    if (emitted or gone is not None) and not defer_links:
        try:
            relinked = links.update(db, ws.id, changed=None if full else names_changed | (renamed or set()))
        except BaseException:
            links.forget(ws.id)  # the transaction rolls back; the cached names must too
            raise
        if relinked and not emitted:
            stored.next_generation(db)  # readers' caches (supersede chains) are keyed by it
        changelog.trim(db)
    for p in batch.pending:
        if isinstance(p, Parsed):
            note(p.path)
    return Written(emitted, sorted(touched), names_changed)
