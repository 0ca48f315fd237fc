"""The quick lane (rpc/quick.py, issue 19's socket overhead): a lone quick read
on an idle daemon is answered by the connection's reader, with no task and no
jsonrpcserver dispatch; its answers and errors are the usual path's, frames
stay whole and in order when the peer reads slowly, and the counters the
inline rule reads come back to rest.

A real Service on a real store served over a real Unix socket or real pipes.
The usual path is counted by wrapping Dispatcher.dispatch (it still runs)."""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import time
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import anyio
import anyio.from_thread
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autodoc.rpc.dispatch import Dispatcher
from autodoc.rpc.framing import NEWLINE, FrameDecoder, encode_message
from autodoc.rpc.server import RpcServer

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from bench.reliability import _BAD_JSONRPC, _BAD_METHOD, _SOME_ID, json_values, params_for, strings

DEADLINE = 30
SEARCH = ["kb", "sqlite lease", {"stages": ["lexical"], "limit": 5}]

# Each request is sent alone and answered before the next. Two of the bad params
# never become a known-quick kind (they fail before they run: their kind is theirs
# alone), so the usual path answers them and the two requests that are not
# requests; workspace.list ["extra"] has the kind of workspace.list {}, so the lane
# answers its -32602 from its own binding. A service error is a run like any other.
NOT_IN_LANE = 4
REQUESTS = [
    ("search.query", SEARCH),
    ("search.query", {"workspace": "kb", "query": "sqlite lease", "opts": {"stages": ["lexical"], "limit": 5}}),
    ("workspace.list", None),
    ("workspace.list", []),
    ("workspace.list", {}),
    ("workspace.status", {"workspace": "kb"}),
    ("workspace.status", {"workspace": "nope"}),  # -32001-style service error, with suggestions
    ("search.query", {"workspace": "kb", "query": 7}),  # -32602 naming query
    ("search.query", {"workspace": "kb", "query": "x", "bogus": 1}),  # -32602, unknown field
    ("workspace.list", ["extra"]),  # -32602, too many positional
    ("document.outline", {"workspace": "kb", "path": "nope.md"}),
    ([], {}),  # not a request: -32600 "method must be a string", alone on an idle daemon
    ({"x": 1}, []),
]


@pytest.fixture
def dispatched(monkeypatch):
    real = Dispatcher.dispatch
    calls = []

    async def counting(self, message, *args, **kwargs):
        calls.append(message)
        return await real(self, message, *args, **kwargs)

    monkeypatch.setattr(Dispatcher, "dispatch", counting)
    return calls


def _count_dispatches(server: RpcServer) -> list:
    """The messages that go through this server's usual path (its dispatcher still runs them)."""
    dispatched: list = []
    real = server.dispatcher.dispatch

    async def counting(message, *args, **kwargs):
        dispatched.append(message)
        return await real(message, *args, **kwargs)

    server.dispatcher.dispatch = counting
    return dispatched


def _volatile(answer: dict) -> dict:
    """The answer less what differs between two runs of the same read (timings)."""

    def strip(v):
        if isinstance(v, dict):
            return {k: strip(x) for k, x in v.items() if not (k.endswith("_ms") or k in ("took", "timings"))}
        if isinstance(v, list):
            return [strip(x) for x in v]
        return v

    return strip(answer)


def _call(raw: socket.socket, f, rid: int, method: str, params) -> dict:
    msg = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        msg["params"] = params
    raw.sendall(json.dumps(msg).encode() + b"\n")
    return json.loads(f.readline())


async def _answers(server: RpcServer, sock_path, rounds: int) -> list[list[dict]]:
    """Each REQUESTS entry, sent alone, ``rounds`` times over one connection."""

    def run() -> list[list[dict]]:
        out = []
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as raw:
            raw.settimeout(DEADLINE)
            raw.connect(str(sock_path))
            f = raw.makefile("rb")
            rid = 0
            for _ in range(rounds):
                row = []
                for method, params in REQUESTS:
                    rid += 1
                    row.append(_call(raw, f, rid, method, params))
                out.append(row)
        return out

    async with anyio.create_task_group() as tg:
        await tg.start(lambda task_status: server.run(socket_path=sock_path, task_status=task_status))
        try:
            return await anyio.to_thread.run_sync(run)
        finally:
            server.request_shutdown("test over")


