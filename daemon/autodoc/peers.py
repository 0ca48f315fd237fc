"""Who hears of a committed change: this process's listeners, and the daemons sharing its store.

The Service (service.py) hands every change its index transactions commit to `Peers.tell`,
which passes it to the change listeners (the RPC server's subscribers, an in-process client)
once. On a shared PostgreSQL store each daemon also follows the store's change feed
(store/pg/notify.py): what another daemon committed marks its documents in this one's caches
(through the Service's `vectors_changed`, which reaches its reader processes too), drops the
link name tables it indexes by, and reaches the listeners. A daemon hears its own changes on the
feed as well: the cursors it told are remembered, so a change reaches listeners once, whoever reports
it first.

A workspace added, removed or configured (`announce` is the writing side), by any daemon sharing the
store this one included, is forgotten here, and the workspace listeners hear what changed (the live
index looks at the roots again, the RPC server tells its subscribers `workspace.changed`): the feed is
the one teller of workspace changes on a shared store (`tells_workspaces`; the RPC method then tells
nothing itself). What the listeners last heard of every workspace is compared with the store on each
notification and each time the feed (re)connects, and the difference is told: whatever the order the
notifications of two daemons' changes arrive in, each daemon tells the workspace as it now is once
(changes committed before it looked are told as one), a configure whose follow-up index failed is told
all the same, and a notification lost while the feed was cut off (or sent before it first listened) is
made up then. On SQLite this process is the one writer, there is no feed, and the method tells.

Runs on: `tell` and `announce` on the writing thread (`announce` inside its transaction); the
feed's callbacks on the feed's own thread (autodoc-changes). The told cursors are kept under a
lock; a listener runs on whichever thread told it and must not block.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from .store import reads
from .store import workspaces as wsrows
from .store.interface import StoreInterface
from .store.links import LinkResolver
from .store.pg.notify import ChangeFeed, follow, notify_workspace
from .store.sql import POSTGRES, dialect
from .store.workspaces import Workspace

log = logging.getLogger("autodoc.peers")

TOLD_KEEP = 10_000  # change cursors remembered as told: a change reaches listeners once, whoever reports it first

ChangeListener = Callable[[str, list[dict[str, Any]]], None]
# (op: added | removed | configured, the workspace's name, its row after the change or None when removed)
WorkspaceListener = Callable[[str, str, Workspace | None], None]


class Peers:
    def __init__(
        self,
        store: StoreInterface,
        links: LinkResolver,
        vectors_changed: Callable[[int, list[int] | None], None],
        forget: Callable[[int], None],
        *,
        feed: bool = True,
    ) -> None:
        self.store = store
        self.links = links
        self._vectors_changed = vectors_changed
        self._forget = forget  # a workspace's vectors, here and in the readers
        self.listeners: list[ChangeListener] = []
        # told (on the feed's thread) when a daemon sharing the store, this one too, added, removed or
        # configured a workspace: the live index watches the roots anew, subscribers hear
        # `workspace.changed` (daemon.py)
        self.workspace_listeners: list[WorkspaceListener] = []
        self._told: dict[int, None] = {}  # cursors listeners were told of, oldest first
        self._told_lock = threading.Lock()
        # every workspace as the listeners last heard of it, by id (a shared store only): what the store
        # holds now is told as the difference, and a removed one's name is known after its row went
        self._known: dict[int, Workspace] = {}  # read and replaced on the feed's thread only
        if feed and getattr(store, "dialect", None) == POSTGRES:
            self._known = self._workspaces()  # before the feed starts: its first event compares with these
        # what every daemon sharing a PostgreSQL store commits (store/pg/notify.py); None on SQLite, and in
        # a reader process (feed=False), which its daemon's invalidations keep right
        self.feed: ChangeFeed | None = (
            follow(store, self._changed_elsewhere, vectors_changed, self._workspace_elsewhere, self._sync)
            if feed
            else None
        )

    @property
    def tells_workspaces(self) -> bool:
        """Whether the change feed tells the workspace listeners of every workspace change, this
        daemon's own too (a shared store); if not, whoever made the change tells them."""
        return self.feed is not None

    def listen(self, fn: ChangeListener) -> None:
        self.listeners.append(fn)

    def unlisten(self, fn: ChangeListener) -> None:
        if fn in self.listeners:
            self.listeners.remove(fn)

    def stop(self) -> None:
        if self.feed is not None:
            self.feed.stop()

    def tell(self, workspace: str, changes: list[dict]) -> None:
        """Listeners hear of each change once: a shared store's feed also reports this daemon's own."""
        with self._told_lock:
            fresh = [c for c in changes if c["cursor"] not in self._told]
            self._told.update((c["cursor"], None) for c in fresh)
            while len(self._told) > TOLD_KEEP:
                del self._told[next(iter(self._told))]
        if not fresh:
            return
        for fn in list(self.listeners):
            try:
                fn(workspace, fresh)
            except Exception:  # a listener's failure must not undo a committed write
                log.exception("change listener failed")

    @staticmethod
    def announce(db: Any, ws_id: int, event: str) -> None:
        """In the transaction adding, removing or configuring a workspace: the other daemons sharing a
        PostgreSQL store drop what they keep of it and tell their clients (`event`: added, removed or
        configured)."""
        if dialect(db) == "postgres":
            notify_workspace(db, ws_id, event)

    def _changed_elsewhere(self, changes: list[dict[str, Any]] | None) -> None:
        """What the shared store's change feed read (its thread; store/pg/notify.py): changes another
        daemon committed (and this one's, again) mark their documents in the caches, here and in the
        readers, and reach the listeners. None: anything may have changed."""
        if changes is not None:
            with self._told_lock:  # this daemon's own, already handled when it wrote them
                changes = [c for c in changes if c["cursor"] not in self._told]
            if not changes:
                return
        with self.store.read() as db:
            names = wsrows.workspace_names(db)
            for name in names if changes is None else sorted({c["workspace"] for c in changes}):
                if name not in names:
                    continue  # removed since
                ws = wsrows.get_workspace(db, name)
                # its names as another daemon wrote them: the next link this one indexes resolves by them
                self.links.forget(ws.id)
                mine = [c for c in changes or () if c["workspace"] == name]
                ids = [reads.document_id(db, ws.id, c["path"]) for c in mine]
                known = sorted({i for i in ids if i is not None})
                # a deleted document's id is gone with it: its vectors are found by reloading them all
                self._vectors_changed(ws.id, None if changes is None or len(known) < len(ids) else known)
                if mine:
                    self.tell(name, mine)

    def _workspace_elsewhere(self, ws_id: int, event: str) -> None:
        """A workspace added, removed or configured through a daemon sharing this PostgreSQL store, this
        one included (its feed's thread; store/pg/notify.py): what this one keeps of it goes (its link
        name tables, and on a removal its vectors, here and in the readers); the store holds the rest.
        The listeners hear how the workspaces differ from what they last heard, whoever sent it:
        telling by the sender (this daemon's own change quiet here) lost or doubled a change another
        daemon made to the same workspace before this one's notification was read."""
        self.links.forget(ws_id)
        if event == "removed":
            self._forget(ws_id)
        self._sync()

    def _workspaces(self) -> dict[int, Workspace]:
        with self.store.read() as db:
            return {ws.id: ws for ws in wsrows.all_workspaces(db)}

    def _sync(self) -> None:
        """Tell the workspace listeners how the workspaces differ from what they last heard (a
        removal first: a name removed and added again is two workspaces)."""
        now = self._workspaces()
        before, self._known = self._known, now
        told: list[tuple[str, str, Workspace | None]] = [
            ("removed", ws.name, None) for i, ws in before.items() if i not in now
        ]
        for i, ws in now.items():
            was = before.get(i)
            if was is None:
                told.append(("added", ws.name, ws))
            elif (was.name, was.root, was.config) != (ws.name, ws.root, ws.config):
                told.append(("configured", ws.name, ws))
        for op, name, row in told:
            for fn in list(self.workspace_listeners):
                try:
                    fn(op, name, row)
                except Exception:  # the feed must keep running
                    log.exception("workspace listener failed")
