"""store/pg/roles.py on a real PostgreSQL (the pg_uri fixture): a reader role reads and never writes,
and is told so before it tries; an indexer role writes (issue 34: "a read-only database role can
search and read but never index"; docs/dev/postgres.md, section 7)."""

from __future__ import annotations

import uuid

import pytest
from helpers.pg import missing_reason

pytestmark = pytest.mark.skipif(missing_reason() is not None, reason=missing_reason() or "")


@pytest.fixture
def roles(pg_uri):
    """(schema, {kind: connection string as that role}): a migrated schema with one workspace,
    a reader and an indexer role granted on it; all dropped afterwards."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    from autodoc.store.pg.roles import grant
    from autodoc.store.pg.schema import migrate

    tag = uuid.uuid4().hex[:8]
    schema, reader, indexer = f"t_{tag}", f"reader_{tag}", f"indexer_{tag}"
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        migrate(conn, schema)
        conn.execute(
            f"INSERT INTO \"{schema}\".workspaces(name, root, config, created) VALUES ('kb', '/kb', '{{}}', 0)"
        )
        conn.execute(f'CREATE ROLE "{reader}" LOGIN')
        conn.execute(f'CREATE ROLE "{indexer}" LOGIN')
        grant(conn, readers=[reader], indexers=[indexer], schema=schema)
    yield schema, {"reader": make_conninfo(pg_uri, user=reader), "indexer": make_conninfo(pg_uri, user=indexer)}
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        for role in (reader, indexer):
            conn.execute(f'DROP OWNED BY "{role}"')
            conn.execute(f'DROP ROLE "{role}"')


INSERT_DOC = (
    "INSERT INTO {s}.documents(workspace_id, path, generation, content_hash, size, mtime_ns, title, tags, aliases, "
    "frontmatter, supersedes, superseded_by, problems, line_count, content, indexed_at) "
    "SELECT id, 'a.md', 1, 'h', 1, 0, 'A', '[]', '[]', '{{}}', '[]', '[]', '[]', 1, 'x', 0 FROM {s}.workspaces"
)


def test_a_reader_reads_and_never_writes(roles):
    import psycopg

    from autodoc.store.pg.indexlock import IndexerLock
    from autodoc.store.pg.roles import can_write

    schema, who = roles
    with psycopg.connect(who["indexer"], autocommit=True) as conn:
        assert can_write(conn, schema)
        conn.execute(INSERT_DOC.format(s=f'"{schema}"'))
    with psycopg.connect(who["reader"], autocommit=True) as conn:
        assert conn.execute("SELECT current_user").fetchone()[0].startswith("reader_")
        assert not can_write(conn, schema)
        assert conn.execute(f'SELECT path, content FROM "{schema}".documents').fetchall() == [("a.md", b"x")]
        for statement in (
            INSERT_DOC.format(s=f'"{schema}"'),
            f"UPDATE \"{schema}\".meta SET value = '9' WHERE key = 'generation'",
            f'DELETE FROM "{schema}".documents',
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)
        # nor can it take the indexer lock: refused, and (its session still open) not left holding it
        (wid,) = conn.execute(f'SELECT id FROM "{schema}".workspaces').fetchone()
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            IndexerLock(conn, wid, schema=schema).try_acquire({"host": "reader"})
        with psycopg.connect(who["indexer"], autocommit=True) as other:
            assert IndexerLock(other, wid, schema=schema).try_acquire({"host": "indexer"})
            assert other.execute(f'SELECT count(*) FROM "{schema}".documents').fetchone() == (1,)
