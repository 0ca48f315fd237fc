"""The real daemon, end to end: `python -m autodoc.cli serve` in its own
process on a temp store and a copy of tests/corpora/kb, driven over its Unix
socket and over stdio, in both framings, by autodoc_client. Every answer is
checked against schemas/ (the daemon runs with AUTODOC_CHECK_RESULTS=1, and
the tests check again on their side)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from helpers.daemon import Daemon, isolated_env

from autodoc.rpc import schemas
from autodoc.rpc.framing import CONTENT_LENGTH, NEWLINE, encode_message
from autodoc_client import Client, RemoteError, call_socket

DEADLINE = 20
MAX_FRAME = 65536
BIG_FILES = 1500
NO_MODEL = {"embedding": {"provider": "none"}}


def checked(method: str, result: Any) -> Any:
    assert schemas.result_errors(method, result) == [], method
    return result


# every answer checked against schemas/ on the daemon's side too, and small frames to hit the limit
CHECKED_ENV = {"AUTODOC_CHECK_RESULTS": "1", "AUTODOC_MAX_FRAME_BYTES": str(MAX_FRAME)}


def daemon_env() -> dict[str, str]:
    return isolated_env(extra=CHECKED_ENV)


def serve_argv(store: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "autodoc.cli", "--store", str(store), "serve", *args]


def make_big_corpus(folder: Path, n: int) -> None:
    folder.mkdir()
    for i in range(n):
        (folder / f"note-{i:04d}.md").write_text(f"# Note {i}\n\nfiller text number {i} about leases and locks.\n")


@pytest.fixture(scope="module")
def daemon():
    base = Path(tempfile.mkdtemp(prefix="ad-e2e-", dir="/tmp"))
    d = Daemon(base, env=CHECKED_ENV, timeout=DEADLINE)
    d.kb, d.big, d.scratch = base / "kb", base / "big", base / "scratch"
    src = Path(__file__).parents[1] / "corpora" / "kb"
    if src.is_dir():
        shutil.copytree(src, d.kb, symlinks=True)
    else:
        (d.kb / "adrs").mkdir(parents=True)
        (d.kb / "adrs" / "0012-lease-recovery.md").write_text("# ADR 0012\n\n## Lease\n\nlease recovery\n")
    make_big_corpus(d.big, BIG_FILES)
    d.scratch.mkdir()
    (d.scratch / "one.md").write_text("# One\n\nscratch words\n")
    d.start()
    try:
        # No embedding model here: a CPU MiniLM takes seconds a batch and would slow every
        # other test (semantic search has its own tests); the shapes are the same.
        checked("workspace.add", d.call("workspace.add", ["kb", str(d.kb), NO_MODEL]))
        checked("workspace.reindex", d.call("workspace.reindex", ["kb"]))
        d.call("workspace.add", ["big", str(d.big), NO_MODEL])
        yield d
    finally:
        was_running = d.running()
        try:
            code = d.stop()  # SIGTERM; killed, and an AssertionError with the log, past the deadline
            if was_running:
                assert code == 0, d.log_text()
                assert not d.sock.exists(), "the socket file outlived the daemon"
        finally:
            shutil.rmtree(base, ignore_errors=True)


async def wait_for(predicate, timeout: float = DEADLINE, what: str = "") -> None:
    with anyio.fail_after(timeout):
        while not await predicate():
            await anyio.sleep(0.01)


# -- every method, over the socket in both framings ------------------------------------------------


@pytest.mark.parametrize("framing", [NEWLINE, CONTENT_LENGTH])
async def test_every_method_over_the_socket(daemon, framing):
    name = f"scratch-{framing}"
    async with await Client.connect_socket(daemon.sock, framing=framing) as c:
        info = checked("server.info", await c.call("server.info"))
        assert info["socket"] == str(daemon.sock) and info["pid"] == daemon.proc.pid
        assert {"kb", "big"} <= set(info["workspaces"])
        added = checked("workspace.add", await c.call("workspace.add", [name, str(daemon.scratch), NO_MODEL]))
        assert added["root"] == str(daemon.scratch.resolve())
        assert any(w["name"] == name for w in checked("workspace.list", await c.call("workspace.list"))["workspaces"])
        checked("workspace.configure", await c.call("workspace.configure", [name, {"demote_superseded": False}]))
        sized = checked("workspace.section_size", await c.call("workspace.section_size", [name, 200]))
        assert sized["config"]["section_tokens"] == 200 and sized["config"]["demote_superseded"] is False
        report = checked("workspace.index", await c.call("workspace.index", [name]))
        assert report["scanned"] == 1  # already indexed: a new section size re-chunks at once
        checked("workspace.reindex", await c.call("workspace.reindex", {"workspace": name}))
        checked("workspace.status", await c.call("workspace.status", [name]))

        answer = checked("search.query", await c.call("search.query", ["kb", "lease recovery", {"limit": 3}]))
        assert answer["hits"] and len(answer["hits"]) <= 3
        assert "«" in answer["hits"][0]["snippet"]
        lexical = checked(
            "search.query",
            await c.call("search.query", {"workspace": "kb", "query": "lease", "opts": {"stages": ["lexical"]}}),
        )
        assert lexical["stages"]["performed"] == ["lexical"]
        facet = checked("search.query", await c.call("search.query", ["kb", "type:adr"]))
        assert facet["mode_used"] in ("facet", "lexical", "hybrid")

        hit = answer["hits"][0]
        span = checked(
            "document.read",
            await c.call(
                "document.read", ["kb", hit["path"], {"line_start": hit["line_start"], "line_end": hit["line_end"]}]
            ),
        )
        assert span["line_start"] == hit["line_start"] and span["text"]
        since = checked("changes.since", await c.call("changes.since", ["kb", 0, 5]))
        assert len(since["changes"]) == 5 and since["has_more"]
        checked("changes.subscribe", await c.call("changes.subscribe", []))
        checked("changes.unsubscribe", await c.call("changes.unsubscribe"))
        assert checked("workspace.remove", await c.call("workspace.remove", [name]))["removed"] == name
        assert await c.call("$/cancelRequest", {"id": 424242}) is None


async def test_batches_notifications_and_errors(daemon):
    async with await Client.connect_socket(daemon.sock) as c:
        answers = await c.call_raw(
            [
                {"jsonrpc": "2.0", "id": 1, "method": "workspace.status", "params": ["kb"]},
                {"jsonrpc": "2.0", "method": "server.info"},
                {"jsonrpc": "2.0", "id": 2, "method": "search.query", "params": ["kb", "lease", {"limit": 201}]},
                {"jsonrpc": "2.0", "id": 3, "method": "search.query", "params": ["nope", "lease"]},
                {"jsonrpc": "2.0", "id": 4, "method": "document.read", "params": ["kb", "../etc/passwd"]},
                {"jsonrpc": "2.0", "id": 5, "method": "no.such"},
                "junk",
            ],
            timeout=DEADLINE,
        )
        assert [a["id"] for a in answers] == [1, 2, 3, 4, 5, None]
        checked("workspace.status", answers[0]["result"])
        codes = [a["error"]["code"] for a in answers[1:]]
        assert codes == [-32602, -32001, -32004, -32601, -32600]
        assert answers[1]["error"]["message"] == "opts.limit: must be ≤ 200"
        assert answers[1]["error"]["data"]["field"] == "opts.limit"
        assert await c.call_raw([{"jsonrpc": "2.0", "method": "workspace.list"}]) is None
        err = await _error(
            c.call("search.query", ["kb", "x", {"stages": ["semantic"], "facets": {"nope_field": ["x"]}}])
        )
        assert err.code == -32602 and err.data["field"].startswith("opts.facets")


async def _error(awaitable) -> RemoteError:
    with pytest.raises(RemoteError) as info:
        await awaitable
    return info.value


@pytest.mark.parametrize("framing", [NEWLINE, CONTENT_LENGTH])
async def test_bad_frames_leave_the_connection_up(daemon, framing):
    async with await Client.connect_socket(daemon.sock, framing=framing) as c:
        huge = encode_message(
            {"jsonrpc": "2.0", "id": 9, "method": "server.info", "params": {"pad": "x" * (MAX_FRAME + 10)}}, framing
        )
        await c.send_bytes(huge)
        assert (await c.next_unmatched(timeout=DEADLINE))["error"]["code"] == -32600
        bad = b'{"jsonrpc": "2.0", "id": 1, "method":'
        await c.send_bytes(bad + b"\n" if framing == NEWLINE else b"Content-Length: %d\r\n\r\n" % len(bad) + bad)
        assert (await c.next_unmatched(timeout=DEADLINE))["error"]["code"] == -32700
        checked("server.info", await c.call("server.info"))


# -- the push feed ------------------------------------------------------------------------------------


async def test_a_saved_file_is_pushed_and_searchable_quickly(daemon):
    async with await Client.connect_socket(daemon.sock) as c:
        await wait_for(lambda: _watching(c, "kb"), what="the watcher")
        checked("changes.subscribe", await c.call("changes.subscribe", ["kb"]))
        path = daemon.kb / "notes" / "live-edit.md"
        start = time.monotonic()
        path.write_text("# Live edit\n\nThe zebracorn protocol renews quasar leases.\n")
        note = await c.next_notification("changes.changed", timeout=DEADLINE)
        pushed = time.monotonic() - start
        assert schemas.notification_errors("changes.changed", note.params) == []
        assert [(ch["path"], ch["op"]) for ch in note.params["changes"]] == [("notes/live-edit.md", "add")]
        hits = checked("search.query", await c.call("search.query", ["kb", "zebracorn"]))["hits"]
        searchable = time.monotonic() - start
        assert [h["path"] for h in hits] == ["notes/live-edit.md"]
        print(f"saved → pushed {pushed * 1000:.0f} ms, searchable {searchable * 1000:.0f} ms")
        assert searchable < 3.0  # the target is 0.3 s; CI machines are slower and busier

        path.write_text("# Live edit\n\nNow about unicorn ferries.\n")
        note = await c.next_notification("changes.changed", timeout=DEADLINE)
        assert note.params["changes"][-1]["op"] == "modify"
        path.unlink()
        note = await c.next_notification("changes.changed", timeout=DEADLINE)
        assert note.params["changes"][-1]["op"] == "delete"
        assert checked("search.query", await c.call("search.query", ["kb", "zebracorn"]))["hits"] == []
        # Hidden and non-Markdown files are not indexed.
        (daemon.kb / "notes" / ".hidden.md").write_text("# Hidden\n\nzebracorn\n")
        (daemon.kb / "notes" / "plain.txt").write_text("zebracorn\n")
        (daemon.kb / "notes" / "visible.md").write_text("# Visible\n\nsentinel\n")
        note = await c.next_notification("changes.changed", timeout=DEADLINE)
        assert [ch["path"] for ch in note.params["changes"]] == ["notes/visible.md"]


async def _watching(c: Client, name: str) -> bool:
    return name in (await c.call("server.info"))["watching"]


async def test_the_embed_queue_fills_vectors_in_the_background(daemon, short_tmp):
    folder = short_tmp / "tiny"
    folder.mkdir()
    (folder / "ferry.md").write_text("# Ferries\n\nBoats that carry cars across the fjord every hour.\n")
    async with await Client.connect_socket(daemon.sock) as c:
        await c.call("workspace.add", ["tiny", str(folder)])  # the default model: the packaged MiniLM
        await c.call("changes.subscribe", ["tiny"])
        await c.call("workspace.reindex", ["tiny"])
        with anyio.fail_after(60):
            while True:
                note = await c.next_notification("embedding.progress")
                assert schemas.notification_errors("embedding.progress", note.params) == []
                if note.params["state"] == "ready":
                    break
        answer = checked(
            "search.query",
            await c.call("search.query", ["tiny", "vessels transporting automobiles", {"stages": ["semantic"]}]),
        )
        assert answer["semantic"] == "ready" and answer["stages"]["performed"] == ["semantic"]
        assert [h["path"] for h in answer["hits"]] == ["ferry.md"] and answer["hits"][0]["via"] == ["semantic"]
        await c.call("workspace.remove", ["tiny"])


# -- cancellation and disconnects ------------------------------------------------------------------------


async def _start_reindex(c: Client, workspace: str) -> int:
    rid = c.next_id()
    await c.send_bytes(
        encode_message({"jsonrpc": "2.0", "id": rid, "method": "workspace.reindex", "params": [workspace]}, c.framing)
    )
    note = await c.next_notification("$/progress", timeout=DEADLINE)
    assert note.params["token"] == rid and note.params["workspace"] == workspace
    return rid


async def test_cancel_a_reindex_mid_run(daemon):
    async with await Client.connect_socket(daemon.sock) as c:
        rid = await _start_reindex(c, "big")
        await c.cancel(rid)
        answer = await c.next_unmatched(timeout=DEADLINE)
        assert answer["id"] == rid
        assert answer["error"]["code"] == -32800, answer
        # The writer is free again and the connection still serves.
        checked("workspace.index", await c.call("workspace.index", ["kb"]))


async def test_disconnect_mid_request_and_the_daemon_keeps_serving(daemon):
    first = await Client.connect_socket(daemon.sock, framing=CONTENT_LENGTH)
    await _start_reindex(first, "big")
    await first.close()
    async with await Client.connect_socket(daemon.sock) as second:
        checked("server.info", await second.call("server.info"))
        with anyio.fail_after(DEADLINE):  # would wait for the whole abandoned reindex if it ran on
            report = checked("workspace.index", await second.call("workspace.index", ["big"]))
        assert report["scanned"] == BIG_FILES


# -- lease, socket and stdio ------------------------------------------------------------------------


def test_a_second_stdio_daemon_on_the_same_store_bridges_to_the_holder(daemon):
    # issue 15: instead of exiting 1 it forwards to the holder's socket (tests/e2e/test_serve_bridge.py drives it);
    # with nothing on stdin it ends at once, having named the holder
    proc = subprocess.run(
        serve_argv(daemon.store, "--stdio"),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        env=daemon_env(),
        timeout=DEADLINE,
    )
    assert proc.returncode == 0 and proc.stdout == b""
    err = proc.stderr.decode()
    assert f"pid {daemon.proc.pid}" in err and str(daemon.sock) in err and "bridging" in err, err
    assert daemon.call("server.info")["pid"] == daemon.proc.pid  # the first one is unharmed


def test_a_second_daemon_on_the_same_socket_is_refused(daemon):
    other_store = daemon.base / "other" / "autodoc.db"
    proc = subprocess.run(
        serve_argv(other_store, "--socket", str(daemon.sock)),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        env=daemon_env(),
        timeout=DEADLINE,
    )
    assert proc.returncode != 0
    assert "already listening" in proc.stderr.decode()
    assert daemon.call("server.info")["pid"] == daemon.proc.pid


@pytest.mark.parametrize("framing", [NEWLINE, CONTENT_LENGTH])
async def test_stdio_daemon(short_tmp, kb_copy, framing):
    store = short_tmp / "stdio.db"
    client = await Client.spawn_stdio(
        serve_argv(store, "--stdio"), framing=framing, env=daemon_env(), stderr=open(short_tmp / "stderr.log", "w")
    )
    try:
        checked("server.info", await client.call("server.info", timeout=DEADLINE))
        checked("workspace.add", await client.call("workspace.add", ["kb", str(kb_copy), NO_MODEL]))
        report = checked("workspace.reindex", await client.call("workspace.reindex", ["kb"], timeout=DEADLINE))
        assert report["added"] > 0
        assert [n for n in client.pending_notifications() if n.method == "$/progress"]
        answer = checked("search.query", await client.call("search.query", ["kb", "lease"]))
        assert answer["hits"]
        batch = await client.batch([("workspace.status", ["kb"]), ("search.query", ["kb", "x", {"limit": 0}])])
        checked("workspace.status", batch[0])
        assert isinstance(batch[1], RemoteError) and batch[1].data["field"] == "opts.limit"
    except RemoteError:
        print((short_tmp / "stderr.log").read_text())
        raise
    finally:
        code = await client.close(timeout=DEADLINE)  # stdin EOF: a graceful shutdown
    assert code == 0


def test_the_sync_wrapper_reports_remote_errors(daemon):
    with pytest.raises(RemoteError) as info:
        call_socket(daemon.sock, "workspace.status", ["nope"], timeout=DEADLINE)
    assert info.value.code == -32001 and info.value.name == "workspace.not_found"
    with pytest.raises(OSError):
        call_socket(daemon.base / "run" / "missing.sock", "server.info", timeout=DEADLINE)
