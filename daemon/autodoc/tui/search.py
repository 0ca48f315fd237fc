"""The search picker: search.query as it is typed, with a box per stage.

Input: the query typed, the stage boxes, the facet and workspace chosen.
Output: the hits (the list), the hit under the cursor at its lines (the
preview, matched words marked, the hit's span shaded), and what the daemon
did with the stages (the list's title and the status line).

A search runs DEBOUNCE_S after the last key; a newer one supersedes it:
over the socket it is withdrawn with $/cancelRequest, and whatever answer
still arrives for it is dropped. A box's change searches again at once. The
app calls `refresh_soon` after a model, ranker or workspace transition, or
a saved file, and the open query runs again.

Runs on: the TUI's event loop; search.query on a worker thread.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from textual import work
from textual.binding import Binding
from textual.containers import Horizontal
from textual.content import Content
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import Button, Checkbox, Input, Select

from . import render, state
from .facets import FacetSelect, WorkspaceSelect
from .link import Cancelled, Pending
from .picker import PickerScreen

DEBOUNCE_S = 0.12
REFRESH_S = 0.15  # after a push, wait this long: several pushes come together
LIMIT = 30
STAGE_KEYS = {"lexical": "alt+l", "semantic": "alt+s", "rerank": "alt+r"}


class StageBox(Checkbox):
    """A stage's box: X when checked, blank when not, so it reads without colour (NO_COLOR)."""

    @property
    def _button(self) -> Content:
        self.BUTTON_INNER = "X" if self.value else " "
        return super()._button


