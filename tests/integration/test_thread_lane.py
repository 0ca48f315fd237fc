"""The thread lane (rpc/quick.py, issue 19's socket overhead for reads on worker
threads): a lone read not known to be quick, on an idle daemon, is handed by the
connection's reader straight to a worker thread, with no task and no jsonrpcserver
dispatch. Its answers and errors are the usual path's; a cancel answers at once;
a client gone mid-read, a shutdown and a full outbox each end as on the usual
path; every counter and slot it holds comes back.

Real Services on real stores over real Unix sockets and pipes, except where the
read must be held open at will: there tests/integration/test_rpc_inprocess.py's stand-in
Service, whose "slow" search waits on a gate, or a read that waits on an Event
(a fault the real search cannot be made to hold)."""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import select
import socket
import threading
import time

import anyio
import pytest
from test_quick_lane import REQUESTS, _answers, _count_dispatches, _volatile
from test_rpc_inprocess import DEADLINE, connect, serving, wait_thread_event, wait_until, with_kb

from autodoc.rpc import schemas
from autodoc.rpc.connection import Connection
from autodoc.rpc.dispatch import Dispatcher
from autodoc.rpc.framing import NEWLINE, FrameDecoder, encode_message
from autodoc.rpc.inline import InlineReads
from autodoc.rpc.outbox import OUTBOX_SIZE, Outbox
from autodoc.rpc.quick import LaneRead, QuickLane
from autodoc.rpc.server import RpcServer
from autodoc.rpc.transport import FdStream

# [] and {"x": 1}: not requests; the usual path says what is wrong with them
NOT_READS = 2


def _at_rest(server: RpcServer) -> bool:
    return (
        server.inline.running == 0
        and server.inline.admitted == 0
        and server.readers.borrowed_tokens == 0
        and server.quick.workers.busy == 0
    )


async def test_the_thread_lane_answers_what_the_usual_path_answers(kb_service, short_tmp):
    lane = RpcServer(kb_service)
    lane.inline.below_s = lane.inline.wall_below_s = 0.0  # no read is ever quick: each goes to a thread
    dispatched = _count_dispatches(lane)
    rounds = 3
    with_lane = await _answers(lane, short_tmp / "a.sock", rounds)

    usual = RpcServer(kb_service)
    usual.quick = None  # every request takes the usual path
    usual.inline.below_s = usual.inline.wall_below_s = 0.0
    without = await _answers(usual, short_tmp / "b.sock", rounds)

    # every read took the thread lane (never the loop: none is quick), only the non-requests the usual path
    assert len(dispatched) == rounds * NOT_READS, dispatched
    assert lane.quick.workers._threads >= 1
    codes = {a["error"]["code"] for a in with_lane[-1] if "error" in a}
    assert {-32602, -32600} < codes, codes
    for row_lane, row_usual in zip(with_lane, without):
        for (method, params), a, b in zip(REQUESTS, row_lane, row_usual):
            assert a["id"] == b["id"]
            assert _volatile({k: v for k, v in a.items() if k != "id"}) == _volatile(
                {k: v for k, v in b.items() if k != "id"}
            ), (method, params)
    assert _at_rest(lane)


async def _slow_in_the_lane(server: RpcServer, sock, service):
    """A client whose lone "slow" search is running in the thread lane: (client, its id)."""
    dispatched = _count_dispatches(server)
    client = await connect(sock)
    await with_kb(client)
    del dispatched[:]
    rid = client.next_id()
    await client.send_bytes(
        encode_message({"jsonrpc": "2.0", "id": rid, "method": "search.query", "params": ["kb", "slow"]}, NEWLINE)
    )
    await wait_thread_event(service.slow_started)
    assert not dispatched and server.quick.workers.busy == 1  # the thread lane has it
    return client, rid


async def test_a_cancelled_read_answers_at_once_and_only_once(short_tmp):
    async with serving(short_tmp) as (server, sock, service):
        client, rid = await _slow_in_the_lane(server, sock, service)
        await client.cancel(rid)
        answer = await client.next_unmatched(timeout=DEADLINE)  # while the read still waits on its gate
        assert answer["id"] == rid and answer["error"]["code"] == -32800
        assert answer["error"]["data"] == {"name": "rpc.cancelled", "id": rid}
        assert server.readers.borrowed_tokens == 0 and server.inline.running == 0  # freed at the cancel
        service.release()
        await wait_thread_event(service.slow_finished)
        await wait_until(lambda: server.quick.workers.busy == 0)
        # the abandoned read's late result is dropped: the next frame is the next answer
        assert (await client.call("workspace.status", ["kb"]))["name"] == "kb"
        with pytest.raises(TimeoutError):
            await client.next_unmatched(timeout=0.3)
        assert _at_rest(server)


