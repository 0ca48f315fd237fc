"""store/pg/notify.py on a real PostgreSQL (the pg_uri fixture): the change feed every daemon sharing
one database keeps (issue 34; docs/dev/postgres.md, section 6). Writers here are other connections
doing what a writing transaction does (the generation row, a change row, pg_notify), so the feed is
tested apart from the daemon; test_pg_daemons.py runs it inside real daemons."""

from __future__ import annotations

import random
import threading
import time
import uuid

import pytest
from helpers.pg import missing_reason

pytestmark = pytest.mark.skipif(missing_reason() is not None, reason=missing_reason() or "")


@pytest.fixture
def schema(pg_uri):
    import psycopg

    from autodoc.store.pg.schema import migrate

    name = f"t_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        migrate(conn, name)
    yield name
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def write_change(conn, schema: str, path: str, hold: float = 0.0) -> int:
    """One writing transaction as store/documents.py makes it: the generation row first (which
    serialises writers), then the change row and its notification."""
    from autodoc.store.pg.notify import CHANNEL

    with conn.transaction():
        (gen,) = conn.execute(
            f"UPDATE \"{schema}\".meta SET value = (value::bigint + 1)::text WHERE key = 'generation' RETURNING value"
        ).fetchone()
        (cursor,) = conn.execute(
            f'INSERT INTO "{schema}".changes(workspace, path, op, generation, old_path, time) '
            "VALUES ('kb', %s, 'modify', %s, NULL, 0) RETURNING cursor",
            (path, int(gen)),
        ).fetchone()
        conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, str(cursor)))
        if hold:
            time.sleep(hold)  # other writers queue on the generation row meanwhile
    return int(cursor)


class Collected:
    def __init__(self) -> None:
        self.rows: list[dict | None] = []
        self.cond = threading.Condition()

    def __call__(self, rows):
        with self.cond:
            self.rows.extend(rows if rows is not None else [None])
            self.cond.notify_all()

    def wait_for(self, n: int, timeout: float = 10.0) -> list:
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.rows) >= n, timeout), f"{len(self.rows)} of {n} arrived"
            return list(self.rows)


def feed_on(pg_uri, schema, got, **kw):
    import psycopg

    from autodoc.store.pg.notify import ChangeFeed

    feed = ChangeFeed(lambda: psycopg.connect(pg_uri, autocommit=True), schema, got, **kw).start()
    assert feed.connected.wait(10)
    return feed


def test_the_feed_hands_on_each_committed_change_once_in_order_and_nothing_uncommitted(pg_uri, schema):
    import psycopg

    with psycopg.connect(pg_uri, autocommit=True) as w:
        before = write_change(w, schema, "old.md")  # before the feed: not handed on
        got = Collected()
        feed = feed_on(pg_uri, schema, got)
        try:
            assert feed.cursor == before
            cursors = [write_change(w, schema, f"d{i}.md") for i in range(5)]
            assert [r["cursor"] for r in got.wait_for(5)] == cursors
            assert [r["path"] for r in got.rows] == [f"d{i}.md" for i in range(5)]
            assert got.rows[0].keys() >= {"cursor", "workspace", "path", "op", "generation", "old_path", "time"}

            # an open transaction's change is neither read nor notified until it commits
            w.execute("BEGIN")
            (gen,) = w.execute(
                f"UPDATE \"{schema}\".meta SET value = (value::bigint + 1)::text WHERE key='generation' RETURNING value"
            ).fetchone()
            w.execute(
                f"INSERT INTO \"{schema}\".changes(workspace, path, op, generation, time) VALUES ('kb','late.md','add',%s,0)",
                (int(gen),),
            )
            w.execute("SELECT pg_notify('autodoc_changes', 'x')")
            time.sleep(0.5)
            assert len(got.rows) == 5
            w.execute("COMMIT")
            assert got.wait_for(6)[-1]["path"] == "late.md"
        finally:
            feed.stop()
    assert len(got.rows) == 6


def test_changes_committed_while_the_feed_was_cut_off_arrive_after_it_reconnects(pg_uri, schema):
    import psycopg

    got = Collected()
    feed = feed_on(pg_uri, schema, got)
    try:
        with psycopg.connect(pg_uri, autocommit=True) as w:
            first = write_change(w, schema, "a.md")
            got.wait_for(1)
            # the server ends the feed's session (as a restart or a dropped connection would), then
            # changes commit while it has none: their notifications are lost, the log is not
            assert w.execute("SELECT pg_terminate_backend(%s)", (feed.backend_pid,)).fetchone() == (True,)
            later = [write_change(w, schema, f"b{i}.md") for i in range(3)]
            rows = got.wait_for(4)
        assert [r["cursor"] for r in rows] == [first, *later]
        assert feed.connects >= 2
    finally:
        feed.stop()


