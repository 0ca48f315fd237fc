"""`autodoc tui`: the app that holds the three pickers, the connection, the
workspace in use and the user's stage choice.

Input: Settings, the workspace to start in (else the last one used, else
the first), whether a daemon may be started. Output: the terminal app;
opening a hit suspends it for $EDITOR and comes back to the picker.

The daemon's pushes arrive on the link's thread and are posted to the app
as `DaemonNote` messages: `workspace.changed` (a model or ranker switch, a
workspace added or removed) refreshes what the workspace can do and runs the
open query again, as do `embedding.progress` (when the semantic state
changes), `changes.changed` (a saved file) and the link's own
`$/reconnected` (a daemon restarted: link.py found it again).

Runs on: the app's event loop (the main thread); every RPC call on a
Textual worker thread.
"""

from __future__ import annotations

import logging
import subprocess
from pathlib import Path
from typing import Any

from textual import work
from textual.app import App, SuspendNotSupported
from textual.binding import Binding
from textual.message import Message

from ..config import Settings
from . import render, state
from .facets import load_facets
from .host import Host
from .link import Link, Pending, open_link
from .style import CSS

log = logging.getLogger("autodoc.tui")


class DaemonNote(Message):
    """A notification pushed by the daemon."""

    def __init__(self, method: str, params: Any) -> None:
        super().__init__()
        self.method = method
        self.params = params


class Connected(Message):
    """The link is up (or could not be made: `error`)."""

    def __init__(self, error: str | None = None) -> None:
        super().__init__()
        self.error = error


