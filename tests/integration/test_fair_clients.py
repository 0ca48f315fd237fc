"""A client that floods the daemon with searches and never reads an answer
must not stand in front of another client's request (issue 19).

A real Service on a real store, served by the RPC server over a real Unix
socket. Without a per-connection share of the reader slots, the flood's
backlog was served first come, first served, so a second client's search
was answered only after almost all of the flood's."""

from __future__ import annotations

import json
import socket

import anyio

from autodoc.rpc import connection
from autodoc.rpc.server import RpcServer
from autodoc_client import Client

FLOOD = 200


READS = 2  # the share each connection gets, fixed here: the product's is the core count


async def test_a_flooding_client_that_never_reads_does_not_stall_another(kb_service, short_tmp, monkeypatch):
    monkeypatch.setattr(connection, "READS_PER_CONNECTION", READS)  # read as each connection is made
    sock_path = short_tmp / "d.sock"
    server = RpcServer(kb_service)
    async with anyio.create_task_group() as tg:
        await tg.start(lambda task_status: server.run(socket_path=sock_path, task_status=task_status))
        flood = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        flood.connect(str(sock_path))
        try:
            lines = b"".join(
                json.dumps(
                    {
                        "jsonrpc": "2.0",
                        "id": i,
                        "method": "search.query",
                        "params": ["kb", "lease storage", {"limit": 50}],
                    }
                ).encode()
                + b"\n"
                for i in range(FLOOD)
            )
            flood.sendall(lines)  # and never reads
            (conn,) = await _wait_for(lambda: [c for c in server.connections if c._running >= FLOOD] or None)
            async with await Client.connect_socket(sock_path) as client:
                answer = await client.call("search.query", ["kb", "sqlite lease", {"limit": 5}])
            assert answer["hits"], answer
            # The flood still has almost all of its searches to run: the other
            # client's went ahead of them, not behind.
            assert conn._running > FLOOD - 20 * READS, conn._running
        finally:
            flood.close()
            server.request_shutdown("test over")


async def _wait_for(probe):
    with anyio.fail_after(10):
        while True:
            got = probe()
            if got:
                return got
            await anyio.sleep(0.001)
