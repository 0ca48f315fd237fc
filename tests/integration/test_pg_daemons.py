"""Several daemons sharing one PostgreSQL store (issue 34, "many daemons, many machines, one
database"; docs/dev/postgres.md sections 5-6). Each daemon is a real `autodoc serve` process with
`--store <postgresql URI>`, its own socket and XDG dirs: a machine of its own, as far as AutoDoc can
tell. Daemon A indexes (the folder is on its machine); B serves reads (no watcher: the folder is
not on its machine). The latency of edit → visible through B is measured in bench/pg_daemons.py,
not here: these tests only bound it loosely."""

from __future__ import annotations

import shutil
import threading
import time
import uuid
from pathlib import Path

import anyio
import pytest
from helpers.daemon import Daemon, machine
from helpers.pg import missing_reason, schema_uri

from autodoc.rpc import schemas
from autodoc_client import Client
from autodoc_client.client import RemoteError

pytestmark = pytest.mark.skipif(missing_reason() is not None, reason=missing_reason() or "")

CORPORA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "corpora"
NO_MODEL = {"embedding": {"provider": "none"}}


@pytest.fixture(scope="module")
def two(pg_uri):
    """(A, B, kb folder, uri): two daemons on one fresh schema, a workspace added through A and indexed."""
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="ad-pgd-", dir="/tmp"))
    uri = schema_uri(pg_uri, f"d_{uuid.uuid4().hex[:8]}")
    kb = base / "kb"
    shutil.copytree(CORPORA / "simpler-grants-adr", kb)
    a = machine(base / "a", uri, "--no-watch").start()
    b = None
    try:
        a.call("workspace.add", ["kb", str(kb), NO_MODEL])
        a.call("workspace.index", ["kb"])
        b = machine(base / "b", uri, "--no-watch").start()
        yield a, b, kb, uri
    finally:
        for d in (a, b):
            if d is not None:
                d.close()
        shutil.rmtree(base, ignore_errors=True)


def paths_of(answer) -> set[str]:
    return {h["path"] for h in answer["hits"]}


def test_an_edit_indexed_through_a_is_searchable_through_b_and_its_subscribers_hear_of_it(two):
    a, b, kb, _ = two
    word = f"zorblax{uuid.uuid4().hex[:6]}"

    async def main() -> None:
        async with await Client.connect_socket(b.sock) as sub:
            await sub.call("changes.subscribe", {"workspace": "kb"})
            (kb / "notes").mkdir(exist_ok=True)
            (kb / "notes" / "edit.md").write_text(f"# An edit\n\nThe {word} decision, made on machine A.\n")
            report = await anyio.to_thread.run_sync(a.call, "workspace.index", ["kb"])
            assert report["added"] == 1
            # B's subscriber hears of A's write: B's change feed read it from the shared log
            note = await sub.next_notification("changes.changed", timeout=10)
            assert schemas.params_error("changes.changed", note.params) is None
            changes = note.params["changes"]
            assert [(c["path"], c["op"]) for c in changes] == [("notes/edit.md", "add")]

    anyio.run(main)
    deadline = time.monotonic() + 10  # a loose bound: the figure (p50/p95) is bench/pg_daemons.py's
    while "notes/edit.md" not in paths_of(b.call("search.query", ["kb", word])):
        assert time.monotonic() < deadline, "A's edit never became searchable through B"
        time.sleep(0.05)


def test_changes_since_gives_the_same_feed_from_either_daemon(two):
    a, b, kb, _ = two
    head = a.call("changes.since", ["kb", 0, 1000])["next_cursor"]
    (kb / "feed-1.md").write_text("# One\n\nfirst\n")
    a.call("workspace.index", ["kb"])
    (kb / "feed-1.md").write_text("# One\n\nfirst, edited\n")
    (kb / "feed-2.md").write_text("# Two\n\nsecond\n")
    a.call("workspace.index", ["kb"])
    (kb / "feed-2.md").rename(kb / "feed-3.md")
    (kb / "feed-1.md").unlink()
    a.call("workspace.index", ["kb"])
    from_a = a.call("changes.since", ["kb", head, 1000])
    from_b = b.call("changes.since", ["kb", head, 1000])
    assert schemas.result_errors("changes.since", from_b) == []
    assert from_b == from_a
    got = [(c["path"], c["op"]) for c in from_b["changes"]]
    assert got[:3] == [("feed-1.md", "add"), ("feed-1.md", "modify"), ("feed-2.md", "add")]
    # one run: its order is the job's. The move is one rename: feed-3.md is last in the scan, behind
    # ~90 files read again when their stored stats were too recent to trust; they used to fill a
    # batch first, which wrote feed-3.md as an add and feed-2.md as a delete (test_live_moves.py)
    assert sorted(got[3:]) == [("feed-1.md", "delete"), ("feed-3.md", "rename")]
    # and page by page from the other daemon, the same again
    first = b.call("changes.since", ["kb", head, 2])
    rest = a.call("changes.since", ["kb", first["next_cursor"], 1000])
    assert first["changes"] + rest["changes"] == from_a["changes"]