class AutodocApp(App):
    """The terminal app: search, open a document, add a workspace."""

    CSS = CSS
    TITLE = "autodoc"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (100, "-wide")]
    BINDINGS = [
        Binding("ctrl+g", "picker('search')", "Search", priority=True),
        Binding("ctrl+o", "picker('documents')", "Open doc", priority=True),
        Binding("ctrl+n", "picker('add')", "Add ws", priority=True),
        Binding("ctrl+t", "next_workspace", "Workspace", priority=True),
        Binding("ctrl+q", "quit", "Quit", priority=True),
    ]

    def __init__(
        self,
        settings: Settings,
        *,
        workspace: str | None = None,
        start_daemon: bool = True,
        state_file: Path | None = None,
        link: Link | None = None,
    ) -> None:
        super().__init__()
        self.settings = settings
        self.state_file = state_file or state.state_path()
        self.choice = state.load(self.state_file)
        self.wanted_workspace = workspace or self.choice.workspace
        self.start_daemon = start_daemon
        self.link: Link | None = link
        self.workspaces: list[dict[str, Any]] = []
        self.workspace: str | None = None
        self.available = state.Available()
        self.embedding = state.Embedding()
        self.status: dict[str, Any] | None = None
        # the workspace the pickers last showed (boxes, facets): set on the event loop once they follow
        self.shown_workspace: str | None = None
        self.connect_error: str | None = None
        self.editor_runs: list[list[str]] = []  # every editor argv launched (tests read it)
        self.copied: str | None = None
        self.notes_seen: list[tuple[str, Any]] = []
        self.pickers: dict[str, Any] = {}
        self.facets: list[tuple[str, str, int]] = []

    # -- start and stop -----------------------------------------------------------------

    def on_mount(self) -> None:
        from .add import AddScreen
        from .documents import DocumentScreen
        from .search import SearchScreen

        self.pickers = {"search": SearchScreen(), "documents": DocumentScreen(), "add": AddScreen()}
        for name, screen in self.pickers.items():
            self.install_screen(screen, name)
        self.push_screen("search")
        self._connect()

    @work(thread=True, exclusive=True, group="connect")
    def _connect(self) -> None:
        try:
            if self.link is None:
                self.link = open_link(
                    self.settings,
                    self._on_note,
                    start=self.start_daemon,
                    daemon_log=self.state_file.parent / "daemon.log",
                )
            self.link.subscribe()
        except Exception as e:  # no daemon and the store is held elsewhere, a bad store path…
            log.warning("cannot connect", exc_info=True)
            self.post_message(Connected(f"cannot reach the store: {e}"))
            return
        self._load_workspaces()
        self.post_message(Connected())

    def on_connected(self, message: Connected) -> None:
        self.connect_error = message.error
        if message.error:
            self.pickers["search"].set_status(message.error)
            return
        mode = self.link.mode if self.link else "?"
        self.sub_title = f"{self.workspace or 'no workspace'} · {mode}"
        self._workspace_ready()

    def on_unmount(self) -> None:
        if self.link is not None:
            self.link.close()

    def _on_note(self, method: str, params: Any) -> None:
        self.post_message(DaemonNote(method, params))  # thread-safe: onto the event loop

    # -- calls --------------------------------------------------------------------------

    def call(self, method: str, params: Any, *, pending: Pending | None = None, progress: Any = None) -> Any:
        """One RPC call; blocks, so only from a worker thread."""
        if self.link is None:
            raise ConnectionError(self.connect_error or "not connected yet")
        return self.link.call(method, params, pending=pending, progress=progress)

    # -- workspaces ----------------------------------------------------------------------

    def _load_workspaces(self) -> None:
        """(worker thread) The list, the one in use, and what it can do."""
        self.workspaces = self.call("workspace.list", {})["workspaces"]
        names = [w["name"] for w in self.workspaces]
        if self.workspace not in names:
            self.workspace = self.wanted_workspace if self.wanted_workspace in names else names[0] if names else None
        self._load_status()

    def _load_status(self) -> None:
        """(worker thread) workspace.status → which boxes show, the ranker's name, the semantic state."""
        if self.workspace is None:
            self.status, self.available, self.embedding = None, state.Available(), state.Embedding()
            self.facets = []
            return
        st = self.call("workspace.status", [self.workspace])
        emb, rk = st.get("embedding") or {}, st.get("ranker") or {}
        self.status = st
        self.available = state.Available(
            semantic=bool(emb.get("available")) or emb.get("state") in ("partial", "switching", "ready"),
            rerank=rk.get("state") not in (None, "off"),
            ranker_model=rk.get("model"),
        )
        self.embedding = state.Embedding(emb.get("state"), emb.get("pending"), emb.get("reason"))
        self.facets = load_facets(self.call, self.workspace, st)

    def root_of(self, name: str | None) -> str:
        for w in self.workspaces:
            if w["name"] == name:
                return w["root"]
        return "."

    def _workspace_ready(self, rerun: str | None = None) -> None:
        """(event loop) Tell every picker; remember the workspace for next time."""
        if self.workspace and self.workspace != self.choice.workspace:
            self.choice.workspace = self.workspace
            state.save(self.state_file, self.choice)
        mode = self.link.mode if self.link else "?"
        self.sub_title = f"{self.workspace or 'no workspace'} · {mode}"
        if not self.is_running:
            return  # an answer that came back while the app closed
        for screen in self.pickers.values():
            if screen.is_mounted:
                screen.on_workspace()
        self.shown_workspace = self.workspace
        if rerun:
            self.pickers["search"].refresh_soon(rerun)

    def use_workspace(self, name: str) -> None:
        if name == self.workspace:
            return
        self.workspace = name
        self.refresh_workspace()

    @work(thread=True, group="status")
    def refresh_workspace(self, reload_list: bool = False, rerun: str | None = None) -> None:
        """(worker thread) Read the workspace again; then the pickers follow, and with
        `rerun` the open search runs again (after the boxes show what it can do now)."""
        try:
            if reload_list:
                self._load_workspaces()
            else:
                self._load_status()
        except Exception as e:
            log.warning("workspace refresh failed: %s", e)
            self.call_from_thread(self.notify, f"{e}", severity="error")
            return
        self.call_from_thread(self._workspace_ready, rerun)

    def action_next_workspace(self) -> None:
        names = [w["name"] for w in self.workspaces]
        if not names:
            self.notify("no workspaces yet: add one with Ctrl+N")
            return
        i = names.index(self.workspace) + 1 if self.workspace in names else 0
        self.use_workspace(names[i % len(names)])

    def action_picker(self, name: str) -> None:
        if self.screen is not self.pickers.get(name):
            self.switch_screen(name)
        self.pickers[name].focus_fields()

    def save_choice(self) -> None:
        state.save(self.state_file, self.choice)

    # -- the daemon's pushes ---------------------------------------------------------------

    def on_daemon_note(self, note: DaemonNote) -> None:
        p = note.params if isinstance(note.params, dict) else {}
        self.notes_seen.append((note.method, p))
        if note.method == "$/reconnected":  # a new daemon: what it holds may differ from the last one's
            self.notify("reconnected to the daemon")
            self.refresh_workspace(reload_list=True, rerun="reconnected")
        elif note.method == "workspace.changed":
            # a model or ranker switch, a workspace added or removed: what the boxes
            # offer may change, and the open query's answer with it
            mine = p.get("workspace") == self.workspace
            self.refresh_workspace(reload_list=True, rerun=f"workspace {p.get('op')}" if mine else None)
        elif note.method == "embedding.progress" and p.get("workspace") == self.workspace:
            before = self.embedding.state
            self.embedding = state.Embedding(p.get("state"), p.get("pending"), p.get("reason"))
            if p.get("state") != before:
                self.refresh_workspace(rerun=f"embedding {p.get('state')}")
            else:
                self.pickers["search"].show_state()
        elif note.method == "changes.changed" and p.get("workspace") == self.workspace:
            self.pickers["search"].refresh_soon("changes")
            self.pickers["documents"].refresh_soon()

    # -- what leaves the app ------------------------------------------------------------------

    def open_in_editor(self, workspace: str, path: str, line: int) -> None:
        """$EDITOR at the line, the app suspended meanwhile; back to the picker after."""
        argv = render.editor_argv(str(Path(self.root_of(workspace)) / path), line)
        self.editor_runs.append(argv)
        try:
            with self.suspend():
                result = subprocess.run(argv, check=False)
        except SuspendNotSupported:  # a headless run (tests): no terminal to hand over
            result = subprocess.run(
                argv, check=False, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
        except FileNotFoundError:
            self.notify(f"cannot run the editor {argv[0]!r}: set $EDITOR", severity="error")
            return
        if result.returncode:
            self.notify(f"{argv[0]} exited with status {result.returncode}", severity="warning")

    def copy(self, text: str) -> None:
        """To the system clipboard (OSC 52, through the terminal) and shown."""
        self.copied = text
        self.copy_to_clipboard(text)
        self.notify(f"copied {text}")

    def write_quickfix(self, hits: list[dict[str, Any]], workspace: str) -> Path | None:
        """Every hit as `file:line:col: text` in the state folder: `vim -q FILE`, `:cfile`, Emacs's grep mode."""
        target = self.state_file.parent / "quickfix.txt"
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text("\n".join(render.quickfix_lines(hits, self.root_of(workspace))) + "\n", encoding="utf-8")
        except OSError as e:
            self.notify(f"cannot write {target}: {e}", severity="error")
            return None
        self.notify(f"{len(hits)} hits → {target}  (vim -q {target})")
        return target


def _host(app: AutodocApp) -> Host:
    """(types only) The app is what the pickers expect of their host: mypy checks it here."""
    return app
