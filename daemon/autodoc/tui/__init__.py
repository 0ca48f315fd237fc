"""`autodoc tui`: a terminal app with the spec's three pickers — search (with
live stage boxes), open a document, add a workspace — over the daemon's
socket (started on demand) or a Service in this process (connect.py).

Textual is imported only here and below, so other commands never pay for it.
While the app owns the terminal, logs go to a file beside its state
(`$XDG_STATE_HOME/autodoc/tui.log`), not to stderr, which would tear the screen.

Runs on: the main thread (Textual's event loop); RPC calls on its worker threads.
"""

from __future__ import annotations

import logging
from pathlib import Path

from ..config import Settings


def run(settings: Settings, *, workspace: str | None = None, start_daemon: bool = True) -> int:
    from .app import AutodocApp
    from .state import state_path

    state_file = state_path()
    _log_to_file(state_file.parent / "tui.log")
    app = AutodocApp(settings, workspace=workspace, start_daemon=start_daemon, state_file=state_file)
    app.run()
    return app.return_code or 0


def _log_to_file(path: Path) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handler: logging.Handler = logging.FileHandler(path, encoding="utf-8")
    except OSError:
        handler = logging.NullHandler()
    from ..config.logs import FORMAT

    handler.setFormatter(logging.Formatter(FORMAT))
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    root.addHandler(handler)
    if root.level == logging.NOTSET or root.level > logging.WARNING:
        root.setLevel(logging.WARNING)
