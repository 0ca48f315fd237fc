"""A moved root through real processes: the CLI (`autodoc workspace configure NAME --root PATH`,
in-process on a SQLite store), a daemon whose watcher leaves the old root for the new, and a
daemon sharing a PostgreSQL store that hears of the move on the change feed and watches the new
root too (issue 34: a docs repository indexed by CI, checked out at a new path each run)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from helpers.daemon import machine
from helpers.pg import missing_reason, schema_uri

from autodoc.rpc import schemas

KB = Path(__file__).resolve().parents[1] / "corpora" / "kb"
NO_MODEL = {"embedding": {"provider": "none"}}
DEADLINE = 20.0


def _cli(env: dict[str, str], cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    p = subprocess.run(
        [sys.executable, "-m", "autodoc.cli", *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=120
    )
    if check and p.returncode != 0:
        raise AssertionError(f"autodoc {' '.join(args)} → {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p


def _counts(out: str) -> dict[str, int]:
    """The index command's summary: {'added': 17, 'modified': 0, …}."""
    return {k: int(n) for n, k in re.findall(r"(\d+) (added|modified|deleted|unchanged)\b", out)}


def test_the_cli_moves_a_renamed_folder_and_the_next_index_finds_it_unchanged(short_tmp):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUTODOC_")}
    env.update(AUTODOC_STORE=str(short_tmp / "store.db"), XDG_RUNTIME_DIR=str(short_tmp), AUTODOC_INSTANT_DIR="off")
    env["AUTODOC_READERS"] = "0"
    shutil.copytree(KB, short_tmp / "kb", symlinks=True)
    _cli(env, short_tmp, "workspace", "add", "kb", "kb", "--config", '{"embedding": {"provider": "none"}}')
    first = _counts(_cli(env, short_tmp, "index", "kb").stdout)
    assert first["added"] > 0
    (short_tmp / "kb").rename(short_tmp / "docs")

    # before: an index of the old root refuses, naming it, and it and doctor say how to move it
    gone = _cli(env, short_tmp, "index", "kb", check=False)
    assert gone.returncode != 0 and str(short_tmp / "kb") in gone.stderr
    assert "autodoc workspace configure kb --root" in gone.stderr, gone.stderr
    doctor = _cli(env, short_tmp, "doctor", check=False)
    assert "autodoc workspace configure kb --root FOLDER" in doctor.stdout, doctor.stdout
    # CI's `add --if-missing` of this run's checkout leaves the workspace where it was, and says so
    kept = _cli(env, short_tmp, "workspace", "add", "kb", "docs", "--if-missing").stdout.strip()
    where = f"at {short_tmp / 'kb'}, not {short_tmp / 'docs'}"
    assert kept == f"workspace kb exists {where} (autodoc workspace configure kb --root {short_tmp / 'docs'} moves it)"

    # a relative --root is this shell's: resolved before it reaches the store
    moved = _cli(env, short_tmp, "workspace", "configure", "kb", "--root", "docs")
    assert moved.stdout.strip() == f"workspace kb → {short_tmp / 'docs'}"
    again = _counts(_cli(env, short_tmp, "index", "kb").stdout)
    assert again == {"added": 0, "modified": 0, "deleted": 0, "unchanged": first["added"]}, again
    listed = _cli(env, short_tmp, "workspace", "list").stdout
    assert _cli(env, short_tmp, "workspace", "add", "kb", "docs", "--if-missing").stdout == "workspace kb exists\n"
    assert f"kb\t{short_tmp / 'docs'}\t" in listed
    hits = _cli(env, short_tmp, "search", "-w", "kb", "lease", "recovery").stdout
    assert "runbooks/lease-recovery.md" in hits

    # refused: a root that is not a folder (named as the flag typed), and nothing to change
    bad = _cli(env, short_tmp, "workspace", "configure", "kb", "--root", "nowhere", check=False)
    assert bad.returncode != 0 and "--root" in bad.stderr and "is not a folder" in bad.stderr, bad.stderr
    bare = _cli(env, short_tmp, "workspace", "configure", "kb", check=False)
    assert bare.returncode == 2 and "--root" in bare.stderr


def _searchable(call, word: str, timeout: float = DEADLINE) -> list[str]:
    deadline = time.monotonic() + timeout
    while True:
        paths = [h["path"] for h in call("search.query", ["kb", word])["hits"]]
        if paths or time.monotonic() > deadline:
            return paths
        time.sleep(0.05)


