"""store/pg/snapshot.py on a real PostgreSQL (the pg_uri fixture): the row modules' SQLite-style SQL
runs unchanged (`?`, `?NNN`, `:name`, a literal `%`), `with db:` is a transaction and a savepoint when
nested, and a statement without rows answers as apsw's cursor does (issue 34; docs/dev/postgres.md §1)."""

from __future__ import annotations

import uuid

import pytest
from helpers.pg import missing_reason

pytestmark = pytest.mark.skipif(missing_reason() is not None, reason=missing_reason() or "")


@pytest.fixture
def snap(pg_uri):
    """A PgSnapshot on a schema of this test's own (dropped afterwards), holding a table t."""
    import psycopg

    from autodoc.store.pg.snapshot import PgSnapshot, prepare

    name = f"t_{uuid.uuid4().hex[:10]}"
    conn = psycopg.connect(pg_uri, autocommit=True)
    prepare(conn)
    conn.execute(f'CREATE SCHEMA "{name}"')
    conn.execute(f'SET search_path TO "{name}"')
    conn.execute("CREATE TABLE t(id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, k text, n bigint)")
    s = PgSnapshot(conn)
    yield s
    conn.execute(f'DROP SCHEMA "{name}" CASCADE')
    conn.close()


def test_convert_rewrites_placeholders_outside_literals_and_doubles_percent():
    from autodoc.store.pg.snapshot import convert

    assert convert("SELECT * FROM t WHERE k LIKE '%a?b:c' AND n = ? AND k = ?") == (
        "SELECT * FROM t WHERE k LIKE '%%a?b:c' AND n = %s AND k = %s",
        None,
    )
    assert convert('SELECT n % 2, "we?rd", x::text FROM t WHERE k = :key -- a ? here\n') == (
        'SELECT n %% 2, "we?rd", x::text FROM t WHERE k = %(key)s -- a ? here\n',
        None,
    )
    # SQLite numbers a bare ? after the highest so far: the same arguments bind to the same slots
    assert convert("SELECT ?2, ?1, ?") == ("SELECT %(p2)s, %(p1)s, %(p3)s", 3)


def test_the_row_modules_sql_runs_unchanged(snap):
    from autodoc.store.sql import all_rows, dialect, in_ids, scalar

    assert dialect(snap) == "postgres"
    first = scalar(snap, "INSERT INTO t(k, n) VALUES (?, ?) RETURNING id", ("50%", 1))
    snap.executemany("INSERT INTO t(k, n) VALUES (?, ?)", [("a", 2), ("b", 3), ("c", 4)])
    assert scalar(snap, "SELECT k FROM t WHERE id = ?", (first,)) == "50%"
    assert scalar(snap, "SELECT COUNT(*) FROM t WHERE k LIKE '%0%'") == 1
    assert all_rows(snap, "SELECT k FROM t WHERE n BETWEEN :lo AND :hi ORDER BY n", {"lo": 2, "hi": 3}) == [
        ("a",),
        ("b",),
    ]
    assert all_rows(snap, "SELECT ?2 || k || ?1 FROM t WHERE n = ?3", ("]", "[", 4)) == [("[c]",)]
    cond, arg = in_ids(snap, "k", ["a", "c", "zz"])
    assert sorted(r[0] for r in snap.execute(f"SELECT n FROM t WHERE {cond}", (arg,))) == [2, 4]
    # SUM of integers is numeric in Postgres: answered as SQLite does, an int (and a float when not whole)
    total = scalar(snap, "SELECT SUM(n) FROM t")
    assert total == 10 and type(total) is int
    assert scalar(snap, "SELECT SUM(n) / 4.0 FROM t") == 2.5
    # a statement without rows: None / [] / nothing to iterate, as apsw's cursor answers
    cur = snap.execute("UPDATE t SET n = n + 1 WHERE k = ?", ("a",))
    assert cur.fetchone() is None and cur.fetchall() == [] and list(cur) == []
    assert list(snap.execute("SELECT n FROM t ORDER BY n")) == [(1,), (3,), (3,), (4,)]


def test_with_is_a_transaction_and_a_savepoint_when_nested(snap):
    from autodoc.store.sql import scalar

    with snap:
        snap.execute("INSERT INTO t(k, n) VALUES ('kept', 1)")
        with pytest.raises(ZeroDivisionError), snap:
            snap.execute("INSERT INTO t(k, n) VALUES ('inner', 2)")
            1 / 0
        assert snap.in_transaction
    assert not snap.in_transaction
    assert [r[0] for r in snap.execute("SELECT k FROM t")] == ["kept"]
    with pytest.raises(RuntimeError), snap:
        snap.execute("INSERT INTO t(k, n) VALUES ('gone', 3)")
        raise RuntimeError("rolled back")
    assert scalar(snap, "SELECT COUNT(*) FROM t") == 1


def test_an_apsw_connection_is_a_sqlite_snapshot(tmp_path):
    import apsw

    from autodoc.store.sql import dialect, in_ids, scalar

    db = apsw.Connection(str(tmp_path / "x.db"))
    db.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, k TEXT)")
    assert dialect(db) == "sqlite"
    assert scalar(db, "INSERT INTO t(k) VALUES (?) RETURNING id", ("a",)) == 1
    cond, arg = in_ids(db, "k", ["a", "b"])
    assert scalar(db, f"SELECT COUNT(*) FROM t WHERE {cond}", (arg,)) == 1
