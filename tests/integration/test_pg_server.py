"""The private PostgreSQL server the PostgreSQL store's tests stand on (issue 34): it has pgvector,
and it stops cleanly, keeping what was committed across a restart (what the fault tests will need)."""

from __future__ import annotations

import pytest
from helpers.pg import PgServer, missing_reason

pytestmark = pytest.mark.skipif(missing_reason() is not None, reason=missing_reason() or "")


def test_vector_extension_works(pg_uri):
    import psycopg

    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        version = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
        assert version is not None and version[0].startswith("0.")
        conn.execute("DROP TABLE IF EXISTS t_vec")
        conn.execute("CREATE TABLE t_vec (id int PRIMARY KEY, v vector(3))")
        conn.execute("INSERT INTO t_vec VALUES (1, '[1,0,0]'), (2, '[0,1,0]'), (3, '[0.9,0.1,0]')")
        conn.execute("CREATE INDEX ON t_vec USING hnsw (v vector_cosine_ops)")
        rows = conn.execute("SELECT id, 1 - (v <=> '[1,0,0]') FROM t_vec ORDER BY v <=> '[1,0,0]'").fetchall()
        conn.execute("DROP TABLE t_vec")
    assert [r[0] for r in rows] == [1, 3, 2]
    assert rows[0][1] == pytest.approx(1.0)


def test_server_stops_cleanly_and_keeps_committed_rows(short_tmp):
    import psycopg

    server = PgServer(short_tmp / "pgdata")
    uri = server.start()
    try:
        with psycopg.connect(uri, autocommit=True) as conn:
            conn.execute("CREATE TABLE kept (x int)")
            conn.execute("INSERT INTO kept VALUES (42)")
    finally:
        server.stop()
    assert not server.running()
    assert "database system is shut down" in server.log_text()
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(uri, connect_timeout=2).close()

    uri = server.start()  # the same data folder: a restart, as a server restarted mid-index would be
    try:
        with psycopg.connect(uri) as conn:
            assert conn.execute("SELECT x FROM kept").fetchall() == [(42,)]
    finally:
        server.stop()
    assert not server.running()
