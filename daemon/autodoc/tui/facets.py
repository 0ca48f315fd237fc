"""The workspace and facet choosers every picker carries (mouse or keyboard:
Ctrl+T cycles the workspace, Ctrl+F the facet), and where the facet values
come from.

A facet is one `field: value` of the workspace's frontmatter (tag, and the
schema's fields; without a schema, type and status when documents have
them), counted by a facet-only search.query (`facet_counts`).

Runs on: the TUI's event loop; `load_facets` on a worker thread.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from textual.widgets import Select

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

    def cycle(self) -> None:
        """The next value (after the last: none)."""
        keys = [f"{f}:{v}" for f, v, _ in self.values]
        if not keys:
            self.app.notify("no facets in this workspace")
            return
        cur = self.value if isinstance(self.value, str) else None
        nxt = (
            keys[keys.index(cur) + 1]
            if cur in keys and keys.index(cur) + 1 < len(keys)
            else (None if cur in keys else keys[0])
        )
        if nxt is None:
            self.clear()
        else:
            self.value = nxt