def test_8_readers_across_two_daemons_never_see_half_of_a_documents_new_chunks(two):
    """Saves through A rewrite one document with 2 or 5 sections by turns, every section holding the
    word and its version; 4 readers on A and 4 on B search for the word all the while: each answer
    holds one version of the document, whole (one generation, as many of its sections as a search
    shows of one document: PER_DOCUMENT)."""
    from autodoc.config import PER_DOCUMENT

    a, b, kb, _ = two
    word = f"quokka{uuid.uuid4().hex[:6]}"

    def sections(v: int) -> int:
        return 2 if v % 2 else 5

    def version(v: int) -> str:
        k = sections(v)
        parts = [f"# Atomic v{v}\n"] + [
            f"\n## part {i} of {k} v{v}\n\nThe {word} marker, part {i}.\n" for i in range(k)
        ]
        return "".join(parts)

    (kb / "atomic.md").write_text(version(0))
    a.call("workspace.index", ["kb"])
    stop = threading.Event()
    seen: list[tuple[int, int]] = []
    bad: list[str] = []

    def reader(d: Daemon) -> None:
        while not stop.is_set():
            hits = [h for h in d.call("search.query", ["kb", word, {"limit": 50}])["hits"] if h["path"] == "atomic.md"]
            versions = {h["breadcrumb"].rsplit(" v", 1)[-1] for h in hits}
            gens = {h.get("generation") for h in hits}
            if len(versions) != 1 or len(gens) != 1:
                bad.append(f"mixed versions {versions} generations {gens}")
                continue
            v = int(versions.pop())
            if len(hits) != min(sections(v), PER_DOCUMENT):
                bad.append(f"version {v}: {len(hits)} sections")
            seen.append((v, len(hits)))

    readers = [threading.Thread(target=reader, args=(d,)) for d in (a, b) * 4]
    for t in readers:
        t.start()
    try:
        for v in range(1, 13):
            (kb / "atomic.md").write_text(version(v))
            a.call("workspace.index", ["kb"])
    finally:
        stop.set()
        for t in readers:
            t.join(30)
    assert not bad, bad[:5]
    assert len({v for v, _ in seen}) >= 3, "the readers saw too few versions to mean anything"


def test_one_indexer_per_workspace_and_a_sigkilled_one_is_taken_over_with_nothing_lost_or_duplicated(pg_uri, short_tmp):
    """A indexes a 400-file folder; B's index of it is refused naming A; A is SIGKILLed mid-run;
    B's retries take over within 10 s and finish: every file once, chunks whole, one `add` each."""
    import psycopg

    schema = f"k_{uuid.uuid4().hex[:8]}"
    uri = schema_uri(pg_uri, schema)
    kb = short_tmp / "kb"
    for name in ("jekyll", "simpler-grants-adr"):  # ~400 Markdown files: six write batches
        shutil.copytree(CORPORA / name, kb / name)
    a = machine(short_tmp / "a", uri, "--no-watch").start()
    b = None
    try:
        a.call("workspace.add", ["kb", str(kb), NO_MODEL])
        b = machine(short_tmp / "b", uri, "--no-watch").start()
        running = threading.Thread(target=lambda: _quietly(a.call, "workspace.index", ["kb"]), daemon=True)
        running.start()
        with psycopg.connect(pg_uri, autocommit=True) as pg:

            def documents() -> int:
                return pg.execute(f'SELECT count(*) FROM "{schema}".documents').fetchone()[0]

            deadline = time.monotonic() + 120
            while documents() < 64:  # A has committed a batch or more: mid-run
                assert time.monotonic() < deadline and a.running(), a.log_text()[-2000:]
                time.sleep(0.05)
            with pytest.raises(RemoteError) as refused:
                b.call("workspace.index", ["kb"])
            assert "being indexed by another AutoDoc" in str(refused.value)
            assert f"pid {a.pid}" in str(refused.value)
            at_kill = documents()
            assert a.running(), "A finished before it could be killed: the folder is too small"
            a.kill()  # SIGKILL
            killed = time.monotonic()
            while True:
                try:
                    report = b.call("workspace.index", ["kb"], timeout=300)
                    break
                except RemoteError as e:
                    assert "being indexed by another AutoDoc" in str(e), f"{e}\n{b.log_text()[-3000:]}"
                    assert time.monotonic() - killed < 10, "B did not take over within 10 s"
                    time.sleep(0.1)
            # B wrote what A had not committed, and only that
            files = report["scanned"] - len(report["skipped"])
            assert report["added"] + report["unchanged"] == files and at_kill < files
            assert report["unchanged"] >= at_kill and report["added"] > 0
            q = f'"{schema}"'
            stored = sorted(r[0] for r in pg.execute(f"SELECT path FROM {q}.documents").fetchall())
            assert len(stored) == files
            again = b.call("workspace.index", ["kb"], timeout=300)  # the store is the folder: nothing to do
            assert (again["added"], again["modified"], again["deleted"], again["renamed"]) == (0, 0, 0, 0)
            # no chunk twice, every chunk of its document's generation, one `add` per file
            assert pg.execute(
                f"SELECT count(*) FROM (SELECT document_id, ordinal FROM {q}.chunks GROUP BY 1, 2 HAVING count(*) > 1) d"
            ).fetchone() == (0,)
            assert pg.execute(
                f"SELECT count(*) FROM {q}.chunks c JOIN {q}.documents d ON d.id = c.document_id "
                "WHERE c.generation <> d.generation"
            ).fetchone() == (0,)
            adds = pg.execute(f"SELECT path, count(*) FROM {q}.changes WHERE op = 'add' GROUP BY path").fetchall()
            assert sorted(p for p, _ in adds) == stored and {n for _, n in adds} == {1}
    finally:
        for d in (a, b):
            if d is not None:
                d.close()