async def test_the_lane_answers_what_the_usual_path_answers(kb_service, short_tmp, dispatched):
    lane = RpcServer(kb_service)
    lane.inline.below_s = lane.inline.wall_below_s = 10.0  # every read counts as quick: the rule alone decides
    rounds = lane.inline.window + 3
    with_lane = await _answers(lane, short_tmp / "a.sock", rounds)
    through_lane = rounds * len(REQUESTS) - len(dispatched)

    usual = RpcServer(kb_service)
    usual.quick = None  # every request takes the usual path
    usual.inline.below_s = usual.inline.wall_below_s = 10.0
    before = len(dispatched)
    without = await _answers(usual, short_tmp / "b.sock", rounds)
    assert len(dispatched) - before == rounds * len(REQUESTS)

    # After each kind's first `window` runs (on threads, to learn its cost), lone reads take the lane.
    assert through_lane >= 3 * (len(REQUESTS) - NOT_IN_LANE), through_lane
    codes = {a["error"]["code"] for a in with_lane[-1] if "error" in a}
    assert {-32602, -32600} < codes, codes  # bad params, bad requests and a service error all answered
    for row_lane, row_usual in zip(with_lane, without):
        for (method, params), a, b in zip(REQUESTS, row_lane, row_usual):
            assert {k for k in a if k != "id"} == {k for k in b if k != "id"}, (method, params, a, b)
            assert _volatile({k: v for k, v in a.items() if k != "id"}) == _volatile(
                {k: v for k, v in b.items() if k != "id"}
            ), (method, params)
    assert lane.inline.admitted == 0 and lane.inline.running == 0


async def test_frames_stay_whole_and_in_order_when_the_peer_reads_slowly(kb_service, kb_copy):
    """A pipe of one page: a large answer is written as far as the pipe takes it, the
    rest goes through the outbox, and the next answer, from the lane as well, waits
    behind it rather than cutting into it."""
    (kb_copy / "big.md").write_text(
        "# Big\n\n" + "\n\n".join(f"## Part {i}\n\n" + "lease sqlite words " * 400 for i in range(40)), encoding="utf-8"
    )
    kb_service.index("kb")
    server = RpcServer(kb_service)
    server.inline.below_s = server.inline.wall_below_s = 10.0
    to_server_r, to_server_w = os.pipe()
    from_server_r, from_server_w = os.pipe()
    fcntl.fcntl(from_server_w, fcntl.F_SETPIPE_SZ, 4096)
    big = {"workspace": "kb", "path": "big.md"}
    decoder = FrameDecoder()

    async def read_frames(n: int) -> list[dict]:
        frames: list = []
        with anyio.fail_after(DEADLINE):
            while len(frames) < n:
                await anyio.wait_readable(from_server_r)
                frames += decoder.feed(os.read(from_server_r, 1024))  # a slow reader: small reads
        return [json.loads(f.payload) for f in frames]

    async with anyio.create_task_group() as tg:
        await tg.start(partial(server.run, stdio=True, stdio_fds=(to_server_r, from_server_w)))
        try:
            rid = 0
            for _ in range(server.inline.window):  # both kinds become known-quick
                for method, params in (("document.read", big), ("workspace.list", {})):
                    rid += 1
                    os.write(
                        to_server_w,
                        encode_message({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}, NEWLINE),
                    )
                    assert "result" in (await read_frames(1))[0]
            # Now: a big answer nobody reads yet, then a small one right behind it.
            os.write(
                to_server_w,
                encode_message({"jsonrpc": "2.0", "id": "big", "method": "document.read", "params": big}, NEWLINE),
            )
            with anyio.fail_after(DEADLINE):
                while not server.connections or not next(iter(server.connections)).outbox.queued:
                    await anyio.sleep(0.005)  # the pipe took a page; the rest waits in the outbox
            os.write(
                to_server_w,
                encode_message({"jsonrpc": "2.0", "id": "small", "method": "workspace.list", "params": {}}, NEWLINE),
            )
            got = await read_frames(2)
            assert [g["id"] for g in got] == ["big", "small"]
            assert got[0]["result"]["total_bytes"] > 100_000 and "workspaces" in got[1]["result"]
        finally:
            os.close(to_server_w)
            with anyio.fail_after(DEADLINE):
                await server.shutdown_requested.wait()
    for fd in (to_server_r, from_server_r, from_server_w):
        os.close(fd)


