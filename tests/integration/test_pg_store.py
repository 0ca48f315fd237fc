"""store/pg/store.py on a real PostgreSQL (the pg_uri fixture): the PgStore behind open_store, its
snapshots, its writer, a reader role's read-only store, and errors that name the database without
its password (issue 34; docs/dev/postgres.md, sections 1, 5 and 7)."""

from __future__ import annotations

import threading
import time
import uuid
from urllib.parse import quote

import pytest
from helpers.pg import missing_reason

pytestmark = pytest.mark.skipif(missing_reason() is not None, reason=missing_reason() or "")


def in_schema(uri: str, schema: str) -> str:
    """`uri` with its search_path set to `schema` (libpq's `options`): the store lives there."""
    sep = "&" if "?" in uri else "?"
    return f"{uri}{sep}options={quote(f'-csearch_path={schema}')}"


@pytest.fixture
def target(pg_uri):
    """A PostgreSQL target of this test's own (a schema, dropped afterwards)."""
    import psycopg

    name = f"t_{uuid.uuid4().hex[:10]}"
    yield in_schema(pg_uri, name)
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def test_open_store_opens_a_pg_store_that_writes_and_reads(target):
    from autodoc.store import open_store
    from autodoc.store import workspaces as ws_rows
    from autodoc.store.documents import next_generation
    from autodoc.store.pg.store import PgStore
    from autodoc.store.sql import POSTGRES, dialect

    store = open_store(target)
    try:
        assert isinstance(store, PgStore) and store.writable
        assert store.schema == target.rsplit("%3D", 1)[1]
        with store.write() as db:
            ws_rows.add_workspace(db, "kb", "/nowhere", {})
            assert next_generation(db) == 1
            with pytest.raises(RuntimeError), db:  # a nested write is a savepoint: only it is undone
                ws_rows.add_workspace(db, "gone", "/nowhere", {})
                raise RuntimeError("undo the inner one")
        with store.read() as db:
            assert ws_rows.workspace_names(db) == ["kb"]
            assert ws_rows.store_generation(db) == 1
            assert (
                store.dialect == dialect(db) == POSTGRES
            )  # the store says what its snapshots say (embed/queue.py asks)
            with store.read() as inner:  # a read inside a read joins it
                assert inner is db
    finally:
        store.close()


def test_a_read_is_one_snapshot_while_a_writer_commits(target):
    from autodoc.store import open_store
    from autodoc.store import workspaces as ws_rows
    from autodoc.store.documents import next_generation

    store = open_store(target)
    try:
        with store.write() as db:
            ws_rows.add_workspace(db, "kb", "/nowhere", {})
        seen: list[int] = []
        with store.read() as db:
            seen.append(ws_rows.store_generation(db))

            def write() -> None:
                with store.write() as w:
                    next_generation(w)
                    ws_rows.add_workspace(w, "later", "/nowhere", {})

            t = threading.Thread(target=write)
            t.start()
            t.join()
            # the other thread's transaction has committed: this snapshot still does not see it
            seen.append(ws_rows.store_generation(db))
            assert ws_rows.workspace_names(db) == ["kb"]
        with store.read() as db:
            seen.append(ws_rows.store_generation(db))
            assert ws_rows.workspace_names(db) == ["kb", "later"]
        assert seen == [0, 0, 1]
        with store.read() as db, pytest.raises(Exception, match="read-only transaction"):
            ws_rows.add_workspace(db, "never", "/nowhere", {})
    finally:
        store.close()


def test_a_reader_store_reads_and_refuses_writes(target):
    from autodoc.errors import StoreReadOnly, WorkspaceNotFound
    from autodoc.store import open_store
    from autodoc.store import workspaces as ws_rows

    with pytest.raises(WorkspaceNotFound, match="no AutoDoc store"):
        open_store(target, writer=False)  # nothing migrated there yet, and a reader never migrates
    writer = open_store(target)
    with writer.write() as db:
        ws_rows.add_workspace(db, "kb", "/nowhere", {})
    reader = open_store(target, writer=False)
    try:
        assert not reader.writable
        with reader.read() as db:
            assert ws_rows.workspace_names(db) == ["kb"]
        with pytest.raises(StoreReadOnly):
            reader.check_writable()
        with pytest.raises(StoreReadOnly), reader.write():
            pass
    finally:
        reader.close()
        writer.close()


