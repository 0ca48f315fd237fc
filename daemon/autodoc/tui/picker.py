"""What the three pickers share: one layout (the fields over the list on the
left, the file under the cursor on the right, the buttons beneath), moving
through the list from the fields, a preview read on a worker thread, and a
normal-mode keymap on the list (j/k, `SPC /` to search, `/` or `i` back to
the fields).

A picker fills `compose_fields`, `compose_buttons` and `preview_for`; the
app calls `on_workspace` when the workspace or what it can do changes.

Runs on: the TUI's event loop; document reads on Textual's worker threads.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, cast

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer, Input, OptionList, Static

from . import render
from .link import Cancelled

if TYPE_CHECKING:
    from .host import Host

PREVIEW_BEFORE = 3  # lines shown above a hit
PREVIEW_LINES = 120  # read at most this much of a document for a preview (it renders whole)


class PickerScreen(Screen):
    """One picker: fields, list, preview, buttons."""

    BINDINGS = [
        Binding("down", "move(1)", "Down", show=False),
        Binding("up", "move(-1)", "Up", show=False),
        Binding("pagedown", "move(10)", "Page down", show=False),
        Binding("pageup", "move(-10)", "Page up", show=False),
        Binding("escape", "normal_mode", "List", show=False),
    ]
    title_text = ""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self._leader = False  # SPC pressed on the list: `/` next opens the search
        self._docs: dict[tuple[str, str], tuple[int, str]] = {}  # (ws, path) -> (generation, text)

    @property
    def autodoc(self) -> Host:
        return cast("Host", self.app)

    # -- layout ----------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        with Horizontal(id="body"):
            with Vertical(id="left"):
                with Vertical(id="fields"):
                    yield from self.compose_fields()
                yield Static("", id="status")
                yield OptionList(id="list")
            with Vertical(id="right"):
                yield Static("", id="preview-title")
                with VerticalScroll(id="preview-scroll"):
                    yield Static("", id="preview")
        with Horizontal(id="buttons"):
            yield from self.compose_buttons()
        yield Footer()

    def compose_fields(self) -> Iterable[Widget]:
        return ()

    def compose_buttons(self) -> Iterable[Widget]:
        return ()

    @property
    def listing(self) -> OptionList:
        return self.query_one("#list", OptionList)

    def set_status(self, text: str | Text) -> None:
        self.query_one("#status", Static).update(text)

    def set_list_title(self, text: str) -> None:
        self.listing.border_title = text

    def on_workspace(self) -> None:
        """The workspace changed, or what it can do."""

    # -- the list --------------------------------------------------------------------

    def action_move(self, by: int) -> None:
        ol = self.listing
        if not ol.option_count:
            return
        cur = ol.highlighted if ol.highlighted is not None else -1
        ol.highlighted = max(0, min(ol.option_count - 1, cur + by))

    def action_normal_mode(self) -> None:
        self.listing.focus()

    def focus_fields(self) -> None:
        first = next(iter(self.query("#fields Input")), None)
        if first is not None:
            first.focus()

    def on_key(self, event: Any) -> None:
        if not self.listing.has_focus:
            self._leader = False
            return
        key = event.key
        if self._leader:
            self._leader = False
            if key in ("slash", "/"):
                event.stop()
                self.autodoc.action_picker("search")
            return
        if key == "space":
            self._leader = True
            event.stop()
        elif key == "j":
            self.action_move(1)
            event.stop()
        elif key == "k":
            self.action_move(-1)
            event.stop()
        elif key in ("slash", "i"):
            self.focus_fields()
            event.stop()
        elif key == "q":
            event.stop()
            self.app.exit()
        else:
            self.normal_key(key, event)

    def normal_key(self, key: str, event: Any) -> None:
        """A picker's own normal-mode keys."""

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        self.show_preview(event.option_index)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.activate(event.option_index)

    def activate(self, index: int) -> None:
        """Enter on an item (or a double click)."""

    # -- the preview -----------------------------------------------------------------

    def preview_for(self, index: int) -> dict[str, Any] | None:
        """What to preview for an item: {workspace, path, line, span, words, title}, or None."""
        return None

    def show_preview(self, index: int | None) -> None:
        spec = self.preview_for(index) if index is not None and index >= 0 else None
        if spec is None:
            self.query_one("#preview-title", Static).update("")
            self.query_one("#preview", Static).update("")
            return
        self.query_one("#preview-title", Static).update(Text(spec["title"], no_wrap=True, overflow="ellipsis"))
        self._load_preview(spec)

    @work(thread=True, exclusive=True, group="preview")
    def _load_preview(self, spec: dict[str, Any]) -> None:
        key = (spec["workspace"], spec["path"])
        cached = self._docs.get(key)
        if cached is None or spec.get("generation") not in (None, cached[0]):
            try:
                out = self.autodoc.call("document.read", [spec["workspace"], spec["path"]])
            except Cancelled:
                return
            except Exception as e:  # a file gone since the answer: say so in the pane
                self.app.call_from_thread(self._put_preview, spec, Text(f"cannot read {spec['path']}: {e}"))
                return
            cached = (out["generation"], out["text"])
            if len(self._docs) > 32:
                self._docs.pop(next(iter(self._docs)))
            self._docs[key] = cached
        lines = cached[1].split("\n")
        first = max(1, spec["line"] - PREVIEW_BEFORE)
        body = "\n".join(lines[first - 1 : first - 1 + PREVIEW_LINES])
        text = render.preview(body, first, spec.get("span"), spec.get("words") or [])
        self.app.call_from_thread(self._put_preview, spec, text)

    def _put_preview(self, spec: dict[str, Any], text: Text) -> None:
        if not self.is_mounted:
            return
        try:
            self.query_one("#preview", Static).update(text)
            self.query_one("#preview-scroll", VerticalScroll).scroll_home(animate=False)
        except NoMatches:  # a read that came back while the app closed (its panes already gone)
            return
        self.preview_shown = spec  # what the pane shows now (tests, screenshots)

    preview_shown: dict[str, Any] | None = None

    def first_input(self) -> Input | None:
        return next(iter(self.query("#fields Input").results(Input)), None)
