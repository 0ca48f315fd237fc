"""The RPC layer in-process (server, connections, dispatch, methods, client)
over a real Unix socket and stdio pipes, with an in-memory FakeService so that
timing (slow searches, stuck index runs) is under the test's control. The real
daemon is driven by test_daemon_e2e.py."""

from __future__ import annotations

import logging
import os
import socket
import stat
import threading
import time
from collections.abc import Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import anyio
import pytest

from autodoc.api import NOTIFICATIONS
from autodoc.config import WorkspaceConfig
from autodoc.errors import (
    CursorExpired,
    DocumentNotFound,
    InvalidParams,
    Unsupported,
    WorkspaceExists,
    WorkspaceNotFound,
)
from autodoc.rpc import schemas
from autodoc.rpc.framing import CONTENT_LENGTH, NEWLINE, FrameDecoder, encode_message
from autodoc.rpc.server import RpcServer
from autodoc.rpc.transport import SocketInUse, SocketPathError, prepare_socket_path
from autodoc_client import Client, RemoteError

DEADLINE = 10


# -- a stand-in Service --------------------------------------------------------------------
# Queries drive its timing: "slow" blocks until release(), "boom" raises a plain
# exception, "nan" answers something that is not JSON, "sleep:<s>" sleeps.


class FakeService:
    def __init__(self) -> None:
        self.workspaces: dict[str, dict[str, Any]] = {}
        self.docs: dict[str, dict[str, str]] = {}
        self.changes: list[dict[str, Any]] = []
        self.listeners: list[Callable[[str, dict], None]] = []
        self.lock = threading.Lock()
        self.gate = threading.Event()
        self.slow_started = threading.Event()
        self.slow_finished = threading.Event()
        self.index_started = threading.Event()
        self.index_gate = threading.Event()
        self.index_gate.set()
        self.calls: list[str] = []
        self.closed = False

    # -- helpers for tests --------------------------------------------------------

    def release(self) -> None:
        self.gate.set()

    def _ws(self, name: str) -> dict[str, Any]:
        try:
            return self.workspaces[name]
        except KeyError:
            raise WorkspaceNotFound(f"no workspace named {name!r}", {"workspace": name}) from None

    def _change(self, workspace: str, path: str, op: str) -> None:
        change = {
            "cursor": len(self.changes) + 1,
            "workspace": workspace,
            "path": path,
            "op": op,
            "generation": len(self.changes) + 1,
            "old_path": None,
            "time": time.time(),
        }
        self.changes.append(change)
        for fn in list(self.listeners):
            fn(workspace, [change])

    # -- the Service API -------------------------------------------------------------

    def info(self) -> dict:
        return {
            "name": "autodoc",
            "version": "0.1.0",
            "protocol_version": "1.0",
            "store": "/tmp/fake.db",
            "pid": 1,
            "writable": True,
            "stages": {"lexical": True, "semantic": False, "rerank": False},
            "models": {"embedding": None, "ranker": []},
            "workspaces": sorted(self.workspaces),
            "semantic": {
                "state": "none",
                "model_state": "none",
                "pending": 0,
                "eta_seconds": None,
                "reason": "no embedding model is configured for any workspace",
                "instant": None,
            },
        }

    def workspace_add(self, name: str, root: str, config: dict | None = None, force: bool = False) -> dict:
        with self.lock:
            if name in self.workspaces:
                raise WorkspaceExists(f"a workspace named {name!r} exists", {"workspace": name})
            cfg = WorkspaceConfig.from_json(config)
            self.workspaces[name] = {
                "name": name,
                "root": root,
                "config": cfg.to_json(),
                "documents": 2,
                "chunks": 2,
                "created": time.time(),
            }
            self.docs[name] = {"a.md": "# A\n\nlease recovery\n", "b.md": "# B\n\nother words\n"}
            return dict(self.workspaces[name])

    def workspace_remove(self, name: str) -> dict:
        self._ws(name)
        del self.workspaces[name]
        return {"removed": name, "documents": 2}

    def workspace_list(self) -> dict:
        return {"workspaces": [dict(w) for w in self.workspaces.values()]}

    def workspace_configure(
        self, name: str, options: dict | None = None, root: str | None = None, force: bool = False
    ) -> dict:
        ws = self._ws(name)
        ws["config"] = WorkspaceConfig.from_json(ws["config"]).merged(options or {}).to_json()
        if root is not None:
            ws["root"] = root  # the service stores a moved root as it is (nothing indexed is touched)
        return dict(ws)

    def workspace_section_size(self, name: str, tokens: int) -> dict:
        return self.workspace_configure(name, {"section_tokens": tokens})

    def workspace_status(self, name: str) -> dict:
        ws = self._ws(name)
        return {
            "name": name,
            "root": ws["root"],
            "root_exists": True,
            "files": {
                "on_disk": 2,
                "indexed": 2,
                "skipped": [],
                "left_out": {
                    "files": 0,
                    "by_extension": {},
                    "hidden_files": 0,
                    "hidden_folders": 0,
                    "examples": [],
                    "setting": "markdown",
                },
                "redacted": [],
            },
            "chunks": 2,
            "sessions": {"sessions": 0, "events": 0, "chunks": 0},
            "generation": 1,
            "problems": [],
            "broken_links": [],
            "embedding": {
                "available": False,
                "state": "off",
                "model": None,
                "embedded": 0,
                "pending": 0,
                "skipped": 2,
                "total": 2,
                "reason": "no embedding model",
                "model_state": "none",
                "rate": None,
                "eta_seconds": None,
                "instant": None,
                "search": None,
            },
            "ranker": {"state": "off", "model": None, "reason": "no ranker"},
            "change_cursor": len(self.changes),
        }

    def index(
        self,
        name: str,
        *,
        full: bool = False,
        progress: Callable[[int, int, str], None] | None = None,
        embed: bool = False,
    ) -> dict:
        self._ws(name)
        self.index_started.set()
        paths = sorted(self.docs[name])
        total = 40
        for i in range(total):
            if progress:
                progress(i, total, f"file {i}")
            self.index_gate.wait(10)
            time.sleep(0.002)
        if progress:
            progress(total, total, "done")
        for p in paths:
            self._change(name, p, "modify")
        return self._report(name, full, len(paths))

    def index_paths(self, name: str, relpaths: list[str]) -> dict:
        self._ws(name)
        for p in relpaths:
            self._change(name, p, "modify")
        return self._report(name, False, len(relpaths))

    def _report(self, name: str, full: bool, n: int) -> dict:
        return {
            "workspace": name,
            "scanned": n,
            "added": 0,
            "modified": n,
            "deleted": 0,
            "renamed": 0,
            "unchanged": 0,
            "skipped": [],
            "chunks": n,
            "seconds": 0.01,
        }

    def search(self, name: str, query: str, opts: dict | None = None, *, cancel: threading.Event | None = None) -> dict:
        self._ws(name)
        self.calls.append(query)
        if query == "slow":
            self.slow_started.set()
            self.gate.wait(30)
            self.slow_finished.set()
        elif query == "boom":
            raise RuntimeError("secret internal detail /etc/passwd")
        elif query == "nan":
            return {"x": float("nan")}
        elif query.startswith("sleep:"):
            time.sleep(float(query.split(":", 1)[1]))
        opts = opts or {}
        if opts.get("stages") == ["semantic"]:
            raise Unsupported("semantic search needs an embedding model", {"stage": "semantic"})
        limit = opts.get("limit", 10)
        hits = [self._hit(name, path) for path in sorted(self.docs[name])][:limit]
        return {
            "workspace": name,
            "query": query,
            "hits": hits,
            "mode_used": "lexical",
            "lexical_match": "all",
            "semantic": "off",
            "semantic_tier": None,
            "rank": {"state": "off", "model": None, "error": ""},
            "stages": {
                "requested": ["lexical", "semantic", "rerank"],
                "performed": ["lexical"],
                "skipped": {"semantic": "no embedding model", "rerank": "no ranker"},
            },
            "facet_counts": {},
            "answerable": bool(hits),
            "held_back": 0,
        }

    def _hit(self, name: str, path: str) -> dict:
        return {
            "workspace": name,
            "path": path,
            "title": path,
            "breadcrumb": path,
            "kind": "section",
            "chunk_id": 1,
            "snippet": "«lease»",
            "byte_start": 0,
            "byte_end": 10,
            "line_start": 1,
            "line_end": 3,
            "relevance": 0.5,
            "score": 0.016,
            "via": ["lexical"],
            "scores": {"lexical": 1.0, "semantic": None},
            "ranks": {"lexical": 0, "semantic": None},
            "rank_score": None,
            "compatibility": 0.5,
            "confidence": 0.5,
            "generation": 1,
            "superseded_by": None,
            "tags": [],
            "origin": {"kind": "file", "path": path, "title": path},
        }

    def document_read(self, name: str, path: str, opts: dict | None = None) -> dict:
        self._ws(name)
        text = self.docs[name].get(path)
        if text is None:
            raise DocumentNotFound(f"no document {path!r} in {name!r}", {"path": path})
        lines = text.splitlines(keepends=True)
        return {
            "workspace": name,
            "path": path,
            "generation": 1,
            "text": text,
            "byte_start": 0,
            "byte_end": len(text.encode()),
            "line_start": 1,
            "line_end": len(lines),
            "total_bytes": len(text.encode()),
            "total_lines": len(lines),
        }

    def changes_since(self, name: str, cursor: int, limit: int = 1000) -> dict:
        self._ws(name)
        if cursor < 0:
            raise InvalidParams("cursor", "must be ≥ 0")
        if cursor == 999_999:
            raise CursorExpired("the cursor predates the change log", {"oldest": 1})
        out = [c for c in self.changes if c["workspace"] == name and c["cursor"] > cursor][:limit]
        return {"changes": out, "next_cursor": out[-1]["cursor"] if out else cursor, "has_more": False}

    def add_change_listener(self, fn: Callable[[str, dict], None]) -> None:
        self.listeners.append(fn)

    def remove_change_listener(self, fn: Callable[[str, dict], None]) -> None:
        if fn in self.listeners:
            self.listeners.remove(fn)

    def close(self) -> None:
        self.closed = True


