"""The reader pool (readers/pool.py, readers/reader.py, issue 19): searches run in
reader processes with the same answers and errors as in the daemon; a save is
searchable through a reader at once; a reader that dies or stops mid-call
never hangs its client (the call is answered, the reader replaced); a cancel
answers at once and the reader comes back; a killed daemon leaves no reader.

Real reader processes on a real store, over real sockets. SIGSTOP stands in
for a reader stuck mid-call (the one fault not otherwise caused on demand)."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import socket
import threading
import time
import types

import anyio
import pytest
from helpers.daemon import daemon_argv

from autodoc.readers import pool as poolmod
from autodoc.readers.pool import ReaderPool, pool_size
from autodoc.readers.reader import apply_invalidations
from autodoc.rpc.server import RpcServer
from autodoc_client import Client, RemoteError

SEARCH = ["kb", "sqlite lease", {"stages": ["lexical"], "limit": 5}]
DEADLINE_S = 60.0  # how long a reader may take to start on a loaded machine: a bound, not a measurement


async def _until(cond, what: str) -> None:
    with anyio.fail_after(DEADLINE_S):
        while not cond():
            await anyio.sleep(0.05)


def _alive_pids(pool: ReaderPool) -> list[int]:
    return [r.proc.pid for r in pool.readers if r.alive]


async def _serve(service, short_tmp, tg, size: int = 2) -> tuple[RpcServer, ReaderPool]:
    pool = ReaderPool(service, size=size)
    server = RpcServer(service, pool=pool)
    server.inline.below_s = 0.0  # never inline: every search goes to a reader
    sock_path = short_tmp / "d.sock"
    await tg.start(lambda task_status: server.run(socket_path=sock_path, task_status=task_status))
    tg.start_soon(pool.run)
    pool.want()
    await _until(lambda: len(_alive_pids(pool)) == size, "readers up")
    return server, pool


async def _warm(short_tmp):
    """One search through the daemon's socket (the reader has answered once); the socket's path."""
    path = short_tmp / "d.sock"
    async with await Client.connect_socket(path) as client:
        await client.call("search.query", SEARCH)
    return path


@contextlib.contextmanager
def _reader_on_a_thread(settings, release: threading.Event):
    """readers/reader.serve on a thread over a real socket pair, past its "ready": our end. At the
    end the held call is let go, then the socket closes and the reader ends."""
    from autodoc.readers import reader as readermod

    ours, theirs = socket.socketpair()
    t = threading.Thread(target=readermod.serve, args=(theirs,), daemon=True)
    t.start()
    try:
        readermod.send_frame(ours, settings)
        assert readermod.recv_frame(ours)[0] == "ready"
        yield ours
    finally:
        release.set()
        ours.close()
        t.join(10)
        theirs.close()


def _raw_call(path, payload: dict) -> dict:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as raw:
        raw.connect(str(path))
        raw.sendall(json.dumps(payload).encode() + b"\n")
        return json.loads(raw.makefile("rb").readline())


async def test_readers_answer_as_the_daemon_and_see_each_save(kb_service, kb_copy, short_tmp):
    expected = kb_service.search(*SEARCH)
    async with anyio.create_task_group() as tg:
        server, pool = await _serve(kb_service, short_tmp, tg)
        try:
            async with await Client.connect_socket(short_tmp / "d.sock") as client:
                before = pool.calls
                got = await client.call("search.query", SEARCH)
                assert pool.calls == before + 1, "the search did not go to a reader"
                assert got["hits"] == expected["hits"]
                with pytest.raises(RemoteError) as err:
                    await client.call("search.query", ["nope", "sqlite", {"stages": ["lexical"]}])
                with pytest.raises(RemoteError) as direct:
                    await client.call("workspace.status", {"workspace": "nope"})  # answered in the daemon
                assert err.value.code == direct.value.code == -32001
                assert pool.calls == before + 2
                # a save, committed by the daemon's writer, is searchable through every reader at once
                (kb_copy / "fresh.md").write_text("# Fresh\n\nA zanzibarite note about quokkas.\n")
                await anyio.to_thread.run_sync(kb_service.index_paths, "kb", ["fresh.md"])
                for _ in range(4):  # both readers
                    hits = (await client.call("search.query", ["kb", "zanzibarite", {"stages": ["lexical"]}]))["hits"]
                    assert [h["path"] for h in hits] == ["fresh.md"]
        finally:
            server.request_shutdown("test over")
            tg.cancel_scope.cancel()


async def test_a_reader_that_dies_mid_call_is_replaced_and_the_call_answered(kb_service, short_tmp):
    async with anyio.create_task_group() as tg:
        server, pool = await _serve(kb_service, short_tmp, tg, size=1)
        try:
            async with await Client.connect_socket(short_tmp / "d.sock") as client:
                await client.call("search.query", SEARCH)
                (pid,) = _alive_pids(pool)
                os.kill(pid, signal.SIGSTOP)  # stuck: the call waits in its socket
                async with anyio.create_task_group() as calls:
                    answers = []

                    async def one() -> None:
                        answers.append(await client.call("search.query", SEARCH))

                    calls.start_soon(one)
                    await anyio.sleep(0.3)
                    assert not answers
                    # review item 5: the embed queue yields to a search in a reader as to one on a thread
                    assert kb_service._searching(), "a search in a reader is not seen as a search"
                    os.kill(pid, signal.SIGKILL)  # dies with the call in hand
                assert answers[0]["hits"], "the call was not answered"
                assert not kb_service._searching()
                await _until(lambda: _alive_pids(pool) and _alive_pids(pool) != [pid], "a new reader")
                before = pool.calls
                await client.call("search.query", SEARCH)
                assert pool.calls == before + 1
        finally:
            server.request_shutdown("test over")
            tg.cancel_scope.cancel()


async def test_a_cancel_answers_at_once_and_the_reader_comes_back(kb_service, short_tmp):
    async with anyio.create_task_group() as tg:
        server, pool = await _serve(kb_service, short_tmp, tg, size=1)
        try:
            path = await _warm(short_tmp)
            (pid,) = _alive_pids(pool)
            os.kill(pid, signal.SIGSTOP)
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as raw:
                raw.connect(str(path))
                raw.sendall(
                    json.dumps({"jsonrpc": "2.0", "id": 7, "method": "search.query", "params": SEARCH}).encode() + b"\n"
                )
                await anyio.sleep(0.3)
                raw.sendall(
                    json.dumps({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 7}}).encode() + b"\n"
                )
                answer = await anyio.to_thread.run_sync(lambda: json.loads(raw.makefile("rb").readline()))
            assert answer["id"] == 7 and answer["error"]["code"] == -32800
            assert kb_service.searches_elsewhere == 0  # a cancelled call no longer counts as running
            os.kill(pid, signal.SIGCONT)  # it answers the cancelled call to nobody, then is free again
            before = pool.calls
            got = await anyio.to_thread.run_sync(
                _raw_call, path, {"jsonrpc": "2.0", "id": 8, "method": "search.query", "params": SEARCH}
            )
            assert got["result"]["hits"] and pool.calls >= before + 1
            assert _alive_pids(pool) == [pid]
        finally:
            server.request_shutdown("test over")
            tg.cancel_scope.cancel()


def test_what_goes_to_the_readers(kb_service, monkeypatch):
    monkeypatch.setenv("AUTODOC_READERS", "0")
    assert pool_size() == 0
    assert not ReaderPool(kb_service, size=pool_size()).serves("search.query", {"workspace": "kb", "query": "x"})
    cores = len(os.sched_getaffinity(0))
    monkeypatch.delenv("AUTODOC_READERS", raising=False)  # the default: one per core, at most MAX_AUTO
    assert pool_size() == (min(cores, poolmod.MAX_AUTO) if cores >= 2 else 0)
    monkeypatch.setenv("AUTODOC_READERS", "auto")
    assert pool_size() == (min(cores, poolmod.MAX_AUTO) if cores >= 2 else 0)
    monkeypatch.setenv("AUTODOC_READERS", "3")
    assert pool_size() == 3
    pool = ReaderPool(kb_service, size=2)
    hybrid = {"workspace": "kb", "query": "x", "opts": {"stages": ["lexical", "semantic"]}}
    lexical = {"workspace": "kb", "query": "x", "opts": {"stages": ["lexical"]}}
    assert pool.serves("search.query", hybrid) and pool.serves("search.query", lexical)
    assert not pool.serves("document.read", {"workspace": "kb", "path": "a.md"})
    pool.semantic = False  # a store too large for a copy of its vectors per reader
    assert not pool.serves("search.query", hybrid) and not pool.serves(
        "search.query", {"workspace": "kb", "query": "x"}
    )
    assert pool.serves("search.query", lexical)


def test_invalidations_reach_a_readers_caches(kb_service, kb_copy):
    """What the daemon's Service tells its own caches on a write is what a reader applies."""
    seen = []
    kb_service.on_invalidate = lambda *item: seen.append(item)
    (kb_copy / "fresh.md").write_text("# Fresh\n\nNew words.\n")
    kb_service.index_paths("kb", ["fresh.md"])
    ws_id = kb_service._ws("kb").id
    assert any(i[0] == "vectors" and i[1] == ws_id for i in seen), seen
    kb_service.workspace_configure("kb", {"embedding": {"provider": "onnx"}})
    assert ("forget", ws_id) in seen

    class Recorder:
        def __init__(self):
            self.calls = []

        def __getattr__(self, name):
            return lambda *a: self.calls.append((name, *a))

    class Reader:
        vectors, embed_queue = Recorder(), Recorder()

    apply_invalidations(Reader, [("vectors", ws_id, [3]), ("forget", ws_id), ("model", ws_id, "fp")])
    assert Reader.vectors.calls == [("mark_dirty", ws_id, [3]), ("forget", ws_id), ("forget_model", ws_id, "fp")]
    assert Reader.embed_queue.calls == [("changed", ws_id)] * 2


