"""The "open a document" picker: fuzzy over titles and paths, with facet filters.

Input: what is typed (`field:value` words filter, the rest is the fuzzy
pattern), the facet chooser, the workspace. Output: the matching documents,
best first, the one under the cursor previewed from its top; Enter opens it
in $EDITOR.

The daemon matches (document.find: every document's title and path, however
many there are, or every one the facets admit), a moment after each key.

Runs on: the TUI's event loop; the searches on a worker thread.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from textual import work
from textual.binding import Binding
from textual.containers import Horizontal
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import Button, Input, Select

from . import render
from .facets import FacetSelect, WorkspaceSelect
from .link import Cancelled, Pending
from .picker import PickerScreen

FETCH_DEBOUNCE_S = 0.08
SHOWN = 200  # the most documents listed (document.find's answer)
_FACET = re.compile(r"^-?[\w.]+:.")


def split_filter(text: str) -> tuple[str, str]:
    """(facet words, fuzzy pattern)."""
    facets: list[str] = []
    words: list[str] = []
    for w in text.split():
        (facets if _FACET.match(w) else words).append(w)
    return " ".join(facets), " ".join(words)


class DocumentScreen(PickerScreen):
    BINDINGS = [
        Binding("ctrl+y", "copy_path", "Copy path"),
        Binding("ctrl+f", "next_facet", "Facet"),
    ]

    def __init__(self) -> None:
        super().__init__(id="documents-screen")
        self.docs: list[dict[str, Any]] = []
        self.got: dict[str, Any] = {"documents": [], "matched": 0, "total": 0, "facets": ""}
        self.shown: list[dict[str, Any]] = []
        self.fetched_for: tuple[str | None, str, str] | None = None
        self.pending: Pending | None = None
        self.seq = 0
        self._timer: Timer | None = None

    def compose_fields(self) -> Iterable[Widget]:
        with Horizontal():
            yield Input(placeholder="fuzzy: title or path; field:value filters", id="filter")
            yield WorkspaceSelect()
        with Horizontal():
            yield FacetSelect()

    def compose_buttons(self) -> Iterable[Widget]:
        yield Button("Open ⏎", id="open", compact=True)
        yield Button("Copy path ^Y", id="copy", compact=True)
        yield Button("Search ^G", id="to-search", compact=True)
        yield Button("Add workspace ^N", id="to-add", compact=True)

    def on_mount(self) -> None:
        self.set_list_title("documents")
        self.on_workspace()

    def on_workspace(self) -> None:
        self.query_one(WorkspaceSelect).sync(self.autodoc)
        self.query_one(FacetSelect).sync(self.autodoc)
        self.fetch()

    def filter_text(self) -> str:
        return self.query_one("#filter", Input).value

    def on_input_changed(self, event: Input.Changed) -> None:
        if self._timer is not None:
            self._timer.stop()
        self._timer = self.set_timer(FETCH_DEBOUNCE_S, self.fetch)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if self.shown:
            self.activate(self.listing.highlighted or 0)

    def on_select_changed(self, event: Select.Changed) -> None:
        if isinstance(event.select, FacetSelect):
            self.fetch()

    def refresh_soon(self) -> None:
        """A file changed: read the list again."""
        self.fetched_for = None
        if self.is_mounted:
            self.fetch()

    def fetch(self) -> None:
        ws = self.autodoc.workspace
        if ws is None or self.autodoc.link is None:
            return
        facets, pattern = split_filter(self.filter_text())
        chosen = self.query_one(FacetSelect).facet()
        if chosen:
            facets = f"{facets} {chosen[0]}:{chosen[1]}".strip()
        key = (ws, facets, pattern)
        if key == self.fetched_for:
            self.show()
            return
        self.fetched_for = key
        if self.pending is not None:
            self.pending.cancel()
        self.seq += 1
        self.pending = Pending()
        self._fetch(self.seq, self.pending, ws, facets, pattern)

    @work(thread=True, group="documents")
    def _fetch(self, seq: int, pending: Pending, ws: str, facets: str, pattern: str) -> None:
        try:
            found = self.autodoc.call("document.find", [ws, pattern, SHOWN, facets], pending=pending)
            docs = [{**d, "workspace": ws} for d in found["documents"]]
            got = {
                "documents": docs,
                "matched": found["matched"],
                "total": found["total"],
                "facets": facets,
                "pattern": pattern,
            }
        except Cancelled:
            return
        except Exception as e:
            self.app.call_from_thread(self._fetched, seq, None, getattr(e, "message", None) or str(e))
            return
        self.app.call_from_thread(self._fetched, seq, got, None)

    def _fetched(self, seq: int, got: dict[str, Any] | None, error: str | None) -> None:
        if seq != self.seq:
            return
        self.pending = None
        self.got = got or {"documents": [], "matched": 0, "total": 0, "facets": ""}
        self.docs = self.got["documents"]
        self.show(error)

    def show(self, error: str | None = None) -> None:
        """The daemon's answer, as it ranked it."""
        got = self.got
        self.shown = self.docs
        matched, total = got["matched"], got["total"]
        ol = self.listing
        ol.set_options([render.doc_label(d) for d in self.shown])
        ws = self.autodoc.workspace or "no workspace"
        more = f", the best {len(self.shown)} shown" if matched > len(self.shown) else ""
        with_facet = " with the facet" if got["facets"] else ""
        self.set_list_title(f"{ws} · {matched} of {total} documents{with_facet}{more}")
        self.set_status(error or "Enter opens in $EDITOR · Ctrl+F facet · Ctrl+T workspace")
        if self.shown:
            ol.highlighted = 0
            self.show_preview(0)
        else:
            self.show_preview(None)

    def preview_for(self, index: int) -> dict[str, Any] | None:
        if not 0 <= index < len(self.shown):
            return None
        d = self.shown[index]
        _, pattern = split_filter(self.filter_text())
        return {
            "workspace": d["workspace"],
            "path": d["path"],
            "line": 1,
            "span": None,
            "words": [w.lower() for w in pattern.split() if len(w) >= 3],
            "generation": d.get("generation"),
            "title": f"{d['path']}  {d.get('title') or ''}",
        }

    def activate(self, index: int) -> None:
        if 0 <= index < len(self.shown):
            d = self.shown[index]
            self.autodoc.open_in_editor(d["workspace"], d["path"], 1)

    def action_copy_path(self) -> None:
        i = self.listing.highlighted
        if i is not None and 0 <= i < len(self.shown):
            self.autodoc.copy(self.shown[i]["path"])

    def action_next_facet(self) -> None:
        self.query_one(FacetSelect).pick()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        {
            "open": lambda: self.activate(self.listing.highlighted or 0),
            "copy": self.action_copy_path,
            "to-search": lambda: self.autodoc.action_picker("search"),
            "to-add": lambda: self.autodoc.action_picker("add"),
        }.get(event.button.id or "", lambda: None)()