# -- harness -----------------------------------------------------------------------------


@asynccontextmanager
async def serving(tmp, service=None, **kw):
    """An RpcServer on a socket under tmp, checking its own answers against the schemas."""
    service = service or FakeService()
    kw.setdefault("check_results", True)
    kw.setdefault("shutdown_deadline", 2.0)
    server = RpcServer(service, **kw)
    sock = tmp / "run" / "autodoc.sock"
    async with anyio.create_task_group() as tg:
        await tg.start(partial(server.run, socket_path=sock))
        try:
            yield server, sock, service
        finally:
            service.release()
            service.index_gate.set()
            server.request_shutdown("test over")


async def connect(sock, framing=NEWLINE) -> Client:
    return await Client.connect_socket(sock, framing=framing)


async def with_kb(client: Client) -> None:
    await client.call("workspace.add", ["kb", "/tmp"])


async def error_of(awaitable) -> RemoteError:
    with pytest.raises(RemoteError) as info:
        await awaitable
    return info.value


async def wait_until(predicate: Callable[[], bool], timeout: float = DEADLINE) -> None:
    with anyio.fail_after(timeout):
        while not predicate():
            await anyio.sleep(0.005)


async def wait_thread_event(event: threading.Event, timeout: float = DEADLINE) -> None:
    assert await anyio.to_thread.run_sync(event.wait, timeout), "timed out waiting for the service"