async def test_a_client_gone_mid_read_leaves_the_daemon_serving(short_tmp):
    async with serving(short_tmp) as (server, sock, service):
        gone, _ = await _slow_in_the_lane(server, sock, service)
        await gone.close()
        await wait_until(lambda: len(server.connections) == 0)  # cancelled at the disconnect, then closed
        other = await connect(sock)
        with anyio.fail_after(DEADLINE):  # served while the abandoned read still holds its thread
            assert (await other.call("workspace.status", ["kb"]))["name"] == "kb"
        assert not service.slow_finished.is_set()
        service.release()
        await wait_until(lambda: _at_rest(server))
        assert (await other.call("search.query", ["kb", "lease"]))["hits"]


async def test_a_shutdown_answers_the_read_before_closing(short_tmp):
    async with serving(short_tmp) as (server, sock, service):
        client, rid = await _slow_in_the_lane(server, sock, service)
        server.request_shutdown("test")
        await anyio.sleep(0.2)  # the server stops reading; the read is in flight
        service.release()
        answer = await client.next_unmatched(timeout=DEADLINE)
        assert answer["id"] == rid and answer["result"]["query"] == "slow"


async def test_a_client_that_stops_sending_still_gets_its_answer(short_tmp):
    """A client that shuts its sending side after its request (the end of its input) waits
    for the answer: the connection reads the end, and still answers the read in flight."""
    async with serving(short_tmp) as (server, sock, service):
        client = await connect(sock)
        await with_kb(client)
        await client.close()

        def ask() -> dict:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as raw:
                raw.settimeout(DEADLINE)
                raw.connect(str(sock))
                raw.sendall(
                    encode_message(
                        {"jsonrpc": "2.0", "id": 7, "method": "search.query", "params": ["kb", "slow"]}, NEWLINE
                    )
                )
                assert service.slow_started.wait(DEADLINE)
                assert server.quick.workers.busy == 1  # the thread lane has it
                raw.shutdown(socket.SHUT_WR)
                time.sleep(0.2)  # the connection reads the end of input meanwhile
                service.release()
                return json.loads(raw.makefile("rb").readline())

        answer = await anyio.to_thread.run_sync(ask)
        assert answer["id"] == 7 and answer["result"]["query"] == "slow"