def test_concurrent_writers_cursors_reach_the_feed_in_commit_order_with_none_skipped(pg_uri, schema):
    """Four writers on their own connections, each holding its transaction a random while: the
    generation row serialises them, so the cursor order is the commit order and reading "after the
    last cursor" on each wake-up never skips a change that commits later with a smaller cursor."""
    import psycopg

    got = Collected()
    feed = feed_on(pg_uri, schema, got)
    written: list[int] = []
    lock = threading.Lock()

    def writer(k: int) -> None:
        rnd = random.Random(k)
        with psycopg.connect(pg_uri, autocommit=True) as w:
            for i in range(10):
                c = write_change(w, schema, f"w{k}-{i}.md", hold=rnd.random() * 0.02)
                with lock:
                    written.append(c)

    try:
        threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        rows = got.wait_for(40)
    finally:
        feed.stop()
    cursors = [r["cursor"] for r in rows]
    assert cursors == sorted(written)
    assert len(set(cursors)) == 40
    gens = [r["generation"] for r in rows]
    assert gens == sorted(gens) and len(set(gens)) == 40  # one generation each, in the same order


def test_a_feed_behind_the_trimmed_log_says_anything_may_have_changed(pg_uri, schema):
    import psycopg

    with psycopg.connect(pg_uri, autocommit=True) as w:
        a = write_change(w, schema, "a.md")
        b = write_change(w, schema, "b.md")
        write_change(w, schema, "c.md")
        w.execute(f'DELETE FROM "{schema}".changes WHERE cursor <= %s', (b,))
        w.execute(f"UPDATE \"{schema}\".meta SET value = %s WHERE key = 'changes_trimmed_through'", (str(b),))
        got = Collected()
        feed = feed_on(pg_uri, schema, got, cursor=a)  # a daemon that last read `a`: b is gone for good
        try:
            assert got.wait_for(1) == [None]
            after = write_change(w, schema, "d.md")
            assert got.wait_for(2)[-1]["cursor"] == after
        finally:
            feed.stop()


def test_vectors_written_elsewhere_reach_on_vectors_and_a_reconnect_says_anything_may_have_changed(pg_uri, schema):
    """Vector writes make no change-log row: their transaction's notify_vectors is handed to on_vectors
    (workspace, documents; None past the payload limit), and a feed that was cut off, which cannot
    read lost ones back, hands on None to its daemon once it is back."""
    import psycopg

    from autodoc.store.pg.notify import notify_vectors

    got = Collected()
    vectors: list[tuple[int, list[int] | None]] = []
    feed = feed_on(pg_uri, schema, got, on_vectors=lambda ws, docs: vectors.append((ws, docs)))
    try:
        with psycopg.connect(pg_uri, autocommit=True) as w:
            with w.transaction():
                notify_vectors(_Percent(w), 7, [3, 5, 8])
                time.sleep(0.3)
                assert vectors == []  # nothing before commit
            with w.transaction():
                notify_vectors(_Percent(w), 7, list(range(100_000, 102_000)))  # too many to name
            deadline = time.monotonic() + 10
            while len(vectors) < 2:
                assert time.monotonic() < deadline, vectors
                time.sleep(0.02)
            assert vectors == [(7, [3, 5, 8]), (7, None)]
            assert w.execute("SELECT pg_terminate_backend(%s)", (feed.backend_pid,)).fetchone() == (True,)
            assert got.wait_for(1) == [None]
    finally:
        feed.stop()


class _Percent:
    """A raw psycopg connection taking `?` placeholders, as the store's PgSnapshot does."""

    def __init__(self, conn) -> None:
        self.conn = conn

    def execute(self, sql, args=()):
        return self.conn.execute(sql.replace("?", "%s"), args)


