"""The lexical index's own statistics on the PostgreSQL store, which has no FTS5 (docs/dev/postgres.md,
section 2): what FTS5 keeps beside its doclists and the SQLite store reads from it.

- `lexical_sizes`: each indexed chunk's tokens per column (title, breadcrumb, meta, body): FTS5's
  docsize record, so a chunk's removal can take its tokens out of the totals;
- `lexical_stats`: the one row of the index's totals (chunks, tokens per column): FTS5's averages
  record, the N and the average length of its bm25. `version` goes up with every write to the index
  and `born` is drawn when the row is made, so (born, version) names one state of one database's
  index, as FTS5's structure record does (readers' caches are keyed by it).

The postings themselves (`postings`, `postings_delta`, `postings_dead`) are the SQLite store's
tables and records (store/lexical/postings.py), written by the same code; a term's document count
is derived from them (store/lexical/postread.live_counts), never kept apart. The tables are made
by store/pg/schema.py.

A chunk's rows are not sent when it is written but held by the writer's snapshot (`Pending`, the
snapshot's `deferred`) and sent together when the transaction commits: the sizes and totals in one
statement, an index batch's records built into the segments (from TAIL_CHUNKS chunks, as SQLite's
batch tail is) and a live save's few by the delta in one COPY, not two statements a chunk (section
7c: those were most of an index job's time). A statement on the same connection that names one of
the three tables sends them first, so the transaction reads what it wrote, as on SQLite; a savepoint
rolled back takes its chunks' held rows with it.

Runs on: the caller's thread, inside the writing transaction (add, removed) or on a read
snapshot (state).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

from ..interface import Snapshot
from ..sql import in_ids, one

# held chunks from which a flush builds their records into the segments, not the delta (as
# store/lexical/postings.py TAIL_CHUNKS on SQLite): a live save's few chunks go by the delta, since
# building rewrites each of their tokens' segment rows
TAIL_CHUNKS = 256
# the tables whose rows a transaction may hold back (a statement naming one sends them first)
_HELD = re.compile(r"\b(postings_delta|lexical_sizes|lexical_stats)\b", re.IGNORECASE)


def state(db: Snapshot) -> tuple[int, int, tuple]:
    """(chunks, tokens over every column, a key naming this state of the index and of its postings'
    maintenance: store/lexical/postread.cache_key's on SQLite): one read."""
    chunks, tokens, version, born, gen = one(
        db,
        "SELECT chunks, t0 + t1 + t2 + t3, version, born, (SELECT value FROM meta WHERE key = 'postings_gen') "
        "FROM lexical_stats WHERE id = 1",
    )
    return int(chunks), int(tokens), ("postgres", born, int(version), gen or "0")


def add(
    db: Snapshot, chunk_id: int, d: int, terms: dict[str, list[int]], sizes: list[int], fold: Fold | None = None
) -> None:
    """A chunk's lexical rows (its postings delta: token -> count per column; its column sizes, FTS5's
    docsize and averages), held until the transaction commits (sent now outside one). `fold` builds
    an index batch's rows into the postings segments (store/lexical/postings.py fold_rows: passed
    in, as postings imports this module)."""
    pending = getattr(db, "deferred", None)
    if not isinstance(pending, Pending):
        pending = Pending()
        db.deferred = pending  # type: ignore[attr-defined]  # a PgSnapshot (dialect postgres)
    if fold is not None:
        pending.fold = fold
    if chunk_id in pending.ids:  # written twice unsent: the first goes first, as a row at a time would
        pending.flush(db)
    pending.rows.append((chunk_id, d, terms, sizes))
    pending.ids.add(chunk_id)
    if not getattr(db, "depth", 0):  # no transaction open: nothing to hold the rows for
        pending.committing(db)


Row = tuple[int, int, dict[str, list[int]], list[int]]  # chunk id, its length, token -> counts, column sizes
# many chunks' rows built into the postings segments; returns those that must go by the delta
Fold = Callable[[Snapshot, list[Row]], list[Row]]


class Pending:
    """The lexical rows of the chunks written in the open transaction: `rows` in the order written,
    the first `sent` of them sent, the others held.

    Sent rows are kept until the transaction ends, because a savepoint that rolls back undoes on the
    server what was sent inside it, rows written before it as well: those are held again, and the
    ones written inside it dropped (`mark`: what was sent and written when a savepoint began)."""

    def __init__(self) -> None:
        self.rows: list[Row] = []
        self.sent = 0
        self.ids: set[int] = set()  # the held rows' chunks
        self.fold: Fold | None = None

    def mark(self) -> tuple[int, int]:
        return self.sent, len(self.rows)

    def undo(self, mark: tuple[int, int] | None) -> None:
        """A savepoint that began at `mark` rolled back (None: the transaction did)."""
        sent, written = mark or (0, 0)
        del self.rows[written:]
        self.sent = min(self.sent, sent)
        self.ids = {r[0] for r in self.rows[self.sent :]}

    def before(self, db: Snapshot, sql: str) -> None:
        """A statement is about to run on the connection: the held rows first if it names their tables."""
        if self.sent < len(self.rows) and _names_held(sql):
            self.flush(db)

    def committing(self, db: Snapshot) -> None:
        """The transaction is about to commit: what it holds is sent (a failure rolls it back)."""
        self.flush(db)
        self.undo(None)  # the transaction's rows are the server's now

    def flush(self, db: Snapshot) -> None:
        """Send the held rows: the sizes and the totals in one statement, the postings in one COPY."""
        rows = self.rows[self.sent :]
        self.sent = len(self.rows)  # first: the statements below name the tables themselves
        self.ids.clear()
        if not rows:
            return
        sizes: list[list[int]] = [[], [], [], [], []]  # chunk, t0..t3: a column each
        for chunk_id, _, _, cols in rows:
            for c, v in enumerate((chunk_id, *cols)):
                sizes[c].append(v)
        db.execute(
            "WITH s AS (INSERT INTO lexical_sizes(chunk, t0, t1, t2, t3) "
            "SELECT * FROM unnest(?::bigint[], ?::integer[], ?::integer[], ?::integer[], ?::integer[])) "
            "UPDATE lexical_stats SET chunks = chunks + ?, t0 = t0 + ?, t1 = t1 + ?, t2 = t2 + ?, t3 = t3 + ?, "
            "version = version + ? WHERE id = 1",
            (*sizes, len(rows), *(sum(c) for c in sizes[1:]), len(rows)),
        )
        if len(rows) >= TAIL_CHUNKS and self.fold is not None:  # an index batch's: into the segments
            rows = self.fold(db, rows)
        # COPY, not an INSERT's ON CONFLICT: a chunk's delta rows exist only beside its lexical_sizes
        # row (written and deleted together), whose primary key refused a second chunk just above
        text = _copy_text(rows)
        if text:
            with db.conn.cursor() as cur:  # type: ignore[attr-defined]  # a PgSnapshot's psycopg connection
                with cur.copy("COPY postings_delta(term, chunk, d, t0, t1, t2, t3) FROM STDIN") as copy:
                    copy.write(text)


# COPY's text format: a backslash, tab, newline or carriage return in a value is escaped (FTS5's
# tokens hold none of them, they separate tokens: only a guard)
_ESCAPE = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})
_SPECIAL = re.compile(r"[\\\t\n\r]")


