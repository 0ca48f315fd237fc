"""The live index: keeps every workspace's index in step with its folder while a daemon runs.

watchfiles watches, without recursion, exactly the folders the scanner walks
in every workspace (its own recursion follows symlinked folders out of the
root: a link to /usr cost 15,450 inotify watches). The watch set is rebuilt
when workspaces are added or removed and when a folder appears, vanishes or
is renamed (inotify watches the folder, not its name). A folder that
appears is indexed at once (its Markdown files, found by walking just that
folder: newfolders.py), then again once the new watcher is up, so a file saved between the
two is not missed; a workspace where a folder vanished or was renamed away
is indexed whole (the files inside got no event of their own) once re-watched.
A watcher that stops drops the events it held, and none watches until the next one runs: after
a restart for a new folder, the folders watched before are compared with the store once the new
watcher runs (a stat of each file, as a whole index decides: 20 ms for 2,000 files) and what
changed or went is indexed; a folder made in that gap is found by listing the folders changed
since the old watcher last handed over a batch (newfolders.py), and watched.
While every folder is walked again (workspaces added or removed), nothing
watches: each workspace watched before is indexed again (incrementally) once
the new watcher runs, so a file saved in that gap is not missed.
A new folder used to cost a whole-workspace index before its first file
answered: 2.8 s at 1M chunks (docs/benchmarks/speed.md, save → searchable). A saved .md/.markdown file is handed to `Service.index_paths`
after a ~50 ms debounce (and so is _schema/frontmatter.yaml, which
re-derives every document's facets). A batch where a file is gone waits one debounce more for the
next, so a move the debounce cut in two is still one rename (up to MOVE_HOLD_MAX_S). At start each workspace gets
one incremental index, to catch edits made while no daemon ran (tried again every LOCKED_RETRY_S
while another daemon holds the workspace's indexer lock, said once in the log). A store that cannot be
reached (a PostgreSQL server restarting) loses no save: the workspace whose live index it refused
is indexed whole once the store answers again, as after a walk. Of the service it
needs only `Indexer`'s three methods (workspace roots, index, index_paths).

Runs on: the event loop; every store call goes through the host's `read`
(a reader thread) or `write` (the single writer slot).
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

import anyio

from ..errors import InvalidParams, StoreLocked, StoreUnreachable, WorkspaceNotFound
from ..fmschema import SCHEMA_DIR, SCHEMA_RELPATH
from ..ingest.scan import DEFAULT_RULE, MarkdownRule, is_ignored
from .newfolders import (
    folders_under,
    made_since,
    markdown_under,
    maybe_folder,
    present,
    rel_folder,
    relative,
    watched_folders,
)

log = logging.getLogger("autodoc.index.live")

WATCH_DEBOUNCE_MS = 50
WATCH_STEP_MS = 25
STORE_RETRY_S = 1.0  # how often the watcher looks whether an unreachable store answers again
LOCKED_RETRY_S = 2.0  # how often a catch-up another daemon's index run held off is tried again
MOVE_HOLD_MAX_S = 1.0  # a stream of batches with files gone is written at least this often

Run = Callable[..., Awaitable[Any]]


class Indexer(Protocol):
    """What the live index asks of the service (service.py), through the host's `read` and `write`."""

    def workspace_roots(self) -> dict[str, str]:
        """Each workspace's root folder by name."""
        ...

    def workspace_markdown(self) -> dict[str, list[str]]:
        """Each workspace's `markdown` option (which files are Markdown) by name."""
        ...

    def index(self, name: Any) -> dict[str, Any]:
        """An incremental index of the whole workspace: its report."""
        ...

    def index_paths(self, name: Any, relpaths: list[str]) -> dict[str, Any]:
        """Just these workspace-relative paths brought up to date: its report."""
        ...

    def workspace_indexed(self, name: Any) -> bool:
        """Whether an index run of the workspace has ended."""
        ...

    def stored_under(self, name: Any, folders: list[str]) -> list[str]:
        """The files indexed under these folders."""
        ...

    def stale_in(self, name: Any, folders: list[str]) -> list[str]:
        """The paths directly in these folders a whole index would read again."""
        ...


