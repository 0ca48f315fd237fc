"""Issue 36, generative test (c): file operations interleaved with index runs leave store == disk.

hypothesis draws sequences (bench/generative.py `op_lists`) of create, edit, a
same-size rewrite that keeps the mtime, rename of a file or a folder, delete,
mkdir, rmdir, moves of files and folders out of and into the root, and index
runs between them: a whole one (Service.index, what workspace.index runs) or a
live one (Service.index_paths with the paths touched since, what the watcher
hands over). Afterwards, on the real store: its documents are exactly the
Markdown files under the root with the sha256 and size of their bytes, and
its dump (documents with content hashes and line counts, chunks, facets,
links and their resolved targets) equals a clean index of the same folder;
after the last live run and again after one more whole run.

AUTODOC_OPS_EXAMPLES sets the number of sequences (default 8, for make test's
budget); `python -m bench.reliability generative` runs thousands.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from bench.generative import Op, check_ops_world, op_lists

EXAMPLES = int(os.environ.get("AUTODOC_OPS_EXAMPLES", "8"))


@pytest.fixture(scope="module")
def scratch():
    path = Path(tempfile.mkdtemp(prefix="ad-ops-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_the_check_sees_a_change_the_index_missed(short_tmp, monkeypatch):
    """A live run that is not told of an edit leaves the store behind the disk: reported."""
    from autodoc.service import Service

    monkeypatch.setattr(Service, "index_paths", lambda self, name, paths: {})
    problems = check_ops_world(short_tmp / "w", [Op("edit", "a.md", text="# A\n\nchanged\n"), Op("live")])
    assert any("a.md" in p and "after the live index" in p for p in problems), problems
    assert not any("after a whole index" in p for p in problems), problems


def test_a_folder_renamed_and_a_kept_mtime_rewrite(short_tmp):
    steps = [
        Op("same_size", "a.md"),
        Op("rename_dir", "x", "z"),
        Op("live"),
        Op("move_out", "z"),
        Op("create", "x/y/c.md", text="# C\n\n[[b]] [a](../../a.md)\n"),
        Op("index"),
        Op("move_in", "z"),
        Op("same_size", "x/y/c.md"),
    ]
    assert check_ops_world(short_tmp / "w", steps) == []


@settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(steps=op_lists())
def test_store_equals_disk_after_any_interleaving(scratch, steps):
    problems = check_ops_world(scratch / "w", steps)
    assert problems == [], "; ".join(map(str, steps)) + "\n" + "\n".join(problems)


LIVE_EXAMPLES = int(os.environ.get("AUTODOC_OPS_LIVE_EXAMPLES", "3"))


@pytest.fixture(scope="module")
def live_daemon(scratch):
    from helpers.daemon import Daemon

    d = Daemon(scratch / "d")
    try:
        d.start()
        yield d
        assert d.stop() == 0, d.log_text()[-3000:]
    finally:
        d.close()


_LIVE = iter(range(1 << 30))


@pytest.mark.slow
@settings(max_examples=LIVE_EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(steps=op_lists(12))
def test_the_daemons_watcher_reaches_the_disk(live_daemon, scratch, steps):
    """The same operations under a real daemon: its watcher is the live index, workspace.index the whole one."""
    from bench.generative import check_ops_world_live

    problems = check_ops_world_live(live_daemon.sock, scratch, next(_LIVE), steps)
    assert live_daemon.running(), live_daemon.log_text()[-3000:]
    assert problems == [], "; ".join(map(str, steps)) + "\n" + "\n".join(problems)