def _follows_the_move(indexer, watcher, old: Path, new: Path) -> None:
    """Through `indexer` the root moves from `old` (left in place, as a previous checkout is) to
    `new`; `watcher`'s live index then indexes a save under `new` and none under `old`, and the
    move itself changes no document."""
    head = indexer.call("changes.since", ["kb", 0, 1000])["next_cursor"]
    out = indexer.call("workspace.configure", {"workspace": "kb", "root": str(new)})
    assert schemas.result_errors("workspace.configure", out) == [] and out["root"] == str(new)
    assert watcher.call("workspace.list", {})["workspaces"][0]["root"] == str(new)
    stale, fresh = f"stale{uuid.uuid4().hex[:8]}", f"fresh{uuid.uuid4().hex[:8]}"
    (old / "left-behind.md").write_text(f"# Old\n\nThe {stale} checkout.\n")
    (new / "arrived.md").write_text(f"# New\n\nThe {fresh} checkout.\n")
    assert _searchable(indexer.call, fresh) == ["arrived.md"], watcher.log_text()[-3000:]
    # the save under the old root came first: had it been watched, it would be indexed by now
    assert _searchable(indexer.call, stale, timeout=0) == []
    changes = indexer.call("changes.since", ["kb", head, 1000])["changes"]
    assert [(c["path"], c["op"]) for c in changes] == [("arrived.md", "add")], changes


def test_the_daemons_watcher_leaves_the_old_root_for_the_new(daemon_factory, short_tmp):
    old, new = short_tmp / "run-1" / "kb", short_tmp / "run-2" / "kb"
    shutil.copytree(KB, old, symlinks=True)
    d = daemon_factory(short_tmp / "d", timeout=30)
    d.call("workspace.add", ["kb", str(old), NO_MODEL])
    d.call("workspace.index", ["kb"])
    shutil.copytree(old, new, symlinks=True, copy_function=shutil.copyfile)  # a new checkout: new mtimes
    _follows_the_move(d, d, old, new)


@pytest.mark.skipif(missing_reason() is not None, reason=missing_reason() or "")
def test_a_peer_on_the_shared_store_hears_of_the_move_and_watches_the_new_root(pg_uri, short_tmp):
    """A configures (no watcher: CI); B, sharing the database, is the machine whose watcher indexes."""
    uri = schema_uri(pg_uri, f"m_{uuid.uuid4().hex[:8]}")
    old, new = short_tmp / "run-1" / "kb", short_tmp / "run-2" / "kb"
    shutil.copytree(KB, old, symlinks=True)
    a = machine(short_tmp / "a", uri, "--no-watch").start()
    b = None
    try:
        a.call("workspace.add", ["kb", str(old), NO_MODEL])
        a.call("workspace.index", ["kb"])
        b = machine(short_tmp / "b", uri).start()
        shutil.copytree(old, new, symlinks=True, copy_function=shutil.copyfile)
        _follows_the_move(a, b, old, new)
    finally:
        for d in (a, b):
            if d is not None:
                d.close()


def test_a_save_in_a_folder_renamed_under_the_watcher_deletes_nothing(daemon_factory, short_tmp):
    """`mv kb docs` while the daemon watches, then a save in docs/: the watcher still holds the
    moved folders and reports the save under the old path, where no file is. That is no deletion
    (the root is gone, not emptied): the document stays until the root is configured, and the index
    then finds just the saved file modified and the new one added."""
    old, new = short_tmp / "kb", short_tmp / "docs"
    shutil.copytree(KB, old, symlinks=True)
    d = daemon_factory(short_tmp / "d", timeout=30)
    d.call("workspace.add", ["kb", str(old), NO_MODEL])
    d.call("workspace.index", ["kb"])
    head = d.call("changes.since", ["kb", 0, 1000])["next_cursor"]
    documents = d.call("workspace.list", {})["workspaces"][0]["documents"]
    old.rename(new)
    saved = new / "runbooks" / "lease-recovery.md"
    saved.write_text(saved.read_text() + "\nAppended after the move.\n")
    deadline = time.monotonic() + DEADLINE
    while "live index of workspace kb refused" not in d.log_text():  # the watcher heard the save, refused it
        changes = d.call("changes.since", ["kb", head, 1000])["changes"]
        assert not changes, changes
        assert time.monotonic() < deadline, d.log_text()[-3000:]
        time.sleep(0.05)
    assert d.call("changes.since", ["kb", head, 1000])["changes"] == []
    assert d.call("workspace.list", {})["workspaces"][0]["documents"] == documents

    (new / "added-later.md").write_text("# Later\n\nA note written in the moved folder.\n")
    d.call("workspace.configure", {"workspace": "kb", "root": str(new)})
    expected = [("added-later.md", "add"), ("runbooks/lease-recovery.md", "modify")]
    while sorted((c["path"], c["op"]) for c in d.call("changes.since", ["kb", head, 1000])["changes"]) != expected:
        assert time.monotonic() < deadline + DEADLINE, d.call("changes.since", ["kb", head, 1000])
        time.sleep(0.05)
