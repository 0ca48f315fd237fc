"""Daemons sharing one PostgreSQL store and what each says of the others' work (issue 34's loose
ends): a daemon started while another indexes a workspace, a second indexer that waits its turn, and
what a peer answers after a workspace is removed or reconfigured elsewhere. Real `autodoc serve`
processes, each with its own socket and XDG dirs (a machine of its own), over the `pg_uri` server."""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.daemon import Daemon, machine
from helpers.pg import missing_reason, schema_uri

pytestmark = pytest.mark.skipif(missing_reason() is not None, reason=missing_reason() or "")

KB = Path(__file__).resolve().parents[1] / "corpora" / "kb"
NO_MODEL = {"embedding": {"provider": "none"}}
TRACEBACK = "Traceback (most recent call last)"


class Peers:
    def __init__(self, base: Path, uri: str, schema: str, kb: Path, a: Daemon):
        self.base, self.uri, self.schema, self.kb, self.a = base, uri, schema, kb, a

    def connect(self) -> Any:
        import psycopg

        return psycopg.connect(self.uri, autocommit=True)

    def workspace_id(self, name: str) -> int:
        with self.connect() as pg:
            return int(pg.execute(f'SELECT id FROM "{self.schema}".workspaces WHERE name = %s', (name,)).fetchone()[0])


@pytest.fixture(scope="module")
def peers(pg_uri) -> Iterator[Peers]:
    """Daemon A (no watcher) over a fresh schema, tests/corpora/kb added as `kb` and indexed."""
    base = Path(tempfile.mkdtemp(prefix="ad-pgp-", dir="/tmp"))
    schema = f"p_{uuid.uuid4().hex[:8]}"
    uri = schema_uri(pg_uri, schema)
    kb = base / "kb"
    shutil.copytree(KB, kb)
    a = machine(base / "a", uri, "--no-watch").start()
    try:
        a.call("workspace.add", ["kb", str(kb), NO_MODEL])
        a.call("workspace.index", ["kb"])
        yield Peers(base, uri, schema, kb, a)
    finally:
        a.close()
        shutil.rmtree(base, ignore_errors=True)


def until(what: Any, seconds: float, why: str) -> None:
    deadline = time.monotonic() + seconds
    while not what():
        assert time.monotonic() < deadline, why
        time.sleep(0.1)


def hits(d: Daemon, workspace: str, query: str) -> set[str]:
    return {h["path"] for h in d.call("search.query", [workspace, query])["hits"]}


def test_a_daemon_starting_while_another_indexes_logs_one_line_and_catches_up_once_it_is_free(peers):
    """Its catch-up at start finds the workspace's indexer lock held by another AutoDoc: one line
    naming the holder (no traceback), and the catch-up is done once the lock is free."""
    import psycopg

    from autodoc.store.pg.indexlock import IndexerLock

    word = f"glimmet{uuid.uuid4().hex[:6]}"
    (peers.kb / "while-held.md").write_text(f"# While held\n\nThe {word} note, saved while no daemon ran here.\n")
    conn = psycopg.connect(peers.uri, autocommit=True)
    lock = IndexerLock(conn, peers.workspace_id("kb"), schema=peers.schema)
    lock.acquire({"host": "ci-runner", "pid": 4242})
    c = machine(peers.base / "c", peers.uri).start()  # watching: it catches up at start
    try:
        until(lambda: "ci-runner" in c.log_text(), 30, f"no word of the holder:\n{c.log_text()[-3000:]}")
        time.sleep(3)  # a retry or two while it is still held
        assert hits(c, "kb", word) == set()
        lock.release()
        until(lambda: hits(c, "kb", word) == {"while-held.md"}, 30, f"never caught up:\n{c.log_text()[-3000:]}")
        log = c.log_text()
        assert TRACEBACK not in log, log[-3000:]
        said = [line for line in log.splitlines() if "ci-runner" in line]
        assert len(said) == 1 and "workspace kb" in said[0] and "pid 4242" in said[0], said
    finally:
        conn.close()
        c.close()
        (peers.kb / "while-held.md").unlink()
        peers.a.call("workspace.index", ["kb"])


