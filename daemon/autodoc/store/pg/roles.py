"""Who may do what in a shared PostgreSQL store (docs/dev/postgres.md, section 7).

Three kinds of role: the owner (runs the migrations, store/pg/schema.py), an indexer (reads and writes
the rows), a reader (reads only: a daemon connected as one searches and reads documents, and never
indexes). `grant` gives existing roles what their kind needs on one AutoDoc schema (the roles
themselves, with their passwords, are the administrator's to create); `can_write` is how a store tells
which kind it connected as, so that a reader's daemon opens the store read-only instead of failing
mid-index.

Runs on: the caller's thread, on the (autocommit) connection it passes (`can_write`: the thread that
opens the store, store/pg/store.py).
"""

from __future__ import annotations

from collections.abc import Iterable

import psycopg
from psycopg import sql

from .schema import SCHEMA


def grant(
    conn: psycopg.Connection, *, readers: Iterable[str] = (), indexers: Iterable[str] = (), schema: str = SCHEMA
) -> None:
    """Grant `readers` SELECT and `indexers` SELECT, INSERT, UPDATE, DELETE on every table of `schema`
    (and what the tables' identity columns need), in one transaction. Run by the schema's owner
    after each migration: a table a migration adds is covered only once this runs again."""
    ns = sql.Identifier(schema)
    with conn.transaction():
        for role in readers:
            who = sql.Identifier(role)
            conn.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(ns, who))
            conn.execute(sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA {} TO {}").format(ns, who))
        for role in indexers:
            who = sql.Identifier(role)
            conn.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(ns, who))
            conn.execute(
                sql.SQL("GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {} TO {}").format(ns, who)
            )
            conn.execute(sql.SQL("GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA {} TO {}").format(ns, who))


def can_write(conn: psycopg.Connection, schema: str = SCHEMA) -> bool:
    """Whether this connection's role may index: write documents, chunks and the change log."""
    # one privilege a call: has_table_privilege with a list is true when ANY of them is held
    row = conn.execute(
        "SELECT bool_and(has_table_privilege(current_user, format('%%I.%%I', %s::text, t), p)) "
        "FROM unnest(ARRAY['documents', 'chunks', 'changes', 'meta']) AS t, "
        "unnest(ARRAY['INSERT', 'UPDATE', 'DELETE']) AS p",
        (schema,),
    ).fetchone()
    return bool(row and row[0])
