"""The workspace and facet choosers every picker carries (mouse or keyboard:
Ctrl+T cycles the workspace, Ctrl+F picks the facet), and where the facet values
come from.

Ctrl+F opens `FacetPicker`: every value with its documents, narrowed as a
filter is typed (the Select only jumps to a match).

A facet is one `field: value` of the workspace's frontmatter (tag, and the
schema's fields; without a schema, type and status when documents have
them), counted by a facet-only search.query (`facet_counts`).

Runs on: the TUI's event loop; `load_facets` on a worker thread.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Select
from textual.widgets.option_list import Option

from ..errors import InvalidParams

if TYPE_CHECKING:
    from .host import Host

GUESSED_FIELDS = ("type", "status")  # without a schema: asked for one by one, kept when some document has them
PER_FIELD = 25


def load_facets(call: Callable[..., Any], workspace: str, status: dict[str, Any] | None) -> list[tuple[str, str, int]]:
    """[(field, value, documents)], the fields in order, each field's values most used first."""
    schema = (status or {}).get("schema") or None
    fields = ["tag", *sorted((schema or {}).get("fields") or {})] if schema else ["tag", *GUESSED_FIELDS]
    counts: dict[str, dict[str, int]] = {}
    try:
        counts = call("search.query", [workspace, "", {"limit": 1, "facet_counts": fields[:20]}])["facet_counts"]
    except InvalidParams:  # a guessed field no document has: keep those that are
        for f in fields:
            try:
                counts.update(call("search.query", [workspace, "", {"limit": 1, "facet_counts": [f]}])["facet_counts"])
            except InvalidParams:
                continue
    out: list[tuple[str, str, int]] = []
    for f in fields:
        values = sorted((counts.get(f) or {}).items(), key=lambda kv: (-kv[1], kv[0]))
        out.extend((f, str(v), n) for v, n in values[:PER_FIELD])
    return out


class WorkspaceSelect(Select):
    """The workspace in use (all pickers share it)."""

    def __init__(self) -> None:
        super().__init__([], prompt="workspace", allow_blank=True, classes="workspace")

    def sync(self, app: Host) -> None:
        names = [w["name"] for w in app.workspaces]
        with self.prevent(Select.Changed):
            self.set_options([(n, n) for n in names])
            if app.workspace in names:
                self.value = app.workspace

    def _on_select_changed(self, event: Select.Changed) -> None:
        if isinstance(event.value, str):
            cast("Host", self.app).use_workspace(event.value)


class FacetSelect(Select):
    """One `field: value` filter (blank: none)."""

    def __init__(self) -> None:
        super().__init__([], prompt="any facet", allow_blank=True, compact=True, classes="facet")
        self.values: list[tuple[str, str, int]] = []

    def sync(self, app: Host) -> None:
        if app.facets == self.values:
            return
        keep = self.value
        self.values = list(app.facets)
        with self.prevent(Select.Changed):
            self.set_options([(f"{f}:{v} ({n})", f"{f}:{v}") for f, v, n in self.values])
            if keep in {f"{f}:{v}" for f, v, _ in self.values}:
                self.value = keep

    def facet(self) -> tuple[str, str] | None:
        v = self.value
        if not isinstance(v, str):
            return None
        field, _, value = v.partition(":")
        return field, value

    def pick(self) -> None:
        """Ctrl+F: choose among every value, with its count, narrowed by what is typed."""
        if not self.values:
            self.app.notify("no facets in this workspace")
            return
        current = self.value if isinstance(self.value, str) else None

        def chosen(key: str | None) -> None:
            if key is None:
                return  # Esc: as it was
            if key == NONE:
                self.clear()
            else:
                self.value = key

        self.app.push_screen(FacetPicker(self.values, current), chosen)


NONE = "\x00none"  # the picker's "no facet" entry


def facet_matches(values: list[tuple[str, str, int]], typed: str) -> list[tuple[str, str, int]]:
    """The values whose `field:value` holds every typed word (case-insensitive), in their order."""
    words = typed.lower().split()
    return [(f, v, n) for f, v, n in values if all(w in f"{f}:{v}".lower() for w in words)]


class FacetPicker(ModalScreen[str | None]):
    """Every facet value with its documents; typing narrows the list; Enter chooses, Esc cancels."""

    BINDINGS = [
        Binding("escape", "dismiss_none", "Cancel", priority=True),
        Binding("down", "move(1)", show=False, priority=True),
        Binding("up", "move(-1)", show=False, priority=True),
    ]
    DEFAULT_CSS = """
    FacetPicker { align: center middle; }
    FacetPicker > Vertical { width: 60; max-width: 90%; height: 70%; border: round $accent; background: $surface; }
    FacetPicker OptionList { height: 1fr; }
    """

    def __init__(self, values: list[tuple[str, str, int]], current: str | None) -> None:
        super().__init__()
        self.values = values
        self.current = current
        self.shown: list[str] = []

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Input(placeholder="filter: field or value", id="facet-filter")
            yield OptionList(id="facet-list")

    def on_mount(self) -> None:
        self.query_one(Vertical).border_title = "facet (documents)"
        self.fill("")
        self.query_one("#facet-filter", Input).focus()

    def fill(self, typed: str) -> None:
        found = facet_matches(self.values, typed)
        ol = self.query_one("#facet-list", OptionList)
        self.shown = [f"{f}:{v}" for f, v, _ in found] + ([NONE] if self.current else [])
        ol.set_options(
            [Option(f"{f}:{v}  ({n})") for f, v, n in found] + ([Option("no facet")] if self.current else [])
        )
        self.query_one(Vertical).border_subtitle = f"{len(found)} of {len(self.values)}"
        if self.shown:
            ol.highlighted = self.shown.index(self.current) if self.current in self.shown else 0

    def on_input_changed(self, event: Input.Changed) -> None:
        self.fill(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        i = self.query_one("#facet-list", OptionList).highlighted
        if i is not None and 0 <= i < len(self.shown):
            self.dismiss(self.shown[i])

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.shown[event.option_index])

    def action_move(self, by: int) -> None:
        ol = self.query_one("#facet-list", OptionList)
        if ol.option_count:
            ol.highlighted = max(0, min(ol.option_count - 1, (ol.highlighted or 0) + by))

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
