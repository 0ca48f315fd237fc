"""What the pickers need of the app that hosts them, as a Protocol.

The screens (picker.py, search.py, documents.py, add.py) and the selects
(facets.py) are typed against `Host`, not against `AutodocApp`: the app
imports the screens, and nothing imports the app back, not even for types.
`AutodocApp` (app.py) is the one implementation.

Runs on: nothing (types only).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from . import state
from .link import Link, Pending, Progress


class Host(Protocol):
    """The app, as the pickers see it: its state, its one way to call, and what it does for them."""

    workspaces: list[dict[str, Any]]
    workspace: str | None
    status: dict[str, Any] | None  # the workspace's workspace.status
    facets: list[tuple[str, str, int]]
    choice: state.Choice
    available: state.Available
    embedding: state.Embedding
    link: Link | None

    def call(
        self, method: str, params: Any, *, pending: Pending | None = None, progress: Progress | None = None
    ) -> Any: ...

    def call_from_thread(self, callback: Callable[..., Any], *args: Any, **kwargs: Any) -> Any: ...

    def use_workspace(self, name: str) -> None: ...

    def refresh_workspace(self, reload_list: bool = False, rerun: str | None = None) -> Any: ...

    def action_picker(self, name: str) -> None: ...

    def save_choice(self) -> None: ...

    def open_in_editor(self, workspace: str, path: str, line: int) -> None: ...

    def copy(self, text: str) -> None: ...

    def write_quickfix(self, hits: list[dict[str, Any]], workspace: str) -> Path | None: ...