class _HeldLane:
    """A Connection over real pipes of one page with a thread lane whose one read ("held")
    waits for its gate: the test decides when the read ends and what the peer reads."""

    def __init__(self, monkeypatch, result=None):
        self.to_r, self.to_w = os.pipe()
        self.from_r, self.from_w = os.pipe()
        fcntl.fcntl(self.from_w, fcntl.F_SETPIPE_SZ, 4096)
        self.started, self.gate = threading.Event(), threading.Event()

        def held(params: dict) -> dict:
            self.started.set()
            self.gate.wait(DEADLINE)
            return result if result is not None else {"echo": params}

        self.inline = InlineReads()
        self.readers = anyio.CapacityLimiter(2)
        self.lane = QuickLane({"held": LaneRead(held, False, lambda p: True)}, self.inline, self.readers)
        self.conn = Connection(
            FdStream(self.to_r, self.from_w), Dispatcher({}), name="pipes", quick=self.lane, load=self.inline
        )
        monkeypatch.setattr(schemas, "bind_params", lambda name, raw: raw)  # "held" is the test's: no schema
        self.decoder, self.frames = FrameDecoder(), []

    def then_on_loop(self, monkeypatch, action) -> list[bool]:
        """After the worker's own write (its results, returned), ``action`` runs on the loop
        before the worker goes on to tell the loop it is done."""
        wrote, real = [], Outbox.write_from_thread

        def patched(outbox, data, claim):
            wrote.append(real(outbox, data, claim))
            ran = threading.Event()
            self.loop.call_soon_threadsafe(lambda: (action(), ran.set()))
            ran.wait(DEADLINE)
            return wrote[-1]

        monkeypatch.setattr(Outbox, "write_from_thread", patched)
        return wrote

    async def ask(self) -> None:
        self.loop = asyncio.get_running_loop()
        os.write(
            self.to_w, encode_message({"jsonrpc": "2.0", "id": "r", "method": "held", "params": {"a": 1}}, NEWLINE)
        )
        await wait_thread_event(self.started)

    async def read_until(self, done) -> list[dict]:
        with anyio.fail_after(DEADLINE):
            while not done([json.loads(f.payload) for f in self.frames]):
                await anyio.wait_readable(self.from_r)
                self.frames += self.decoder.feed(os.read(self.from_r, 65536))
        return [json.loads(f.payload) for f in self.frames]

    async def exchange(self, n: int) -> list[dict]:
        """Run the connection, ask, let the read end: the first ``n`` frames the peer reads."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.conn.run)
            await self.ask()
            self.gate.set()
            messages = await self.read_until(lambda m: len(m) >= n)
            os.close(self.to_w)  # the connection reads the end and stops
        return messages

    def drain(self) -> list[dict]:
        """Every frame the peer can read now, without waiting."""
        while select.select([self.from_r], [], [], 0)[0]:
            self.frames += self.decoder.feed(os.read(self.from_r, 65536))
        return [json.loads(f.payload) for f in self.frames]

    def close(self) -> None:
        for fd in (self.to_r, self.from_r, self.from_w):
            os.close(fd)


async def test_an_answer_its_thread_wrote_in_part_stays_whole_and_first(monkeypatch):
    """The worker thread writes the answer itself (the outbox idle), the pipe takes a page of
    it; notifications queued meanwhile come after the rest, never inside it."""
    big = {"text": "z" * 60_000}
    h = _HeldLane(monkeypatch, big)

    def notify() -> None:  # the notifications are queued before the loop hears of the answer
        for i in range(20):
            assert h.conn.notify_nowait("changes.changed", {"i": i})

    wrote = h.then_on_loop(monkeypatch, notify)
    try:
        messages = await h.exchange(21)
        assert wrote == [True]  # written by the thread, in part: the pipe holds one page
        assert messages[0] == {"jsonrpc": "2.0", "result": big, "id": "r"}
        assert [m["params"]["i"] for m in messages[1:]] == list(range(20))
        assert h.inline.running == 0 and h.readers.borrowed_tokens == 0 and h.conn._running == 0
    finally:
        h.close()


async def test_a_client_asking_again_before_the_loop_ran_the_last_finish_still_takes_the_lane(monkeypatch):
    """Seen in the suite: the worker writes the answer, the client sends its next request at
    once, and the loop reads it before running the first read's finish; the connection then
    looked busy and the request went the usual way. The next frame now settles it first. Here
    the worker holds until the loop has taken the second frame; this connection's dispatcher
    knows no method, so a request that went the usual way would answer -32601."""
    h = _HeldLane(monkeypatch)
    taken = threading.Event()
    real_write, real_take = Outbox.write_from_thread, h.conn._take

    def write_then_hold(outbox, data, claim):
        written = real_write(outbox, data, claim)
        if b'"r"' in data:
            os.write(
                h.to_w, encode_message({"jsonrpc": "2.0", "id": "r2", "method": "held", "params": {"b": 2}}, NEWLINE)
            )
            taken.wait(DEADLINE)
        return written

    async def take(item, requests, alone):
        await real_take(item, requests, alone)
        if b'"r2"' in getattr(item, "payload", b""):
            taken.set()

    monkeypatch.setattr(Outbox, "write_from_thread", write_then_hold)
    h.conn._take = take
    try:
        messages = await h.exchange(2)
        assert taken.is_set()
        assert messages == [
            {"jsonrpc": "2.0", "result": {"echo": {"a": 1}}, "id": "r"},
            {"jsonrpc": "2.0", "result": {"echo": {"b": 2}}, "id": "r2"},
        ]
        assert h.inline.running == 0 and h.readers.borrowed_tokens == 0 and h.conn._running == 0
    finally:
        h.close()


async def test_no_worker_thread_to_be_had_means_the_usual_way_with_nothing_held(monkeypatch):
    """A thread that cannot start (the process is out of threads: a fault this test can only
    cause by standing in for threading.Thread) must cost the read nothing: it goes the usual way,
    and no slot or counter stays taken; then a writer whose own write fails leaves it to the loop."""
    import autodoc.rpc.quick as quick

    class NoThread(threading.Thread):
        def start(self):
            raise RuntimeError("can't start new thread")

    h = _HeldLane(monkeypatch)
    h.conn.dispatcher = Dispatcher({"held": lambda ctx, p: _echo(p)})
    h.gate.set()
    monkeypatch.setattr(quick.threading, "Thread", NoThread)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(h.conn.run)
            os.write(
                h.to_w, encode_message({"jsonrpc": "2.0", "id": "r", "method": "held", "params": {"a": 1}}, NEWLINE)
            )
            messages = await h.read_until(lambda m: len(m) == 1)
            assert messages == [{"jsonrpc": "2.0", "result": {"the usual way": {"a": 1}}, "id": "r"}]
            assert h.inline.running == 0 and h.inline.admitted == 0 and h.readers.borrowed_tokens == 0
            assert h.lane.workers.busy == 0 and h.lane.workers._threads == 0

            monkeypatch.undo()  # threads again; and the thread's own write fails
            monkeypatch.setattr(schemas, "bind_params", lambda name, raw: raw)
            monkeypatch.setattr(Outbox, "write_from_thread", lambda *a: 1 / 0)
            os.write(
                h.to_w, encode_message({"jsonrpc": "2.0", "id": "s", "method": "held", "params": {"b": 2}}, NEWLINE)
            )
            messages = await h.read_until(lambda m: len(m) == 2)
            assert messages[1] == {"jsonrpc": "2.0", "result": {"echo": {"b": 2}}, "id": "s"}
            await wait_until(lambda: h.lane.workers.busy == 0 and h.inline.running == 0)
            os.close(h.to_w)
    finally:
        h.close()


async def _echo(p: dict) -> dict:
    return {"the usual way": p}


async def test_a_cancel_just_after_its_thread_wrote_the_answer_adds_nothing(monkeypatch):
    """The race the claim settles: the worker writes the answer, and the cancel is handled on
    the loop before the worker's own finish: one answer, the result, and the slots back."""
    h = _HeldLane(monkeypatch)
    h.then_on_loop(monkeypatch, lambda: h.conn.cancel_request("r"))
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(h.conn.run)
            await h.ask()
            h.gate.set()
            messages = await h.read_until(lambda m: len(m) >= 1)
            await wait_until(lambda: h.inline.running == 0 and h.lane.workers.busy == 0)
            await anyio.sleep(0.1)
            messages = h.drain()
            os.close(h.to_w)
        assert messages == [{"jsonrpc": "2.0", "result": {"echo": {"a": 1}}, "id": "r"}]
        assert h.readers.borrowed_tokens == 0 and h.conn._running == 0
    finally:
        h.close()


