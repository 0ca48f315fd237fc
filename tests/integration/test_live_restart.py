"""Nothing saved while the live index's watcher restarts is lost.

A folder that appears makes the watcher restart with it in the watch set: the old watcher is
stopped (watchfiles drops the events it held but had not yet handed over) and a new one made.
A save, a deletion or a new folder in a folder watched before, in that gap, got no event: it was
missing from the index until the next whole index. So was a folder made inside the new folder
before the new watcher ran (its later saves were never seen).

The gap lasts milliseconds, so the test makes its changes inside it on purpose, at one of its two
parts: while the batch that found the new folder is applied (the old watcher still runs, and holds
the events, then drops them when it stops), found by wrapping the Service's `stored_under`, which
that batch asks about the new folder; or between the two watchers, found by wrapping watchfiles'
`awatch`, whose second call (the restart) comes after the old watcher is gone and before the new
one exists. Everything else is real: the Service, its SQLite store, the LiveIndex and the watcher."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import anyio
import pytest
import watchfiles

from autodoc.config import Settings
from autodoc.index.live import LiveIndex
from autodoc.service import Service

DEADLINE = 10


@pytest.mark.parametrize("gap", ["held by the old watcher", "between the watchers"])
async def test_changes_made_while_the_watcher_restarts_are_indexed(gap, short_tmp, kb_copy, monkeypatch):
    old = kb_copy / "notes"
    (old / "doomed.md").write_text("# Doomed\n\nthe lugubrious axolotl\n")
    (old / "edited.md").write_text("# Edited\n\nthe first version\n")
    service = Service(Settings.from_env(store=short_tmp / "store.db"))
    try:
        service.workspace_add("kb", str(kb_copy), {"embedding": {"provider": "none"}})
        service.index("kb")
        fresh = kb_copy / "fresh"

        def in_the_gap() -> None:
            (old / "late.md").write_text("# Late\n\nthe crepuscular okapi\n")  # a new file
            (old / "edited.md").write_text("# Edited\n\nthe second version: a mellifluous gecko\n")
            (old / "doomed.md").unlink()
            (old / "later").mkdir()  # a folder in an old folder: its event is lost too
            (fresh / "inner").mkdir()  # a folder in the new folder, after its folders were listed
            (fresh / "early.md").write_text("# Early\n\nthe first draft\n")
            (fresh / "early.md").write_text("# Early\n\nthe redrafted wombat\n")  # made, then changed

        made: list[str] = []  # the gap's changes, once
        real_awatch, real_stored_under = watchfiles.awatch, service.stored_under

        def awatch(*paths, **kwargs):
            if gap == "between the watchers" and not made and fresh in map(Path, paths):
                in_the_gap()
                made.append(gap)
            return real_awatch(*paths, **kwargs)

        def stored_under(name, folders):
            if gap == "held by the old watcher" and not made and folders == ["fresh"]:
                in_the_gap()
                made.append(gap)
            return real_stored_under(name, folders)

        monkeypatch.setattr(watchfiles, "awatch", awatch)
        service.stored_under = stored_under

        async def read(fn, *a, **k):
            return await anyio.to_thread.run_sync(partial(fn, *a, **k))

        async def hits(text: str) -> list[str]:
            found = await read(service.search, "kb", text, {"stages": ["lexical"]})
            return sorted({h["path"] for h in found["hits"]})

        async def state() -> dict[str, bool]:
            return {
                "new file": await hits("crepuscular okapi") == ["notes/late.md"],
                "edited file": await hits("mellifluous gecko") == ["notes/edited.md"],
                "deleted file": "notes/doomed.md" not in await read(service.stored_under, "kb", ["notes"]),
                "file made and changed in the new folder": await hits("redrafted wombat") == ["fresh/early.md"],
                "save in a folder made in an old folder": await hits("sagacious quokka") == ["notes/later/q.md"],
                "save in a folder made in the new folder": await hits("ebullient numbat") == ["fresh/inner/n.md"],
            }

        watching: list[list[str]] = []
        live = LiveIndex(service, read=read, write=read, set_watching=watching.append)
        async with anyio.create_task_group() as tg:
            tg.start_soon(live.run)
            with anyio.fail_after(DEADLINE):
                while not (watching and watching[-1] == ["kb"]):
                    await anyio.sleep(0.01)
                await anyio.sleep(0.3)  # the catch-up index at start has run
                fresh.mkdir()
                while len(watching) < 2:  # the watcher restarted, the gap's changes made
                    await anyio.sleep(0.01)
            await anyio.sleep(0.5)  # the new watcher is up: saves in the two folders made in the gap
            (old / "later" / "q.md").write_text("# Q\n\nthe sagacious quokka\n")
            (fresh / "inner" / "n.md").write_text("# N\n\nthe ebullient numbat\n")
            with anyio.move_on_after(DEADLINE):
                while not all((now := await state()).values()):
                    await anyio.sleep(0.05)
            live.stop()
            tg.cancel_scope.cancel()
        assert made == [gap]
        assert all(now.values()), [k for k, v in now.items() if not v]  # what is missing
    finally:
        service.close()


def test_the_check_after_a_restart_reads_again_only_what_changed(short_tmp, kb_copy, monkeypatch):
    """What the check hands to the index, of every folder the watcher had: the files changed, made
    or gone, and those a whole index reads every time (a skipped file: it is no document) - not
    every file (that would cost a restart a whole index's reading)."""
    import autodoc.index.job as job
    from autodoc.ingest.scan import scan_folders

    monkeypatch.setattr(job, "RACY_NS", 0)  # the copy's stats are trusted at once, as an old tree's are
    service = Service(Settings.from_env(store=short_tmp / "store.db"))
    try:
        service.workspace_add("kb", str(kb_copy), {"embedding": {"provider": "none"}})
        assert service.stale_in("kb", [""]) == []  # not indexed yet: its first index reads every file
        skipped = sorted(s["path"] for s in service.index("kb")["skipped"] if (kb_copy / s["path"]).exists())
        folders = ["" if f == kb_copy else f.relative_to(kb_copy).as_posix() for f in scan_folders(kb_copy)]
        assert service.stale_in("kb", folders) == skipped
        stored = service.stored_under("kb", ["adrs"])
        (kb_copy / stored[0]).write_text("# Changed\n")
        (kb_copy / stored[1]).unlink()
        (kb_copy / "adrs" / "9999-new.md").write_text("# New\n")
        (kb_copy / "adrs" / ".hidden.md").write_text("# Hidden\n")  # the scan never reads it
        changed = sorted([stored[0], stored[1], "adrs/9999-new.md"])
        assert service.stale_in("kb", folders) == sorted(changed + skipped)
        assert service.stale_in("kb", ["notes"]) == [p for p in skipped if p.startswith("notes/")]
    finally:
        service.close()