def test_a_service_tells_each_change_once_and_marks_anothers_documents_in_its_caches(pg_uri, tmp_path):
    """Two Services on one database (the Service's side of the feed, peers.py _changed_elsewhere):
    A's listeners hear its own writes once though its feed reads them back; B's hear A's writes, in
    order, and B's readers are told which documents' vectors to refresh (all of them after a delete,
    whose id is gone)."""
    from autodoc.config import Settings
    from autodoc.service import Service
    from autodoc.store import reads

    uri = f"{pg_uri}&options=-csearch_path%3Ds_{uuid.uuid4().hex[:8]}"
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "one.md").write_text("# One\n\nalpha\n")
    a = Service(Settings.from_env(store=uri))
    b = None
    try:
        a.workspace_add("kb", str(kb), {"embedding": {"provider": "none"}})
        b = Service(Settings.from_env(store=uri), writer=False)  # a reader machine
        heard_a: list[int] = []
        heard_b: list[tuple[str, str, int]] = []
        marked: list[tuple] = []
        a.add_change_listener(lambda ws, ch: heard_a.extend(c["cursor"] for c in ch))
        b.add_change_listener(lambda ws, ch: heard_b.extend((ws, c["path"], c["cursor"]) for c in ch))
        b.on_invalidate = lambda *item: marked.append(item)
        a.index("kb")
        ws_id = a._ws("kb").id
        with a.store.read() as db:
            one = reads.document_id(db, ws_id, "one.md")
        (kb / "two.md").write_text("# Two\n\nbeta\n")
        (kb / "one.md").unlink()
        a.index("kb")
        log = a.changes_since("kb", 0, 100)["changes"]
        cursors = [c["cursor"] for c in log]
        # one run's removals are written before its new files (index/job.py _flush)
        assert [(c["path"], c["op"]) for c in log] == [("one.md", "add"), ("one.md", "delete"), ("two.md", "add")]
        deadline = time.monotonic() + 10
        assert a.peers.feed is not None and b.peers.feed is not None
        while len(heard_b) < 3 or a.peers.feed.cursor < cursors[-1]:
            assert time.monotonic() < deadline, (heard_b, a.peers.feed.cursor)
            time.sleep(0.02)
        assert heard_a == cursors  # each once: A's feed read them back and told nobody again
        assert heard_b == [("kb", c["path"], c["cursor"]) for c in log]
        vectors = [item for item in marked if item[0] == "vectors"]
        assert vectors[0] == ("vectors", ws_id, [one])  # the first run's one document
        assert ("vectors", ws_id, None) in vectors[1:]  # the second run deleted one: every document
    finally:
        for s in (b, a):
            if s is not None:
                s.close()


