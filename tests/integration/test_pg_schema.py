"""store/pg/schema.py on a real PostgreSQL (the pg_uri fixture): the SQLite store's schema, table for
table and column for column, migrated once however many daemons start together, and a database of a
newer schema refused (issue 34; docs/dev/postgres.md, section 4)."""

from __future__ import annotations

import threading
import uuid

import pytest
from helpers.pg import missing_reason

pytestmark = pytest.mark.skipif(missing_reason() is not None, reason=missing_reason() or "")

# what Postgres has that SQLite keeps implicitly (links' rowid) or has no counterpart for
PG_ONLY_COLUMNS = {"links": {"id"}, "vectors": {"v"}}
PG_ONLY_TABLES = {"indexer", "lexical_sizes", "lexical_stats"}  # the last two: FTS5's own records


@pytest.fixture
def schema(pg_uri):
    """A schema name of this test's own, dropped afterwards."""
    import psycopg

    name = f"t_{uuid.uuid4().hex[:10]}"
    yield name
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def sqlite_tables(tmp_path) -> dict[str, set[str]]:
    from autodoc.store import Store

    store = Store(tmp_path / "autodoc.db")
    try:
        db = store.writer()
        names = [n for (n,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {
            n: {row[1] for row in db.execute(f"PRAGMA table_info({n})")}
            for n in names
            if not n.startswith(("chunks_fts", "sqlite_"))
        }
    finally:
        store.close()


def pg_tables(conn, schema: str) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    rows = conn.execute(
        "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = %s", (schema,)
    )
    for table, column in rows:
        out.setdefault(table, set()).add(column)
    return out


def test_migrate_makes_the_sqlite_schema(pg_uri, schema, tmp_path):
    import psycopg

    from autodoc.store.pg.schema import MIGRATIONS, migrate, schema_version

    with psycopg.connect(pg_uri, autocommit=True) as conn:
        assert schema_version(conn, schema) == 0
        assert migrate(conn, schema) == len(MIGRATIONS) == 2
        got = pg_tables(conn, schema)
        meta = dict(conn.execute(f'SELECT key, value FROM "{schema}".meta').fetchall())
        # a second run changes nothing
        assert migrate(conn, schema) == 2
        assert pg_tables(conn, schema) == got
        # the migration's search path did not outlive its transaction
        assert schema not in str(conn.execute("SHOW search_path").fetchone())
    want = sqlite_tables(tmp_path)
    assert set(got) == set(want) | PG_ONLY_TABLES
    for table, columns in want.items():
        assert got[table] == columns | PG_ONLY_COLUMNS.get(table, set()), table
    assert meta["schema_version"] == "2"
    assert meta["generation"] == "0"
    assert meta["vector_extension"] == "public"  # pgserver's server has pgvector


def test_the_vector_column_holds_the_products_vectors(pg_uri, schema):
    import psycopg

    from autodoc.store.pg.schema import migrate

    with psycopg.connect(pg_uri, autocommit=True) as conn:
        migrate(conn, schema)
        conn.execute(f'SET search_path TO "{schema}", public')
        (wid,) = conn.execute(
            "INSERT INTO workspaces(name, root, config, created) VALUES ('kb', '/kb', '{}', 0) RETURNING id"
        ).fetchone()
        conn.execute(
            "INSERT INTO vectors(workspace_id, model_fp, text_hash, f32, bits, v) VALUES "
            "(%s, 'fp', 'a', '', '', '[1,0,0]'), (%s, 'fp', 'b', '', '', '[0,1,0]')",
            (wid, wid),
        )
        rows = conn.execute("SELECT text_hash FROM vectors ORDER BY v::vector(3) <=> '[0.2,0.9,0]' LIMIT 1")
        assert rows.fetchall() == [("b",)]


def test_daemons_starting_together_migrate_once(pg_uri, schema):
    """Eight connections migrate at the same instant: every one returns the version and none fails.
    Without the advisory lock, the second CREATE TABLE of the same name fails (DuplicateTable, or a
    unique violation on pg_type), which is what this test would show."""
    import psycopg

    from autodoc.store.pg.schema import migrate

    n = 8
    conns = [psycopg.connect(pg_uri, autocommit=True) for _ in range(n)]
    barrier = threading.Barrier(n)
    results: list[object] = [None] * n

    def run(i: int) -> None:
        barrier.wait()
        try:
            results[i] = migrate(conns[i], schema)
        except Exception as e:
            results[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    try:
        assert results == [2] * n
        rows = conns[0].execute(f'SELECT count(*) FROM "{schema}".meta WHERE key = %s', ("schema_version",))
        assert rows.fetchone() == (1,)
    finally:
        for c in conns:
            c.close()


def test_migrate_refuses_a_connection_inside_a_transaction(pg_uri, schema):
    import psycopg

    from autodoc.store.pg.schema import migrate

    with psycopg.connect(pg_uri) as conn:  # not autocommit: the first statement opens a transaction
        conn.execute("SELECT 1")
        with pytest.raises(RuntimeError, match="outside a transaction"):
            migrate(conn, schema)


def test_a_newer_schema_is_refused(pg_uri, schema):
    import psycopg

    from autodoc.errors import StoreTooNew
    from autodoc.store.pg.schema import migrate

    with psycopg.connect(pg_uri, autocommit=True) as conn:
        migrate(conn, schema)
        conn.execute(f"UPDATE \"{schema}\".meta SET value = '3' WHERE key = 'schema_version'")
        with pytest.raises(StoreTooNew, match=r"version 3, newer than this AutoDoc understands \(2\)"):
            migrate(conn, schema)
        # refused without touching it
        assert conn.execute(f"SELECT value FROM \"{schema}\".meta WHERE key = 'schema_version'").fetchone() == ("3",)


def test_posting_lists_written_after_version_2_are_stored_uncompressed(pg_uri, schema, monkeypatch):
    """A version-1 schema migrates to 2; a posting list written afterwards is not pglz-compressed
    (every search reading it would decompress it: docs/dev/postgres.md 7c), one written before stays so."""
    import psycopg

    from autodoc.store.pg import schema as pgschema

    blob = b"\x00\x01" * 50_000  # compressible and past the 2 kB toast threshold
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        monkeypatch.setattr(pgschema, "MIGRATIONS", pgschema.MIGRATIONS[:1])
        assert pgschema.migrate(conn, schema) == 1
        insert = f'INSERT INTO "{schema}".postings(term, seg, wide, data) VALUES (%s, 0, 0, %s)'
        conn.execute(insert, ("before", blob))
        monkeypatch.undo()
        assert pgschema.migrate(conn, schema) == 2
        conn.execute(insert, ("after", blob))
        got = dict(conn.execute(f'SELECT term, pg_column_compression(data) FROM "{schema}".postings').fetchall())
        assert got == {"before": "pglz", "after": None}
        assert conn.execute(f'SELECT data FROM "{schema}".postings WHERE term = %s', ("after",)).fetchone() == (blob,)
