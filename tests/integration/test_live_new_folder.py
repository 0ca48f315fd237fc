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