# -- every method, both framings --------------------------------------------------------------

CALLS = [
    ("server.info", None),
    ("workspace.add", ["kb", "/tmp"]),
    ("workspace.list", {}),
    ("workspace.configure", ["kb", {"demote_superseded": False}]),
    ("workspace.configure", {"workspace": "kb", "root": "/tmp/kb-moved"}),
    ("workspace.section_size", ["kb", 400]),
    ("workspace.status", ["kb"]),
    ("workspace.index", ["kb"]),
    ("workspace.reindex", {"workspace": "kb"}),
    ("search.query", ["kb", "lease", {"limit": 1}]),
    ("document.read", ["kb", "a.md", {"line_start": 1, "line_end": 2}]),
    ("changes.since", ["kb", 0]),
    ("changes.subscribe", ["kb"]),
    ("changes.unsubscribe", []),
    ("workspace.remove", ["kb"]),
    ("server.shutdown", None),
]


@pytest.mark.parametrize("framing", [NEWLINE, CONTENT_LENGTH])
async def test_every_method_answers_within_its_schema(short_tmp, framing):
    async with serving(short_tmp) as (server, sock, _):
        client = await connect(sock, framing)
        for method, params in CALLS:
            result = await client.call(method, params, timeout=DEADLINE)
            assert schemas.result_errors(method, result) == [], method
        assert result == {"shutting_down": True}
        await wait_until(lambda: server.shutting_down)
        await client.close()
    assert set(schemas.methods_with_schemas()) >= {m for m, _ in CALLS}
    assert set(server.dispatcher.handlers) == set(schemas.methods_with_schemas()) - NOTIFICATIONS


