"""The index job: diff a workspace's folder against the store and write the difference.

Input: a workspace and either the whole folder (`run`) or some of its paths
(`paths`, the live index: each judged by ingest/scan.py's entry_for, as a scan would). Output: an IndexReport, documents written a
generation at a time, change-log entries, and the listeners told.

Files are read and parsed outside the write transaction; each batch of
documents is written in one transaction (index/batch.py), each document atomically. A deleted
file whose bytes reappear under a new path is a rename (its rows and vectors
stay). Links are resolved once per job, after its last batch: resolving after
every batch re-read every document's names each time, quadratic in the
workspace.

On a PostgreSQL store shared by several daemons, a whole run holds the workspace's indexer lock
(store/pg/indexlock.py): one indexer per workspace at a time, a second one refused naming the
holder (StoreLocked, as the SQLite lease refuses a second writer). A live index's few paths wait
for it up to LIVE_WAIT_S (another daemon's run may have read the folder before the save), then
write what the run left to do: nothing, if it had the save already. A run cut short (its daemon
killed) leaves only whole documents behind, and the next run, by any daemon, writes just what is
missing: files are compared by content with what the store holds.

Runs on: the thread that calls it, holding the store's write lock only
while a batch is written (the daemon's single writer slot).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import time
from collections import Counter
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from ..config import WorkspaceConfig
from ..errors import InvalidParams
from ..fmschema import SCHEMA_RELPATH
from ..ingest.readfile import FileRead
from ..ingest.scan import (
    OUTSIDE,
    LeftOut,
    MarkdownRule,
    ScanEntry,
    SkipFile,
    entry_for,
    is_ignored,
    read_file,
    scan_workspace,
)
from ..store import documents as stored
from ..store.documents import FileState
from ..store.facets import read_schema_file, schema_hash, schema_row, sync_schema
from ..store.interface import StoreInterface
from ..store.lexical import postings
from ..store.links import LinkResolver
from ..store.sessions import is_session_path
from ..store.sql import POSTGRES
from ..store.workspaces import Workspace, chunk_count, chunking, set_chunking
from .batch import Batch, IndexReport, Pending, Touched, write_batch
from .prepare import Preparer, prepare_or_reason, workers_for

log = logging.getLogger("autodoc.index")

Progress = Callable[[int, int, str], None]
WRITE_BATCH = 64
LIVE_WAIT_S = 60.0  # how long a live save waits for another daemon's run of its workspace


# A stat taken this soon after the file's last change is not trusted as a change signal: a same-size
# write in the same clock tick (coarse file-system timestamps: 1 s on some, 2 s on FAT) would leave
# size, mtime, ctime and inode as they were. Such a file's ctime is stored as not known, so the next
# scan compares it by content (git's "racily clean" entries) and then records a settled stat.
RACY_NS = 2_000_000_000


def _signal(got: FileRead) -> tuple[int, int | None, int | None]:
    """(mtime_ns, ctime_ns, inode) to store for the file the bytes were read from; ctime_ns and
    inode None when the stat was taken too close to a change to be trusted."""
    if time.time_ns() - max(got.mtime_ns, got.ctime_ns) < RACY_NS:
        return got.mtime_ns, None, None
    return got.mtime_ns, got.ctime_ns, got.inode


def _unchanged(old: FileState | None, e: ScanEntry, full: bool) -> bool:
    """The file's size, mtime, ctime and inode are the stored ones (old: its stored file_states
    row); a stored ctime that is not known never matches, so the file is compared by content."""
    return (
        old is not None
        and not full
        and old[3] is not None
        and (old[1], old[2], old[3], old[4]) == (e.size, e.mtime_ns, e.ctime_ns, e.inode)
    )


def _root_gone(ws: Workspace) -> InvalidParams:
    """A root that is no folder: nothing is indexed (or removed) until it is back or configured anew."""
    return InvalidParams(
        "workspace",
        f"the workspace root {ws.root} is not a folder any more (moved? workspace.configure's root, "
        f"autodoc workspace configure {ws.name} --root FOLDER, keeps what is indexed)",
    )


def _indexer_locks(store: StoreInterface) -> Any:
    """The indexer locks of a PostgreSQL store, else None (asked only then: a SQLite daemon imports
    no psycopg, which may not even be installed)."""
    if store.dialect != POSTGRES:
        return None
    from ..store.pg.indexlock import indexer_locks

    return indexer_locks(store)


class IndexJob:
    def __init__(
        self,
        store: StoreInterface,
        links: LinkResolver,
        token_counter: Callable[[Workspace], Callable[[str], int] | None],
        written: Callable[[Workspace, list[dict], list[int]], None],
        tokenizer_id: Callable[[dict[str, Any]], str],
    ):
        self.store = store
        self.links = links
        self._token_counter = token_counter
        self._tokenizer_id = tokenizer_id  # an `embedding` config → what its token_counter counts with
        self._written = written  # (workspace, change-log entries, touched document ids), after each commit
        self._locks = _indexer_locks(store)  # a shared PostgreSQL store's per-workspace indexer locks; None on SQLite

    def build_postings(self) -> bool:
        """One small slice of the postings index of a store that predates it (the daemon calls this
        between other writes until it is complete; FTS5 ranks the OR query until then). True when
        complete. The slice is small so a save waits for it at most ~0.4 s at 1M chunks."""
        with self.store.locked() as db:
            if postings.complete(db) or not postings.has_tables(db):
                return True
            with db:
                done = postings.build_slice(db, postings.SMALL_SLICE)
            return done

    def chunking(self, cfg: WorkspaceConfig) -> str:
        """Everything chunk boundaries depend on besides the file's bytes. It is
        recorded per workspace when a run ends; a run that finds another one
        re-chunks every file (a new model's tokenizer, or a configure whose
        re-chunk a crash cut short), so the store equals a fresh index."""
        return json.dumps(
            {
                "section_tokens": cfg.section_tokens,
                "abstract_chunk": cfg.abstract_chunk,
                "tokens": self._tokenizer_id(cfg.embedding),
                # masked or not, the texts cut differ; a store from before masking is cut again once
                "redact_secrets": cfg.redact_secrets,
            },
            sort_keys=True,
        )

    # -- the frontmatter schema ---------------------------------------------------------

    def sync_schema(self, ws: Workspace) -> bool:
        """Apply _schema/frontmatter.yaml if it changed: every document's facets and
        problems are derived again from the stored frontmatter (no re-chunk, no re-embed)."""
        with self.store.write() as db:
            changed = sync_schema(db, ws.id, Path(ws.root))
            if changed:
                self.links.update(db, ws.id, changed=None)  # link fields may have changed
                stored.next_generation(db)  # readers' cached field sets are keyed by it
        if changed:
            log.info("workspace %s: frontmatter schema applied", ws.name)
        return changed

    # -- a whole workspace -----------------------------------------------------------------

    def run(self, ws: Workspace, *, full: bool = False, progress: Progress | None = None) -> IndexReport:
        """Scan the workspace and bring the store in line with the disk. `full`
        re-chunks every file even when its bytes are unchanged (after a chunking
        setting changed); unchanged chunks still keep their rows."""
        with self._locks.hold(ws.id) if self._locks is not None else nullcontext():
            return self._run(ws, full, progress)

    def _run(self, ws: Workspace, full: bool, progress: Progress | None) -> IndexReport:
        started = time.monotonic()
        cfg = WorkspaceConfig.from_json(ws.config)
        root = Path(ws.root)
        if not root.is_dir():
            raise _root_gone(ws)
        self.sync_schema(ws)
        cut = self.chunking(cfg)
        left_out = LeftOut()
        rule = MarkdownRule.of(cfg.markdown)
        entries = list(scan_workspace(root, max_bytes=cfg.max_file_bytes, rule=rule, left_out=left_out))
        with self.store.locked() as db:
            known = stored.file_states(db, ws.id)
            if chunking(db, ws.id) != cut:
                full = True
        report = IndexReport(ws.name, scanned=sum(1 for e in entries if not e.relpath.endswith("/")))  # files
        report.left_out = left_out.to_json()
        pending: list[Pending] = []
        skips: list[tuple[str, str]] = []
        renamed: set[str] = set()  # paths whose names changed in this job's earlier batches
        failures: list[tuple[str, str]] = []  # documents that could not be written
        read_stat: dict[int, tuple[int, int | None, int | None]] = {}  # entry index -> _signal of its read
        read_size: dict[int, int] = {}  # entry index -> the read file's size (not its indexed text's)
        total = len(entries)
        count = self._token_counter(ws)
        changed = sum(1 for e in entries if not e.skip and not _unchanged(known.get(e.relpath), e, full))
        # The paths gone are written with the last batch: a file holding a gone path's bytes waits
        # for that batch too, so the two are paired as one rename. Written in an earlier batch it
        # was an add, and the gone path a delete (a move among more than WRITE_BATCH changes).
        listed = {e.relpath for e in entries}
        gone_hashes = Counter(old[0] for path, old in known.items() if path not in listed)  # one held each
        moved: list[Pending] = []
        # Every entry but the unchanged ones passes through the preparer, in scan order, so
        # batches, skips and document ids come out as an inline run makes them.
        preparer: Preparer[tuple[int, ScanEntry], str | Touched] = Preparer(
            cfg.section_tokens, cfg.abstract_chunk, count, workers_for(changed, count), cfg.redact_secrets
        )

        def take(drain: bool = False) -> None:
            nonlocal pending, renamed
            for (i, e), got in preparer.ready(drain):
                signal = read_stat.pop(i, (e.mtime_ns, None, None))
                size = read_size.pop(i, None)
                if isinstance(got, str):
                    skips.append((e.relpath, got))
                    continue
                if isinstance(got, Touched):
                    report.unchanged += 1
                    pending.append(got)
                    continue
                got.mtime_ns, got.ctime_ns, got.inode = signal
                got.size = size
                if gone_hashes and gone_hashes[h := stored.content_hash(got.data)] > 0:
                    gone_hashes[h] -= 1
                    moved.append(got)
                else:
                    pending.append(got)
                if len(pending) >= WRITE_BATCH:
                    renamed |= self._flush(ws, Batch(pending), report, full, failures, defer_links=True)
                    pending = []
                if progress:
                    progress(i + 1, total, e.relpath)

        try:
            for i, e in enumerate(entries):
                key = (i, e)
                if e.skip:
                    preparer.add_ready(key, e.skip)
                    take()
                    continue
                old = known.get(e.relpath)
                if _unchanged(old, e, full):
                    report.unchanged += 1
                    continue
                try:
                    got = read_file(e.path, max_bytes=cfg.max_file_bytes)
                except SkipFile as s:
                    preparer.add_ready(key, str(s))
                except OSError as err:  # vanished or unreadable between scan and read
                    preparer.add_ready(key, f"unreadable: {err.strerror or err}")
                else:
                    if old and not full and old[0] == stored.content_hash(got.data):
                        preparer.add_ready(key, Touched(e.relpath, *_signal(got), got.size))
                    else:
                        read_stat[i] = _signal(got)  # the read file's own, taken before its bytes
                        read_size[i] = got.size
                        preparer.add(key, e.relpath, got.data)
                take()
            take(drain=True)
            if not root.is_dir():
                raise _root_gone(ws)  # moved during the run: the files it did not find are not gone
            # a file skipped (a dangling link, grown too large) is not gone: it is listed, and the
            # batch's skips take its document out and say why, as the live index does
            gone = [p for p in known if p not in listed]
            self._flush(
                ws,
                Batch(pending + moved, gone=gone, skips=skips, every_skip=True),
                report,
                full,
                failures,
                renamed=renamed,
            )
            with self.store.write() as db:
                set_chunking(db, ws.id, cut)
        except BaseException:
            # batches already committed never reached the cached name tables: read them all next time
            self.links.forget(ws.id)
            raise
        finally:
            preparer.close()
        if progress:
            progress(total, total, "done")
        report.skipped = [{"path": p, "reason": r} for p, r in skips + failures]
        with self.store.locked() as db:
            report.chunks = chunk_count(db, ws.id)
        report.seconds = round(time.monotonic() - started, 3)
        return report

    # -- some paths (the live index) ------------------------------------------------------------

    def paths(self, ws: Workspace, relpaths: list[str]) -> IndexReport:
        """Bring just these workspace-relative paths up to date."""
        with self._locks.hold(ws.id, wait=LIVE_WAIT_S) if self._locks is not None else nullcontext():
            return self._paths(ws, relpaths)

    def _paths(self, ws: Workspace, relpaths: list[str]) -> IndexReport:
        cfg = WorkspaceConfig.from_json(ws.config)
        root = Path(ws.root).resolve()
        with self.store.locked() as db:
            recorded = chunking(db, ws.id)
        if not root.is_dir():
            # moved or unmounted, not emptied: the watcher, which still holds the moved folders, reports
            # a save there under the old path, where no file is; its document is no deletion
            raise _root_gone(ws)
        if recorded is not None and recorded != self.chunking(cfg):
            return self.run(ws)  # the chunking changed: every file is cut again, not just these
        self.sync_schema(ws)  # the watcher hands us _schema/frontmatter.yaml too
        report = IndexReport(ws.name)
        rule = MarkdownRule.of(cfg.markdown)
        counter = functools.cache(lambda: self._token_counter(ws))  # once, and only if a file is parsed
        pending: list[Pending] = []
        gone: list[str] = []
        skips: list[tuple[str, str]] = []
        for rel in sorted(set(relpaths)):
            if not rule.matches(rel) or is_session_path(rel):  # a session is never a file, even if one is there
                continue
            report.scanned += 1
            if not (root / rel).exists() and not (root / rel).is_symlink():  # a dangling link is a skip, as in a scan
                gone.append(rel)
                continue
            # what a scan would say of it (ingest/scan.py): ignored, or a skip (outside, too large, ...)
            e = entry_for(root, rel, max_bytes=cfg.max_file_bytes, rule=rule)
            if e is None:
                continue
            if e.skip:
                skips.append((e.relpath, e.skip))
                continue
            try:
                if not e.path.resolve().is_relative_to(root):  # a file in a linked folder outside the root
                    raise SkipFile(OUTSIDE)
                got = read_file(e.path, max_bytes=cfg.max_file_bytes)
            except SkipFile as s:
                skips.append((rel, str(s)))
                continue
            except OSError:
                gone.append(rel)
                continue
            parsed = prepare_or_reason(
                rel, got.data, cfg.section_tokens, cfg.abstract_chunk, counter(), cfg.redact_secrets
            )
            if isinstance(parsed, str):
                skips.append((rel, parsed))
                continue
            # the stat of the descriptor the bytes were read from, taken before the read: the
            # stored mtime is never a newer version's, and a file gone since costs nothing
            parsed.mtime_ns, parsed.ctime_ns, parsed.inode = _signal(got)
            parsed.size = got.size
            pending.append(parsed)
        failures: list[tuple[str, str]] = []
        self._flush(ws, Batch(pending, gone=gone or None, skips=skips or None), report, False, failures)
        report.skipped = [{"path": p, "reason": r} for p, r in skips + failures]
        return report

    # -- what a whole run would read again, in some folders (the live index) -------------------

    def stale(self, ws: Workspace, folders: list[str]) -> list[str]:
        """The paths directly in these workspace-relative folders ("" the root) that a whole run
        would read again (no stored document, or a stat not the stored one: `_unchanged`), the
        stored ones there now gone, and the frontmatter schema if it is not the one applied.
        A listing of each folder and a stat of each file in it, and one read of the store: what
        the live index checks for the saves its restarting watcher had no event for."""
        cfg = WorkspaceConfig.from_json(ws.config)
        rule = MarkdownRule.of(cfg.markdown)
        root = Path(ws.root)
        with self.store.read() as db:
            if chunking(db, ws.id) is None:
                return []  # never indexed: its first run reads every file (with the report it gives)
            known = stored.file_states(db, ws.id)
            applied = schema_row(db, ws.id)
        out: set[str] = set()
        listed: set[str] = set()
        found: set[str] = set()  # the Markdown files in them
        for folder in folders:
            prefix = f"{folder}/" if folder else ""
            try:
                items = list(os.scandir(root / folder))
            except OSError:
                continue  # gone: the watcher's restart for it indexes the workspace whole
            listed.add(folder)
            for it in items:
                rel = prefix + it.name
                old = known.get(rel)
                if old is None and not rule.matches(rel):  # a stored one matched (a new rule re-indexes whole)
                    continue
                try:
                    if it.is_dir():
                        continue
                    st = it.stat()  # through a link, as the scan's entry is
                except OSError:  # a dangling link: a skip if it is stored, as a scan says
                    if old is not None:
                        out.add(rel)
                    continue
                found.add(rel)
                e = ScanEntry(rel, Path(it.path), st.st_size, st.st_mtime_ns, None, st.st_ctime_ns, st.st_ino)
                if not _unchanged(old, e, False) and (old is not None or not is_ignored(root, rel, rule)):
                    out.add(rel)
        out.update(p for p in known if p not in found and p.rpartition("/")[0] in listed)
        if applied is None or applied[0] != schema_hash(read_schema_file(root)):
            out.add(SCHEMA_RELPATH)  # `paths` applies it (sync_schema), whatever else it is given
        return sorted(out)

    # -- one transaction ------------------------------------------------------------------------

    def _flush(
        self,
        ws: Workspace,
        batch: Batch,
        report: IndexReport,
        full: bool,
        failures: list[tuple[str, str]],
        *,
        defer_links: bool = False,
        renamed: set[str] | None = None,
    ) -> set[str]:
        """Write one batch (index/batch.py), tell the listeners, then maintain the postings. Returns
        the paths whose names (path, title, aliases, frontmatter) changed."""
        if self._locks is not None:  # a restart may have ended the indexer lock's session since the last batch
            self._locks.check(ws.id)
        with self.store.write() as db:
            out = write_batch(
                db, self.links, ws, batch, report, full, failures, defer_links=defer_links, renamed=renamed
            )
        self._written(ws, out.emitted, out.touched)
        with self.store.locked() as db:  # after the batch is out: fold a large delta, build a slice of an old store
            postings.maintain(db, budget=0, size=postings.SMALL_SLICE)
        return out.names_changed