def test_writers_of_two_stores_through_the_row_functions_reach_a_feed_in_commit_order(pg_uri):
    """The real write path (store/documents.py next_generation, then log_change, whose pg_notify wakes
    the feed) on two PgStores, as two daemons have: 3 threads on each, each transaction held a random
    while after its generation. Every change reaches the feed once, in cursor order, each with a
    generation of its own (one UPDATE … RETURNING: a read-then-write would hand two daemons the same)."""
    from autodoc.store import open_store
    from autodoc.store.documents import log_change, next_generation
    from autodoc.store.pg.notify import follow

    uri = f"{pg_uri}&options=-csearch_path%3Do_{uuid.uuid4().hex[:8]}"
    stores = [open_store(uri), open_store(uri)]
    got = Collected()
    feed = follow(stores[0], got)
    assert feed is not None and feed.connected.wait(10)

    def writer(k: int) -> None:
        rnd = random.Random(k)
        store = stores[k % 2]
        for i in range(8):
            with store.write() as db:
                gen = next_generation(db)
                time.sleep(rnd.random() * 0.01)  # others queue on the generation row meanwhile
                log_change(db, "kb", f"w{k}-{i}.md", "modify", gen)

    try:
        threads = [threading.Thread(target=writer, args=(k,)) for k in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        rows = got.wait_for(48)
    finally:
        feed.stop()
        for s in stores:
            s.close()
    cursors = [r["cursor"] for r in rows]
    assert cursors == sorted(cursors) and len(set(cursors)) == 48
    gens = [r["generation"] for r in rows]
    assert gens == sorted(gens) and len(set(gens)) == 48


def test_changes_the_daemon_could_not_take_are_handed_on_again(pg_uri, schema):
    """A hand-on that fails (the daemon's own store read failed, say) leaves the cursor where it was:
    the feed reconnects after a pause and hands the same changes on again, none skipped."""
    import psycopg

    got = Collected()
    failures = [RuntimeError("the store went away")]

    def flaky(rows):
        if failures:
            raise failures.pop()
        got(rows)

    feed = feed_on(pg_uri, schema, flaky)
    try:
        with psycopg.connect(pg_uri, autocommit=True) as w:
            cursors = [write_change(w, schema, f"f{i}.md") for i in range(3)]
        rows = got.wait_for(3)
        assert [r["cursor"] for r in rows] == cursors  # every one once, after the failed first try
        assert feed.connects >= 2 and not failures
    finally:
        feed.stop()


def test_workspaces_changed_elsewhere_reach_the_listeners_once_and_a_lost_one_at_the_reconnect(pg_uri, tmp_path):
    """peers.py: another Service's workspace.add, configure and remove reach B's workspace listeners
    (op, name, row), and A's own reach A's once (the feed is the one teller of a shared store's
    workspace changes); one sent while B's feed was cut off (a notification is not read back) is told
    once the feed is back."""
    import psycopg

    from autodoc.config import Settings
    from autodoc.service import Service

    uri = f"{pg_uri}&options=-csearch_path%3Dw_{uuid.uuid4().hex[:8]}"
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    a = Service(Settings.from_env(store=uri))
    b = None
    try:
        a.workspace_add("first", str(one), {"embedding": {"provider": "none"}})
        b = Service(Settings.from_env(store=uri), writer=False)
        told_a: list[tuple] = []
        told_b: list[tuple] = []
        a.peers.workspace_listeners.append(lambda op, name, ws: told_a.append((op, name, ws and ws.root)))
        b.peers.workspace_listeners.append(lambda op, name, ws: told_b.append((op, name, ws and ws.root)))
        assert a.peers.feed is not None and b.peers.feed is not None
        assert b.peers.feed.connected.wait(30)

        def heard(n: int) -> list[tuple]:
            deadline = time.monotonic() + 10
            while len(told_b) < n:
                assert time.monotonic() < deadline, told_b
                time.sleep(0.02)
            return told_b

        a.workspace_add("second", str(two), {"embedding": {"provider": "none"}})
        assert heard(1) == [("added", "second", str(two))]
        a.workspace_configure("second", root=str(one))
        assert heard(2)[1] == ("configured", "second", str(one))
        a.workspace_remove("first")
        assert heard(3)[2] == ("removed", "first", None)

        # B's feed cut off, and kept off while A adds a workspace: its notification never reaches B
        feed = b.peers.feed
        connect, cut = feed._connect, threading.Event()

        def refused():
            cut.set()
            raise OSError("kept off by the test")

        feed._connect = refused
        with psycopg.connect(pg_uri, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (feed.backend_pid,))
        assert cut.wait(10)
        a.workspace_add("third", str(two), {"embedding": {"provider": "none"}})
        time.sleep(0.5)
        assert len(told_b) == 3
        feed._connect = connect
        assert heard(4)[3] == ("added", "third", str(two))
        time.sleep(1.0)  # A's own notifications have long reached A's feed
        assert len(told_b) == 4, told_b
        # the first add may have been told before A's listener was there
        assert told_a in (told_b, [("added", "first", str(one)), *told_b]), (told_a, told_b)
    finally:
        for s in (b, a):
            if s is not None:
                s.close()


def test_a_workspace_added_before_the_feed_first_listens_is_known_to_the_peer(pg_uri, tmp_path, monkeypatch):
    """B reads the workspaces, then its feed starts listening: a workspace A added in between sent
    its notification to nobody. B's feed reads the workspaces again once it listens, so A's later
    removal of it reaches B's listeners (it was told of no removal of a workspace it never knew)."""
    import autodoc.peers as peers_mod
    from autodoc.config import Settings
    from autodoc.service import Service

    uri = f"{pg_uri}&options=-csearch_path%3Dv_{uuid.uuid4().hex[:8]}"
    a = Service(Settings.from_env(store=uri))
    b = None
    follow = peers_mod.follow

    def late(*args, **kw):
        a.workspace_add("between", str(tmp_path), {"embedding": {"provider": "none"}})
        return follow(*args, **kw)

    try:
        monkeypatch.setattr(peers_mod, "follow", late)
        b = Service(Settings.from_env(store=uri), writer=False)
        monkeypatch.setattr(peers_mod, "follow", follow)
        told: list[tuple] = []
        assert b.peers.feed is not None and b.peers.feed.connected.wait(30)
        b.peers.workspace_listeners.append(lambda op, name, ws: told.append((op, name)))
        a.workspace_remove("between")
        deadline = time.monotonic() + 10
        while not told:
            assert time.monotonic() < deadline, "B never heard of the removal"
            time.sleep(0.02)
        assert told == [("removed", "between")]
    finally:
        for s in (b, a):
            if s is not None:
                s.close()