async def test_positional_and_named_params_are_the_same(short_tmp):
    async with serving(short_tmp) as (_, sock, _):
        client = await connect(sock)
        await with_kb(client)
        positional = await client.call("search.query", ["kb", "lease", {"limit": 1}])
        named = await client.call("search.query", {"workspace": "kb", "query": "lease", "opts": {"limit": 1}})
        assert positional == named and len(named["hits"]) == 1
        # An optional param given as null counts as absent.
        assert len((await client.call("search.query", ["kb", "lease", None]))["hits"]) == 2


@pytest.mark.parametrize(
    "method, params, field, message",
    [
        ("search.query", ["kb", "lease", {"limit": 500}], "opts.limit", "opts.limit: must be ≤ 200"),
        ("search.query", ["kb", "lease", {"limit": 0}], "opts.limit", "opts.limit: must be ≥ 1"),
        ("search.query", ["kb", "lease", {"bogus": 1}], "opts.bogus", "opts.bogus: is not a known field"),
        ("search.query", ["kb", "lease", {"stages": ["rerank"]}], "opts.stages", "must include lexical or semantic"),
        ("search.query", ["kb", "lease", {"stages": ["words"]}], "opts.stages[0]", "must be one of"),
        ("search.query", ["kb"], "query", "query: is required"),
        ("search.query", {"workspace": "kb", "query": 7}, "query", "query: must be a string"),
        ("search.query", ["kb", "q", {}, "extra"], "params", "too many positional params"),
        (
            "search.query",
            ["kb", "q", {"facets": {"type": [1]}}],
            "opts.facets.type",
            "must be a value or an array of strings",
        ),
        ("workspace.section_size", ["kb", 5], "tokens", "tokens: must be ≥ 32"),
        ("workspace.configure", ["kb", {"sectoin_tokens": 300}], "options.sectoin_tokens", "is not a known field"),
        ("workspace.add", {"name": "k b", "root": "/tmp"}, "name", "name: must be 1 to 64"),
        ("document.read", ["kb", "a.md", {"byte_start": 0, "line_end": 2}], "opts", "not both"),
        ("changes.since", ["kb", -1], "cursor", "cursor: must be ≥ 0"),
        ("server.info", "nope", "params", "must be an array or an object"),
    ],
)
async def test_bad_params_are_32602_naming_the_field(short_tmp, method, params, field, message):
    async with serving(short_tmp) as (_, sock, service):
        client = await connect(sock)
        await with_kb(client)
        if isinstance(params, str):  # not expressible through call(): send the raw request
            response = await client.call_raw({"jsonrpc": "2.0", "id": 99, "method": method, "params": params})
            error = response["error"]
            assert error["code"] == -32600  # params that are neither array nor object break the request object
            return
        err = await error_of(client.call(method, params))
        assert err.code == -32602
        assert message in err.message
        assert err.data == {"name": "rpc.invalid_params", "field": field}
        assert service.calls == []  # refused before reaching the service