def _cache_after(items):
    """What a reader's vector cache needs after `items`: per workspace, a full reload or the
    documents to re-read; and the models dropped."""
    need: dict[int, set | None] = {}
    dropped = set()
    for kind, ws, *rest in items:
        if kind == "forget" or (kind == "vectors" and rest[0] is None):
            need[ws] = None
        elif kind == "vectors" and need.get(ws, set()) is not None:
            need.setdefault(ws, set()).update(rest[0])
        elif kind == "model":
            dropped.add((ws, rest[0]))
    return need, dropped


def test_an_overflowing_invalidation_list_keeps_what_each_item_meant():
    """Review item 6: past MAX_INVALIDATIONS the list collapsed into "anything changed", so a
    reader reloaded every vector of the workspace (a 1M store's whole matrix) after a large
    save, and a dropped model's vectors stayed. Compacted, it asks for the same reloads and
    drops, in one item per workspace and model."""
    from autodoc.readers.pool import compact_invalidations

    rng = random.Random(5)
    for _ in range(300):
        items = []
        for _ in range(rng.randrange(1, 60)):
            ws, r = rng.randrange(1, 4), rng.random()
            if r < 0.75:
                items.append(("vectors", ws, rng.sample(range(50), rng.randrange(1, 4))))
            elif r < 0.8:
                items.append(("vectors", ws, None))
            elif r < 0.9:
                items.append(("model", ws, rng.choice(["fp-a", "fp-b"])))
            else:
                items.append(("forget", ws))
        small = compact_invalidations(items)
        assert _cache_after(small) == _cache_after(items), items
        # per workspace: a forget, a vectors item (marks after it count: a base shared after a
        # forget needs them, tests/e2e/test_shared_vectors.py), and two models
        assert len(small) <= 3 * 4
    assert compact_invalidations([("vectors", 1, [4, 2]), ("vectors", 1, [2, 9])]) == [("vectors", 1, [2, 4, 9])]