async def test_a_notification_never_lands_inside_a_partly_written_answer():
    """Review finding: after a partial write the rest of the answer was queued with an await,
    and a notification queued meanwhile was written into the middle of the answer. A real
    Connection over real pipes of one page."""
    from autodoc.rpc.connection import Connection
    from autodoc.rpc.transport import FdStream

    to_r, to_w = os.pipe()
    from_r, from_w = os.pipe()
    fcntl.fcntl(from_w, fcntl.F_SETPIPE_SZ, 4096)
    conn = Connection(FdStream(to_r, from_w), Dispatcher({}), name="pipes")
    big = {"jsonrpc": "2.0", "result": {"text": "y" * 20_000}, "id": 1}

    async def notify() -> None:
        for i in range(20):
            conn.notify_nowait("changes.changed", {"i": i})
            await anyio.sleep(0)

    decoder, frames = FrameDecoder(), []
    async with anyio.create_task_group() as tg:
        tg.start_soon(conn.run)
        await anyio.sleep(0.01)  # its writer task waits on the outbox
        tg.start_soon(notify)
        await conn.send(big, direct=True)
        with anyio.fail_after(DEADLINE):
            while len(frames) < 21:
                await anyio.wait_readable(from_r)
                frames += decoder.feed(os.read(from_r, 1024))
        os.close(to_w)  # the connection reads EOF and ends
    messages = [json.loads(f.payload) for f in frames]
    assert messages[0] == big
    assert [m["params"]["i"] for m in messages[1:]] == list(range(20))
    for fd in (to_r, from_r, from_w):
        os.close(fd)


async def test_a_burst_of_clients_is_not_served_one_by_one_on_the_loop(short_tmp):
    """Seen in the suite: the lane answers a request before the loop reads the next, so
    clients sending at once each found the daemon idle and were served one after another
    on the loop, never by the reader processes or threads. With bytes waiting on another
    connection, the lane steps aside. The Service is tests/integration/test_rpc_inprocess.py's stand-in,
    whose "sleep:<s>" query holds the loop while the other clients send."""
    from test_rpc_inprocess import FakeService

    service = FakeService()
    service.workspace_add("kb", str(short_tmp))
    server = RpcServer(service)
    server.inline.below_s = server.inline.wall_below_s = 10.0
    server.inline.window = 1
    dispatched = _count_dispatches(server)
    sock_path = short_tmp / "d.sock"

    def clients() -> list[dict]:
        socks = [socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) for _ in range(3)]
        try:
            for s in socks:
                s.settimeout(DEADLINE)
                s.connect(str(sock_path))
            files = [s.makefile("rb") for s in socks]
            for query in ("sleep:0.3", "quick"):  # each kind runs once and is known-quick (window 1)
                _call(socks[0], files[0], 0, "search.query", ["kb", query])
            del dispatched[:]
            socks[0].sendall(
                json.dumps(
                    {"jsonrpc": "2.0", "id": "a", "method": "search.query", "params": ["kb", "sleep:0.3"]}
                ).encode()
                + b"\n"
            )
            time.sleep(0.1)  # the lane holds the loop with the first; the others send meanwhile
            for i, s in enumerate(socks[1:]):
                s.sendall(
                    json.dumps(
                        {"jsonrpc": "2.0", "id": i, "method": "search.query", "params": ["kb", "quick"]}
                    ).encode()
                    + b"\n"
                )
            return [json.loads(f.readline()) for f in files]
        finally:
            for s in socks:
                s.close()

    async with anyio.create_task_group() as tg:
        await tg.start(lambda task_status: server.run(socket_path=sock_path, task_status=task_status))
        try:
            answers = await anyio.to_thread.run_sync(clients)
        finally:
            server.request_shutdown("test over")
    assert all("result" in a for a in answers), answers
    # the first ran in the lane; of the two that came together, at least the first read took the usual path
    assert [m["id"] for m in dispatched if m["id"] != "a"], dispatched


@contextmanager
def _serving(service, folder):
    """The same service served twice over real Unix sockets, from a thread of its own: with the
    quick lane, every kind known-quick after one run (the lane's answers are what is compared,
    not the rule's timing), and without it. Yields (lane socket, usual socket, the lane server's
    calls that went through its dispatcher)."""
    lane, usual = RpcServer(service), RpcServer(service)
    for server in (lane, usual):
        server.inline.below_s = server.inline.wall_below_s = 10.0
        server.inline.window = 1
    usual.quick = None
    dispatched = _count_dispatches(lane)
    with anyio.from_thread.start_blocking_portal() as portal:
        for name, server in (("l", lane), ("u", usual)):
            portal.start_task(partial(server.run, socket_path=folder / f"{name}.sock"))
        try:
            yield folder / "l.sock", folder / "u.sock", dispatched
        finally:
            for server in (lane, usual):
                portal.call(server.request_shutdown, "test over")