async def test_service_errors_keep_their_codes(short_tmp):
    async with serving(short_tmp) as (_, sock, _):
        client = await connect(sock)
        await with_kb(client)
        cases = [
            (("search.query", ["nope", "x"]), -32001, "workspace.not_found"),
            (("workspace.add", ["kb", "/tmp"]), -32002, "workspace.exists"),
            (("document.read", ["kb", "zzz.md"]), -32003, "document.not_found"),
            (("changes.since", ["kb", 999_999]), -32005, "changes.cursor_expired"),
            (("search.query", ["kb", "x", {"stages": ["semantic"]}]), -32065, "rpc.unsupported"),
            (("changes.subscribe", ["nope"]), -32001, "workspace.not_found"),
            (("no.such.method", None), -32601, "rpc.method_not_found"),
        ]
        for (method, params), code, name in cases:
            err = await error_of(client.call(method, params))
            assert (err.code, err.name) == (code, name), method


async def test_unexpected_exceptions_leak_nothing(short_tmp, caplog):
    async with serving(short_tmp) as (_, sock, _):
        client = await connect(sock)
        await with_kb(client)
        with caplog.at_level(logging.ERROR, logger="autodoc.rpc"):
            err = await error_of(client.call("search.query", ["kb", "boom"]))
        assert err.code == -32603 and err.message == "internal error"
        assert "secret" not in repr(err.data) and "Traceback" not in repr(err.data)
        assert "secret internal detail" in caplog.text  # …but the log has it
        # An answer that is not JSON (NaN) is the method's bug too, and the connection survives.
        err = await error_of(client.call("search.query", ["kb", "nan"]))
        assert err.code == -32603
        assert (await client.call("server.info"))["name"] == "autodoc"


# -- JSON-RPC semantics: batches, notifications, bad frames ----------------------------------------------


async def test_mixed_batch_answers_each_element_in_order(short_tmp):
    async with serving(short_tmp) as (_, sock, _):
        client = await connect(sock)
        await with_kb(client)
        batch = [
            {"jsonrpc": "2.0", "id": 1, "method": "server.info"},
            {"jsonrpc": "2.0", "method": "server.info"},  # notification: no answer
            {"jsonrpc": "2.0", "id": 2, "method": "nope"},
            7,
            {"jsonrpc": "1.0", "id": 3, "method": "server.info"},
            {"jsonrpc": "2.0", "id": "four", "method": "search.query", "params": ["kb", "q", {"limit": 999}]},
            {"jsonrpc": "2.0", "id": 5, "method": "search.query", "params": ["kb", "lease"]},
        ]
        answers = await client.call_raw(batch, timeout=DEADLINE)
        assert [a["id"] for a in answers] == [1, 2, None, 3, "four", 5]
        assert "result" in answers[0] and "result" in answers[5]
        assert [a.get("error", {}).get("code") for a in answers[1:5]] == [-32601, -32600, -32600, -32602]
        assert answers[2]["error"]["message"].startswith("invalid request: a request must be an object")
        assert all(a["jsonrpc"] == "2.0" for a in answers)


async def test_notifications_and_batches_of_them_get_no_answer(short_tmp):
    async with serving(short_tmp) as (_, sock, _):
        client = await connect(sock)
        await client.notify("workspace.list")
        await client.notify("no.such.method")  # not even an error
        assert await client.call_raw([{"jsonrpc": "2.0", "method": "server.info"}]) is None
        assert (await client.call("workspace.list")) == {"workspaces": []}
        assert list(client.unmatched) == []


@pytest.mark.parametrize("framing", [NEWLINE, CONTENT_LENGTH])
async def test_bad_frames_are_answered_and_the_connection_stays_up(short_tmp, framing):
    async with serving(short_tmp, max_frame_bytes=2048) as (_, sock, _):
        client = await connect(sock, framing)
        big = encode_message(
            {"jsonrpc": "2.0", "id": 1, "method": "server.info", "params": {"pad": "x" * 5000}}, framing
        )
        await client.send_bytes(big)
        error = await client.next_unmatched(timeout=DEADLINE)
        assert error["id"] is None and error["error"]["code"] == -32600
        assert "exceeds the limit of 2048 bytes" in error["error"]["message"]
        for bad, code in [(b"{not json", -32700), (b"[]", -32600), (b'"just a string"', -32600), (b"\xff\xfe", -32700)]:
            await client.send_bytes(
                bad + b"\n" if framing == NEWLINE else b"Content-Length: %d\r\n\r\n" % len(bad) + bad
            )
            error = await client.next_unmatched(timeout=DEADLINE)
            assert error["error"]["code"] == code, bad
            assert error["id"] is None
        if framing == CONTENT_LENGTH:
            await client.send_bytes(b"Content-Length: nope\r\n\r\n")
            assert (await client.next_unmatched(timeout=DEADLINE))["error"]["code"] == -32700
        assert (await client.call("server.info"))["name"] == "autodoc"


