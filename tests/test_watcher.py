"""Issue 16: the live index's watcher stays inside its root and survives any file name.

A real daemon (`autodoc serve --socket`) watches a workspace whose root holds a
symlink to a folder tree outside it (standing in for a link to /usr). The
inotify watches the daemon holds are read from /proc/<pid>/fdinfo (one
`inotify wd:` line per watch, with the watched folder's inode): every watched
inode must be a folder the scanner walks, none the link's target. Files saved
outside through the link are never indexed; files in folders created or
renamed after the watcher started are; a file name that is not valid UTF-8
leaves the watcher running.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from autodoc.ingest.scan import scan_folders
from autodoc_client import Client
from helpers.nvim_daemon import wait_listening

pytestmark = pytest.mark.skipif(not Path("/proc/self/fdinfo").is_dir(), reason="needs Linux /proc (inotify)")

NO_MODEL = {"embedding": {"provider": "none"}}
OUTSIDE_FOLDERS = 40
DEADLINE = 20


def inotify_inodes(pid: int) -> list[int]:
    """The inode of every folder the process has an inotify watch on."""
    inodes: list[int] = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") != "anon_inode:inotify":
                continue
            info = Path(f"/proc/{pid}/fdinfo/{fd}").read_text()
        except OSError:
            continue
        inodes += [int(m.group(1), 16) for m in re.finditer(r"^inotify wd:\S+ ino:([0-9a-f]+)", info, re.M)]
    return inodes


async def _watching(c: Client) -> bool:
    return "kb" in (await c.call("server.info"))["watching"]


async def _wait(predicate, what: str) -> None:
    with anyio.fail_after(DEADLINE):
        while not await predicate():
            await anyio.sleep(0.02)


async def _changes(c: Client) -> list[tuple[str, str]]:
    note = await c.next_notification("changes.changed", timeout=DEADLINE)
    return [(ch["path"], ch["op"]) for ch in note.params["changes"]]


async def test_the_watcher_stays_inside_the_root_and_follows_new_folders(short_tmp):
    kb, outside = short_tmp / "kb", short_tmp / "usr"
    (kb / "a" / "b").mkdir(parents=True)
    (kb / ".git" / "objects").mkdir(parents=True)
    (kb / "a" / "b" / "deep.md").write_text("# Deep\n\nalpha\n")
    for i in range(OUTSIDE_FOLDERS):
        (outside / f"d{i}" / "sub").mkdir(parents=True)
    (outside / "outside.md").write_text("# Outside\n\nnever indexed\n")
    (kb / "usr").symlink_to(outside, target_is_directory=True)
    (kb / "a" / "loop").symlink_to(kb, target_is_directory=True)
    store, sock = short_tmp / "s" / "a.db", short_tmp / "d.sock"
    log = open(short_tmp / "daemon.log", "wb")
    d = subprocess.Popen([sys.executable, "-m", "autodoc.cli", "--store", str(store), "serve", "--socket", str(sock)],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
                         env={**os.environ, "AUTODOC_CHECK_RESULTS": "1", "AUTODOC_LOG": "INFO"})
    try:
        wait_listening(sock, d, short_tmp / "daemon.log", 30)
        async with await Client.connect_socket(sock) as c:
            await c.call("workspace.add", {"name": "kb", "root": str(kb), "config": NO_MODEL})
            await c.call("workspace.index", ["kb"])
            await _wait(lambda: _watching(c), "the watcher")
            walked = {p.stat().st_ino for p in scan_folders(kb)}
            outside_inodes = {p.stat().st_ino for p in [outside, *outside.rglob("*")] if p.is_dir()}
            assert len(walked) == 3  # kb, kb/a, kb/a/b: not .git, not the links
            watched = inotify_inodes(d.pid)
            print(f"inotify watches: {len(watched)} (folders walked {len(walked)}, outside {len(outside_inodes)})")
            assert set(watched) == walked
            assert not set(watched) & outside_inodes

            await c.call("changes.subscribe", ["kb"])
            (outside / "d3" / "sub" / "leak.md").write_text("# Leak\n\nthrough the link\n")
            (kb / "a" / "b" / "edit.md").write_text("# Edit\n\nbeta\n")
            assert await _changes(c) == [("a/b/edit.md", "add")]

            # A folder made after the watcher started is watched (the watch set is re-rooted).
            (kb / "new").mkdir()
            (kb / "new" / "one.md").write_text("# One\n\ngamma\n")
            got = await _changes(c)
            assert got == [("new/one.md", "add")], got
            await _wait(lambda: _async(set(inotify_inodes(d.pid)) == {p.stat().st_ino for p in scan_folders(kb)}),
                        "the new folder watched")
            (kb / "new" / "two.md").write_text("# Two\n\ndelta\n")
            assert await _changes(c) == [("new/two.md", "add")]

            # A renamed folder: its files move, and later saves in it are seen under the new name.
            (kb / "a").rename(kb / "z")
            got = await _changes(c)
            assert sorted(got) == [("z/b/deep.md", "rename"), ("z/b/edit.md", "rename")], got
            await _wait(lambda: _async(set(inotify_inodes(d.pid)) == {p.stat().st_ino for p in scan_folders(kb)}),
                        "the renamed folder watched")
            (kb / "z" / "b" / "three.md").write_text("# Three\n\nepsilon\n")
            assert await _changes(c) == [("z/b/three.md", "add")]

            # A file name that is not valid UTF-8, then a good one: the watcher keeps running.
            with open(os.path.join(os.fsencode(kb), b"bad-\xff.md"), "wb") as fh:
                fh.write(b"# Bad name\n")
            (kb / "after.md").write_text("# After\n\nzeta\n")
            got: list[tuple[str, str]] = []
            while ("after.md", "add") not in got:
                got += await _changes(c)
            assert d.poll() is None
            paths = sorted(h["path"] for h in (await c.call("search.query", ["kb", "through the link"]))["hits"])
            assert paths == []
            status = await c.call("workspace.status", ["kb"])
            assert status["files"]["indexed"] == 6, status  # deep, edit, one, two, three, after
            assert status["files"]["skipped"] == [{"path": "bad-\\xff.md", "reason": "file name is not valid UTF-8"}]
            await c.call("server.shutdown", {})
        assert d.wait(timeout=DEADLINE) == 0
    finally:
        if d.poll() is None:
            d.kill()
        log.close()


async def _async(value: bool) -> bool:
    return value