def test_a_killed_daemon_leaves_no_reader(short_tmp, kb_copy, daemon_factory):
    from autodoc.config import Settings
    from autodoc.service import Service

    store = short_tmp / "store.db"
    svc = Service(Settings.from_env(store=store))
    svc.workspace_add("kb", str(kb_copy), {"embedding": {"provider": "none"}})
    svc.index("kb")
    svc.close()
    sock = short_tmp / "d.sock"
    argv = daemon_argv(store, sock, "--no-watch")
    daemon = daemon_factory(short_tmp, store=store, sock=sock, argv=argv, env={"AUTODOC_READERS": "2"})
    try:
        t0 = time.monotonic()
        kids: list[int] = []
        while len(kids) < 2 and time.monotonic() - t0 < DEADLINE_S:
            # pipelined searches overlap: the pool starts
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as raw:
                try:
                    raw.connect(str(sock))
                except OSError:  # not listening yet
                    time.sleep(0.1)
                    continue
                raw.sendall(
                    b"".join(
                        json.dumps({"jsonrpc": "2.0", "id": i, "method": "search.query", "params": SEARCH}).encode()
                        + b"\n"
                        for i in range(4)
                    )
                )
                f = raw.makefile("rb")
                assert all("result" in json.loads(f.readline()) for _ in range(4))
            kids = _children(daemon.pid)
            time.sleep(0.2)
        assert len(kids) == 2, "the readers did not start"
        daemon.kill()
        while any(_running(k) for k in kids) and time.monotonic() - t0 < DEADLINE_S:
            time.sleep(0.05)
        assert not any(_running(k) for k in kids), "a reader outlived its daemon"
    finally:
        daemon.kill()