async def test_an_answer_finding_the_outbox_full_waits_its_turn(monkeypatch):
    """A peer that reads nothing while the read runs: notifications fill the pipe and the
    outbox, so the answer waits in a task (and counts as in flight) instead of being lost
    or written ahead of them."""
    to_r, to_w = os.pipe()
    from_r, from_w = os.pipe()
    fcntl.fcntl(from_w, fcntl.F_SETPIPE_SZ, 4096)
    started, gate = threading.Event(), threading.Event()

    def held(params: dict) -> dict:
        started.set()
        gate.wait(DEADLINE)
        return {"echo": params}

    inline = InlineReads()
    readers = anyio.CapacityLimiter(2)
    lane = QuickLane({"held": LaneRead(held, False, lambda p: True)}, inline, readers)
    conn = Connection(FdStream(to_r, from_w), Dispatcher({}), name="pipes", quick=lane, load=inline)
    monkeypatch.setattr(schemas, "bind_params", lambda name, raw: raw)  # "held" is the test's: no schema
    try:
        decoder, frames = FrameDecoder(), []
        async with anyio.create_task_group() as tg:
            tg.start_soon(conn.run)
            os.write(to_w, encode_message({"jsonrpc": "2.0", "id": "r", "method": "held", "params": {"a": 1}}, NEWLINE))
            await wait_thread_event(started)
            sent = 0
            with anyio.fail_after(DEADLINE):
                while conn.notify_nowait("changes.changed", {"i": sent, "pad": "x" * 100}):
                    sent += 1
                    await anyio.sleep(0)
            assert sent >= OUTBOX_SIZE
            gate.set()
            await wait_until(lambda: inline.running == 0)  # answered: into a task, the outbox being full
            assert conn._running == 1 and readers.borrowed_tokens == 0
            with anyio.fail_after(DEADLINE):
                while not frames or json.loads(frames[-1].payload).get("id") != "r":
                    await anyio.wait_readable(from_r)
                    frames += decoder.feed(os.read(from_r, 65536))
            os.close(to_w)
        messages = [json.loads(f.payload) for f in frames]
        assert [m["params"]["i"] for m in messages[:-1]] == list(range(sent))
        assert messages[-1] == {"jsonrpc": "2.0", "result": {"echo": {"a": 1}}, "id": "r"}
        assert conn._running == 0
    finally:
        for fd in (to_r, from_r, from_w):
            os.close(fd)
