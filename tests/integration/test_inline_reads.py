"""Quick reads run on the event loop when the daemon is otherwise idle
(rpc/inline.py, issue 19): the answers and errors are the same as from a
worker thread, pipelined or batched requests never take that path, and a
client that vanishes mid-request leaves the counters where they were.

A real Service on a real store, served by the RPC server over a real Unix
socket. The hand-offs to worker threads are counted by wrapping
anyio.to_thread.run_sync (it still runs every call)."""

from __future__ import annotations

import json
import socket

import anyio
import anyio.to_thread
import pytest

from autodoc.rpc.inline import InlineReads, read_kind
from autodoc.rpc.server import RpcServer
from autodoc_client import Client, RemoteError

SEARCH = ["kb", "sqlite lease", {"stages": ["lexical"], "limit": 5}]


@pytest.fixture
def hand_offs(monkeypatch):
    real = anyio.to_thread.run_sync
    calls = []

    async def counting(fn, *args, **kwargs):
        calls.append(fn)
        return await real(fn, *args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", counting)
    return calls


def test_the_rule_idle_and_known_quick():
    inline = InlineReads(below_s=0.005, window=4)
    kind = read_kind("search.query", {"workspace": "kb", "query": "x", "opts": {"stages": ["lexical"]}})
    assert not inline.may_run(kind)  # never seen: a thread first
    for _ in range(4):
        inline.record(kind, 0.001, 0.002)
    assert inline.may_run(kind)
    inline.admitted = 2
    assert not inline.may_run(kind)  # another request is in: no
    inline.admitted, inline.running = 1, 1
    assert not inline.may_run(kind)  # a read or write runs on a thread: no
    inline.running = 0
    for _ in range(3):
        inline.record(kind, 0.5, 0.5)
    assert not inline.may_run(kind)  # slow of late at the median: back to threads
    for _ in range(4):
        inline.record(kind, 0.001, 0.5)
    assert not inline.may_run(kind)  # cheap in CPU but waiting long (I/O, a lock): threads
    hybrid = read_kind("search.query", {"workspace": "kb", "query": "x", "opts": {"stages": ["lexical", "semantic"]}})
    assert hybrid != kind and not inline.may_run(hybrid)


def test_a_long_or_filtered_search_is_not_the_kind_of_a_short_one():
    """Eight quick two-word searches must not let a 600-word or a filtered one run on the loop."""

    def kind(query, **opts):
        return read_kind("search.query", {"workspace": "kb", "query": query, "opts": {"stages": ["lexical"], **opts}})

    short = kind("graph notes")
    assert kind("daily notes") == short
    assert kind(" ".join(["word"] * 600)) != short
    assert kind("graph notes", limit=200) != kind("graph notes", limit=10)
    assert kind("graph notes", paths=["adr/**"]) != short
    assert kind("graph notes", facets=[{"field": "status", "value": "accepted"}]) != short
    positional = read_kind("search.query", ["kb", "graph notes"])
    assert read_kind("search.query", ["kb", " ".join(["word"] * 600)]) != positional
    # as sent or as bound, positional or named: one kind (the quick lane decides before binding)
    assert positional == read_kind("search.query", {"workspace": "kb", "query": "graph notes"})
    assert read_kind("search.query", ["kb", "graph notes", {"stages": ["lexical"]}]) == short
    assert read_kind("search.query", ["kb", "graph notes", None]) == positional


async def test_inline_answers_and_errors_are_the_threads_ones(kb_service, short_tmp, hand_offs):
    server = RpcServer(kb_service)
    server.inline.below_s = server.inline.wall_below_s = 10.0  # every read counts as quick: the rule alone decides
    sock_path = short_tmp / "d.sock"
    async with anyio.create_task_group() as tg:
        await tg.start(lambda task_status: server.run(socket_path=sock_path, task_status=task_status))
        try:
            async with await Client.connect_socket(sock_path) as client:
                answers, errors = [], []
                for _ in range(server.inline.window + 4):
                    answers.append(await client.call("search.query", SEARCH))
                    try:
                        await client.call("workspace.status", {"workspace": "nope"})
                    except RemoteError as exc:
                        errors.append((exc.code, exc.message, exc.data))
            threaded = len(hand_offs)
            assert answers[0]["hits"]
            assert all(a["hits"] == answers[0]["hits"] for a in answers), "inline answers differ"
            assert len(errors) == len(answers) and len(set(map(repr, errors))) == 1, errors
            assert errors[0][0] != -32603
            # The first `window` of each kind went to a thread, the rest ran on the loop.
            assert threaded <= 2 * server.inline.window + 2, threaded
        finally:
            server.request_shutdown("test over")


async def test_pipelined_requests_never_run_inline(kb_service, short_tmp, hand_offs):
    server = RpcServer(kb_service)
    server.inline.below_s = server.inline.wall_below_s = 10.0
    sock_path = short_tmp / "d.sock"
    async with anyio.create_task_group() as tg:
        await tg.start(lambda task_status: server.run(socket_path=sock_path, task_status=task_status))
        try:
            async with await Client.connect_socket(sock_path) as client:
                for _ in range(server.inline.window):  # the kind becomes known-quick
                    await client.call("search.query", SEARCH)
            before = len(hand_offs)
            n = 40
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as raw:
                raw.connect(str(sock_path))
                raw.sendall(
                    b"".join(
                        json.dumps({"jsonrpc": "2.0", "id": i, "method": "search.query", "params": SEARCH}).encode()
                        + b"\n"
                        for i in range(n)
                    )
                )
                got = await anyio.to_thread.run_sync(_read_answers, raw, n)
            assert sorted(a["id"] for a in got) == list(range(n))
            assert all("result" in a for a in got), got[:2]
            # All but the first, which may have found the daemon idle, went to threads.
            assert len(hand_offs) - before >= n - 1 - 1, len(hand_offs) - before  # -1: the wrapped read above
        finally:
            server.request_shutdown("test over")


async def test_a_client_vanishing_mid_request_leaves_the_counters_at_rest(kb_service, short_tmp):
    server = RpcServer(kb_service)
    sock_path = short_tmp / "d.sock"
    async with anyio.create_task_group() as tg:
        await tg.start(lambda task_status: server.run(socket_path=sock_path, task_status=task_status))
        try:
            for _ in range(5):
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as raw:
                    raw.connect(str(sock_path))
                    raw.sendall(
                        b"".join(
                            json.dumps(
                                {
                                    "jsonrpc": "2.0",
                                    "id": i,
                                    "method": "search.query",
                                    "params": ["kb", "lease", {"limit": 20}],
                                }
                            ).encode()
                            + b"\n"
                            for i in range(10)
                        )
                    )
                # closed before any answer is read
            with anyio.fail_after(20):
                while server.connections or server.inline.admitted or server.inline.running:
                    await anyio.sleep(0.01)
            async with await Client.connect_socket(sock_path) as client:
                assert (await client.call("search.query", SEARCH))["hits"]
            assert server.inline.admitted == 0 and server.inline.running == 0
        finally:
            server.request_shutdown("test over")


def _read_answers(raw: socket.socket, n: int) -> list[dict]:
    raw.settimeout(30)
    f = raw.makefile("rb")
    return [json.loads(f.readline()) for _ in range(n)]