async def test_empty_batch_is_one_invalid_request(short_tmp):
    async with serving(short_tmp) as (_, sock, _):
        client = await connect(sock)
        await client.send_bytes(b"[]\n")
        error = await client.next_unmatched(timeout=DEADLINE)
        assert error == {
            "jsonrpc": "2.0",
            "id": None,
            "error": {
                "code": -32600,
                "message": "invalid request: empty batch",
                "data": {"name": "rpc.invalid_request"},
            },
        }


# -- concurrency, cancellation, disconnects ----------------------------------------------------------


async def test_a_slow_search_blocks_nothing(short_tmp):
    async with serving(short_tmp) as (_, sock, service):
        a, b = await connect(sock), await connect(sock, CONTENT_LENGTH)
        await with_kb(a)
        async with anyio.create_task_group() as tg:
            slow: list[Any] = []
            tg.start_soon(lambda: _collect(slow, a.call("search.query", ["kb", "slow"])))
            await wait_thread_event(service.slow_started)
            # The same connection and another one both get answers meanwhile.
            with anyio.fail_after(DEADLINE):
                assert (await a.call("search.query", ["kb", "lease"]))["hits"]
                assert (await b.call("workspace.status", ["kb"]))["name"] == "kb"
                assert (await a.call("workspace.section_size", ["kb", 300]))["config"]["section_tokens"] == 300
            assert not slow
            service.release()
        assert slow[0]["query"] == "slow"


async def _collect(into: list, awaitable) -> None:
    try:
        into.append(await awaitable)
    except (RemoteError, ConnectionError) as exc:
        into.append(exc)


async def test_cancel_request_answers_32800_and_frees_the_connection(short_tmp):
    async with serving(short_tmp) as (_, sock, service):
        client = await connect(sock)
        await with_kb(client)
        rid = client.next_id()
        async with anyio.create_task_group() as tg:
            answer: list[Any] = []
            tg.start_soon(
                lambda: _collect(
                    answer,
                    client.call_raw({"jsonrpc": "2.0", "id": rid, "method": "search.query", "params": ["kb", "slow"]}),
                )
            )
            await wait_thread_event(service.slow_started)
            await client.cancel(rid)
        assert answer[0]["error"]["code"] == -32800
        assert answer[0]["error"]["data"] == {"name": "rpc.cancelled", "id": rid}
        # Cancelling an unknown id is harmless; the connection goes on.
        await client.cancel(12345)
        assert (await client.call("server.info"))["name"] == "autodoc"
        service.release()


