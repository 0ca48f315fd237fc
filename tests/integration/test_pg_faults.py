"""Faults of a PostgreSQL store (issue 34, "Faults" and "Security"), with real processes: a daemon
(`python -m autodoc.daemon --store <URI>`) over a PostgreSQL server of this module's own
(tests/helpers/pg.py), which these tests stop and start again on the same data: the shared `pg_uri`
server must not restart under the other tests of this xdist worker.

- the server restarted mid-search: while it is down every answer is store.unreachable (-32012), never
  -32603 nor an empty answer; once it is back the very next search answers as before;
- the server restarted mid-index: the job answers -32012, the next run finishes it, nothing lost
  or duplicated (every file once, its chunks of its generation, one `add` in the log per file);
- the writer's connection terminated mid-transaction (pg_terminate_backend): nothing half-written,
  the daemon serves on and the next run finishes;
- a schema newer than this AutoDoc's: the daemon and the CLI refuse with a clear message;
- every message and log line of all this names the store without its password.

The server trusts local connections, so the URI's password is never checked: it is there to be
leaked, and the tests look for it everywhere."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.daemon import Daemon, daemon_argv, isolated_env
from helpers.pg import PgServer, missing_reason

from autodoc_client.client import RemoteError

pytestmark = pytest.mark.skipif(missing_reason() is not None, reason=missing_reason() or "")

KB = Path(__file__).resolve().parents[1] / "corpora" / "kb"
CORPORA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "corpora"
NO_MODEL = {"embedding": {"provider": "none"}}
PASSWORD = f"Pw-{uuid.uuid4().hex}"  # what no output may ever show
UNREACHABLE = -32012
TRACEBACK = "Traceback (most recent call last)"
INTERNAL = re.compile(r"ERROR autodoc\.rpc: \S+( failed|: the quick lane failed before the call)$", re.MULTILINE)


class Server:
    """This module's PostgreSQL server, and URIs for a schema of each test's own, with a password."""

    def __init__(self, base: Path):
        self.base = base
        self.pg = PgServer(base / "pgdata")
        self.uri = self.pg.start()
        self.host = self.uri.split("host=")[1]
        # a commit acknowledged is a commit kept, as on a real server: the helper's throwaway setting
        # (synchronous_commit off) would let a crash lose the last ~0.6 s of acknowledged commits
        with self.connect() as pg:
            pg.execute("ALTER SYSTEM SET synchronous_commit = on")
            pg.execute("SELECT pg_reload_conf()")
        self.outputs: list[str] = []  # every message and log a test saw, checked for the password

    def store(self, schema: str) -> str:
        return f"postgresql://postgres:{PASSWORD}@/postgres?host={self.host}&options=-csearch_path%3D{schema}"

    def shown(self, schema: str) -> str:
        return self.store(schema).replace(PASSWORD, "***")

    def connect(self) -> Any:
        import psycopg

        return psycopg.connect(self.uri, autocommit=True)

    def restart(self) -> None:
        self.pg.stop()
        self.pg.start()

    def daemon(self, name: str, schema: str, *, watch: bool = False, readers: int = 0) -> Daemon:
        base = self.base / name
        sock = base / "s.sock"
        store = self.store(schema)
        args = () if watch else ("--no-watch",)
        d = Daemon(base, store=base / "unused.db", sock=sock, argv=daemon_argv(store, sock, *args))  # type: ignore[arg-type]
        d.env["AUTODOC_STORE"] = store
        d.env["AUTODOC_READERS"] = str(readers)
        return d.start()


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    base = Path(tempfile.mkdtemp(prefix="ad-pgf-", dir="/tmp"))
    s = Server(base)
    try:
        yield s
    finally:
        s.pg.stop()
        leaked = [text for text in s.outputs if PASSWORD in text]
        # what the RPC layer logs when it answers -32603 ("<method> failed" and a traceback)
        internal = [m.group(0) for text in s.outputs for m in INTERNAL.finditer(text)]
        shutil.rmtree(base, ignore_errors=True)
        assert not leaked, f"the password was shown: {leaked[0][:2000]}"
        assert not internal, f"a daemon answered -32603: {internal}"


@pytest.fixture(scope="module")
def kb(server: Server) -> Iterator[tuple[Daemon, str]]:
    """A daemon serving tests/corpora/kb (16 documents) from schema kb_…, indexed."""
    schema = f"kb_{uuid.uuid4().hex[:8]}"
    d = server.daemon("kb", schema, readers=2)  # searches served by reader processes too, as on 2 cores
    try:
        d.call("workspace.add", ["kb", str(KB), NO_MODEL])
        d.call("workspace.index", ["kb"])
        yield d, schema
    finally:
        d.stop()
        server.outputs.append(d.log_text())


def down_error(server: Server, schema: str, e: RemoteError) -> None:
    """What a client is told while the server is down: the store unreachable, named without its password."""
    server.outputs.append(f"{e.message} {json.dumps(e.data)}")
    assert e.code == UNREACHABLE, (e.code, e.message, e.data)
    assert server.shown(schema) in e.message, e.message
    assert e.data["store"] == server.shown(schema)


def test_a_server_restart_mid_search_answers_unreachable_then_the_same_answers(server, kb):
    d, schema = kb
    queries = ["lease", "frontmatter", "runbook recovery"]
    before = {q: d.call("search.query", ["kb", q]) for q in queries}
    assert all(before[q]["hits"] for q in queries)
    seen: list[tuple[str, Any]] = []  # ("ok", answer) | ("err", RemoteError), from a client searching throughout
    stop = threading.Event()

    def searching() -> None:
        i = 0
        while not stop.is_set():
            q = queries[i % len(queries)]
            i += 1
            try:
                seen.append(("ok", (q, d.call("search.query", ["kb", q]))))
            except RemoteError as e:
                seen.append(("err", e))

    client = threading.Thread(target=searching, daemon=True)
    client.start()
    try:
        time.sleep(0.3)
        server.pg.stop()
        time.sleep(0.3)
        for method, params in (  # what reads, what writes, what subscribes: each says the store is down
            ("search.query", ["kb", "lease"]),
            ("workspace.status", ["kb"]),
            ("workspace.list", {}),
            ("document.read", {"workspace": "kb", "path": "index.md"}),
            ("document.outline", {"workspace": "kb", "path": "index.md"}),
            ("document.backlinks", {"workspace": "kb", "path": "index.md"}),
            ("changes.since", {"workspace": "kb", "cursor": 0}),
            ("changes.subscribe", {"workspace": "kb"}),
            (
                "session.append",
                {"workspace": "kb", "session_id": "s1", "events": [{"id": "e1", "kind": "message", "text": "hi"}]},
            ),
            ("workspace.index", ["kb"]),
            ("workspace.add", ["kb2", str(KB), NO_MODEL]),
        ):
            with pytest.raises(RemoteError) as down:
                d.call(method, params)
            down_error(server, schema, down.value)
        server.pg.start()
        # the very next search answers, on each of the daemon's threads that read before
        for q in queries * 3:
            assert d.call("search.query", ["kb", q]) == before[q]
        time.sleep(0.3)
    finally:
        stop.set()
        client.join(30)
    answers = [x for kind, x in seen if kind == "ok"]
    errors = [x for kind, x in seen if kind == "err"]
    assert answers, "the client never searched"
    for q, answer in answers:  # never an empty or partial answer: the one from before, or an error
        assert answer == before[q], q
    for e in errors:
        down_error(server, schema, e)
    assert d.running()


def test_after_a_restart_nobody_saw_the_first_request_answers(server, kb):
    """Restarted between two requests: every connection the daemon holds is stale, and the first
    request after must not be the one that finds out."""
    d, _ = kb
    before = d.call("search.query", ["kb", "lease"])
    status = d.call("workspace.status", ["kb"])
    server.restart()
    assert d.call("search.query", ["kb", "lease"]) == before
    assert d.call("workspace.status", ["kb"])["files"] == status["files"]
    assert d.call("document.read", {"workspace": "kb", "path": "index.md"})["text"] == (KB / "index.md").read_text()


def test_its_read_connections_terminated_between_requests_the_daemon_answers_on(server, kb):
    """An administrator (or an idle-session timeout) ends the daemon's idle read sessions, the
    server staying up: the next requests answer, on new sessions."""
    d, _ = kb
    before = d.call("search.query", ["kb", "lease"])
    with server.connect() as pg:
        ended = pg.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE %s",
            (f"autodoc read %:{d.pid}",),
        ).fetchall()
        assert ended and all(ok for (ok,) in ended)
    for _ in range(4):
        assert d.call("search.query", ["kb", "lease"]) == before
    assert d.call("document.read", {"workspace": "kb", "path": "index.md"})["text"] == (KB / "index.md").read_text()


def test_an_edit_saved_after_a_restart_is_indexed_live(server):
    """The watcher's first write after a restart finds the writer connection stale outside any
    transaction (the live index starts under the write lock, before its BEGIN)."""
    schema = f"lv_{uuid.uuid4().hex[:8]}"
    root = server.base / "live" / "kb"
    shutil.copytree(KB, root)
    d = server.daemon("live", schema, watch=True)
    try:
        d.call("workspace.add", ["kb", str(root), NO_MODEL])
        d.call("workspace.index", ["kb"])
        server.restart()
        word = f"quuxly{uuid.uuid4().hex[:6]}"
        (root / "after-restart.md").write_text(f"# After the restart\n\nThe {word} note.\n")
        deadline = time.monotonic() + 20
        while not d.call("search.query", ["kb", word])["hits"]:
            assert time.monotonic() < deadline, f"the edit was never indexed:\n{d.log_text()[-3000:]}"
            time.sleep(0.1)
    finally:
        d.stop()
        server.outputs.append(d.log_text())


def test_an_edit_saved_while_the_server_is_down_is_indexed_once_it_is_back(server):
    """The watcher sees the save, the store cannot take it: it is indexed when the server returns,
    not dropped with a line in the log (and the watcher is still there for the next one)."""
    schema = f"dn_{uuid.uuid4().hex[:8]}"
    root = server.base / "down" / "kb"
    shutil.copytree(KB, root)
    d = server.daemon("down", schema, watch=True)
    try:
        d.call("workspace.add", ["kb", str(root), NO_MODEL])
        d.call("workspace.index", ["kb"])
        server.pg.stop()
        word = f"blorpy{uuid.uuid4().hex[:6]}"
        (root / "while-down.md").write_text(f"# While it was down\n\nThe {word} note.\n")
        (root / "index.md").unlink()
        time.sleep(2)  # the watcher's debounce and its attempt
        server.pg.start()

        def found(query: str, path: str) -> bool:
            return any(h["path"] == path for h in d.call("search.query", ["kb", query, {"limit": 50}])["hits"])

        deadline = time.monotonic() + 30
        while not found(word, "while-down.md"):
            assert time.monotonic() < deadline, f"the edit was never indexed:\n{d.log_text()[-3000:]}"
            time.sleep(0.2)
        with pytest.raises(RemoteError):
            d.call("document.read", {"workspace": "kb", "path": "index.md"})  # its deletion too
        word2 = f"snarfy{uuid.uuid4().hex[:6]}"
        (root / "after.md").write_text(f"# After\n\nThe {word2} note.\n")
        deadline = time.monotonic() + 20
        while not found(word2, "after.md"):
            assert time.monotonic() < deadline, f"the watcher is gone:\n{d.log_text()[-3000:]}"
            time.sleep(0.2)
    finally:
        d.stop()
        server.outputs.append(d.log_text())


def test_after_a_restart_an_edit_through_one_daemon_reaches_the_other_and_its_subscriber(server):
    """Two daemons on one schema, a subscriber on B, the server restarted: B's change feed and its
    subscriber's stream survive it; an edit indexed through A afterwards reaches B's searches and its
    subscriber (the feed reconnected and caught up), and nothing committed before is announced twice."""
    import anyio

    from autodoc_client import Client

    schema = f"two_{uuid.uuid4().hex[:8]}"
    root = server.base / "two" / "kb"
    shutil.copytree(KB, root)
    a = server.daemon("two-a", schema)
    b = None
    try:
        a.call("workspace.add", ["kb", str(root), NO_MODEL])
        a.call("workspace.index", ["kb"])
        b = server.daemon("two-b", schema)
        word = f"frobly{uuid.uuid4().hex[:6]}"

        async def main() -> None:
            assert b is not None
            async with await Client.connect_socket(b.sock) as sub:
                await sub.call("changes.subscribe", {"workspace": "kb"})
                await anyio.to_thread.run_sync(server.restart)
                (root / "after.md").write_text(f"# After\n\nThe {word} note, indexed through A.\n")
                report = await anyio.to_thread.run_sync(a.call, "workspace.index", ["kb"])
                assert report["added"] == 1, report
                note = await sub.next_notification("changes.changed", timeout=15)
                assert [(c["path"], c["op"]) for c in note.params["changes"]] == [("after.md", "add")]

        anyio.run(main)
        deadline = time.monotonic() + 15
        while not any(h["path"] == "after.md" for h in b.call("search.query", ["kb", word])["hits"]):
            assert time.monotonic() < deadline, f"A's edit never reached B:\n{b.log_text()[-3000:]}"
            time.sleep(0.1)
    finally:
        for d in (a, b):
            if d is not None:
                d.stop()
                server.outputs.append(d.log_text())


# -- mid-index -------------------------------------------------------------------------------------

BIG = CORPORA / "jekyll"  # 307 files: a run of 5 batches of 64, one committed before it is cut


def files_of(root: Path) -> list[str]:
    paths = (p.relative_to(root) for p in root.rglob("*") if p.suffix in (".md", ".markdown"))
    return sorted(str(p) for p in paths if not any(part.startswith(".") for part in p.parts))


def documents(pg: Any, schema: str) -> int:
    return pg.execute(f'SELECT count(*) FROM "{schema}".documents').fetchone()[0]


def whole(pg: Any, schema: str) -> list[str]:
    """The store's paths, having checked each document is all there or not at all: its chunks of its
    generation, each chunk's lexical row and no other, the lexical totals the sum of the rows, one
    `add` in the change log per document and none for a document not stored."""
    q = f'"{schema}"'

    def one(sql: str) -> Any:
        return pg.execute(sql).fetchone()[0]

    assert (
        one(
            f"SELECT count(*) FROM {q}.chunks c JOIN {q}.documents d ON d.id = c.document_id "
            "WHERE c.generation <> d.generation"
        )
        == 0
    )
    assert (
        one(f"SELECT count(*) FROM {q}.chunks c LEFT JOIN {q}.documents d ON d.id = c.document_id WHERE d.id IS NULL")
        == 0
    )
    assert (
        one(f"SELECT count(*) FROM (SELECT document_id, ordinal FROM {q}.chunks GROUP BY 1, 2 HAVING count(*) > 1) x")
        == 0
    )
    assert (
        one(f"SELECT count(*) FROM {q}.chunks c LEFT JOIN {q}.lexical_sizes s ON s.chunk = c.id WHERE s.chunk IS NULL")
        == 0
    )
    assert (
        one(f"SELECT count(*) FROM {q}.lexical_sizes s LEFT JOIN {q}.chunks c ON c.id = s.chunk WHERE c.id IS NULL")
        == 0
    )
    assert one(f"SELECT chunks FROM {q}.lexical_stats") == one(f"SELECT count(*) FROM {q}.chunks")
    assert (
        one(
            f"SELECT count(*) FROM {q}.postings_delta p LEFT JOIN {q}.chunks c ON c.id = p.chunk "
            f"WHERE c.id IS NULL AND p.chunk NOT IN (SELECT chunk FROM {q}.postings_dead)"
        )
        == 0
    )
    paths = [r[0] for r in pg.execute(f"SELECT path FROM {q}.documents ORDER BY path").fetchall()]
    adds = pg.execute(f"SELECT path, count(*) FROM {q}.changes WHERE op = 'add' GROUP BY path ORDER BY path").fetchall()
    assert [p for p, _ in adds] == paths and {n for _, n in adds} <= {1}
    return paths


def index_in_background(d: Daemon, workspace: str) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(d.call("workspace.index", [workspace], timeout=300))
        except Exception as e:  # RemoteError is what the test looks at
            out.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, out


def until(what: Any, deadline_s: float = 120) -> None:
    deadline = time.monotonic() + deadline_s
    while not what():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@pytest.mark.parametrize("how", ["stop", "crash"])
def test_a_server_restart_mid_index_answers_unreachable_and_the_next_run_finishes(server, how):
    """`stop`: a clean fast shutdown (its backends say FATAL, then close); `crash`: an immediate one
    (sockets closed without a word, the WAL replayed at the next start)."""
    schema = f"ri_{how}_{uuid.uuid4().hex[:8]}"
    d = server.daemon(f"ri_{how}", schema)
    files = files_of(BIG)
    try:
        d.call("workspace.add", ["big", str(BIG), NO_MODEL])
        job, out = index_in_background(d, "big")
        with server.connect() as pg:
            until(lambda: documents(pg, schema) >= 64)
        server.pg.crash() if how == "crash" else server.pg.stop()
        job.join(60)
        assert not job.is_alive()
        (failed,) = out
        assert isinstance(failed, RemoteError), failed
        down_error(server, schema, failed)
        with pytest.raises(RemoteError) as down:  # an index while it is down: said, not -32603
            d.call("workspace.index", ["big"])
        down_error(server, schema, down.value)
        server.pg.start()
        with server.connect() as pg:
            at_restart = whole(pg, schema)
            assert 0 < len(at_restart) < len(files), "the run was not cut in the middle"
            report = d.call("workspace.index", ["big"], timeout=300)
            assert report["added"] + report["unchanged"] == len(files)
            assert report["unchanged"] == len(at_restart) and report["modified"] == 0
            assert whole(pg, schema) == files
        assert d.call("search.query", ["big", "liquid template"])["hits"]
    finally:
        d.stop()
        server.outputs.append(d.log_text())


def test_liveness_tells_an_ended_idle_connection_without_a_round_trip(server):
    from autodoc.store.pg.liveness import alive

    with server.connect() as admin, server.connect() as conn, server.connect() as busy:
        conn.execute("SELECT 1")
        assert alive(conn)
        admin.execute("SELECT pg_notify('nobody_listens', 'x')")  # nothing arrives for conn
        assert alive(conn) and not conn.closed
        with busy.transaction():
            assert alive(busy)  # in a transaction: in use, not looked at
        admin.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))
        until(lambda: not alive(conn), 10)
        assert conn.closed


# -- a newer schema ----------------------------------------------------------------------------------


def test_a_schema_newer_than_this_autodoc_is_refused_by_the_daemon_and_every_command(server, kb):
    """Another machine ran a newer AutoDoc against the database: this one neither migrates it back
    nor reads it as if it understood it, and says so, from the daemon's start and from each command."""
    from autodoc.store.pg.schema import MIGRATIONS

    d, _ = kb
    schema = f"new_{uuid.uuid4().hex[:8]}"
    with server.connect() as pg:  # a copy of kb's schema at a version this AutoDoc does not know
        pg.execute(f'CREATE SCHEMA "{schema}"')
        pg.execute(f'CREATE TABLE "{schema}".meta(key text PRIMARY KEY, value text NOT NULL)')
        pg.execute(f"INSERT INTO \"{schema}\".meta VALUES ('schema_version', '{len(MIGRATIONS) + 1}')")
    base = server.base / "newer"
    env = isolated_env(base, extra={"AUTODOC_STORE": server.store(schema)})
    for name in ("XDG_RUNTIME_DIR", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME"):
        Path(env[name]).mkdir(parents=True, exist_ok=True, mode=0o700)
    env.pop("AUTODOC_SOCKET", None)
    said = f"is version {len(MIGRATIONS) + 1}, newer than this AutoDoc understands ({len(MIGRATIONS)})"
    runs = [
        ["serve", "--socket", str(base / "s.sock")],
        ["search", "-w", "kb", "lease"],
        ["workspace", "list"],
        ["index", "kb"],
        ["read", "kb", "index.md"],
    ]
    for args in runs:
        proc = subprocess.run(
            [sys.executable, "-m", "autodoc.cli", *args], env=env, capture_output=True, text=True, timeout=60
        )
        server.outputs += [proc.stdout, proc.stderr]
        assert proc.returncode == 1, (args, proc.returncode, proc.stderr)
        assert said in proc.stderr and "upgrade AutoDoc" in proc.stderr, (args, proc.stderr)
        assert TRACEBACK not in proc.stderr, proc.stderr
    with server.connect() as pg:  # nothing was migrated or written there
        assert pg.execute(
            f"SELECT count(*) FROM information_schema.tables WHERE table_schema = '{schema}'"
        ).fetchone() == (1,)
    assert d.call("search.query", ["kb", "lease"])["hits"]  # the other schema's daemon is not concerned


# -- a connection dropped mid-transaction ------------------------------------------------------------


def test_the_writer_terminated_mid_transaction_leaves_nothing_half_written(server):
    """pg_terminate_backend of the daemon's writer while a batch of documents is being written (its
    transaction open): that batch is rolled back whole, every document is all there or not at all,
    the daemon serves on, and the next run writes the rest once."""
    schema = f"tx_{uuid.uuid4().hex[:8]}"
    d = server.daemon("tx", schema)
    files = files_of(BIG)
    writer = (
        "SELECT pid FROM pg_stat_activity WHERE application_name LIKE 'autodoc write %%' AND xact_start IS NOT NULL"
    )
    try:
        d.call("workspace.add", ["big", str(BIG), NO_MODEL])
        job, out = index_in_background(d, "big")
        with server.connect() as pg:
            until(lambda: documents(pg, schema) >= 64)  # a batch committed: the next one is in flight
            pids: list[Any] = []
            until(lambda: bool(pids.extend(r[0] for r in pg.execute(writer).fetchall()) or pids))
            assert pg.execute("SELECT pg_terminate_backend(%s)", (pids[0],)).fetchone() == (True,)
            job.join(60)
            assert not job.is_alive()
            (answer,) = out
            if isinstance(answer, RemoteError):
                down_error(server, schema, answer)  # the job stops there, saying why
            else:  # or it was between two statements outside a transaction: the job went on
                assert answer["added"] == len(files), answer
            cut = whole(pg, schema)
            assert d.call("search.query", ["big", "liquid template"])["hits"]  # serving still
            report = d.call("workspace.index", ["big"], timeout=300)
            assert report["added"] + report["unchanged"] == len(files) and report["unchanged"] == len(cut)
            assert whole(pg, schema) == files
    finally:
        d.stop()
        server.outputs.append(d.log_text())


def test_an_indexer_whose_lock_session_was_cut_takes_it_again_or_stops(server):
    """The indexer lock lives in a session of its own: a restart (or pg_terminate_backend) ends it
    while the job, between two batches, has not failed. The job must not write on without it (another
    daemon could then index the same workspace at the same time): before its next batch it takes the
    lock again, or stops, saying another daemon has it."""
    schema = f"lk_{uuid.uuid4().hex[:8]}"
    d = server.daemon("lk", schema)
    files = files_of(BIG)
    held_by_d = (
        "SELECT a.pid FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
        "WHERE l.locktype = 'advisory' AND l.granted AND a.application_name LIKE %s"
    )
    try:
        d.call("workspace.add", ["big", str(BIG), NO_MODEL])
        job, out = index_in_background(d, "big")
        with server.connect() as pg:
            mine = (f"autodoc index %:{d.pid}",)
            until(lambda: documents(pg, schema) >= 64 and pg.execute(held_by_d, mine).fetchone() is not None)
            (first,) = pg.execute(held_by_d, mine).fetchone()
            pg.execute("SELECT pg_terminate_backend(%s)", (first,))
            until(lambda: pg.execute(held_by_d, mine).fetchone() not in (None, (first,)) or not job.is_alive(), 60)
            again = pg.execute(held_by_d, mine).fetchone()
            job.join(120)
            (answer,) = out
            assert again is not None or isinstance(answer, RemoteError), "the job wrote on without its lock"
            if isinstance(answer, RemoteError):
                report = d.call("workspace.index", ["big"], timeout=300)
            else:
                report = answer
            assert whole(pg, schema) == files
            assert report["added"] + report["unchanged"] == len(files)
    finally:
        d.stop()
        server.outputs.append(d.log_text())


def test_an_embed_claim_whose_session_ended_is_taken_again_not_believed(server):
    """A daemon's embed claims live in one session: after a restart (here pg_terminate_backend) the
    claims are gone with it, and the next step must claim again rather than trust what it held."""
    from autodoc.store.pg.indexlock import EMBED_CLASS, EmbedClaims

    claims = EmbedClaims(server.connect)
    held = "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND classid::bigint = %s AND objid = %s"
    try:
        with server.connect() as pg:
            assert claims.claim(7)
            (first,) = pg.execute(held, (EMBED_CLASS, 7)).fetchone()
            pg.execute("SELECT pg_terminate_backend(%s)", (first,))
            until(lambda: pg.execute(held, (EMBED_CLASS, 7)).fetchone() is None, 10)
            assert claims.claim(7)
            again = pg.execute(held, (EMBED_CLASS, 7)).fetchone()
            assert again is not None and again != (first,), "the claim was believed, not held"
    finally:
        claims.close()


# -- a hung server -----------------------------------------------------------------------------------


def test_a_hung_server_answers_unreachable_in_seconds_then_serves_again(server, kb):
    """Every process of the server stopped (SIGSTOP): its kernel still accepts connections and
    answers keepalives, nothing replies. A read and an index answer -32012 within seconds (they hung
    until the client gave up before); once it runs again the next search answers as before."""
    import psutil

    d, schema = kb
    before = d.call("search.query", ["kb", "lease"])
    postmaster = psutil.Process(server.pg.pid)
    stopped = [postmaster, *postmaster.children(recursive=True)]
    for p in stopped:
        p.suspend()
    try:
        for method, params in (
            ("search.query", ["kb", "runbook recovery"]),
            ("document.read", {"workspace": "kb", "path": "index.md"}),
            ("workspace.index", ["kb"]),
        ):
            t0 = time.monotonic()
            with pytest.raises(RemoteError) as hung:
                d.call(method, params, timeout=45)
            took = time.monotonic() - t0
            down_error(server, schema, hung.value)
            assert took < 20, (method, took)
    finally:
        for p in stopped:
            p.resume()
    assert d.call("search.query", ["kb", "lease"]) == before
    assert d.running()