def test_a_role_that_cannot_write_opens_read_only(pg_uri, target):
    import psycopg

    from autodoc.store import open_store
    from autodoc.store import workspaces as ws_rows
    from autodoc.store.pg.roles import grant

    schema = target.rsplit("%3D", 1)[1]
    role = f"r_{uuid.uuid4().hex[:8]}"
    owner = open_store(target)
    with owner.write() as db:
        ws_rows.add_workspace(db, "kb", "/nowhere", {})
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD 'sekret-pw'")
        grant(conn, readers=[role], schema=schema)
    as_reader = in_schema(_with_user(pg_uri, role, "sekret-pw"), schema)
    store = open_store(as_reader)  # asked for a writer, but the role may only read
    try:
        assert not store.writable
        assert "sekret-pw" not in str(store.path)
        with store.read() as db:
            assert ws_rows.workspace_names(db) == ["kb"]
    finally:
        store.close()
        owner.close()
        with psycopg.connect(pg_uri, autocommit=True) as conn:
            conn.execute(f'REVOKE ALL ON ALL TABLES IN SCHEMA "{schema}" FROM {role}')
            conn.execute(f'REVOKE ALL ON SCHEMA "{schema}" FROM {role}')
            conn.execute(f"DROP ROLE {role}")


def _with_user(uri: str, user: str, password: str) -> str:
    scheme, rest = uri.split("://", 1)
    if "@" in rest:
        rest = rest.split("@", 1)[1]
    return f"{scheme}://{user}:{password}@{rest}"


def test_an_unreachable_database_is_named_without_its_password(tmp_path):
    from autodoc.errors import StoreUnreachable
    from autodoc.store import open_store

    # a socket folder where no server listens: libpq fails at once
    target = f"postgresql://someone:hunter2-secret@/autodoc?host={tmp_path}&port=5999"
    with pytest.raises(StoreUnreachable) as err:
        open_store(target)
    assert "hunter2-secret" not in str(err.value) and "***" in str(err.value)
    assert err.value.data == {"store": "postgresql://someone:***@/autodoc?host=" + str(tmp_path) + "&port=5999"}


def test_writers_of_two_stores_take_distinct_generations_in_commit_order(target):
    """Two daemons' stores writing at once: each generation is taken once, and the change log's cursor
    order is their commit order (the meta row `generation` serializes writers: postgres.md §6)."""
    from autodoc.store import open_store
    from autodoc.store import workspaces as ws_rows
    from autodoc.store.documents import log_change, next_generation

    stores = [open_store(target), open_store(target)]
    try:
        with stores[0].write() as db:
            ws_rows.add_workspace(db, "kb", "/nowhere", {})
        start = threading.Barrier(4)

        def write(store, who: str) -> None:
            start.wait()
            for i in range(15):
                with store.write() as db:
                    gen = next_generation(db)
                    db.execute("SELECT pg_sleep(0.002)")  # a document's rows take a while
                    log_change(db, "kb", f"{who}-{i}.md", "add", gen)

        threads = [threading.Thread(target=write, args=(s, f"{n}{k}")) for n, s in enumerate(stores) for k in "ab"]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        with stores[1].read() as db:
            rows = db.execute("SELECT cursor, generation FROM changes ORDER BY cursor").fetchall()
        generations = [g for _, g in rows]
        assert len(rows) == 60 and len(set(generations)) == 60
        assert generations == sorted(generations)  # cursor order is generation order is commit order
    finally:
        for s in stores:
            s.close()


def test_reads_share_a_few_connections_however_many_threads_read(pg_uri, target):
    """A daemon's threads come and go (anyio retires idle ones): its read connections are as many as
    it runs reads at once, and at most IDLE_READERS stay open between them, not one per thread that
    ever read (4 daemons x 40 threads would pass a server's max_connections)."""
    import os

    import psycopg

    from autodoc.store import open_store
    from autodoc.store import workspaces as ws_rows
    from autodoc.store.pg.store import IDLE_READERS

    def readers_open(expect: int) -> int:
        """The read connections the server still lists: a closed connection's backend leaves
        pg_stat_activity a moment after the client closed it, so wait (5 s at most) for `expect`."""
        deadline = time.monotonic() + 5
        while (n := listed()) != expect and time.monotonic() < deadline:
            time.sleep(0.05)
        return n

    def listed() -> int:
        with psycopg.connect(pg_uri, autocommit=True) as conn:
            row = conn.execute(
                "SELECT COUNT(*) FROM pg_stat_activity WHERE application_name LIKE %s",
                (f"autodoc read %:{os.getpid()}",),
            ).fetchone()
            return int(row[0]) if row else -1

    store = open_store(target)
    try:
        with store.write() as db:
            ws_rows.add_workspace(db, "kb", "/nowhere", {})

        def read_once() -> None:
            with store.read() as db:
                assert ws_rows.workspace_names(db) == ["kb"]

        for _ in range(30):  # one thread after another: one connection serves them all
            t = threading.Thread(target=read_once)
            t.start()
            t.join()
        assert readers_open(1) == 1
        inside = threading.Barrier(IDLE_READERS + 4)

        def read_together() -> None:
            with store.read() as db:
                inside.wait()  # every read is open at once
                assert ws_rows.workspace_names(db) == ["kb"]

        threads = [threading.Thread(target=read_together) for _ in range(IDLE_READERS + 4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert readers_open(IDLE_READERS) == IDLE_READERS
    finally:
        store.close()
    assert readers_open(0) == 0
