"""A file saved in a folder made after the watcher started answers without a
whole-workspace index (issue 19: at 1M chunks that index made the first save
in a new folder searchable after 2.8 s).

The live index runs in-process on a real Service, store and watcher; the
Service's whole-workspace `index` is wrapped to count its calls (a spy: the
real method still runs)."""

from __future__ import annotations

from functools import partial

import anyio

from autodoc.config import Settings
from autodoc.index.live import LiveIndex
from autodoc.service import Service

DEADLINE = 20


async def test_a_new_folders_file_is_indexed_by_itself(short_tmp, kb_copy):
    service = Service(Settings.from_env(store=short_tmp / "store.db"))
    try:
        service.workspace_add("kb", str(kb_copy), {"embedding": {"provider": "none"}})
        service.index("kb")
        whole: list[str] = []
        real_index = service.index

        def index(name, *args, **kwargs):
            whole.append(name)
            return real_index(name, *args, **kwargs)

        service.index = index
        writer = anyio.CapacityLimiter(1)

        async def read(fn, *a, **k):
            return await anyio.to_thread.run_sync(partial(fn, *a, **k))

        async def write(fn, *a, **k):
            async with writer:
                return await anyio.to_thread.run_sync(partial(fn, *a, **k))

        watching: list[list[str]] = []
        live = LiveIndex(service, read=read, write=write, set_watching=watching.append)
        async with anyio.create_task_group() as tg:
            tg.start_soon(live.run)
            with anyio.fail_after(DEADLINE):
                while not (watching and watching[-1] == ["kb"] and whole == ["kb"]):  # watching, caught up
                    await anyio.sleep(0.01)
                (kb_copy / "fresh" / "deeper").mkdir(parents=True)
                (kb_copy / "fresh" / "deeper" / "note.md").write_text("# Note\n\nthe quixotic marmoset\n")
                while not (await read(service.search, "kb", "quixotic marmoset", {"stages": ["lexical"]}))["hits"]:
                    await anyio.sleep(0.01)
                # the watcher comes back with the new folders watched, and their files indexed again
                while len(watching) < 2 or watching[-1] != ["kb"]:
                    await anyio.sleep(0.01)
                (kb_copy / "fresh" / "deeper" / "second.md").write_text("# Second\n\nthe laconic pangolin\n")
                while not (await read(service.search, "kb", "laconic pangolin", {"stages": ["lexical"]}))["hits"]:
                    await anyio.sleep(0.01)
            assert whole == ["kb"], whole  # the catch-up at start only
            live.stop()
            tg.cancel_scope.cancel()
    finally:
        service.close()


async def test_a_folder_replaced_by_an_empty_one_of_its_name_leaves_the_store(short_tmp, kb_copy):
    """A folder moved out of the root and another made under its name at once: the watcher's batch
    holds one event, the name, now a folder again; its files had no event of their own. They were
    left in the store until the next whole index (bench.reliability generative, ~1 sequence in 200)."""
    service = Service(Settings.from_env(store=short_tmp / "store.db"))
    try:
        folder = kb_copy / "gone-soon"
        folder.mkdir()
        (folder / "note.md").write_text("# Note\n\nthe perspicacious tapir\n")
        service.workspace_add("kb", str(kb_copy), {"embedding": {"provider": "none"}})
        service.index("kb")

        async def read(fn, *a, **k):
            return await anyio.to_thread.run_sync(partial(fn, *a, **k))

        async def found() -> bool:
            return bool((await read(service.search, "kb", "perspicacious tapir", {"stages": ["lexical"]}))["hits"])

        watching: list[list[str]] = []
        live = LiveIndex(service, read=read, write=read, set_watching=watching.append)
        async with anyio.create_task_group() as tg:
            tg.start_soon(live.run)
            with anyio.fail_after(DEADLINE):
                while not (watching and watching[-1] == ["kb"]):
                    await anyio.sleep(0.01)
                await anyio.sleep(0.3)  # the catch-up index at start has run
                assert await found()
                folder.rename(short_tmp / "elsewhere")
                folder.mkdir()
                while await found():
                    await anyio.sleep(0.05)
            assert "gone-soon/note.md" not in service.stored_under("kb", ["gone-soon"])
            live.stop()
            tg.cancel_scope.cancel()
    finally:
        service.close()
