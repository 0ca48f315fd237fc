"""The "add a workspace" picker: pick a folder, name it, index it with a progress bar.

Input: a folder (typed, or walked to in the list: Enter goes into the
folder under the cursor, `..` up), a name (made from the folder's name until
one is typed). Output: workspace.add, then workspace.index with its
progress ($/progress over the socket, the index run's callback in-process)
in the bar; the new workspace becomes the one in use.

The preview shows the Markdown files the folder holds (what the index
would read, roughly: hidden folders and node_modules left out), counted on a
worker thread.

Runs on: the TUI's event loop; the folder walk and the calls on worker threads.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import work
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widget import Widget
from textual.widgets import Button, Input, ProgressBar, Static

from . import render
from .picker import PickerScreen

PREVIEW_FILES = 200
WALK_LIMIT = 20_000  # stop counting after this many entries: a preview, not a scan


def name_for(path: Path) -> str:
    """A workspace name from a folder's name: letters, digits, `.`, `_`, `-`, starting with a letter or digit."""
    name = re.sub(r"[^\w.-]", "-", path.name, flags=re.ASCII)
    name = re.sub(r"^[^A-Za-z0-9]+", "", name)[:64]
    return name or "notes"


def subfolders(folder: Path) -> list[str]:
    try:
        names = sorted(e.name for e in os.scandir(folder) if e.is_dir() and not e.name.startswith("."))
    except OSError:
        return []
    return [".."] + names if folder.parent != folder else names


def markdown_files(folder: Path) -> tuple[list[str], int, bool]:
    """(the first PREVIEW_FILES Markdown files, how many, whether the walk stopped early)."""
    found: list[str] = []
    count = seen = 0
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "node_modules")
        for f in sorted(files):
            seen += 1
            if f.endswith((".md", ".markdown")) and not f.startswith("."):
                count += 1
                if len(found) < PREVIEW_FILES:
                    found.append(os.path.relpath(os.path.join(root, f), folder))
        if seen > WALK_LIMIT:
            return found, count, True
    return found, count, False


