"""Issue 35: the live index follows the workspace's `markdown` option. A real daemon watches a
workspace whose rule takes in Middleman pages (*.html.md.erb) and .github/: saves there are
indexed live, a hidden folder the rule does not name stays unwatched, and a configure that drops
them takes their documents out and stops following them."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from autodoc_client import Client

pytestmark = pytest.mark.skipif(not Path("/proc/self/fdinfo").is_dir(), reason="needs Linux (inotify)")

NO_MODEL = {"embedding": {"provider": "none"}}
RULE = [".md", "*.html.md.erb", ".github/**/*.md"]
DEADLINE = 20


async def _changes(c: Client) -> list[tuple[str, str]]:
    note = await c.next_notification("changes.changed", timeout=DEADLINE)
    return [(ch["path"], ch["op"]) for ch in note.params["changes"]]


async def _until(c: Client, want: tuple[str, str]) -> list[tuple[str, str]]:
    got: list[tuple[str, str]] = []
    while want not in got:
        got += await _changes(c)
    return got


async def _watching(c: Client) -> None:
    with anyio.fail_after(DEADLINE):
        while "kb" not in (await c.call("server.info"))["watching"]:
            await anyio.sleep(0.02)


async def test_the_live_index_follows_the_markdown_option(short_tmp, daemon_factory):
    kb = short_tmp / "kb"
    for folder in ("source", ".github", ".hidden"):
        (kb / folder).mkdir(parents=True)
    (kb / "a.md").write_text("# A\n")
    store, sock = short_tmp / "s" / "a.db", short_tmp / "d.sock"
    daemon_factory(short_tmp, store=store, sock=sock, env={"AUTODOC_CHECK_RESULTS": "1"}, timeout=30)
    async with await Client.connect_socket(sock) as c:
        await c.call("workspace.add", {"name": "kb", "root": str(kb), "config": {**NO_MODEL, "markdown": RULE}})
        await c.call("workspace.index", ["kb"])
        await _watching(c)
        await c.call("changes.subscribe", ["kb"])

        (kb / "source" / "incident.html.md.erb").write_text("# Incident <%= x %>\n\nPage the rotation.\n")
        assert await _changes(c) == [("source/incident.html.md.erb", "add")]
        (kb / ".github" / "CONTRIBUTING.md").write_text("# Contributing\n")
        assert await _changes(c) == [(".github/CONTRIBUTING.md", "add")]
        (kb / ".hidden" / "no.md").write_text("# Not named by the rule\n")
        (kb / "b.md").write_text("# B\n")
        got = await _until(c, ("b.md", "add"))
        assert (".hidden/no.md", "add") not in got, got

        await c.call("workspace.configure", ["kb", {"markdown": [".md"]}])
        status = await c.call("workspace.status", ["kb"])
        assert status["files"]["indexed"] == 2  # a.md, b.md: the page and .github/ left with the rule
        assert status["files"]["left_out"]["by_extension"] == {".md.erb": 1}
        await anyio.sleep(0.5)  # the watcher re-walks its folders after a configure
        (kb / ".github" / "later.md").write_text("# Later\n")
        (kb / "source" / "more.html.md.erb").write_text("# More\n")
        (kb / "c.md").write_text("# C\n")
        got = await _until(c, ("c.md", "add"))
        assert all(p == "c.md" or op == "delete" for p, op in got), got