async def test_a_cancel_right_behind_its_request_is_never_lost(short_tmp):
    async with serving(short_tmp) as (_, sock, _):
        client = await connect(sock)
        await with_kb(client)
        for i in range(20):
            rid = 1000 + i
            both = encode_message(
                {"jsonrpc": "2.0", "id": rid, "method": "search.query", "params": ["kb", "sleep:0.2"]}, NEWLINE
            ) + encode_message({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": rid}}, NEWLINE)
            await client.send_bytes(both)
            answer = await client.next_unmatched(timeout=DEADLINE)
            assert answer["id"] == rid and answer["error"]["code"] == -32800


async def test_a_timed_out_call_cancels_on_the_server(short_tmp):
    async with serving(short_tmp) as (server, sock, service):
        client = await connect(sock)
        await with_kb(client)
        with pytest.raises(TimeoutError):
            await client.call("search.query", ["kb", "slow"], timeout=0.3)
        await wait_until(lambda: all(c.inflight_count == 0 for c in server.connections))
        service.release()


async def test_cancel_stops_a_reindex_between_files(short_tmp):
    async with serving(short_tmp) as (_server, sock, service):
        client = await connect(sock)
        await with_kb(client)
        service.index_gate.clear()
        rid = client.next_id()
        async with anyio.create_task_group() as tg:
            answer: list[Any] = []
            tg.start_soon(
                lambda: _collect(
                    answer,
                    client.call_raw({"jsonrpc": "2.0", "id": rid, "method": "workspace.reindex", "params": ["kb"]}),
                )
            )
            await wait_thread_event(service.index_started)
            await client.cancel(rid)
            service.index_gate.set()
        assert answer[0]["error"]["code"] == -32800
        # The writer slot is free again.
        assert (await client.call("workspace.index", ["kb"], timeout=DEADLINE))["workspace"] == "kb"


async def test_reindex_sends_progress_with_the_request_id_as_token(short_tmp):
    async with serving(short_tmp) as (_, sock, _):
        client = await connect(sock, CONTENT_LENGTH)
        await with_kb(client)
        seen = []
        client.on_notification(lambda n: seen.append(n))
        report = await client.call("workspace.reindex", ["kb"])
        progress = [n.params for n in seen if n.method == "$/progress"]
        assert progress and report["workspace"] == "kb"
        rid = progress[0]["token"]
        assert isinstance(rid, int)
        assert all(p["token"] == rid and p["workspace"] == "kb" for p in progress)
        assert progress[0]["done"] == 0 and progress[-1]["done"] == progress[-1]["total"] == 40
        assert len(progress) < 40  # throttled
        for p in progress:
            assert schemas.notification_errors("$/progress", p) == []


async def test_disconnect_mid_request_cancels_it_and_the_server_keeps_serving(short_tmp):
    async with serving(short_tmp) as (server, sock, service):
        first = await connect(sock)
        await with_kb(first)
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: _collect([], first.call("search.query", ["kb", "slow"])))
            await wait_thread_event(service.slow_started)
            await first.close()
        await wait_until(lambda: len(server.connections) == 0)
        second = await connect(sock)
        assert (await second.call("search.query", ["kb", "lease"]))["hits"]
        service.release()


async def test_half_closed_client_still_gets_its_answer(short_tmp):
    """`printf '{…}' | nc -U sock` shuts its sending side and waits to read."""
    async with serving(short_tmp) as (_, sock, _):
        stream = await anyio.connect_unix(str(sock))
        await stream.send(b'{"jsonrpc":"2.0","id":1,"method":"search.query","params":["nope","sleep:0.2"]}')
        await stream.send_eof()
        data = b""
        with anyio.fail_after(DEADLINE):
            try:
                while True:
                    data += await stream.receive()
            except anyio.EndOfStream:
                pass
        assert data.startswith(b'{"jsonrpc":"2.0","error":{"code":-32001'), data
        assert data.endswith(b'"id":1}\n')


# -- the change feed ------------------------------------------------------------------------------------


async def test_subscribers_get_pushed_changes_for_their_workspaces(short_tmp):
    async with serving(short_tmp) as (_, sock, _):
        everything, only_kb, nobody = await connect(sock), await connect(sock), await connect(sock)
        await with_kb(everything)
        await everything.call("workspace.add", ["other", "/tmp"])
        assert await everything.call("changes.subscribe", []) == {"all": True, "workspaces": []}
        assert await only_kb.call("changes.subscribe", ["kb"]) == {"all": False, "workspaces": ["kb"]}
        await nobody.call("workspace.index", ["other"])
        await nobody.call("workspace.index", ["kb"])
        note = await only_kb.next_notification("changes.changed", timeout=DEADLINE)
        assert note.params["workspace"] == "kb"
        assert schemas.notification_errors("changes.changed", note.params) == []
        got = set()
        with anyio.fail_after(DEADLINE):
            while got != {"kb", "other"}:
                got.add((await everything.next_notification("changes.changed")).params["workspace"])
        assert await only_kb.call("changes.unsubscribe") == {"all": False, "workspaces": []}
        await nobody.call("workspace.index", ["kb"])
        await everything.next_notification("changes.changed", timeout=DEADLINE)
        await only_kb.call("server.info")  # a round trip after the push: nothing was queued for it
        assert [
            n
            for n in only_kb.pending_notifications()
            if n.params["workspace"] == "kb" and n.params["changes"][0]["cursor"] > 4
        ] == []
        assert not [n for n in nobody.pending_notifications() if n.method == "changes.changed"]


# -- shutdown -----------------------------------------------------------------------------------------


async def test_shutdown_answers_in_flight_work_and_refuses_new_requests(short_tmp):
    async with serving(short_tmp) as (_server, sock, service):
        a, b = await connect(sock), await connect(sock)
        await with_kb(a)
        async with anyio.create_task_group() as tg:
            slow: list[Any] = []
            tg.start_soon(lambda: _collect(slow, a.call("search.query", ["kb", "slow"])))
            await wait_thread_event(service.slow_started)
            assert await b.call("server.shutdown") == {"shutting_down": True}
            err = await error_of(b.call("server.info"))
            assert (err.code, err.name) == (-32020, "server.shutting_down")
            assert not sock.exists()  # stopped accepting
            service.release()
        assert slow[0]["query"] == "slow"  # finished within the deadline, answered


async def test_shutdown_cancels_what_outlives_the_deadline(short_tmp):
    async with serving(short_tmp, shutdown_deadline=0.3) as (server, sock, service):
        client = await connect(sock)
        await with_kb(client)
        async with anyio.create_task_group() as tg:
            stuck: list[Any] = []
            tg.start_soon(lambda: _collect(stuck, client.call("search.query", ["kb", "slow"])))
            await wait_thread_event(service.slow_started)
            server.request_shutdown("test")
        assert isinstance(stuck[0], RemoteError) and stuck[0].code == -32020
        service.release()


# -- transports -----------------------------------------------------------------------------------------


async def test_socket_is_private_and_a_stale_one_is_replaced(short_tmp):
    folder = short_tmp / "run"
    folder.mkdir(mode=0o700)
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(folder / "autodoc.sock"))
    stale.close()  # a socket file nobody listens on: a dead daemon's
    async with serving(short_tmp) as (_, sock, _):
        assert stat.S_IMODE(sock.stat().st_mode) == 0o600
        assert stat.S_IMODE(sock.parent.stat().st_mode) == 0o700
        with pytest.raises(SocketInUse, match="already listening"):
            prepare_socket_path(sock)
        assert (await (await connect(sock)).call("server.info"))["socket"] == str(sock)
    assert not sock.exists()  # removed on shutdown


