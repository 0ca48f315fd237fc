"""Daemons sharing one PostgreSQL store and what each says of the others' work (issue 34's loose
ends): a daemon started while another indexes a workspace, a second indexer that waits its turn, and
what a peer answers after a workspace is removed or reconfigured elsewhere. Real `autodoc serve`
processes, each with its own socket and XDG dirs (a machine of its own), over the `pg_uri` server."""

from __future__ import annotations

import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.daemon import Daemon, daemon_argv
from helpers.pg import missing_reason

pytestmark = pytest.mark.skipif(missing_reason() is not None, reason=missing_reason() or "")

KB = Path(__file__).resolve().parents[1] / "corpora" / "kb"
NO_MODEL = {"embedding": {"provider": "none"}}
TRACEBACK = "Traceback (most recent call last)"


def schema_uri(pg_uri: str, schema: str) -> str:
    return f"{pg_uri}{'&' if '?' in pg_uri else '?'}options=-csearch_path%3D{schema}"


def machine(base: Path, uri: str, *args: str) -> Daemon:
    sock = base / "s.sock"
    return Daemon(
        base, store=base / "unused.db", sock=sock, argv=daemon_argv(uri, sock, *args), env={"AUTODOC_STORE": uri}
    )


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