class SearchScreen(PickerScreen):
    BINDINGS = [
        # priority: a terminal sends Alt+L as ESC l, which arrives as `alt+l` carrying the
        # character `l`, and the query field would type it before a plain binding is asked
        Binding("alt+l", "toggle_stage('lexical')", "Lexical", priority=True),
        Binding("alt+s", "toggle_stage('semantic')", "Semantic", priority=True),
        Binding("alt+r", "toggle_stage('rerank')", "Rerank", priority=True),
        Binding("ctrl+y", "copy_ref", "Copy ref"),
        Binding("ctrl+s", "quickfix", "Quickfix"),
        Binding("ctrl+f", "next_facet", "Facet"),
    ]

    def __init__(self) -> None:
        super().__init__(id="search-screen")
        self.query_text = ""
        self.seq = 0
        self.pending: Pending | None = None
        self.answer: dict[str, Any] | None = None
        self.error: str | None = None
        self.hits: list[dict[str, Any]] = []
        self.last_request: dict[str, Any] | None = None
        self.last_refresh: str | None = None
        self.stats = {"sent": 0, "cancelled": 0, "stale": 0, "refreshed": 0, "answered": 0}
        self._timer: Timer | None = None

    # -- layout ------------------------------------------------------------------------

    def compose_fields(self) -> Iterable[Widget]:
        with Horizontal():
            yield Input(placeholder='search: words, "phrases", prefix*, field:value', id="query")
            yield WorkspaceSelect()
        with Horizontal(id="stages"):
            yield StageBox("Lexical", True, id="stage-lexical", compact=True)
            yield StageBox("Semantic", True, id="stage-semantic", compact=True)
            yield StageBox("Rerank", True, id="stage-rerank", compact=True)
            yield FacetSelect()

    def compose_buttons(self) -> Iterable[Widget]:
        yield Button("Open ⏎", id="open", compact=True)
        yield Button("Copy ref ^Y", id="copy", compact=True)
        yield Button("Quickfix ^S", id="quickfix", compact=True)
        yield Button("Documents ^O", id="to-documents", compact=True)
        yield Button("Add workspace ^N", id="to-add", compact=True)

    def on_mount(self) -> None:
        self.set_list_title("hits")
        self.sync_boxes()
        self.show_state()
        self.focus_fields()

    def on_workspace(self) -> None:
        self.query_one(WorkspaceSelect).sync(self.autodoc)
        self.query_one(FacetSelect).sync(self.autodoc)
        self.sync_boxes()
        self.show_state()
        if self.query_text.strip() and (self.last_request or {}).get("workspace") != self.autodoc.workspace:
            self.run()  # another workspace: the open query there

    # -- the stage boxes -------------------------------------------------------------------

    def box(self, stage: str) -> Checkbox:
        return self.query_one(f"#stage-{stage}", Checkbox)

    def sync_boxes(self) -> None:
        """Show a box while its stage can run; show each as the user left it."""
        app = self.autodoc
        shown = state.effective(app.choice, app.available)
        for stage in state.ORDER:
            box = self.box(stage)
            box.display = app.available.shows(stage)
            with box.prevent(Checkbox.Changed):
                box.value = shown[stage]
        self.box("rerank").label = state.rerank_label(app.available)

    def on_checkbox_changed(self, event: Checkbox.Changed) -> None:
        stage = (event.checkbox.id or "").removeprefix("stage-")
        if stage not in state.ORDER:
            return
        event.stop()
        why = state.flip(self.autodoc.choice, self.autodoc.available, stage, event.value)
        if why:
            self.sync_boxes()  # put the box back
            self.notify(why, severity="warning")
            return
        self.autodoc.save_choice()
        self.sync_boxes()
        self.run()

    def action_toggle_stage(self, stage: str) -> None:
        box = self.box(stage)
        if not box.display:
            why = {"semantic": "no embedding model is in use", "rerank": "no ranker is configured"}.get(stage, "")
            self.notify(f"{stage} cannot run here: {why}", severity="warning")
            return
        box.value = not box.value  # → on_checkbox_changed

    # -- searching -------------------------------------------------------------------------

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id != "query":
            return
        self.query_text = event.value
        if self._timer is not None:
            self._timer.stop()
        self._timer = self.set_timer(DEBOUNCE_S, self.run)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "query" and self.hits:
            self.activate(self.listing.highlighted or 0)

    def on_select_changed(self, event: Select.Changed) -> None:
        if isinstance(event.select, FacetSelect):
            self.run()

    def request_opts(self) -> dict[str, Any]:
        app = self.autodoc
        opts: dict[str, Any] = {"limit": LIMIT, "stages": state.requested(app.choice, app.available)}
        facet = self.query_one(FacetSelect).facet()
        if facet:
            opts["facets"] = {facet[0]: [facet[1]]}
        return opts

    def run(self) -> None:
        """Search now for the query in the field, superseding any search on its way."""
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        self.seq += 1
        if self.pending is not None:
            self.pending.cancel()
            self.stats["cancelled"] += 1
            self.pending = None
        ws = self.autodoc.workspace
        query = self.query_text
        if not query.strip() or ws is None:
            self.answer, self.error, self.hits = None, None, []
            self.listing.clear_options()
            self.show_preview(None)
            self.show_state()
            return
        opts = self.request_opts()
        self.last_request = {"workspace": ws, "query": query, "opts": opts}
        self.stats["sent"] += 1
        self.pending = Pending()
        self._search(self.seq, self.pending, ws, query, opts)
        self.show_state()

    @work(thread=True, group="search")
    def _search(self, seq: int, pending: Pending, ws: str, query: str, opts: dict[str, Any]) -> None:
        try:
            answer = self.autodoc.call("search.query", [ws, query, opts], pending=pending)
        except Cancelled:
            return
        except Exception as e:  # the daemon's error (a bad facet, semantic alone while switching…)
            message = getattr(e, "message", None) or str(e)
            code = getattr(e, "code", None)
            self.app.call_from_thread(self._answered, seq, None, f"{message}" + (f" ({code})" if code else ""))
            return
        self.app.call_from_thread(self._answered, seq, answer, None)

    def _answered(self, seq: int, answer: dict[str, Any] | None, error: str | None) -> None:
        if seq != self.seq:
            self.stats["stale"] += 1  # a newer search was asked for meanwhile
            return
        self.pending = None
        self.stats["answered"] += 1
        same = answer is not None and self.answer is not None and answer.get("query") == self.answer.get("query")
        self.answer, self.error = answer, error
        self.hits = list(answer.get("hits") or []) if answer else []
        ol = self.listing
        keep = ol.highlighted if same else 0  # a refreshed answer keeps the cursor; a new query starts on top
        ol.set_options([render.hit_label(h) for h in self.hits])
        if self.hits:
            ol.highlighted = min(keep or 0, len(self.hits) - 1)
            self.show_preview(ol.highlighted)
        else:
            self.show_preview(None)
        self.show_state()

    def refresh_soon(self, why: str) -> None:
        """Search again shortly (a push from the daemon): the open query's answer may have changed."""
        if not self.query_text.strip():
            return

        def again() -> None:
            self.stats["refreshed"] += 1
            self.last_refresh = why
            self.run()

        if self._timer is not None:
            self._timer.stop()
        self._timer = self.set_timer(REFRESH_S, again)

    def show_state(self) -> None:
        app = self.autodoc
        title, status = state.describe(
            self.answer, app.choice, app.available, app.embedding, self.error, self.query_text
        )
        if self.pending is not None and title:
            title += " · searching…"
        ws = app.workspace or "no workspace"
        self.set_list_title(f"{ws} · {title}" if title else ws)
        if app.workspace is None and app.link is not None:
            status = "no workspaces yet: add one with Ctrl+N"
        elif self.answer is not None and not self.hits and state.never_indexed(app.status):
            status = f"{ws} holds no documents yet: its folder was never indexed (autodoc index {ws})"
        self.set_status(status)

    # -- the hit under the cursor ---------------------------------------------------------------

    def current(self) -> dict[str, Any] | None:
        i = self.listing.highlighted
        return self.hits[i] if i is not None and 0 <= i < len(self.hits) else None

    def preview_for(self, index: int) -> dict[str, Any] | None:
        if not 0 <= index < len(self.hits):
            return None
        h = self.hits[index]
        start, end = h.get("line_start") or 1, h.get("line_end") or h.get("line_start") or 1
        crumb = h.get("breadcrumb") or ""
        return {
            "workspace": h["workspace"],
            "path": h["path"],
            "line": start,
            "span": (start, end),
            "words": render.match_words(h, self.query_text),
            "generation": h.get("generation"),
            "title": f"{render.ref(h)}  {crumb}",
        }

    def activate(self, index: int) -> None:
        if 0 <= index < len(self.hits):
            h = self.hits[index]
            self.autodoc.open_in_editor(h["workspace"], h["path"], h.get("line_start") or 1)

    def action_copy_ref(self) -> None:
        h = self.current()
        if h is not None:
            self.autodoc.copy(render.ref(h))

    def action_quickfix(self) -> None:
        if self.hits:
            self.autodoc.write_quickfix(self.hits, self.hits[0]["workspace"])
        else:
            self.notify("no hits to send")

    def action_next_facet(self) -> None:
        self.query_one(FacetSelect).pick()

    def normal_key(self, key: str, event: Any) -> None:
        actions = {"y": self.action_copy_ref, "o": lambda: self.activate(self.listing.highlighted or 0)}
        if key in actions:
            event.stop()
            actions[key]()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        {
            "open": lambda: self.activate(self.listing.highlighted or 0),
            "copy": self.action_copy_ref,
            "quickfix": self.action_quickfix,
            "to-documents": lambda: self.autodoc.action_picker("documents"),
            "to-add": lambda: self.autodoc.action_picker("add"),
        }.get(event.button.id or "", lambda: None)()