def test_a_socket_path_that_is_not_a_socket_is_left_alone(short_tmp):
    path = short_tmp / "notes.txt"
    path.write_text("mine")
    with pytest.raises(SocketPathError, match="not a socket"):
        prepare_socket_path(path)
    assert path.read_text() == "mine"


async def test_stdio_transport_with_both_framings_and_eof_shutdown(short_tmp):
    service = FakeService()
    server = RpcServer(service, check_results=True)
    to_server_r, to_server_w = os.pipe()
    from_server_r, from_server_w = os.pipe()
    async with anyio.create_task_group() as tg:
        await tg.start(partial(server.run, stdio=True, stdio_fds=(to_server_r, from_server_w)))
        request = encode_message({"jsonrpc": "2.0", "id": 1, "method": "workspace.list"}, CONTENT_LENGTH)
        os.write(to_server_w, request)
        decoder = FrameDecoder()
        frames = []
        with anyio.fail_after(DEADLINE):
            while not frames:
                await anyio.wait_readable(from_server_r)
                frames += decoder.feed(os.read(from_server_r, 65536))
        assert decoder.framing == CONTENT_LENGTH
        assert frames[0].payload == b'{"jsonrpc":"2.0","result":{"workspaces":[]},"id":1}'
        # A request sent just before EOF is still answered, then the server stops.
        os.write(to_server_w, encode_message({"jsonrpc": "2.0", "id": 2, "method": "server.info"}, CONTENT_LENGTH))
        os.close(to_server_w)
        with anyio.fail_after(DEADLINE):
            await server.shutdown_requested.wait()
    os.close(from_server_w)
    rest = b""
    while chunk := os.read(from_server_r, 65536):
        rest += chunk
    assert b'"id":2' in rest and b'"result"' in rest
    assert server.shutdown_reason == "stdin closed"
    for fd in (to_server_r, from_server_r):
        os.close(fd)