def cli_env(base: Path, uri: str) -> dict[str, str]:
    """A machine with no daemon of its own: `autodoc` runs the command in its own process."""
    from helpers.daemon import isolated_env

    env = isolated_env(base, extra={"AUTODOC_STORE": uri})
    for name in ("XDG_RUNTIME_DIR", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME"):
        Path(env[name]).mkdir(parents=True, exist_ok=True, mode=0o700)
    env.pop("AUTODOC_SOCKET", None)
    return env


def test_a_second_indexer_refuses_naming_the_holder_or_with_wait_lock_queues_behind_it(peers):
    """CI behind CI: `autodoc index` while another AutoDoc holds the workspace refuses (exit 1, the
    holder named); with `--wait-lock` it says it waits, and indexes once the holder is done."""
    import subprocess
    import sys
    import threading

    import psycopg

    from autodoc.store.pg.indexlock import IndexerLock

    env = cli_env(peers.base / "ci", peers.uri)
    word = f"quibbet{uuid.uuid4().hex[:6]}"
    (peers.kb / "queued.md").write_text(f"# Queued\n\nThe {word} note, indexed by the second run.\n")
    conn = psycopg.connect(peers.uri, autocommit=True)
    lock = IndexerLock(conn, peers.workspace_id("kb"), schema=peers.schema)
    lock.acquire({"host": "ci-runner-1", "pid": 4242})
    try:
        cmd = [sys.executable, "-m", "autodoc.cli", "index", "kb"]
        refused = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
        assert refused.returncode == 1, refused
        assert "workspace kb is being indexed by another AutoDoc (host ci-runner-1, pid 4242" in refused.stderr
        assert TRACEBACK not in refused.stderr, refused.stderr
        release = threading.Timer(3.0, lock.release)
        release.start()
        t0 = time.monotonic()
        queued = subprocess.run([*cmd, "--wait-lock", "60"], env=env, capture_output=True, text=True, timeout=90)
        release.join()
        assert queued.returncode == 0, queued
        assert time.monotonic() - t0 >= 2.5, "it did not wait for the holder"
        assert "host ci-runner-1, pid 4242" in queued.stderr and "waiting up to" in queued.stderr, queued.stderr
        assert "kb: 1 added" in queued.stdout, queued.stdout
        assert hits(peers.a, "kb", word) == {"queued.md"}
        short = subprocess.run(
            [*cmd, "--wait-lock", "0.5"], env=env, capture_output=True, text=True, timeout=60
        )  # nothing held now: it just runs
        assert short.returncode == 0 and "kb: 0 added" in short.stdout, short
    finally:
        conn.close()
        (peers.kb / "queued.md").unlink()
        peers.a.call("workspace.index", ["kb"])


def test_status_reads_this_disk_only_on_the_workspaces_indexer(peers):
    """A folder at the workspace's root path on a machine that does not index it (another checkout,
    or nothing to do with it) says nothing of the workspace: status there is the stored state only.
    The machine that last indexed it (the indexer row's host) counts its disk, as on SQLite."""
    a = peers.a
    mine = a.call("workspace.status", ["kb"])
    assert mine["root_exists"] and mine["files"]["on_disk"] >= mine["files"]["indexed"] > 0
    with peers.connect() as pg:  # another machine ran the last index (what its indexer lock wrote)
        pg.execute(
            f"UPDATE \"{peers.schema}\".indexer SET holder = jsonb_set(holder::jsonb, '{{host}}', '\"ci-runner\"')::text"
        )
    (peers.kb / "only-on-this-disk.md").write_text("# Not indexed\n\nA file of this machine's folder.\n")
    try:
        theirs = a.call("workspace.status", ["kb"])
        assert not theirs["root_exists"], theirs  # not this machine's folder to read
        assert theirs["files"]["on_disk"] == 0 and theirs["files"]["left_out"]["files"] == 0
        assert theirs["files"]["indexed"] == mine["files"]["indexed"]  # the stored state, all of it
        assert theirs["chunks"] == mine["chunks"] and theirs["generation"] == mine["generation"]
    finally:
        (peers.kb / "only-on-this-disk.md").unlink()
        a.call("workspace.index", ["kb"])  # this machine indexes it again: its row says so
    assert a.call("workspace.status", ["kb"])["root_exists"]


def test_a_workspace_removed_or_reconfigured_through_a_reads_the_same_through_b(peers):
    """B serves what A did to a workspace: a removal (search, status, list all say it is gone), a
    configure (its options, and searches by the new settings), a new workspace by the old name (its
    own documents, none of the removed one's)."""
    from autodoc_client.client import RemoteError

    word, other = f"plimsy{uuid.uuid4().hex[:6]}", f"quorbl{uuid.uuid4().hex[:6]}"
    one, two = peers.base / "one", peers.base / "two"
    one.mkdir()
    two.mkdir()
    (one / "a.md").write_text(f"# One\n\nThe {word} note of the first folder.\n")
    (two / "b.md").write_text(f"# Two\n\nThe {other} note of the second folder.\n")
    a = peers.a
    b = machine(peers.base / "b", peers.uri, "--no-watch").start()
    try:
        a.call("workspace.add", ["tmp", str(one), NO_MODEL])
        a.call("workspace.index", ["tmp"])
        assert hits(b, "tmp", word) == {"a.md"}  # B has read it (and cached what it caches)
        assert b.call("workspace.status", ["tmp"])["files"]["indexed"] == 1

        a.call("workspace.configure", ["tmp", {"site_roots": ["docs"]}])
        listed = {w["name"]: w for w in b.call("workspace.list", {})["workspaces"]}
        assert listed["tmp"]["config"]["site_roots"] == ["docs"], listed["tmp"]

        a.call("workspace.remove", ["tmp"])
        assert "tmp" not in {w["name"] for w in b.call("workspace.list", {})["workspaces"]}
        for method, params in (("search.query", ["tmp", word]), ("workspace.status", ["tmp"])):
            with pytest.raises(RemoteError) as gone:
                b.call(method, params)
            assert gone.value.code == -32001, (method, gone.value.code, gone.value.message)

        a.call("workspace.add", ["tmp", str(two), NO_MODEL])
        a.call("workspace.index", ["tmp"])
        assert hits(b, "tmp", word) == set()
        assert hits(b, "tmp", other) == {"b.md"}
        assert b.call("workspace.status", ["tmp"])["files"]["indexed"] == 1
        assert TRACEBACK not in b.log_text(), b.log_text()[-3000:]
    finally:
        b.close()
        with contextlib.suppress(RemoteError):  # gone already, or never made
            a.call("workspace.remove", ["tmp"])


def test_a_link_indexed_through_b_resolves_to_a_note_a_indexed(peers):
    """Two daemons that both index a workspace (each watches its copy, say): B's name tables must
    take in what A indexed since B last looked, or a link B indexes to A's new note is broken."""
    a = peers.a
    b = machine(peers.base / "b2", peers.uri, "--no-watch").start()
    target, linker = peers.kb / "peer-target.md", peers.kb / "peer-linker.md"
    try:
        b.call("workspace.index", ["kb"])  # B has read every name of the workspace
        target.write_text("# Zephyr Quillon\n\nA note indexed through A.\n")
        assert a.call("workspace.index", ["kb"])["added"] == 1
        time.sleep(1.5)  # B's change feed has heard of it (p50 65 ms, docs/dev/postgres.md section 6)
        linker.write_text("# Linker\n\nSee [[Zephyr Quillon]] for the details.\n")
        assert b.call("workspace.index", ["kb"])["added"] == 1
        broken = [x for x in b.call("workspace.status", ["kb"])["broken_links"] if x["path"] == linker.name]
        assert broken == [], broken
        backlinks = b.call("document.backlinks", {"workspace": "kb", "path": target.name})
        assert linker.name in json.dumps(backlinks), backlinks
    finally:
        b.close()
        target.unlink(missing_ok=True)
        linker.unlink(missing_ok=True)
        a.call("workspace.index", ["kb"])


def test_the_feed_hands_on_a_workspace_removed_or_configured_elsewhere(peers):
    """Neither makes a change-log row: the transaction's notification (`w <id> removed|configured`)
    is what tells the other daemons to drop what they keep of it (vectors, link name tables)."""
    import psycopg

    from autodoc.store.pg.notify import ChangeFeed, notify_workspace
    from autodoc.store.pg.snapshot import PgSnapshot

    heard: list[tuple[int, str]] = []
    feed = ChangeFeed(
        lambda: psycopg.connect(peers.uri, autocommit=True),
        peers.schema,
        lambda rows: None,
        poll=0.05,
        on_workspace=lambda ws_id, event: heard.append((ws_id, event)),
    ).start()
    try:
        assert feed.connected.wait(30)
        with psycopg.connect(peers.uri, autocommit=True) as conn:
            db = PgSnapshot(conn)
            with db:
                notify_workspace(db, 41, "configured")
                time.sleep(0.3)
                assert heard == []  # not before the commit
            with db:
                notify_workspace(db, 42, "removed")
        until(lambda: len(heard) == 2, 10, f"heard {heard}")
        assert heard == [(41, "configured"), (42, "removed")]
    finally:
        feed.stop()


def watching(d: Daemon) -> set[str]:
    return set(d.call("server.info", {})["watching"])


def test_a_workspace_added_through_a_is_watched_by_b_while_it_runs(peers):
    """B (watching) learns of a workspace A added without a restart: it watches its root, and a file
    saved there is indexed by B's live index (searchable through A)."""
    from autodoc_client.client import RemoteError

    word = f"fennix{uuid.uuid4().hex[:6]}"
    fresh = peers.base / "fresh-watched"
    fresh.mkdir()
    (fresh / "first.md").write_text("# First\n\nA note there before the workspace was added.\n")
    a = peers.a
    b = machine(peers.base / "b-watch", peers.uri).start()  # watching
    try:
        until(lambda: "kb" in watching(b), 30, f"B never watched kb:\n{b.log_text()[-3000:]}")
        a.call("workspace.add", ["fresh", str(fresh), NO_MODEL])
        a.call("workspace.index", ["fresh"])
        until(lambda: "fresh" in watching(b), 15, f"B never watched A's new workspace:\n{b.log_text()[-3000:]}")
        (fresh / "saved.md").write_text(f"# Saved\n\nThe {word} note, saved on B's machine.\n")
        until(lambda: hits(a, "fresh", word) == {"saved.md"}, 15, f"B never indexed it:\n{b.log_text()[-3000:]}")
        a.call("workspace.remove", ["fresh"])
        until(lambda: "fresh" not in watching(b), 15, f"B still watches a removed workspace:\n{b.log_text()[-3000:]}")
        assert TRACEBACK not in b.log_text(), b.log_text()[-3000:]
    finally:
        b.close()
        with contextlib.suppress(RemoteError):  # gone already, or never made
            a.call("workspace.remove", ["fresh"])


def test_bs_subscribers_hear_of_a_workspace_added_configured_and_removed_through_a_once(peers):
    """`workspace.changed` reaches B's subscribers for what A did, in the documented shape (checked
    against the schema), as A's own subscribers hear it: each once (A hears its own on the feed too)."""
    import anyio

    from autodoc.rpc import schemas
    from autodoc_client import Client

    fresh = peers.base / "fresh-told"
    fresh.mkdir()
    (fresh / "one.md").write_text("# One\n\nA note.\n")
    moved = peers.base / "fresh-told-moved"
    moved.mkdir()
    a = peers.a
    b = machine(peers.base / "b-told", peers.uri, "--no-watch").start()

    async def main() -> None:
        async with await Client.connect_socket(a.sock) as on_a, await Client.connect_socket(b.sock) as on_b:
            for sub in (on_a, on_b):
                await sub.call("changes.subscribe", [])

            async def both(op: str) -> dict[str, Any]:
                got = []
                for sub in (on_a, on_b):
                    note = await sub.next_notification("workspace.changed", timeout=10)
                    assert schemas.params_error("workspace.changed", note.params) is None, note.params
                    got.append(note.params)
                assert got[0] == got[1], got  # B says what A says
                assert got[1]["workspace"] == "told" and got[1]["op"] == op, got
                return got[1]

            await anyio.to_thread.run_sync(a.call, "workspace.add", ["told", str(fresh), NO_MODEL])
            added = await both("added")
            assert added["root"] == str(fresh) and added["config"]["site_roots"] != ["wiki"], added
            await anyio.to_thread.run_sync(a.call, "workspace.configure", ["told", {"site_roots": ["wiki"]}])
            assert (await both("configured"))["config"]["site_roots"] == ["wiki"]
            await anyio.to_thread.run_sync(a.call, "workspace.configure", {"workspace": "told", "root": str(moved)})
            assert (await both("configured"))["root"] == str(moved)
            await anyio.to_thread.run_sync(a.call, "workspace.remove", ["told"])
            removed = await both("removed")
            assert removed["config"] is None and removed["root"] is None, removed
            for sub in (on_a, on_b):  # once each: A's own, heard again on its feed, is not told twice
                with pytest.raises(TimeoutError):
                    await sub.next_notification("workspace.changed", timeout=1.5)

    try:
        anyio.run(main)
        assert TRACEBACK not in b.log_text(), b.log_text()[-3000:]
    finally:
        b.close()
        from autodoc_client.client import RemoteError

        with contextlib.suppress(RemoteError):  # gone already, or never made
            a.call("workspace.remove", ["told"])


async def _told(sub: Any, seconds: float) -> list[dict[str, Any]]:
    """Every `workspace.changed` a subscriber hears until none comes for `seconds`."""
    got = []
    while True:
        try:
            got.append((await sub.next_notification("workspace.changed", timeout=seconds)).params)
        except TimeoutError:
            return got


def test_configures_through_a_and_b_committed_before_either_feed_reads_them_are_told_once_as_they_ended(peers):
    """A configures a workspace, then B does, both committed before either daemon's feed reads its
    notifications (a test transaction holds the change log, which the feed reads first). Each daemon's
    subscribers hear one `workspace.changed`, the workspace as it ended (B's root, A's site_roots): A's
    feed took B's change for its own and never told it (A's live index kept the old root), and B's
    subscribers heard it twice (B's method, then A's notification read after B's commit)."""
    import anyio
    import psycopg

    from autodoc_client import Client
    from autodoc_client.client import RemoteError

    first, moved = peers.base / "both", peers.base / "both-moved"
    for folder in (first, moved):
        folder.mkdir()
        (folder / "one.md").write_text("# One\n\nA note.\n")
    a = peers.a
    b = machine(peers.base / "b-both", peers.uri, "--no-watch").start()

    async def main() -> None:
        async with await Client.connect_socket(a.sock) as on_a, await Client.connect_socket(b.sock) as on_b:
            for sub in (on_a, on_b):
                await sub.call("changes.subscribe", [])
            await anyio.to_thread.run_sync(a.call, "workspace.add", ["both", str(first), NO_MODEL])
            for sub in (on_a, on_b):
                assert [n["op"] for n in await _told(sub, 1.5)] == ["added"]
            with psycopg.connect(peers.uri) as hold, hold.transaction():
                hold.execute(f'LOCK TABLE "{peers.schema}".changes IN ACCESS EXCLUSIVE MODE')
                await anyio.to_thread.run_sync(a.call, "workspace.configure", ["both", {"site_roots": ["wiki"]}])
                await anyio.to_thread.run_sync(b.call, "workspace.configure", {"workspace": "both", "root": str(moved)})
            for who, sub in (("A", on_a), ("B", on_b)):
                told = await _told(sub, 2.0)
                assert [(n["op"], n["root"], n["config"]["site_roots"]) for n in told] == [
                    ("configured", str(moved), ["wiki"])
                ], (who, told)

    try:
        anyio.run(main)
        for d in (a, b):
            assert TRACEBACK not in d.log_text(), d.log_text()[-3000:]
    finally:
        b.close()
        with contextlib.suppress(RemoteError):  # gone already, or never made
            a.call("workspace.remove", ["both"])


def test_a_configure_whose_index_fails_is_told_by_the_daemon_that_made_it_too(peers):
    """A new section size is committed, then its re-index fails (another AutoDoc indexes the workspace):
    the method answers the error, but the configuration changed, so A's subscribers (and A's live index)
    hear it as B's do, once."""
    import anyio
    import psycopg

    from autodoc.store.pg.indexlock import IndexerLock
    from autodoc_client import Client
    from autodoc_client.client import RemoteError

    folder = peers.base / "held"
    folder.mkdir()
    (folder / "one.md").write_text("# One\n\nA note.\n")
    a = peers.a
    b = machine(peers.base / "b-held", peers.uri, "--no-watch").start()
    a.call("workspace.add", ["held", str(folder), NO_MODEL])
    a.call("workspace.index", ["held"])
    conn = psycopg.connect(peers.uri, autocommit=True)
    lock = IndexerLock(conn, peers.workspace_id("held"), schema=peers.schema)

    async def main() -> None:
        async with await Client.connect_socket(a.sock) as on_a, await Client.connect_socket(b.sock) as on_b:
            for sub in (on_a, on_b):
                await sub.call("changes.subscribe", [])
            lock.acquire({"host": "ci-runner", "pid": 4242})
            with pytest.raises(RemoteError) as failed:
                await anyio.to_thread.run_sync(a.call, "workspace.configure", ["held", {"section_tokens": 123}])
            assert "ci-runner" in failed.value.message, failed.value.message
            for who, sub in (("A", on_a), ("B", on_b)):
                told = await _told(sub, 2.0)
                assert [(n["op"], n["config"]["section_tokens"]) for n in told] == [("configured", 123)], (who, told)

    try:
        anyio.run(main)
    finally:
        lock.release()
        conn.close()
        b.close()
        with contextlib.suppress(RemoteError):  # gone already, or never made
            a.call("workspace.remove", ["held"])
