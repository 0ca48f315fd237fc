"""store/pg/indexlock.py on a real PostgreSQL (the pg_uri fixture): one indexer per workspace, a second
refused with the holder named, and a SIGKILLed holder's lock taken over (issue 34; docs/dev/postgres.md,
section 5). The holder is a real separate process, as another machine's indexer would be."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest
from helpers.pg import missing_reason

pytestmark = pytest.mark.skipif(missing_reason() is not None, reason=missing_reason() or "")

HOLDER = textwrap.dedent(
    """
    import os, sys, time, psycopg
    from autodoc.store.pg.indexlock import IndexerLock
    conn = psycopg.connect(sys.argv[1], autocommit=True, application_name="autodoc index test-host:%d" % os.getpid())
    lock = IndexerLock(conn, int(sys.argv[3]), schema=sys.argv[2])
    lock.acquire({"host": "test-host", "pid": os.getpid(), "socket": "/tmp/x.sock"})
    print("held", flush=True)
    time.sleep(600)
    """
)


@pytest.fixture
def migrated(pg_uri):
    """(uri, schema, workspace id): a fresh migrated schema with one workspace; dropped afterwards."""
    import psycopg

    from autodoc.store.pg.schema import migrate

    schema = f"t_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        migrate(conn, schema)
        (wid,) = conn.execute(
            f"INSERT INTO \"{schema}\".workspaces(name, root, config, created) VALUES ('kb', '/kb', '{{}}', 0) RETURNING id"
        ).fetchone()
    yield pg_uri, schema, wid
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def test_a_second_indexer_is_refused_naming_the_holder_until_it_releases(migrated):
    import psycopg

    from autodoc.errors import StoreLocked
    from autodoc.store.pg.indexlock import IndexerLock

    uri, schema, wid = migrated
    with psycopg.connect(uri, autocommit=True) as a, psycopg.connect(uri, autocommit=True) as b:
        first, second = IndexerLock(a, wid, schema=schema), IndexerLock(b, wid, schema=schema)
        first.acquire({"host": "ci-runner", "pid": 4242})
        with pytest.raises(
            StoreLocked,
            match=r"^workspace kb is being indexed by another AutoDoc \(host ci-runner, pid 4242, backend pid \d+\)",
        ) as refused:
            second.acquire({"host": "laptop", "pid": 7})
        assert refused.value.data["workspace"] == "kb"  # a person reads the name, not the row id
        # another workspace is not held
        (other,) = b.execute(
            f"INSERT INTO \"{schema}\".workspaces(name, root, config, created) VALUES ('kb2', '/kb2', '{{}}', 0) RETURNING id"
        ).fetchone()
        assert IndexerLock(b, other, schema=schema).try_acquire({"host": "laptop"})
        first.release()
        second.acquire({"host": "laptop", "pid": 7})
        assert second.holder()["row"]["host"] == "laptop"


def test_a_sigkilled_holder_is_taken_over_within_10_s(migrated):
    import psycopg

    from autodoc.errors import StoreLocked
    from autodoc.store.pg.indexlock import IndexerLock

    uri, schema, wid = migrated
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, uri, schema, str(wid)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "held", proc.stderr.read() if proc.stderr else ""
        with psycopg.connect(uri, autocommit=True) as conn:
            lock = IndexerLock(conn, wid, schema=schema)
            with pytest.raises(StoreLocked) as refused:
                lock.acquire({"host": "laptop"})
            holder = refused.value.data["holder"]
            assert holder["row"]["pid"] == proc.pid
            assert holder["session"]["application_name"] == f"autodoc index test-host:{proc.pid}"

            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
            t0 = time.monotonic()
            lock.acquire({"host": "laptop", "pid": os.getpid()}, wait=10)
            assert time.monotonic() - t0 < 10
            assert lock.holder()["row"]["pid"] == os.getpid()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_indexer_locks_are_held_by_the_daemon_and_refuse_or_keep_another_waiting(migrated):
    """What the index job holds (index/job.py): a nested run and a second thread of the same daemon
    share the hold (the daemon's writer slot orders them, as on SQLite); another daemon (another
    IndexerLocks, as another process's would be) is refused naming the holder, or with `wait` gets
    the lock once the last holder here lets go; release closes the dedicated connection."""
    import threading

    import psycopg

    from autodoc.errors import StoreLocked
    from autodoc.store.pg.indexlock import IndexerLocks

    uri, schema, wid = migrated
    opened: list[psycopg.Connection] = []

    def connect() -> psycopg.Connection:
        opened.append(psycopg.connect(uri, autocommit=True))
        return opened[-1]

    here = IndexerLocks(connect, schema, lambda: {"host": "ci", "pid": 1, "socket": "/run/a.sock"})
    there = IndexerLocks(connect, schema, lambda: {"host": "laptop", "pid": 2})
    order: list[str] = []
    inside = threading.Event()
    leave = threading.Event()

    def second_thread() -> None:
        with here.hold(wid):
            order.append("second thread inside")
            inside.set()
            leave.wait(10)

    with here.hold(wid):
        with here.hold(wid):  # a live index that turned into a whole run
            order.append("nested")
        with pytest.raises(StoreLocked, match=r"host ci, pid 1, socket /run/a.sock"):
            with there.hold(wid):
                pass
        t = threading.Thread(target=second_thread)
        t.start()
        assert inside.wait(10)  # the daemon's other thread is not refused by its own session
    # the first holder let go, the second thread still holds: the other daemon waits for it
    waiter = threading.Thread(target=lambda: _hold_once(there, wid, order, wait=10))
    waiter.start()
    waiter.join(0.5)
    assert waiter.is_alive()
    order.append("second thread leaves")
    leave.set()
    t.join(10)
    waiter.join(10)
    assert order == ["nested", "second thread inside", "second thread leaves", "there"]
    assert all(c.closed for c in opened)


def _hold_once(locks, wid, order, wait=0.0):
    with locks.hold(wid, wait=wait):
        order.append("there")


def test_one_daemon_embeds_a_workspace_at_a_time_and_a_dead_ones_claim_passes_on(migrated):
    """EmbedClaims (the embed queue's, embed/queue.py): a claim is kept while its holder fills the
    workspace, refused to another daemon, passed on when released or when the holder's session ends."""
    import psycopg

    from autodoc.store.pg.indexlock import EmbedClaims

    uri, _, wid = migrated
    conns: list[psycopg.Connection] = []

    def connect() -> psycopg.Connection:
        conns.append(psycopg.connect(uri, autocommit=True))
        return conns[-1]

    a, b = EmbedClaims(connect), EmbedClaims(connect)
    assert a.claim(wid) and a.claim(wid)  # kept across steps
    assert not b.claim(wid)
    assert b.claim(wid + 1000)  # another workspace is free
    a.release(wid)
    assert b.claim(wid) and not a.claim(wid)
    with psycopg.connect(uri, autocommit=True) as admin:  # b's daemon dies: its session ends
        pid = conns[1].info.backend_pid
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        deadline = time.monotonic() + 10
        while admin.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()[0]:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    assert a.claim(wid)
    a.close()
    b.close()


def test_a_lock_connection_that_cannot_be_made_is_the_products_error_without_the_password(tmp_path):
    from types import SimpleNamespace

    from autodoc.errors import StoreUnreachable
    from autodoc.store.pg.indexlock import dedicated

    target = f"postgresql://indexer:s3cret-pw@/db?host={tmp_path}/nowhere&connect_timeout=2"
    store = SimpleNamespace(target=target, path=target.replace("s3cret-pw", "***"))
    with pytest.raises(StoreUnreachable) as e:
        dedicated(store, "index")
    assert "s3cret-pw" not in str(e.value) and "s3cret-pw" not in str(e.value.data)
    assert "cannot connect to the PostgreSQL store postgresql://indexer:***@" in str(e.value)