def _copy_text(rows: list[Row]) -> str:
    """The postings delta rows (term, chunk, d, t0..t3), one line each, in COPY's text format."""
    lines: list[str] = []
    for chunk_id, d, counts, _ in rows:
        tail = f"\t{chunk_id}\t{d}\t"
        if _SPECIAL.search("".join(counts)):  # (never, with FTS5's tokens)
            counts = {t.translate(_ESCAPE): v for t, v in counts.items()}
        lines += [f"{t}{tail}{a}\t{b}\t{c}\t{e}" for t, (a, b, c, e) in counts.items()]
    return "\n".join(lines) + "\n" if lines else ""


@functools.lru_cache(maxsize=1024)
def _names_held(sql: str) -> bool:
    return _HELD.search(sql) is not None


def removed(db: Snapshot, chunk_ids: list[int]) -> None:
    """These chunks' lexical rows are gone: their sizes leave the totals."""
    if not chunk_ids:
        return
    cond, arg = in_ids(db, "chunk", chunk_ids)
    n, t0, t1, t2, t3 = one(
        db,
        f"WITH gone AS (DELETE FROM lexical_sizes WHERE {cond} RETURNING t0, t1, t2, t3) "
        "SELECT COUNT(*), COALESCE(SUM(t0), 0), COALESCE(SUM(t1), 0), COALESCE(SUM(t2), 0), COALESCE(SUM(t3), 0) "
        "FROM gone",
        (arg,),
    )
    if n:
        db.execute(
            "UPDATE lexical_stats SET chunks = chunks - ?, t0 = t0 - ?, t1 = t1 - ?, t2 = t2 - ?, t3 = t3 - ?, "
            "version = version + 1 WHERE id = 1",
            (int(n), int(t0), int(t1), int(t2), int(t3)),
        )