LANE_METHODS = sorted(
    m
    for m in (
        "search.query",
        "search.similar",
        "document.read",
        "document.links",
        "document.backlinks",
        "document.outline",
        "document.problems",
        "workspace.list",
        "workspace.status",
        "workspace.tags",
        "session.list",
        "changes.since",
    )
)


KB_PATHS = (
    sorted(str(p.relative_to(KB_DIR)) for p in KB_DIR.rglob("*.md"))
    if (KB_DIR := Path(__file__).parents[1] / "corpora" / "kb").is_dir()
    else []
)
_OPTS = st.fixed_dictionaries(
    {},
    optional={
        "limit": st.integers(-1, 60),
        "stages": st.sampled_from([["lexical"], ["lexical", "semantic"], ["semantic"], []]),
        "paths": st.lists(st.sampled_from(["**", "adr/**", "*.md", "["]), max_size=2),
        "snippet": st.booleans(),
    },
)


def _kb_params(draw, method: str):
    """Params on the fixture's workspace that mostly bind, so many runs reach the lane."""
    path = draw(st.one_of(st.sampled_from(KB_PATHS or ["none.md"]), strings))
    p = {
        "workspace": "kb",
        "search.query": {"query": draw(strings), "opts": draw(_OPTS)},
        "search.similar": {"path": path, "opts": draw(_OPTS)},
    }.get(method, {})
    full = {"workspace": "kb", **(p if isinstance(p, dict) else {})}
    if method.startswith("document."):
        full["path"] = path
    if method == "changes.since":
        full["cursor"] = draw(st.integers(-2, 10**6))
    if method == "workspace.list":
        full = {}
    return full


@st.composite
def _lone_reads(draw) -> dict:
    """A request for a read the lane may answer, with params fuzzed from the schema (bench/
    reliability.py's) or on the fixture's workspace, sometimes broken: a bad jsonrpc, a method
    that is no method name, an unknown member."""
    method = draw(st.sampled_from(LANE_METHODS))
    message = {"jsonrpc": "2.0", "method": method, "id": draw(_SOME_ID)}
    if draw(st.integers(0, 5)):
        message["params"] = draw(params_for(method)) if draw(st.booleans()) else _kb_params(draw, method)
    breakage = draw(st.integers(0, 9))
    if breakage == 1:
        message["jsonrpc"] = draw(_BAD_JSONRPC)
    elif breakage == 2:
        message["method"] = draw(_BAD_METHOD)
    elif breakage == 3:
        message[draw(strings)] = draw(json_values)
    return message


def _ask(path: Path, message: dict) -> dict:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as raw:
        raw.settimeout(DEADLINE)
        raw.connect(str(path))
        raw.sendall(json.dumps(message).encode() + b"\n")
        return json.loads(raw.makefile("rb").readline())


def test_fuzzed_lone_reads_answer_alike_with_and_without_the_lane(kb_service, short_tmp):
    """Each fuzzed request twice to the daemon with the lane (the first run teaches the rule its
    kind, so the second may take the lane) and once to the one without: the same answer."""
    with _serving(kb_service, short_tmp) as (lane, usual, dispatched):
        asked: list = []

        @settings(
            max_examples=200,
            deadline=None,
            database=None,
            derandomize=True,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        )
        @given(message=_lone_reads())
        def check(message):
            _ask(lane, message)
            before = len(dispatched)
            a, b = _ask(lane, message), _ask(usual, message)
            asked.append(len(dispatched) == before)  # True: the lane answered it
            assert a.get("error", {}).get("code") != -32603, (message, a)
            assert json.dumps(a.get("id")) == json.dumps(b.get("id")), (message, a, b)
            assert _volatile({k: v for k, v in a.items() if k != "id"}) == _volatile(
                {k: v for k, v in b.items() if k != "id"}
            ), (message, a, b)

        check()
        assert sum(asked) >= 30, f"the lane answered {sum(asked)} of {len(asked)}"