def _quietly(fn, *args):
    try:
        fn(*args, timeout=300)
    except Exception:
        pass  # the daemon is killed under it


def test_one_daemon_embeds_a_workspace_and_another_takes_over_when_it_is_sigkilled(pg_uri, short_tmp):
    """Both daemons may write and both run an embed queue; whichever claims the workspace first fills
    it while the other stands by (the model server is asked for each text about once, not twice), and
    when the filler is SIGKILLed mid-fill, the other claims the workspace and embeds the rest: every
    chunk gets its vector."""
    import psycopg
    from helpers.embed_server import EmbedServer

    schema = f"e_{uuid.uuid4().hex[:8]}"
    uri = schema_uri(pg_uri, schema)
    kb = short_tmp / "kb"
    kb.mkdir()
    for p in sorted((CORPORA / "simpler-grants-adr").rglob("*.md"))[:25]:
        shutil.copy(p, kb / p.name)
    server = EmbedServer()
    a = machine(short_tmp / "a", uri, "--no-watch").start()
    b = None
    q = f'"{schema}"'
    try:
        a.call("workspace.add", ["kb", str(kb), {"embedding": {"provider": "http", "url": server.url, "model": "m"}}])
        b = machine(short_tmp / "b", uri, "--no-watch").start()
        a.call("workspace.index", ["kb"])
        with psycopg.connect(pg_uri, autocommit=True) as pg:
            (texts,) = pg.execute(f"SELECT count(DISTINCT text_hash) FROM {q}.chunks").fetchone()

            def vectors() -> int:
                return pg.execute(f"SELECT count(*) FROM {q}.vectors").fetchone()[0]

            def claimant() -> str | None:
                row = pg.execute(
                    "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
                    "WHERE l.locktype = 'advisory' AND l.granted AND l.classid::bigint = %s",
                    (int.from_bytes(b"adem", "big"),),
                ).fetchone()
                return row[0] if row else None

            deadline = time.monotonic() + 120
            while vectors() < 32:  # two batches in: A is filling
                assert time.monotonic() < deadline, a.log_text()[-2000:]
                time.sleep(0.05)
            names = {f"autodoc embed {_host()}:{d.pid}": d for d in (a, b)}
            filler = names[claimant() or ""]  # one of the two, and only one
            other = b if filler is a else a
            assert vectors() < texts, "the fill ended before it could be killed: the folder is too small"
            filler.kill()  # SIGKILL
            while vectors() < texts:  # the other's next step claims the workspace and goes on
                assert time.monotonic() < deadline, other.log_text()[-2000:]
                time.sleep(0.1)
            assert claimant() in (None, f"autodoc embed {_host()}:{other.pid}")
            assert pg.execute(
                f"SELECT count(*) FROM {q}.chunks c WHERE NOT EXISTS "
                f"(SELECT 1 FROM {q}.vectors v WHERE v.workspace_id = c.workspace_id AND v.text_hash = c.text_hash)"
            ).fetchone() == (0,)
        # each text asked for once, but for the batch in flight at the kill (16) and each daemon's one
        # dimension probe (embed/http.py): never the whole workspace twice over, as two fillers would
        assert texts <= server.texts <= texts + 16 + 2, (server.texts, texts)
    finally:
        server.stop()
        for d in (a, b):
            if d is not None:
                d.close()


def _host() -> str:
    import socket

    return socket.gethostname()