def _children(pid: int) -> list[int]:
    try:
        return [int(x) for x in open(f"/proc/{pid}/task/{pid}/children").read().split()]
    except OSError:
        return []


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


async def test_a_search_in_a_reader_at_shutdown_is_answered(kb_service, short_tmp):
    """daemon.py cancels the pool's task as soon as shutdown is requested while the server still
    drains its requests: a search a reader is running must still be answered (review finding:
    it waited out the deadline and got -32020)."""
    import os as _os

    pool_ = ReaderPool(kb_service, size=1)
    server = RpcServer(kb_service, shutdown_deadline=5.0, pool=pool_)
    server.inline.below_s = 0.0
    search = ["kb", "sqlite lease", {"stages": ["lexical"], "limit": 5}]
    out: dict = {}
    async with anyio.create_task_group() as tg:
        await tg.start(lambda task_status: server.run(socket_path=short_tmp / "d.sock", task_status=task_status))
        aux = anyio.CancelScope()

        async def run_pool():
            with aux:
                await pool_.run()

        tg.start_soon(run_pool)
        pool_.want()
        await _until(lambda: pool_.ready, "the reader to start")
        async with await Client.connect_socket(short_tmp / "d.sock") as client:
            want = await client.call("search.query", search)
            pid = pool_.readers[0].proc.pid
            _os.kill(pid, signal.SIGSTOP)  # the reader holds the next call while shutdown starts

            async def one():
                out["r"] = await client.call("search.query", search)

            async with anyio.create_task_group() as calls:
                calls.start_soon(one)
                await anyio.sleep(0.3)
                server.request_shutdown("test")
                aux.cancel()  # as daemon.py does
                await anyio.sleep(0.2)
                _os.kill(pid, signal.SIGCONT)
    assert out["r"]["hits"] == want["hits"]


