"""Regenerate the SVG screenshots of `autodoc tui`'s three pickers (`make screenshots`).

A throwaway store over a copy of tests/corpora/kb, indexed in-process with the
bundled embedding model (no daemon, no network), then the app driven headless
by Textual's Pilot; each picker saved with `save_screenshot` beside this file.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORPUS = HERE.parents[1] / "tests" / "corpora" / "kb"
SIZE = (120, 34)


async def until(pilot, cond, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise SystemExit(f"screenshots: gave up waiting for {what}")
        await pilot.pause(0.05)


async def shoot(base: Path) -> None:
    from autodoc.config import Settings
    from autodoc.connect import call
    from autodoc.tui.app import AutodocApp

    notes = base / "notes"
    shutil.copytree(CORPUS, notes, symlinks=True)
    settings = Settings(store=base / "store" / "autodoc.db", socket=base / "run" / "autodoc.sock")
    call(settings, "workspace.add", ["kb", str(notes)])
    call(settings, "workspace.index", ["kb"])  # in-process: embeds before it answers
    os.chdir(base)

    app = AutodocApp(settings, workspace="kb", start_daemon=False, state_file=base / "state" / "tui.json")
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.workspace is not None and app.pickers["search"].is_mounted, "the workspace")
        s = app.pickers["search"]
        s.query_one("#query").value = "lease recovery after a crash"
        await until(pilot, lambda: s.answer is not None and s.pending is None, "the search")
        await pilot.press("down")
        await until(pilot, lambda: (s.preview_shown or {}).get("path") == s.hits[1]["path"], "the preview")
        await pilot.pause(0.3)
        app.save_screenshot("search.svg", str(HERE))

        await pilot.press("ctrl+o")
        d = app.pickers["documents"]
        await until(pilot, lambda: len(d.docs) > 0, "the documents")
        d.query_one("#filter").value = "adr type:adr"
        await until(pilot, lambda: d.shown and all("adrs/" in x["path"] for x in d.shown), "the filter")
        await until(pilot, lambda: d.preview_shown is not None, "the preview")
        await pilot.pause(0.3)
        app.save_screenshot("documents.svg", str(HERE))

        await pilot.press("ctrl+n")
        a = app.pickers["add"]
        a.query_one("#folder").value = str(notes)
        await until(pilot, lambda: a.folder == notes, "the folder")
        await pilot.press("ctrl+s")
        await until(pilot, lambda: a.last_report is not None, "the index run")
        await pilot.pause(0.3)
        app.save_screenshot("add-workspace.svg", str(HERE))


def main() -> int:
    base = Path(tempfile.gettempdir()) / "autodoc-screens"  # a fixed path: the same pictures each run
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir()
    try:
        asyncio.run(shoot(base))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    for name in ("search.svg", "documents.svg", "add-workspace.svg"):
        print(HERE / name, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
