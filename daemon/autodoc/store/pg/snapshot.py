"""A psycopg connection that takes the row modules' SQLite-style SQL: the `Snapshot` of the
PostgreSQL store (store/interface.py; docs/dev/postgres.md, section 1).

The row modules write one SQL text for both backends, with SQLite's placeholders: `?`, `?NNN`
(numbered) and `:name` (with a dict of arguments). psycopg's are `%s` and `%(name)s`, and a `%` of
the SQL itself (a `LIKE '%x'` pattern, a modulo) must be `%%`. `convert` rewrites a statement once
(cached by its text); placeholders inside quoted literals, quoted identifiers and comments are left
alone, and `::` is Postgres's cast, not a parameter.

`with snap:` is a transaction, a savepoint when one is open already (as an apsw connection's is);
the connection itself stays in autocommit so that each transaction is explicit and begins with the
connection's own isolation level and access mode (the store's readers: REPEATABLE READ, READ ONLY).
A writer's transaction may hold rows back to send them in one statement (`deferred`: the chunks'
lexical rows, store/pg/lexical.py): they are sent before a statement that names their tables and
before the commit, and a savepoint rolled back drops those it added.

A statement's cursor answers `fetchone`, `fetchall` and iteration; a statement that returns no rows
answers None and [] (as apsw's cursor does), never psycopg's "no result available".

Runs on: the one thread that holds the connection at a time (psycopg connections are thread-safe,
but one transaction is one thread's; the store gives each thread its own reader).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager
from decimal import Decimal
from typing import Any, Protocol

import psycopg
from psycopg.adapt import Loader

DIALECT = "postgres"

# what the scanner steps over whole (where a ? or :name is not a parameter), and the parameters
_TOKEN = re.compile(
    r"""
    (?P<skip>'(?:[^']|'')*'|"(?:[^"]|"")*"|--[^\n]*|/\*.*?\*/|::)
    | (?P<num>\?(?P<n>\d+))
    | (?P<pos>\?)
    | (?P<name>:(?P<ident>[A-Za-z_][A-Za-z_0-9]*))
    | (?P<pct>%)
    """,
    re.VERBOSE | re.DOTALL,
)


@functools.lru_cache(maxsize=2048)
def convert(sql: str) -> tuple[str, int | None]:
    """(psycopg's text, None) for `?` or `:name` SQL; (text, N) for numbered `?NNN` SQL, whose
    arguments (a sequence) become the mapping `p1..pN` (a bare `?` among them takes the next
    number, as in SQLite)."""
    numbered = any(m.lastgroup == "num" for m in _TOKEN.finditer(sql))
    out: list[str] = []
    last = 0
    highest = 0
    for m in _TOKEN.finditer(sql):
        out.append(sql[last : m.start()])
        last = m.end()
        kind = m.lastgroup
        if kind == "skip":
            out.append(m.group(0).replace("%", "%%"))
        elif kind == "pct":
            out.append("%%")
        elif kind == "pos":
            highest += 1
            out.append(f"%(p{highest})s" if numbered else "%s")
        elif kind == "num":
            n = int(m.group("n"))
            highest = max(highest, n)
            out.append(f"%(p{n})s")
        elif kind == "name":
            out.append(f"%({m.group('ident')})s")
    out.append(sql[last:])
    return "".join(out), (highest if numbered else None)


def _args(args: Any, numbered: int | None) -> Any:
    if args is None:
        return {} if numbered is not None else ()
    if numbered is not None and not isinstance(args, dict):
        return {f"p{i + 1}": v for i, v in enumerate(args)}
    return args


class PgCursor:
    """One statement's rows, as the row modules read an apsw cursor's."""

    __slots__ = ("_cur",)

    def __init__(self, cur: psycopg.Cursor[Any]):
        self._cur = cur

    def fetchone(self) -> Any:
        if self._cur.description is None:
            return None
        return self._cur.fetchone()

    def fetchall(self) -> list[Any]:
        if self._cur.description is None:
            return []
        return self._cur.fetchall()

    def __iter__(self) -> Iterator[Any]:
        # psycopg rebuilds `description` on each read of it: checked once here, not per row
        if self._cur.description is None:
            return iter(())
        return iter(self._cur)

    def __next__(self) -> Any:
        if self._cur.description is None:
            raise StopIteration
        row = self._cur.fetchone()
        if row is None:
            raise StopIteration
        return row

    @property
    def rowcount(self) -> int:
        return self._cur.rowcount


class _NumericLoader(Loader):
    """`numeric` (what SUM of integers and arithmetic on them answer in Postgres) as SQLite answers
    it: an int when integral, else a float; never a Decimal leaking into an answer."""

    def load(self, data: Any) -> Any:
        d = Decimal(bytes(data).decode())
        return int(d) if d == d.to_integral_value() else float(d)


def prepare(conn: psycopg.Connection) -> None:
    """Set a store connection up once: numeric answers as SQLite's (int or float)."""
    conn.adapters.register_loader("numeric", _NumericLoader)


class Deferred(Protocol):
    """Rows a transaction holds back (store/pg/lexical.py's Pending): positions, so a savepoint can
    drop what it added; sent before a statement that reads their tables, and at the commit."""

    def mark(self) -> Any: ...

    def undo(self, mark: Any) -> None: ...

    def before(self, db: PgSnapshot, sql: str) -> None: ...

    def committing(self, db: PgSnapshot) -> None: ...


class PgSnapshot:
    """A psycopg (autocommit) connection speaking the row modules' SQL; `dialect` is "postgres"."""

    dialect = DIALECT

    def __init__(self, conn: psycopg.Connection):
        self.conn = conn
        self._tx: list[AbstractContextManager[Any]] = []
        self._marks: list[Any] = []  # the deferred rows' mark as each savepoint began (None: the transaction)
        self.deferred: Deferred | None = None

    def execute(self, sql: str, args: Any = None, /) -> PgCursor:
        if self.deferred is not None:
            self.deferred.before(self, sql)
        text, numbered = convert(sql)
        return PgCursor(self.conn.execute(text, _args(args, numbered)))

    def executemany(self, sql: str, seq: Iterable[Any], /) -> None:
        if self.deferred is not None:
            self.deferred.before(self, sql)
        text, numbered = convert(sql)
        with self.conn.cursor() as cur:
            cur.executemany(text, [_args(a, numbered) for a in seq])

    @property
    def depth(self) -> int:
        """How many `with snap:` blocks are open on it (0: none; 2: a savepoint inside a transaction)."""
        return len(self._tx)

    @property
    def in_transaction(self) -> bool:
        return self.conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE

    def __enter__(self) -> PgSnapshot:
        tx = self.conn.transaction()
        tx.__enter__()
        self._tx.append(tx)
        self._marks.append(self.deferred.mark() if self.deferred is not None and len(self._tx) > 1 else None)
        return self

    def __exit__(self, etype: Any, evalue: Any, etraceback: Any, /) -> bool:
        mark = self._marks.pop()
        deferred = self.deferred
        if deferred is not None:
            if etype is not None:
                deferred.undo(mark)  # (None at the transaction's end: everything)
            elif not self._marks:  # the commit: what the transaction held goes first
                try:
                    deferred.committing(self)
                except BaseException as e:
                    deferred.undo(None)
                    self._tx.pop().__exit__(type(e), e, e.__traceback__)
                    raise
        tx = self._tx.pop()
        return bool(tx.__exit__(etype, evalue, etraceback))

    def close(self) -> None:
        self.conn.close()