async def test_the_pool_stopping_while_a_reader_starts_does_not_end_the_daemon(monkeypatch):
    """One reader fails to start (the pool stops) while another is still starting: its hand-over
    to the closed free list must not raise out of run() into the daemon's task group (review
    finding: ClosedResourceError ended serve_daemon). Starting readers is faked: a reader that
    fails at start only on the first of two concurrent starts cannot be caused otherwise."""

    class Proc:
        pid = 1

        def poll(self):
            return None

    class FakeReader:
        def __init__(self):
            self.alive, self.gone, self.proc, self.waiting, self.transport = True, anyio.Event(), Proc(), {}, None

    class Svc:
        on_invalidate = None
        vectors = types.SimpleNamespace(sharing=None)  # the pool shares vector bases through it

    p = ReaderPool(Svc(), size=2)
    monkeypatch.setattr(p, "_semantic_fits", lambda: True)
    starts = [0]
    stopped = []

    async def spawn():
        starts[0] += 1
        k = starts[0]
        await anyio.sleep(0.1 * k)
        if k == 1:
            raise RuntimeError("the reader exited at start")
        return FakeReader()

    async def stop(reader):
        stopped.append(reader)

    monkeypatch.setattr(p, "_spawn", spawn)
    monkeypatch.setattr(p, "_stop", stop)
    p.want()
    with anyio.move_on_after(2):
        await p.run()
    assert p.stopped and starts[0] == 2 and len(stopped) == 1  # the late reader was stopped, not handed out


def test_a_store_that_grows_past_the_shared_limit_keeps_semantic_searches_in_the_daemon(
    kb_service, kb_copy, monkeypatch
):
    """Review leftover: the size guard was counted once, when the pool started, so a workspace
    that grew past MAX_SHARED_ROWS afterwards still sent semantic searches to readers that each
    hold a copy of the vectors. A write that changes vectors counts again (at most every
    RECHECK_S), and the readers are told to drop their copies."""
    pool = ReaderPool(kb_service, size=2)
    pool.started = True
    pool.semantic = pool._semantic_fits()
    assert pool.semantic
    with kb_service.store.read() as db:
        rows = sum(1 for _ in db.execute("SELECT id FROM chunks"))
    monkeypatch.setattr(poolmod, "MAX_SHARED_ROWS", rows)  # the store sits at the limit; one more chunk passes it
    monkeypatch.setattr(poolmod, "RECHECK_S", 0.0)

    class Idle:  # a reader's slot for invalidations (no process needed to see what it would be told)
        invalidations: list = []

    pool.readers = [Idle()]
    hybrid = {"workspace": "kb", "query": "x"}
    assert pool.serves("search.query", hybrid)
    (kb_copy / "grown.md").write_text("# Grown\n\nOne more section of words.\n")
    kb_service.index_paths("kb", ["grown.md"])
    assert not pool.serves("search.query", hybrid)
    assert pool.serves("search.query", {"workspace": "kb", "query": "x", "opts": {"stages": ["lexical"]}})
    ws_id = kb_service._ws("kb").id
    assert ("forget", ws_id) in Idle.invalidations


async def test_a_lone_hybrid_search_stays_with_the_daemons_lexical_helper(kb_service, short_tmp):
    """Readers have no lexical helper: a lone search with both legs ran them one after the other
    in a reader (27 ms at 100k chunks) where the daemon overlaps them (17 ms). Alone, it stays in
    the daemon; a lexical search still goes to a reader, and without a helper so does a hybrid."""
    from autodoc.search.lexical.legproc import LexicalHelper

    hybrid = ["kb", "sqlite lease", {"limit": 5}]  # the default stages: lexical, semantic, rerank
    async with anyio.create_task_group() as tg:
        server, pool = await _serve(kb_service, short_tmp, tg, size=1)
        kb_service.lexical_helper = LexicalHelper(kb_service.settings.store)
        try:
            async with await Client.connect_socket(short_tmp / "d.sock") as client:
                before = pool.calls
                got = await client.call("search.query", hybrid)
                assert got["hits"] and pool.calls == before, "a lone hybrid search went to a reader"
                await client.call("search.query", SEARCH)
                assert pool.calls == before + 1, "a lexical search did not go to a reader"
                kb_service.lexical_helper.close()  # given up on: nothing to overlap with in the daemon
                await client.call("search.query", hybrid)
                assert pool.calls == before + 2
        finally:
            kb_service.lexical_helper.close()
            kb_service.lexical_helper = None
            server.request_shutdown("test over")
            tg.cancel_scope.cancel()