class LiveIndex:
    def __init__(
        self,
        service: Indexer,
        *,
        read: Run,
        write: Run,
        set_watching: Callable[[list[str]], None],
        debounce_ms: int = WATCH_DEBOUNCE_MS,
        step_ms: int = WATCH_STEP_MS,
    ):
        self.service = service
        self._read = read
        self._write = write
        self._set_watching = set_watching  # which workspaces are watched, for server.info
        self.debounce_ms = debounce_ms
        self.step_ms = step_ms
        self._restart = anyio.Event()
        self._stopping = False
        self._refolder: set[str] = set()  # workspaces where a folder vanished: index whole once re-watched
        self._new_folders: dict[str, set[str]] = defaultdict(
            set
        )  # name → folders that appeared: index again once re-watched
        # Folders that appeared, walked alone: the next watch set is the last one plus these. Walking
        # every root again (1.9 s at 1M chunks) left the folder unwatched meanwhile, so a second save
        # there waited for the re-index behind it (2.6 s). A vanished folder or a new root walks all.
        self._more_folders: set[Path] = set()
        self._walk_all = True
        # each workspace's `markdown` option: which files a change is about, which hidden folders are watched
        self._rules: dict[str, MarkdownRule] = {}
        # A batch where a file is gone, by workspace: held one debounce for the other half of a move
        # (the debounce can cut between a rename's two events; index/batch.py pairs a gone path with
        # a new one of the same bytes only within one write), then written with the next batch, or
        # by _release_held if none came. A batch with no file gone is written at once (a save).
        self._held: dict[str, set[str]] = {}
        self._held_since: dict[str, float] = {}
        self._batches = 0  # batches applied: a release is for the last one only
        self._applying = anyio.Lock()  # a batch and the release of held deletions, one at a time

    def roots_changed(self) -> None:
        self._walk_all = True
        self._restart.set()

    def stop(self) -> None:
        self._stopping = True
        self._restart.set()

    async def run(self) -> None:
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._watch_loop)
                await self._catch_up()
        finally:
            self._set_watching([])

    async def _roots(self) -> dict[str, Path]:
        listed = await self._read(self.service.workspace_roots)
        rules = {n: MarkdownRule.of(r) for n, r in (await self._read(self.service.workspace_markdown)).items()}
        if rules != self._rules:  # a configure changed a rule: walk again, its hidden folders may be in or out
            self._rules = rules
            self._walk_all = True
        return {name: Path(root) for name, root in listed.items() if Path(root).is_dir()}

    async def _catch_up(self) -> None:
        held: set[str] = set()
        for name in await self._roots():
            try:
                report = await self._write(self.service.index, name)
                log.info("caught up %s: %s", name, _summary(report))
            except StoreLocked as exc:  # another daemon indexes it (a shared PostgreSQL store)
                log.warning("catching up workspace %s later: %s", name, exc.message)
                held.add(name)
            except Exception:
                log.exception("catching up workspace %s failed", name)
        # Not waiting inside the index for the lock: that would hold this daemon's writer slot (its
        # saves, its other workspaces) for as long as the other run lasts. Tried again now and then
        # instead, said once; what the other run indexed meanwhile costs a stat here.
        while held and not self._stopping:
            await anyio.sleep(LOCKED_RETRY_S)
            for name in sorted(held):
                try:
                    report = await self._write(self.service.index, name)
                    log.info("caught up %s: %s", name, _summary(report))
                except StoreLocked:
                    continue
                except WorkspaceNotFound:
                    pass  # removed meanwhile
                except StoreUnreachable:
                    continue  # the watcher waits for the store, and then indexes every workspace anyway
                except Exception:
                    log.exception("catching up workspace %s failed", name)
                held.discard(name)

    async def _watch_loop(self) -> None:
        from watchfiles import awatch

        rescan = False
        covered: set[str] | None = None  # the workspaces _catch_up indexes (those there at the start)
        folders: list[Path] = []
        watched: dict[str, Path] = {}
        handed_ns = 0  # when the watcher last handed over a batch (or began): it drops what it held since
        while not self._stopping:
            self._restart = anyio.Event()
            walked = False
            try:
                roots = await self._roots()
            except StoreUnreachable as exc:
                # nothing is watched until it answers: then every workspace is indexed again
                log.warning("the live index waits for the store: %s", exc)
                with anyio.move_on_after(STORE_RETRY_S):
                    await self._restart.wait()
                rescan = True
                continue
            if covered is None:
                covered = set(roots)
            if rescan:  # what changed while no watcher ran
                rescan = False
                self._refolder.update(roots)
                self._walk_all = True
            if not roots:
                self._set_watching([])
                await self._restart.wait()
                continue
            gap: dict[str, list[str]] = {}
            if self._walk_all or roots != watched:
                self._walk_all = False
                walk_ns = time.time_ns()
                folders = await anyio.to_thread.run_sync(watched_folders, roots, dict(self._rules))
                walked = True
                # Nothing watched while the folders were walked (seconds for a large tree): a
                # file saved meanwhile in a workspace watched before is found by indexing it again
                # (incremental: unchanged files cost a stat) once the new watcher runs.
                self._refolder.update(name for name in roots if name in watched)
            else:
                if not self._more_folders:
                    # A restart that watches nothing new: a roots_changed already in this watch set
                    # (it came while the roots were read). The watcher stopped for it all the same,
                    # so what was saved meanwhile is found by indexing again, as after a walk.
                    self._refolder.update(roots)
                # A restart for folders that appeared: the old watcher dropped the events it held,
                # and none watched until the new one runs. What was saved or deleted meanwhile in
                # the folders watched before is found by comparing them with the store (a stat of
                # each file, not a whole index: that would hold the writer slot, and every save,
                # for seconds at 1M chunks); a folder made in them, by listing those changed since.
                gap = {
                    name: sorted({rel_folder(f, root) for f in folders if f.is_relative_to(root)})
                    for name, root in roots.items()
                    if name not in self._refolder
                }
                folders = sorted(set(folders) | self._more_folders)
            # A workspace added while the daemon runs gets its first index from workspace.index, which
            # can end before this watcher is up (inside the walk above): a file saved in between had
            # neither. Once watched, it is indexed again if that run has ended (incremental).
            added = sorted(name for name in roots if name not in watched and name not in covered)
            covered = set()
            self._more_folders = set()
            watched = roots
            try:
                async with anyio.create_task_group() as tg:
                    # awatch creates its watcher synchronously on the first step of the
                    # loop, before any other task runs: once `watching` is visible to a
                    # request, or the re-index below starts, the folders are watched.
                    self._set_watching(sorted(roots))
                    if self._refolder:
                        tg.start_soon(self._index_all, sorted(self._refolder))
                        self._refolder = set()
                    if added:
                        tg.start_soon(self._index_if_indexed, added)
                    # folders made after the walk passed their parent, or while no watcher ran
                    tg.start_soon(self._watch_late_folders, roots, set(folders), walk_ns if walked else handed_ns)
                    if gap:
                        tg.start_soon(self._index_stale, gap)
                    if self._new_folders:
                        tg.start_soon(self._index_folders, dict(self._new_folders))
                        self._new_folders = defaultdict(set)
                    log.info(
                        "watching %d folders in %s",
                        len(folders),
                        ", ".join(f"{n}={r}" for n, r in sorted(roots.items())),
                    )
                    handed_ns = time.time_ns()
                    async for changes in awatch(
                        *folders,
                        watch_filter=None,
                        debounce=self.debounce_ms,
                        step=self.step_ms,
                        stop_event=self._restart,
                        ignore_permission_denied=True,
                        recursive=False,
                    ):
                        handed_ns = time.time_ns()
                        await self._apply(changes, roots)
                        if self._held:
                            tg.start_soon(self._release_held, self._batches, roots)
            except Exception as exc:
                # a folder vanished under the watcher, or the watcher could not report a file name
                # (one that is not valid UTF-8): the daemon keeps serving, the watcher starts again
                log.warning("the watcher stopped (%s: %s); restarting", type(exc).__name__, exc)
                with anyio.move_on_after(1.0):
                    await self._restart.wait()
                rescan = True

    async def _index_all(self, names: list[str]) -> None:
        for name in names:
            try:
                report = await self._write(self.service.index, name)
                log.debug("live index %s (folders changed): %s", name, _summary(report))
            except WorkspaceNotFound:
                self.roots_changed()
            except StoreUnreachable as exc:
                await self._unreachable(name, exc)
            except Exception:
                log.exception("live index of workspace %s failed", name)

    async def _unreachable(self, name: str, exc: StoreUnreachable) -> None:
        """The store could not take a live index of `name` (its database is down or restarting):
        the workspace is indexed whole, incrementally, once the store answers (the watcher restarts
        and waits for it), so what was saved meanwhile is not lost."""
        log.warning("live index of workspace %s waits for the store: %s", name, exc)
        self._refolder.add(name)
        with anyio.move_on_after(STORE_RETRY_S):  # not at once: a store that refuses again is not hammered
            await self._restart.wait()
        self._restart.set()

    async def _watch_late_folders(self, roots: dict[str, Path], watched: set[Path], walk_ns: int) -> None:
        """A folder made while the walk ran, after it passed the parent, is in no watch set and gets
        no event of its own: now that the watcher runs, the folders changed since the walk began
        are listed again (a stat of each watched folder, not a second walk of every root), and
        any such folder is handled as one that appeared (watched, then its Markdown indexed)."""
        late = await anyio.to_thread.run_sync(made_since, roots, watched, walk_ns, dict(self._rules))
        if not late or self._stopping:
            return
        for name, root in roots.items():
            rels = {f.relative_to(root).as_posix() for f in late if f.is_relative_to(root) and f != root}
            if rels:
                self._new_folders[name] |= rels
        self._more_folders |= late
        self._restart.set()

    async def _index_stale(self, folders: dict[str, list[str]]) -> None:
        """What changed in these folders (by workspace) while no watcher had them: the files whose
        stat is not the stored one, the stored ones gone, indexed as saves are."""
        for name, rels in sorted(folders.items()):
            try:
                paths = await self._read(self.service.stale_in, name, rels)
            except WorkspaceNotFound:
                self.roots_changed()
                continue
            except StoreUnreachable as exc:
                await self._unreachable(name, exc)
                continue
            except Exception:
                log.exception("live index of workspace %s after the watcher restarted failed", name)
                continue
            if paths:
                log.debug("live index %s: %d changed while the watcher restarted", name, len(paths))
                await self._index_paths(name, set(paths))

    async def _index_if_indexed(self, names: list[str]) -> None:
        """Through the writer slot, so behind a workspace.index already queued or running: one
        that has not started yet runs under this watcher, and a workspace never indexed is left
        to its own first index (with the report and progress workspace.index gives)."""
        for name in names:
            try:
                if await self._write(self.service.workspace_indexed, name):
                    report = await self._write(self.service.index, name)
                    log.debug("live index %s (added while serving): %s", name, _summary(report))
            except WorkspaceNotFound:
                self.roots_changed()
            except Exception:
                log.exception("live index of the added workspace %s failed", name)

    async def _index_folders(self, folders: dict[str, set[str]]) -> None:
        for name, rels in sorted(folders.items()):
            if name in self._refolder:
                continue  # indexed whole anyway
            root = (await self._roots()).get(name)
            if root is None:
                continue
            rule = self._rules.get(name, DEFAULT_RULE)
            paths = await anyio.to_thread.run_sync(markdown_under, root, sorted(rels), rule)
            # and what the store holds there: a folder moved out and another made under its name, or
            # a file made and deleted before the new folder was watched, leaves no event of its own
            paths = sorted(set(paths) | set(await self._read(self.service.stored_under, name, sorted(rels))))
            if not paths:
                continue
            try:
                report = await self._write(self.service.index_paths, name, paths)
                log.debug("live index %s (new folders): %s", name, _summary(report))
            except WorkspaceNotFound:
                self.roots_changed()
            except StoreUnreachable as exc:
                await self._unreachable(name, exc)
            except Exception:
                log.exception("live index of new folders in workspace %s failed", name)

    async def _release_held(self, batch: int, roots: dict[str, Path]) -> None:
        """What batch number `batch` held (a batch with a file gone), written: no other batch came
        within a debounce to bring the other half of a move."""
        await anyio.sleep(self.debounce_ms / 1000)
        async with self._applying:
            if self._batches != batch:
                return  # a later batch took them (and holds its own)
            held, self._held = self._held, {}
            self._held_since = {}
            for name, rels in sorted(held.items()):
                if name in roots:
                    await self._index_paths(name, rels)

    async def _apply(self, changes: set[tuple[Any, str]], roots: dict[str, Path]) -> None:
        async with self._applying:
            self._batches += 1
            await self._apply_batch(changes, roots)

    async def _apply_batch(self, changes: set[tuple[Any, str]], roots: dict[str, Path]) -> None:
        paths: dict[str, set[str]] = defaultdict(set)
        rescan: set[str] = set()
        fresh: dict[str, set[str]] = defaultdict(set)
        for _, raw in changes:
            for name, root in roots.items():
                rel = relative(raw, root)
                if rel is None:
                    continue
                rule = self._rules.get(name, DEFAULT_RULE)
                if rule.matches(rel):
                    if not is_ignored(root, rel, rule):
                        paths[name].add(rel)
                elif rel == SCHEMA_RELPATH:  # index_paths applies a changed frontmatter schema
                    paths[name].add(rel)
                elif rel == SCHEMA_DIR:  # the schema's folder came or went: watch it, then index (reads the schema)
                    rescan.add(name)
                elif (root / rel).is_dir() and not (root / rel).is_symlink() and not is_ignored(root, rel, rule):
                    fresh[name].add(rel)
                elif maybe_folder(root / rel) and not is_ignored(root, rel, rule):
                    rescan.add(name)
        if rescan or fresh:  # re-watch; then index the new folders again, those workspaces whole
            self._refolder |= rescan
            if rescan:
                self._walk_all = True
            else:
                self._more_folders |= await anyio.to_thread.run_sync(
                    folders_under,
                    [
                        (roots[n], r, self._rules.get(n, DEFAULT_RULE))
                        for n, rels in fresh.items()
                        for r in sorted(rels)
                    ],
                )
            for name, rels in fresh.items():
                self._new_folders[name] |= rels
            self._restart.set()
        await self._index_folders({n: r for n, r in fresh.items() if n not in rescan})
        for name in rescan:  # indexed whole: what it held too
            self._held.pop(name, None)
            self._held_since.pop(name, None)
        for name in sorted(set(paths) - rescan):
            rels = paths[name] | self._held.pop(name, set())
            since = self._held_since.pop(name, time.monotonic())
            gone = any(not present(roots[name] / r) for r in paths[name])
            if gone and time.monotonic() - since < MOVE_HOLD_MAX_S:
                self._held[name], self._held_since[name] = rels, since
            else:
                await self._index_paths(name, rels)

    async def _index_paths(self, name: str, rels: set[str]) -> None:
        if rels:
            try:
                report = await self._write(self.service.index_paths, name, sorted(rels))
                log.debug("live index %s: %s", name, _summary(report))
            except WorkspaceNotFound:
                self.roots_changed()
            except StoreUnreachable as exc:
                await self._unreachable(name, exc)
            except StoreLocked as exc:  # another daemon's run, past LIVE_WAIT_S: it or the next scan has the save
                log.warning("live index of workspace %s refused: %s", name, exc.message)
            except InvalidParams as exc:
                # its root is gone (moved, unmounted): the folders still watched are the moved ones, let go
                # until the root is back or configured anew (workspace.configure's root)
                log.warning("live index of workspace %s refused: %s", name, exc.message)
                self.roots_changed()
            except Exception:
                log.exception("live index of workspace %s failed", name)


def _summary(report: dict) -> str:
    keys = ("added", "modified", "deleted", "renamed", "unchanged")
    return ", ".join(f"{k} {report[k]}" for k in keys if report.get(k))