class AddScreen(PickerScreen):
    BINDINGS = [Binding("ctrl+s", "add", "Add & index")]

    def __init__(self) -> None:
        super().__init__(id="add-screen")
        self.folder = Path.cwd()
        self.entries: list[str] = []
        self.name_typed = False  # a name typed by the user: no longer follows the folder
        self.auto_name = name_for(self.folder)
        self.last_report: dict[str, Any] | None = None

    def compose_fields(self) -> Iterable[Widget]:
        with Horizontal():
            yield Static("Folder", classes="label")
            yield Input(str(self.folder), placeholder="a folder of Markdown", id="folder")
        with Horizontal():
            yield Static("Name  ", classes="label")
            yield Input(name_for(self.folder), placeholder="workspace name", id="name")

    def compose_buttons(self) -> Iterable[Widget]:
        yield Button("Add & index ^S", id="add", variant="primary", compact=True)
        yield Button("Search ^G", id="to-search", compact=True)
        yield Button("Documents ^O", id="to-documents", compact=True)
        yield ProgressBar(total=None, show_eta=False, id="progress", classes="-idle")

    def on_mount(self) -> None:
        self.set_list_title("folders")
        self.go(self.folder)

    def go(self, folder: Path) -> None:
        """Show a folder: its subfolders in the list, its Markdown files in the preview."""
        self.folder = folder
        inp = self.query_one("#folder", Input)
        if Path(inp.value).expanduser() != folder:
            with inp.prevent(Input.Changed):
                inp.value = str(folder)
        if not self.name_typed:
            self.auto_name = name_for(folder)
            with self.query_one("#name", Input).prevent(Input.Changed):
                self.query_one("#name", Input).value = self.auto_name
        self.entries = subfolders(folder)
        self.listing.set_options([Text(e + "/", "bold" if e == ".." else "") for e in self.entries])
        self.set_list_title(f"folders in {folder}")
        self.set_status("Enter: into the folder · Ctrl+S: add it as a workspace and index it")
        self._count(folder)

    @work(thread=True, exclusive=True, group="walk")
    def _count(self, folder: Path) -> None:
        files, count, stopped = markdown_files(folder)
        self.app.call_from_thread(self._counted, folder, files, count, stopped)

    def _counted(self, folder: Path, files: list[str], count: int, stopped: bool) -> None:
        if folder != self.folder or not self.is_mounted:
            return  # another folder since, or the app closed while it counted
        more = "+" if stopped else ""
        files_ = "file" if count == 1 and not more else "files"
        self.query_one("#preview-title", Static).update(f"{count}{more} Markdown {files_} in {folder.name or folder}")
        body = Text("\n".join(files) + ("\n…" if count > len(files) else ""), render.DIM if not files else "")
        self.query_one("#preview", Static).update(body if files else Text("no Markdown files here", render.DIM))

    def show_preview(self, index: int | None) -> None:
        pass  # the preview is the folder's files, not the entry under the cursor

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "name":
            self.name_typed = event.value not in ("", self.auto_name)
        elif event.input.id == "folder":
            # an empty field waits for a path ("" is the working folder, which went back into the field
            # before what was typed next); a change already overtaken by another is not acted on
            if not event.value.strip() or event.value != event.input.value:
                return
            p = Path(event.value).expanduser()
            if p.is_dir() and p != self.folder:
                self.go(p.resolve())

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "name":
            self.action_add()
        elif event.input.id == "folder":
            self.query_one("#name", Input).focus()

    def activate(self, index: int) -> None:
        if 0 <= index < len(self.entries):
            target = self.folder.parent if self.entries[index] == ".." else self.folder / self.entries[index]
            self.go(target)
            self.listing.focus()

    def action_add(self) -> None:
        name = self.query_one("#name", Input).value.strip()
        folder = Path(self.query_one("#folder", Input).value).expanduser()
        if not folder.is_dir():
            self.set_status(f"{folder} is not a folder")
            return
        if not name:
            self.set_status("give the workspace a name")
            return
        bar = self.query_one("#progress", ProgressBar)
        bar.remove_class("-idle")
        bar.update(total=None, progress=0)
        self.set_status(f"adding {name} → {folder.resolve()} …")
        self._add(name, folder.resolve())

    @work(thread=True, exclusive=True, group="add")
    def _add(self, name: str, folder: Path) -> None:
        app = self.autodoc

        def progress(done: int, total: int, message: str) -> None:
            app.call_from_thread(self._progress, done, total, message)

        try:
            app.call("workspace.add", [name, str(folder)])
            report = app.call("workspace.index", [name], progress=progress)
        except Exception as e:
            app.call_from_thread(self._failed, getattr(e, "message", None) or str(e))
            return
        app.call_from_thread(self._added, name, report)

    def _progress(self, done: int, total: int, message: str) -> None:
        self.query_one("#progress", ProgressBar).update(total=max(total, 1), progress=done)
        self.set_status(f"indexing {done}/{total} {message}")

    def _failed(self, message: str) -> None:
        self.query_one("#progress", ProgressBar).add_class("-idle")
        self.set_status(Text(message, "bold"))
        self.notify(message, severity="error")

    def _added(self, name: str, report: dict[str, Any]) -> None:
        self.last_report = report
        bar = self.query_one("#progress", ProgressBar)
        bar.update(total=max(report.get("scanned") or 1, 1), progress=max(report.get("scanned") or 1, 1))
        emb = report.get("embedding") or {}
        added, chunks = report["added"], report["chunks"]
        text = (
            f"{name}: {added} file{'' if added == 1 else 's'}, {chunks} chunk{'' if chunks == 1 else 's'} in {report['seconds']} s"
            + (f"; {emb['reason']}" if emb.get("reason") else "")
        )
        self.set_status(text)
        self.notify(f"workspace {name} is ready: Ctrl+G to search it")
        self.autodoc.workspace = name
        self.autodoc.refresh_workspace(reload_list=True)