async def test_a_reader_is_handed_its_next_call_before_it_answers(kb_service, short_tmp):
    """DEPTH: a reader holds the call it runs and one queued behind it, so it does not idle
    between two while the daemon's loop is busy elsewhere; a third call waits for a free slot.
    A stopped reader shows what it was handed: its frames sit in its socket."""
    expected = kb_service.search(*SEARCH)["hits"]
    async with anyio.create_task_group() as tg:
        server, pool = await _serve(kb_service, short_tmp, tg, size=1)
        try:
            path = await _warm(short_tmp)
            (reader,) = pool.readers
            if hasattr(os, "SCHED_BATCH"):  # woken by a call, it does not preempt the daemon (reader.py)
                assert os.sched_getscheduler(reader.proc.pid) == os.SCHED_BATCH
            os.kill(reader.proc.pid, signal.SIGSTOP)
            answers: list[dict] = []

            async def one() -> None:
                answers.append(
                    await anyio.to_thread.run_sync(
                        _raw_call, path, {"jsonrpc": "2.0", "id": 1, "method": "search.query", "params": SEARCH}
                    )
                )

            async with anyio.create_task_group() as calls:
                for _ in range(3):
                    calls.start_soon(one)
                try:
                    await _until(lambda: len(reader.waiting) >= 2, "two calls handed to the stopped reader")
                    await anyio.sleep(0.3)
                    assert len(reader.waiting) == poolmod.DEPTH == 2, "a reader was handed more than its slots"
                    assert not answers
                    # a write meanwhile is sent at once, in a frame of its own, not with the next call
                    pool.invalidate("vectors", kb_service._ws("kb").id, None)
                    await _until(lambda: not reader.invalidations, "the invalidation sent")
                finally:  # else the clients' threads wait for it forever
                    os.kill(reader.proc.pid, signal.SIGCONT)
            assert [a["result"]["hits"] for a in answers] == [expected] * 3
            assert not reader.waiting and _alive_pids(pool) == [reader.proc.pid]
        finally:
            server.request_shutdown("test over")
            tg.cancel_scope.cancel()


def test_a_call_cancelled_while_queued_in_a_reader_is_not_run(kb_service, monkeypatch):
    """A cancel that reaches a reader while the call waits behind another one answers it
    cancelled without running it. The reader's serve() runs on a thread here, over a real
    socket pair and a real read-only Service; a stand-in run_call holds the first call open
    (a running call that waits on demand, which a real search cannot be made to do)."""
    from autodoc.readers import reader as readermod

    release, ran = threading.Event(), []
    real_run = readermod.run_call

    def held(service, method, params, cancel):
        ran.append(params["query"])
        if params["query"] == "first":
            release.wait(30)
        return real_run(service, method, params, cancel)

    monkeypatch.setattr(readermod, "run_call", held)
    with _reader_on_a_thread(kb_service.settings, release) as ours:
        params = {"workspace": "kb", "opts": {"stages": ["lexical"], "limit": 3}}
        readermod.send_frame(ours, ("call", 1, "search.query", {**params, "query": "first"}, []))
        readermod.send_frame(ours, ("call", 2, "search.query", {**params, "query": "second"}, []))
        readermod.send_frame(ours, ("cancel", 2))
        readermod.send_frame(ours, ("call", 3, "search.query", {**params, "query": "sqlite lease"}, []))
        time.sleep(0.3)  # the frames thread has read all four while the first call is held
        release.set()
        replies = {r[1]: r for r in (readermod.recv_frame(ours) for _ in range(3))}
        assert replies[1][0] == "ok" and replies[3][0] == "ok" and replies[3][2]["hits"]
        assert replies[2][0] == "err" and replies[2][2]["code"] == -32800
        assert ran == ["first", "sqlite lease"], "the cancelled call ran"


