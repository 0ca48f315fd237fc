"""rpc/transport.SocketStream: an accepted Unix socket read through a reader kept
registered with the event loop. What anyio's own stream guaranteed still holds:
data in order, the end of input and a vanished peer told apart, close wakes a
waiting read, a client sending faster than it is read does not hold the loop,
and a socket nobody reads (a connection paused on a full outbox) does not spin
the loop. Real Unix sockets through a real anyio listener."""

from __future__ import annotations

import socket

import anyio
import pytest

from autodoc.rpc.transport import SocketStream

DEADLINE = 10


async def _pair(tmp_path):
    """(our SocketStream, the peer's blocking socket, the listener)."""
    path = tmp_path / "s.sock"
    listener = await anyio.create_unix_listener(path)
    peer = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    peer.settimeout(DEADLINE)
    peer.connect(str(path))
    with anyio.fail_after(DEADLINE):
        stream = SocketStream(await listener.accept())
    return stream, peer, listener


async def test_reads_in_order_then_the_end_of_input(tmp_path):
    stream, peer, listener = await _pair(tmp_path)
    async with listener:
        got = b""

        async def read_all() -> None:
            nonlocal got
            with anyio.fail_after(DEADLINE):
                while True:
                    try:
                        got += await stream.receive(7)
                    except anyio.EndOfStream:
                        return

        async with anyio.create_task_group() as tg:
            tg.start_soon(read_all)
            for i in range(50):
                peer.sendall(b"frame %d\n" % i)
                if i % 10 == 0:
                    await anyio.sleep(0.01)  # some reads wait, some find data at once
            peer.shutdown(socket.SHUT_WR)
        assert got == b"".join(b"frame %d\n" % i for i in range(50))
        await stream.send(b"still writable after the peer's end of input\n")
        assert peer.recv(100).startswith(b"still writable")
        await stream.aclose()
        peer.close()


async def test_a_vanished_peer_ends_the_read(tmp_path):
    stream, peer, listener = await _pair(tmp_path)
    async with listener:
        peer.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        await stream.send(b"unread\n")  # unread data at close: the kernel resets the connection
        peer.close()
        with anyio.fail_after(DEADLINE), pytest.raises((anyio.EndOfStream, anyio.BrokenResourceError)):
            while True:
                await stream.receive()
        await stream.aclose()


async def test_closing_wakes_a_waiting_read(tmp_path):
    stream, peer, listener = await _pair(tmp_path)
    async with listener:
        outcome: list = []

        async def read() -> None:
            try:
                await stream.receive()
            except anyio.ClosedResourceError as exc:
                outcome.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(read)
            await anyio.sleep(0.05)
            await stream.aclose()
        assert len(outcome) == 1
        peer.close()


async def test_a_socket_nobody_reads_does_not_spin_the_loop(tmp_path, monkeypatch):
    """After one wait the reader stays registered; bytes arriving while nobody reads
    (the connection paused) fire it once or twice, then it steps aside until the next read."""
    stream, peer, listener = await _pair(tmp_path)
    async with listener:
        fired = []
        real = stream._on_readable
        monkeypatch.setattr(stream, "_on_readable", lambda: (fired.append(1), real())[1])
        async with anyio.create_task_group() as tg:
            tg.start_soon(stream.receive)
            await anyio.sleep(0.05)
            peer.sendall(b"first\n")
        assert stream._registered
        fired.clear()
        peer.sendall(b"nobody reads this yet\n")
        for _ in range(200):
            await anyio.sleep(0)  # two hundred turns of the loop
        assert 1 <= len(fired) <= 2 and not stream._registered
        with anyio.fail_after(DEADLINE):
            assert await stream.receive() == b"nobody reads this yet\n"
        await stream.aclose()
        peer.close()


async def test_a_flood_of_input_lets_other_tasks_run(tmp_path):
    """A client sending faster than it is read: each read finds data at once, and must still
    let the loop's other tasks (other connections) run between reads."""
    stream, peer, listener = await _pair(tmp_path)
    async with listener:
        peer.sendall(b"x" * 200_000)
        turns = 0
        reads = 0

        async def other() -> None:
            nonlocal turns
            while True:
                turns += 1
                await anyio.sleep(0)

        async with anyio.create_task_group() as tg:
            tg.start_soon(other)
            await anyio.sleep(0)
            start = turns
            got = 0
            while got < 200_000:
                got += len(await stream.receive(1000))
                reads += 1
            tg.cancel_scope.cancel()
        assert reads >= 100 and turns - start >= reads - 1, (reads, turns - start)
        await stream.aclose()
        peer.close()


async def test_a_request_and_answer_exchange_keeps_one_registration(tmp_path, monkeypatch):
    """The point of the class: a client that sends, waits for the answer, sends again leaves
    the reader registered throughout (anyio's stream added and removed it on every read)."""
    stream, peer, listener = await _pair(tmp_path)
    async with listener:
        added, removed = [], []
        loop = stream._loop
        add, remove = loop.add_reader, loop.remove_reader
        monkeypatch.setattr(loop, "add_reader", lambda *a: (added.append(a[0]), add(*a))[1])
        monkeypatch.setattr(loop, "remove_reader", lambda fd: (removed.append(fd), remove(fd))[1])

        def client() -> list[bytes]:
            answers = []
            for i in range(30):
                peer.sendall(b"request %d\n" % i)
                answers.append(peer.recv(100))
            return answers

        async with anyio.create_task_group() as tg:
            answers: list = []
            tg.start_soon(lambda: _collect(answers, client))
            with anyio.fail_after(DEADLINE):
                for i in range(30):
                    assert await stream.receive() == b"request %d\n" % i
                    await stream.send(b"answer %d\n" % i)
        assert answers[0] == [b"answer %d\n" % i for i in range(30)]
        assert added == [stream._fd] and removed == []
        await stream.aclose()
        assert removed == [stream._fd]
        peer.close()


async def _collect(into: list, fn) -> None:
    into.append(await anyio.to_thread.run_sync(fn))
