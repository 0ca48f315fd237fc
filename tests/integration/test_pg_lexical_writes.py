"""The PostgreSQL store's lexical rows held by the writing transaction and sent at its commit
(store/pg/lexical.py Pending, store/pg/snapshot.py `deferred`; docs/dev/postgres.md section 7c): a
batch's chunks cost a few statements, not two a chunk, and what the transaction holds behaves as
rows written at once would: the transaction reads them, a savepoint rolled back drops its own, a
commit that cannot send them leaves nothing behind. On a real PostgreSQL (the pg_uri fixture).

Answers (byte-identical to SQLite's) are test_pg_lexical's; this file is the write path's
transaction semantics and its statement count.
"""

from __future__ import annotations

import os
import tempfile
import uuid

import pytest
from helpers.pg import missing_reason, schema_uri

pytestmark = pytest.mark.skipif(missing_reason() is not None, reason=missing_reason() or "")


@pytest.fixture(scope="module")
def store(pg_uri):
    import psycopg

    from autodoc.store.pg.store import PgStore

    name = f"lw_{uuid.uuid4().hex[:10]}"
    s = PgStore(schema_uri(pg_uri, name))
    yield s
    s.close()
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def _text(i: int) -> tuple[str, str, str, str]:
    return (f"Title {i}", f"Part {i}", "", f"chunk number {i} holds words like alpha beta gamma{i}")


def _rows(store, ids: list[int]) -> tuple[list[int], list[int], int]:
    """(chunks with sizes, chunks with delta rows, the totals' chunk count), as committed."""
    with store.read() as db:
        sizes = [
            r[0] for r in db.execute("SELECT chunk FROM lexical_sizes WHERE chunk = ANY(?) ORDER BY chunk", (ids,))
        ]
        delta = [
            r[0]
            for r in db.execute("SELECT DISTINCT chunk FROM postings_delta WHERE chunk = ANY(?) ORDER BY chunk", (ids,))
        ]
        chunks = db.execute("SELECT chunks FROM lexical_stats").fetchone()[0]
    return sizes, delta, chunks


def test_a_transaction_reads_its_held_rows_and_a_rolled_back_savepoint_drops_its_own(store):
    from autodoc.store.lexical import writes
    from autodoc.store.pg import lexical

    ids = list(range(1000, 1008))
    before = _rows(store, ids)[2]
    with store.write() as db:
        writes.insert(db, 1000, _text(1000))
        assert lexical.state(db)[0] == before + 1  # sent before the read: the transaction sees it
        writes.insert(db, 1001, _text(1001))
        with pytest.raises(RuntimeError), db:  # a document's savepoint that fails: held rows dropped
            writes.insert(db, 1002, _text(1002))
            raise RuntimeError("this document cannot be written")
        with pytest.raises(RuntimeError), db:  # one whose rows were sent inside it: the server drops them
            writes.insert(db, 1003, _text(1003))
            assert lexical.state(db)[0] == before + 3
            writes.insert(db, 1004, _text(1004))
            raise RuntimeError("nor this one")
        with db:  # a savepoint that succeeds keeps its rows for the commit
            writes.insert(db, 1005, _text(1005))
        writes.insert(db, 1006, _text(1006))
        assert [r[0] for r in db.execute("SELECT chunk FROM lexical_sizes WHERE chunk >= 1000 ORDER BY chunk")] == [
            1000,
            1001,
            1005,
            1006,
        ]
    kept = [1000, 1001, 1005, 1006]
    assert _rows(store, ids) == (kept, kept, before + 4)
    with store.write() as db:  # a chunk's rows deleted again: sizes, totals and delta rows go
        writes.delete(db, [1005])
    assert _rows(store, ids) == ([1000, 1001, 1006], [1000, 1001, 1006], before + 3)


def test_a_commit_that_cannot_send_its_rows_leaves_nothing(store):
    import psycopg

    from autodoc.store.lexical import writes

    before = _rows(store, [2000, 2001])
    with pytest.raises(psycopg.errors.UniqueViolation):
        with store.write() as db:
            writes.insert(db, 2000, _text(2000))
            db.execute("INSERT INTO lexical_sizes(chunk, t0, t1, t2, t3) VALUES (2001, 1, 1, 1, 1)")
            writes.insert(db, 2001, _text(2001))  # held: refused only when sent, at the commit
    assert _rows(store, [2000, 2001]) == before
    with store.write() as db:  # the writer goes on: nothing of the failed transaction is held
        writes.insert(db, 2000, _text(2000))
    assert _rows(store, [2000])[:2] == ([2000], [2000])


def test_a_transaction_of_many_chunks_sends_their_rows_in_a_few_statements(store):
    """Counted on the wire (libpq's trace of the writer connection): writing 200 chunks' lexical
    rows in one transaction sends a handful of statements, where it sent two a chunk before."""
    from autodoc.store.lexical import writes

    fd, path = tempfile.mkstemp(prefix="ad-pgtrace-")
    try:
        with store.write() as db:
            db.conn.pgconn.trace(fd)
            for i in range(3000, 3200):
                writes.insert(db, i, _text(i))
        db.conn.pgconn.untrace()
        with open(path, errors="replace") as f:
            sent = [line for line in f if "\tF\t" in line and ("\tBind\t" in line or "\tQuery\t" in line)]
    finally:
        os.close(fd)
        os.unlink(path)
    assert 0 < len(sent) <= 6, f"{len(sent)} statements for 200 chunks"
    assert _rows(store, list(range(3000, 3200)))[:2] == (list(range(3000, 3200)), list(range(3000, 3200)))


def test_a_batch_of_many_chunks_goes_into_the_segments_and_a_rewritten_chunk_by_the_delta(store):
    """From TAIL_CHUNKS held chunks on, a commit builds their records into the segments (as SQLite's
    index batch does): the same records a delta row would hold. A chunk written again after a delete
    in such a batch has stale records marked dead in its segment: its new ones go by the delta, or
    the dead mark would hide them."""
    from autodoc.store.lexical import postread, writes
    from autodoc.store.pg import lexical

    batch = list(range(5000, 5000 + lexical.TAIL_CHUNKS + 20))
    with store.write() as db:
        for i in batch:
            writes.insert(db, i, _text(i))
    with store.write() as db:  # a few: the delta
        writes.insert(db, 6000, _text(6000))
    with store.read() as db:
        assert _rows(store, batch)[:2] == (batch, [])  # sized, and no delta row: in the segments
        got = postread.read_terms(db, ["alpha", "gamma5010"], lexical.state(db)[2])
        assert {5010, 6000} <= set(got["alpha"]["id"].tolist()) and got["gamma5010"]["id"].tolist() == [5010]
        alpha = {int(r["id"]): (int(r["d"]), r["tf"].tolist()) for r in got["alpha"]}
        assert alpha[5010] == alpha[6000]  # a built record is the record the delta holds

    more = list(range(7000, 7000 + lexical.TAIL_CHUNKS))
    with store.write() as db:
        writes.delete(db, [5010])
        writes.insert(db, 5010, ("Title 5010", "", "", "rewritten as delta5010 alpha"))
        for i in more:
            writes.insert(db, i, _text(i))
    assert _rows(store, [5010, *more])[:2] == ([5010, *more], [5010])
    with store.read() as db:
        got = postread.read_terms(db, ["alpha", "gamma5010", "delta5010"], lexical.state(db)[2])
        assert got["delta5010"]["id"].tolist() == [5010] and got["gamma5010"]["id"].tolist() == []
        ids = got["alpha"]["id"].tolist()
        assert ids.count(5010) == 1 and set(more) <= set(ids) and ids == sorted(ids)