async def test_calls_go_to_the_least_busy_reader(kb_service, short_tmp):
    """Two idle readers each get a call before either gets a second (a review found both slots
    of one reader handed out first while the other idled). Stopped readers show what they hold."""
    async with anyio.create_task_group() as tg:
        server, pool = await _serve(kb_service, short_tmp, tg, size=2)
        try:
            path = short_tmp / "d.sock"  # no call yet: both readers just started, all slots free
            pids = _alive_pids(pool)
            for pid in pids:
                os.kill(pid, signal.SIGSTOP)
            answers: list[dict] = []

            async def one() -> None:
                answers.append(
                    await anyio.to_thread.run_sync(
                        _raw_call, path, {"jsonrpc": "2.0", "id": 1, "method": "search.query", "params": SEARCH}
                    )
                )

            async with anyio.create_task_group() as calls:
                try:
                    for want in ([0, 1], [1, 1], [1, 2], [2, 2]):
                        calls.start_soon(one)
                        await _until(lambda: sum(len(r.waiting) for r in pool.readers) == sum(want), "handed")
                        assert sorted(len(r.waiting) for r in pool.readers) == want
                    calls.start_soon(one)  # no slot is free: it waits in the daemon
                    await anyio.sleep(0.3)
                    assert sorted(len(r.waiting) for r in pool.readers) == [2, 2] and not answers
                finally:
                    for pid in pids:
                        os.kill(pid, signal.SIGCONT)
            assert len(answers) == 5 and all(a["result"]["hits"] for a in answers)
        finally:
            server.request_shutdown("test over")
            tg.cancel_scope.cancel()


def test_a_call_queued_behind_another_applies_what_was_written_meanwhile(kb_service, monkeypatch):
    """Invalidations that reach a reader in a frame of their own while a call waits behind another
    are applied before that call, in the order they came (a review found a queued call searching
    a save it had not heard of: its invalidations rode with the next call). serve() runs on a
    thread over a real socket pair and a real read-only Service; a stand-in run_call holds the
    first call open."""
    from autodoc.readers import reader as readermod

    release, seen = threading.Event(), []
    real_run, real_apply = readermod.run_call, readermod.apply_invalidations

    def held(service, method, params, cancel):
        seen.append(("run", params["query"]))
        if params["query"] == "first":
            release.wait(30)
        return real_run(service, method, params, cancel)

    def applied(service, items):
        if items:
            seen.append(("apply", [i[0] for i in items]))
        return real_apply(service, items)

    monkeypatch.setattr(readermod, "run_call", held)
    monkeypatch.setattr(readermod, "apply_invalidations", applied)
    ws_id = kb_service._ws("kb").id
    with _reader_on_a_thread(kb_service.settings, release) as ours:
        params = {"workspace": "kb", "opts": {"stages": ["lexical"], "limit": 3}}
        readermod.send_frame(ours, ("call", 1, "search.query", {**params, "query": "first"}, [("vectors", ws_id, [1])]))
        deadline = time.monotonic() + 30
        while ("run", "first") not in seen and time.monotonic() < deadline:  # the first call is running
            time.sleep(0.01)
        readermod.send_frame(ours, ("call", 2, "search.query", {**params, "query": "sqlite lease"}, []))
        readermod.send_frame(ours, ("inval", [("vectors", ws_id, None), ("model", ws_id, "fp")]))
        time.sleep(0.3)  # the frames thread has read both while the first call is held
        release.set()
        replies = {r[1]: r for r in (readermod.recv_frame(ours) for _ in range(2))}
        assert replies[1][0] == replies[2][0] == "ok"
        assert seen == [
            ("apply", ["vectors"]),
            ("run", "first"),
            ("apply", ["vectors", "model"]),
            ("run", "sqlite lease"),
        ]
