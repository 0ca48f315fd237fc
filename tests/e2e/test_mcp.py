"""`autodoc mcp`, driven as an agent client would drive it: the official SDK's own
client starting the real command over stdio (and once over localhost HTTP), on a
real indexed corpus (tests/corpora/kb) with the bundled embedding model, alone
and beside a real daemon shared with another MCP server and a plain socket client."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import mcp_types as types
import pytest
from helpers.daemon import Daemon
from mcp import Client, StdioServerParameters

from autodoc_client import Client as SocketClient
from autodoc_client import call_socket

CORPUS = Path(__file__).parents[1] / "corpora" / "kb"
GOLDEN = Path(__file__).parents[1] / "golden" / "mcp_tools.json"
ADR12 = "adrs/0012-lease-recovery.md"


def _cli(env: dict[str, str], *args: str) -> str:
    p = subprocess.run(
        [sys.executable, "-m", "autodoc.cli", *args], env=env, capture_output=True, text=True, timeout=300
    )
    assert p.returncode == 0, f"autodoc {' '.join(args)} → {p.returncode}\n{p.stderr}"
    return p.stdout


def _make_store(base: Path) -> dict[str, str]:
    """A store with workspace kb (a private copy of the test corpus), indexed and embedded."""
    env = dict(os.environ)
    env.update(
        AUTODOC_STORE=str(base / "store" / "a.db"), AUTODOC_SOCKET=str(base / "d.sock"), XDG_RUNTIME_DIR=str(base)
    )
    shutil.copytree(CORPUS, base / "kb", symlinks=True)
    _cli(env, "workspace", "add", "kb", str(base / "kb"))
    _cli(env, "index", "--wait", "kb")  # every vector before the tests (else a daemon embeds them)
    return env


@pytest.fixture(scope="module")
def store():
    """One indexed store for the module (indexing with the real model is the slow part); each
    test writes only files of its own, so the order of the tests does not matter."""
    base = Path(tempfile.mkdtemp(prefix="ad-mcp-", dir="/tmp"))  # short: a socket path must fit in 104 bytes
    try:
        yield base, _make_store(base)
    finally:
        _stop_daemon(base / "d.sock")  # one a test's `autodoc mcp` started and left for others, as it should
        shutil.rmtree(base, ignore_errors=True)


def _stop_daemon(sock: Path) -> None:
    if sock.exists():
        try:
            call_socket(sock, "server.shutdown", [], timeout=30)
        except Exception:
            pass
    deadline = time.monotonic() + 30
    while sock.exists() and time.monotonic() < deadline:
        time.sleep(0.1)


def _server(env: dict[str, str], *extra: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-m", "autodoc.cli", "mcp", *extra], env=env)


def _path(hit: dict[str, Any]) -> str:
    """A search hit's path, from its ref (`kb:adrs/x.md#L3-9`): the one place the tool says it."""
    return hit["ref"].split(":", 1)[1].rsplit("#L", 1)[0]


async def _tool(c: Client, name: str, args: dict[str, Any]) -> tuple[dict[str, Any], str, bool]:
    r = await c.call_tool(name, args)
    return r.structured_content or {}, r.content[0].text, bool(r.is_error)


async def test_every_tool_on_a_real_corpus_over_stdio(store):
    base, env = store
    notes: list[Any] = []

    async def collect(message: Any) -> None:
        notes.append(message)

    async with Client(_server(env, "--in-process"), message_handler=collect) as c:
        # tools/list: exactly the golden names, descriptions and schemas a model reads
        listed = [t.model_dump(by_alias=True, exclude_none=True) for t in (await c.list_tools()).tools]
        assert listed == json.loads(GOLDEN.read_text(encoding="utf-8"))

        # search: compact, citable, one hit per document, within the budget
        ans, text, err = await _tool(c, "search", {"query": "recover the lease after a crashed writer"})
        assert not err and ans["answerable"] is True and 1 <= len(ans["hits"]) <= 5
        top = ans["hits"][0]
        assert _path(top) == ADR12 and top["ref"].startswith(f"kb:{ADR12}#L")
        # one hit a document but the leading one's, whose passages that a leg ranks at the top follow it
        paths = [_path(h) for h in ans["hits"]]
        rest = paths[next((i for i, p in enumerate(paths) if p != ADR12), len(paths)) :]
        assert len(set(rest)) == len(rest) and ADR12 not in rest
        # each path said once, in the ref: no workspace, path, lines or file origin beside it (issue 35)
        assert set(top) == {"ref", "title", "section", "text", "confidence"} and top["confidence"] > 0.5
        # the model reads the passages as they are in the files, each under its ref, once
        assert text.count(top["ref"]) == 1 and top["text"] in text and ans["tokens"] <= 800
        # which stages ran, per workspace, and why any did not (once: not repeated in the notes)
        assert ans["stages"]["kb"]["performed"] == ["lexical", "semantic"]
        assert ans["stages"]["kb"]["skipped"]["rerank"] and not any("rerank" in n for n in ans.get("notes", []))
        asked, _, err = await _tool(c, "search", {"query": "lease", "stages": ["lexical", "rerank"]})
        assert not err and asked["stages"]["kb"]["performed"] == ["lexical"]
        assert asked["stages"]["kb"]["skipped"]["rerank"].startswith("no ranker")
        blank, _, err = await _tool(c, "search", {"query": "   "})  # listed every file as answerable before
        assert err and blank["error"].startswith("query is required")
        # `limit` nested as in the RPC, a workspace name in another case, a tiny budget
        ans, _, err = await _tool(
            c, "search", {"query": "lease", "opts": {"limit": 2}, "workspace": "KB", "budget_tokens": 100}
        )
        assert not err and len(ans["hits"]) <= 2 and ans["tokens"] <= 300
        # the smallest budget still gives the top passage (it answered hits: [] with answerable true)
        assert ans["hits"] and ans["hits"][0]["text"]
        assert "budget_tokens 100 is outside 300..32000: used 300" in ans["notes"]
        assert any(n.startswith("read the keys of 'opts' as arguments (limit)") for n in ans["notes"])
        ans, _, err = await _tool(c, "search", {"query": "lease", "limit": 999, "paths": ["runbooks/"]})
        assert not err and {_path(h).split("/")[0] for h in ans["hits"]} == {"runbooks"}
        assert any("limit 999 is outside 1..50" in n for n in ans["notes"])
        ans, _, err = await _tool(c, "search", {"query": "chocolate cake recipe with strawberries"})
        # only weak hits, if any: the relevance floor holds the rest back, and says how many
        assert not err and ans["answerable"] is False and all(h["confidence"] < 0.2 for h in ans["hits"])
        assert ans["held_back"] and any(f"{ans['held_back']} held back" in n for n in ans["notes"])
        ans, _, err = await _tool(
            c, "search", {"query": "chocolate cake recipe with strawberries", "min_confidence": 0, "limit": "3"}
        )
        assert not err and ans["answerable"] is False and len(ans["hits"]) == 3
        ans, _, err = await _tool(c, "search", {"query": "lease", "workspace": "kbb"})
        assert err and ans["did_you_mean"] == ["kb"]
        ans, _, err = await _tool(c, "search", {"query": "lease", "stages": ["fuzzy"]})
        assert err and "stages may be" in ans["error"]
        ans, _, err = await _tool(c, "search", {"query": "lease", "paths": ["a"] * 1001})
        assert err and ans["field"] == "paths" and ans["error"] == "paths: must have at most 1000 items"

        # read: a hit's ref, numbered lines, clamped ranges, around a line, a section, a guessed path
        ans, text, err = await _tool(c, "read", {"ref": f"kb:{ADR12}#L34-36"})
        assert not err and text.splitlines()[1].startswith("34\u2502## Decision")
        assert (ans["line_start"], ans["line_end"]) == (34, 36)
        ans, _, err = await _tool(c, "read", {"path": ADR12, "lines": "150-9999"})
        assert not err and ans["line_end"] == ans["total_lines"] and any("clamped" in n for n in ans["notes"])
        ans, _, err = await _tool(c, "read", {"ref": ADR12, "around": 40, "context": 2})
        assert not err and (ans["line_start"], ans["line_end"]) == (38, 42)
        ans, _, err = await _tool(c, "read", {"ref": ADR12, "section": "decision"})
        assert not err and ans["text"].startswith("## Decision") and ans["section"] == "Decision"
        ans, _, err = await _tool(c, "read", {"ref": "ADR-12"})
        assert err and ans["did_you_mean"][0] == ADR12
        ans, _, err = await _tool(c, "read", {"ref": ADR12, "lines": "ten to twenty"})
        assert err and '"10-25"' in ans["error"]
        ans, _, err = await _tool(c, "read", {"ref": ADR12, "section": "Nonexistent heading"})
        assert err and "Decision" in ans["headings"]

        # outline: the heading tree with spans and sizes
        ans, text, err = await _tool(c, "outline", {"ref": ADR12})
        assert not err and [n["title"] for n in ans["outline"][0]["children"]][:2] == ["Context", "Decision"]
        decision = ans["outline"][0]["children"][1]
        assert decision["line_start"] == 34 and decision["tokens"] > 0 and "## Decision  L34-" in text

        # links: out (resolved) and in
        ans, _, err = await _tool(c, "links", {"ref": "runbooks/lease-recovery.md"})
        assert not err and any(link["resolved"] and link["ref"] == f"kb:{ADR12}" for link in ans["out"])
        assert any(link["ref"].startswith("kb:index.md#L") for link in ans["in"])

        # similar: other documents, never the document itself
        ans, _, err = await _tool(c, "similar", {"ref": ADR12, "limit": 3})
        assert not err and 1 <= len(ans["similar"]) <= 3 and ADR12 not in {h["path"] for h in ans["similar"]}
        assert ans["similar"][0]["path"] == "adrs/0007-sqlite-wal-lease.md" and ans["similar"][0]["score"] > 0

        # list: path order, counts, a cursor that pages
        first, _, err = await _tool(c, "list", {"limit": 4, "count": ["status"]})
        assert not err and len(first["documents"]) == 4
        assert first["next_cursor"] == first["documents"][-1]["ref"].split(":", 1)[1]  # the last path listed
        assert first["tag_counts"]["sqlite"] >= 2 and "accepted" in first["facet_counts"]["status"]
        second, _, _ = await _tool(c, "list", {"limit": 4, "cursor": first["next_cursor"]})
        refs = [d["ref"] for d in first["documents"] + second["documents"]]
        assert refs == sorted(refs) and len(set(refs)) == 8
        every, cursor = [], None  # page to the end: every file once, in order, then no cursor
        while True:
            page, _, err = await _tool(c, "list", {"limit": 5, **({"cursor": cursor} if cursor else {})})
            assert not err
            every += [d["ref"] for d in page["documents"]]
            if (cursor := page["next_cursor"]) is None:
                break
        whole, _, _ = await _tool(c, "list", {"limit": 200})
        assert every == [d["ref"] for d in whole["documents"]] and whole["next_cursor"] is None

        # changes since a cursor, then status
        ans, _, err = await _tool(c, "changes", {"cursor": 0, "limit": 3})
        assert not err and [ch["cursor"] for ch in ans["changes"]] == sorted(ch["cursor"] for ch in ans["changes"])
        assert ans["has_more"] is True and ans["next_cursor"] == ans["changes"][-1]["cursor"]
        ans, _, err = await _tool(c, "status", {})
        assert not err and ans["server"]["mode"] == "in-process"
        kb = ans["workspaces"][0]
        assert kb["files"]["indexed"] >= 15 and kb["chunks"] > 15 and kb["semantic"]["state"] in ("ready", "partial")
        cursor = kb["change_cursor"]

        # reindex a note the agent just wrote; search finds it, changes report it
        note = base / "kb" / "notes" / "agent-note.md"
        note.write_text("# Zebrafish decision\n\nWe pick zebrafish for the aquarium test.\n", encoding="utf-8")
        ans, _, err = await _tool(c, "reindex", {"paths": ["notes/agent-note.md", "notes/missing.md"]})
        assert not err and ans["files"][0]["indexed"] is True and ans["files"][1]["indexed"] is False
        ans, _, _ = await _tool(c, "search", {"query": "zebrafish aquarium"})
        assert ans["hits"] and _path(ans["hits"][0]) == "notes/agent-note.md", ans
        ans, _, _ = await _tool(c, "changes", {"cursor": cursor})
        assert ("notes/agent-note.md", "add") in [(ch["path"], ch["op"]) for ch in ans["changes"]]

        # an unknown tool, and documents as resources
        r = await c.call_tool("serch", {"query": "x"})
        assert r.is_error and r.structured_content["did_you_mean"] == ["search"]
        resources = (await c.list_resources()).resources
        uris = {str(r.uri) for r in resources}
        assert f"autodoc://kb/{ADR12}" in uris and "autodoc://kb/notes/agent-note.md" in uris
        read = await c.read_resource(f"autodoc://kb/{ADR12}")
        assert read.contents[0].text.startswith('---\ntitle: "ADR 0012')
        templates = (await c.list_resource_templates()).resource_templates
        assert templates[0].uri_template == "autodoc://{workspace}/{+path}"
    # nothing of the daemon's protocol ($/progress, embedding.progress) reached the client
    assert not [n for n in notes if "progress" in type(n).__name__.lower()]


def _start_daemon(daemon_factory, base: Path, env: dict[str, str]) -> Daemon:
    """`autodoc serve --socket` (its store and socket from the env), once its socket answers."""
    argv = [sys.executable, "-m", "autodoc.cli", "serve", "--socket"]
    store, sock = Path(env["AUTODOC_STORE"]), Path(env["AUTODOC_SOCKET"])
    return daemon_factory(base, store=store, sock=sock, argv=argv, env=env, timeout=60)


async def test_two_mcp_servers_and_a_socket_client_share_one_daemon(store, daemon_factory):
    base, env = store
    daemon = _start_daemon(daemon_factory, base, env)
    legacy_updates: list[str] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            legacy_updates.append(str(message.params.uri))

    target = base / "kb" / "adrs" / "0001-sqlite-storage.md"
    uri = "autodoc://kb/adrs/0001-sqlite-storage.md"
    try:
        async with (
            Client(_server(env, "--in-process")) as a,
            Client(_server(env, "--in-process"), mode="legacy", message_handler=on_message) as b,
            await SocketClient.connect_socket(env["AUTODOC_SOCKET"]) as plain,
        ):
            for c in (a, b):
                ans, _, err = await _tool(c, "status", {"workspace": "kb"})
                assert not err and ans["server"]["mode"] == "daemon"
            await plain.call("changes.subscribe", ["kb"])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # resources/subscribe is the handshake era's, as meant here
                await b.session.subscribe_resource(uri)
            original = target.read_text(encoding="utf-8")
            async with a.listen(resource_subscriptions=[uri]) as sub:
                with anyio.fail_after(90):
                    n = 0
                    event = None
                    while event is None or not legacy_updates:
                        # the MCP servers follow the daemon's feed once they reach it: edit until they tell
                        n += 1
                        target.write_text(original + f"\nEdit {n}: the lease stays.\n", encoding="utf-8")
                        with anyio.move_on_after(2):
                            async for ev in sub:
                                if getattr(ev, "uri", None) == uri:
                                    event = ev
                                    break
                        with anyio.move_on_after(0.5):
                            while not legacy_updates:
                                await anyio.sleep(0.05)
            assert legacy_updates[0] == uri
            note = await plain.next_notification("changes.changed", timeout=30)
            assert note.params["workspace"] == "kb"
            # both servers answer from the daemon's one store: what one reindexes, the other finds
            (base / "kb" / "notes" / "shared.md").write_text("# Okapi plan\n\nOkapi rollout notes.\n", encoding="utf-8")
            ans, _, err = await _tool(b, "reindex", {"paths": ["notes/shared.md"], "workspace": "kb"})
            assert not err and ans["files"][0]["indexed"] is True
            ans, _, _ = await _tool(a, "search", {"query": "okapi rollout"})
            assert _path(ans["hits"][0]) == "notes/shared.md"
            ans, _, _ = await _tool(a, "read", {"ref": "kb:adrs/0001-sqlite-storage.md", "lines": "1-3"})
            assert ans["line_start"] == 1
            # the daemon stops: the servers carry on, one holding the store, the other reading it
            daemon.stop(timeout=30)
            ans, _, err = await _tool(a, "search", {"query": "okapi rollout"})
            assert not err and _path(ans["hits"][0]) == "notes/shared.md"
            modes = [(await _tool(c, "status", {}))[0]["server"]["mode"] for c in (a, b)]
            assert modes[0] == "in-process" and "read-only" in modes[1]
    finally:
        daemon.stop(timeout=30)


async def test_beside_a_daemon_that_holds_the_store_on_stdio_only(store):
    """A daemon on stdio holds the lease and has no socket: the MCP server still serves, read-only."""
    _base, env = store
    holder = subprocess.Popen(
        [sys.executable, "-m", "autodoc.cli", "serve"],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        lease = Path(env["AUTODOC_STORE"] + ".lease")
        deadline = time.monotonic() + 60

        def held() -> bool:  # the file alone may be left from the fixture's own writer: it must name the holder
            try:
                return json.loads(lease.read_text()).get("pid") == holder.pid
            except (OSError, ValueError):
                return False

        while not held():
            assert holder.poll() is None and time.monotonic() < deadline, "the daemon never held the store"
            time.sleep(0.05)
        async with Client(_server(env)) as c:
            ans, _, err = await _tool(c, "status", {})
            assert not err and "read-only" in ans["server"]["mode"]
            ans, _, err = await _tool(c, "search", {"query": "porter stemming"})
            assert not err and ans["hits"]
            ans, _, err = await _tool(c, "reindex", {"paths": ["index.md"]})
            # said plainly, naming the holder and the fix (it answered "internal error … RuntimeError:
            # this store was opened read-only"), and no daemon was started that could not take the store
            assert err and not ans["error"].startswith("internal error"), ans
            assert f"pid {holder.pid} (autodoc serve)" in ans["error"] and "Stop that process" in ans["error"]
            assert ans["holder"]["pid"] == holder.pid
            ans, _, err = await _tool(c, "status", {})
            assert "serves no socket" in ans["server"]["daemon_not_started"]
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)


async def test_two_agents_with_the_default_config_share_a_daemon_they_start(store):
    """Two agents configured as the README says (`autodoc mcp`, no daemon running): the first
    starts a daemon and both use it, so both can write. The second answered save_session and
    reindex with "internal error in save_session: RuntimeError: this store was opened read-only"."""
    base, env = store
    (base / "kb" / "notes" / "two-agents.md").write_text("# Quokka census\n\nQuokkas counted.\n", encoding="utf-8")
    turns = [{"role": "user", "text": "How many quokkas?"}, {"role": "assistant", "text": "Forty-two quokkas."}]
    try:
        async with Client(_server(env)) as a, Client(_server(env)) as b:
            # both at once: each starts a daemon, one takes the store, and both use that one
            modes: list[str] = []

            async def first(c: Client) -> None:
                modes.append((await _tool(c, "status", {}))[0]["server"]["mode"])

            async with anyio.create_task_group() as tg:
                tg.start_soon(first, a)
                tg.start_soon(first, b)
            assert modes == ["daemon", "daemon"]
            for i, c in enumerate((a, b)):
                ans, _, err = await _tool(c, "save_session", {"session_id": f"s-two-{i}", "turns": turns})
                assert not err and ans["saved"] == 2, ans
                ans, _, err = await _tool(c, "reindex", {"paths": ["notes/two-agents.md"]})
                assert not err and ans["files"][0]["indexed"] is True, ans
                ans, _, err = await _tool(c, "status", {})
                assert not err and ans["server"]["mode"] == "daemon"
            holder = json.loads(Path(env["AUTODOC_STORE"] + ".lease").read_text())
            assert holder["socket"] == env["AUTODOC_SOCKET"] and holder["pid"] != os.getpid()
        # the daemon outlives the MCP servers that used it: others share it
        async with await SocketClient.connect_socket(env["AUTODOC_SOCKET"]) as plain:
            assert (await plain.call("server.info"))["pid"] == holder["pid"]
            for i in range(2):
                await plain.call("session.remove", ["kb", f"s-two-{i}"])
    finally:
        await anyio.to_thread.run_sync(_stop_daemon, Path(env["AUTODOC_SOCKET"]))
        (base / "kb" / "notes" / "two-agents.md").unlink(missing_ok=True)


async def test_an_empty_store_is_named_with_how_it_was_chosen(tmp_path):
    """The SDK client passes only HOME and PATH: without AUTODOC_STORE in its `env` the server
    opened the default store, empty, and answered "there is no workspace yet" without naming it."""
    home = tmp_path / "home"
    home.mkdir()
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "autodoc.cli", "mcp", "--in-process"], env={"HOME": str(home)}
    )
    store = home / ".local" / "share" / "autodoc" / "autodoc.db"
    async with Client(params) as c:
        ans, _, err = await _tool(c, "status", {})
        assert not err and ans["server"]["store"] == str(store) and ans["server"]["store_from"] == "default"
        assert str(store) in ans["notes"][0] and "AUTODOC_STORE" in ans["notes"][0]
        ans, _, err = await _tool(c, "search", {"query": "lease"})
        assert err and f"in the store {store} (the default: neither --store nor AUTODOC_STORE" in ans["error"]
        assert '"env": {"AUTODOC_STORE"' in ans["error"] and ans["store"] == str(store)
    given = tmp_path / "given.db"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "autodoc.cli", "mcp", "--in-process"],
        env={"HOME": str(home), "AUTODOC_STORE": str(given)},
    )
    async with Client(params) as c:
        ans, _, err = await _tool(c, "search", {"query": "lease"})
        assert err and f"{given} (from AUTODOC_STORE)" in ans["error"] and "client's config" not in ans["error"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _http_call(url: str, tool: str, arguments: Any) -> dict[str, Any]:
    """One tools/call over streamable HTTP as a plain client posts it (a session, then the call)."""
    import httpx

    def answer(r: httpx.Response) -> dict[str, Any]:
        if r.headers.get("content-type", "").startswith("text/event-stream"):
            return json.loads(next(line[5:] for line in r.text.splitlines() if line.startswith("data:")))
        return r.json()

    hdr = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    async with httpx.AsyncClient(timeout=60) as h:
        init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
        r = await h.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}, headers=hdr)
        assert "result" in answer(r), r.text
        if r.headers.get("mcp-session-id"):
            hdr["mcp-session-id"] = r.headers["mcp-session-id"]
        hdr["mcp-protocol-version"] = "2025-06-18"
        await h.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=hdr)
        call = {"name": tool, "arguments": arguments}
        r = await h.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}, headers=hdr)
        return answer(r)


async def test_streamable_http_on_localhost(store):
    _base, env = store
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "autodoc.cli", "mcp", "--in-process", "--http", f"127.0.0.1:{port}"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        async with Client(f"http://127.0.0.1:{port}/mcp") as c:
            assert [t.name for t in (await c.list_tools()).tools] == [t["name"] for t in json.loads(GOLDEN.read_text())]
            ans, _, err = await _tool(c, "search", {"query": "porter stemming", "limit": 2})
            assert not err and _path(ans["hits"][0]) == "adrs/0009-porter-stemming.md"
        # arguments sent as a JSON string over HTTP too: read as the object, with a note (the SDK said -32602)
        called = await _http_call(f"http://127.0.0.1:{port}/mcp", "read", json.dumps({"ref": f"kb:{ADR12}#L1-2"}))
        assert called["result"]["structuredContent"]["ref"] == f"kb:{ADR12}#L1-2"
        assert "arguments sent as a JSON string" in called["result"]["structuredContent"]["notes"][0]
        refused = await _http_call(f"http://127.0.0.1:{port}/mcp", "read", "ADR 12")
        assert refused["id"] == 2 and refused["error"]["code"] == -32602
        assert refused["error"]["data"] == {"field": "arguments"}
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    bad = subprocess.run(
        [sys.executable, "-m", "autodoc.cli", "mcp", "--http", "0.0.0.0:80"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "loopback" in bad.stderr


async def test_an_agent_saves_its_conversation_and_a_later_search_cites_it(store):
    _base, env = store
    turns = [
        {"role": "user", "text": "Why did the zeppelin hangar migration stall last week?"},
        {"role": "tool", "text": "grep output: 14 matches for hangar"},
        {
            "role": "assistant",
            "text": "The zeppelin hangar migration stalled because the ballast ledger was "
            "locked by a forgotten maintenance job; releasing it unblocked the run.",
        },
    ]
    try:
        async with Client(_server(env, "--in-process")) as c:
            ans, _, err = await _tool(c, "save_session", {"session_id": "s-zeppelin", "messages": turns})
            assert not err, ans
            assert ans["saved"] == 2 and ans["skipped"] == {"tool_result": 1} and ans["session_turns"] == 2
            assert "read 'messages' as 'turns'" in ans["notes"]
            ref = ans["ref"]
            # the whole conversation sent again replaces its turns (matched by position), it does not repeat them
            ans, _, err = await _tool(c, "save_session", {"session_id": "s-zeppelin", "turns": turns})
            assert not err and ans["session_turns"] == 2 and ans["saved"] == 2

            ans, _, err = await _tool(
                c, "search", {"query": "why did the hangar migration stall", "scope": "sessions", "per_document": False}
            )
            assert not err and ans["hits"], ans
            assert all(
                h["origin"]["kind"] == "session"
                and h["origin"]["session_id"] == "s-zeppelin"
                and h["ref"].startswith(ref + "#L")
                for h in ans["hits"]
            )
            answer = next(h for h in ans["hits"] if "ballast ledger" in h["text"])  # the agent's response, cited
            assert answer["origin"]["event_kind"] == "response"
            assert "grep output" not in json.dumps(ans)  # tool output stays out of the index
            _, text, err = await _tool(c, "read", {"ref": answer["ref"]})
            assert not err and "ballast ledger" in text
            ans, _, err = await _tool(c, "search", {"query": "why did the hangar migration stall", "scope": "files"})
            assert not err and ans["hits"] and not any("origin" in h for h in ans["hits"])  # a file's is its ref
            ans, _, err = await _tool(c, "save_session", {"session_id": "s-zeppelin", "turns": [{"role": "robot"}]})
            assert err and "role must be user or assistant" in ans["error"]
            # the saved conversations, listed with a ref that reads the whole session
            await _tool(c, "save_session", {"session_id": "s-airship", "turns": turns[:1]})
            ans, _, err = await _tool(c, "sessions", {"limit": 1})
            assert not err and [x["session_id"] for x in ans["sessions"]] == ["s-airship"]
            assert ans["sessions"][0]["turns"] == 1 and ans["next_cursor"] == "s-airship"
            ans, _, err = await _tool(c, "sessions", {"limit": 1, "cursor": ans["next_cursor"]})
            assert not err and ans["next_cursor"] is None and ans["sessions"][0]["ref"] == ref
            assert ans["sessions"][0]["title"].startswith("Why did the zeppelin")
            _read, text, err = await _tool(c, "read", {"ref": ref})
            assert not err and "ballast ledger" in text
    finally:
        for sid in ("s-zeppelin", "s-airship"):  # the other tests search this store
            if sid in _cli(env, "session", "list", "kb"):
                _cli(env, "session", "remove", "kb", sid)


async def test_resources_page_with_a_cursor_over_every_document(store):
    """resources/list pages (a page is one search.query answer; 200 in the server, 4 here) and
    reaches every document; a cursor it did not give is refused. In-process on the real store."""
    from mcp.shared.exceptions import MCPError

    from autodoc.config import Settings
    from autodoc.mcp.backend import Backend
    from autodoc.mcp.resources import list_resources

    base, env = store
    b = Backend(Settings.from_env(store=env["AUTODOC_STORE"], socket=str(base / "no-daemon.sock")))
    try:
        whole = [str(r.uri) for r in (await list_resources(b)).resources]
        paged, cursor = [], None
        for _ in range(100):
            page = await list_resources(b, cursor, page=4)
            assert len(page.resources) <= 4
            paged += [str(r.uri) for r in page.resources]
            if (cursor := page.next_cursor) is None:
                break
        assert paged == whole and len(whole) > 8 and len(set(whole)) == len(whole)
        with pytest.raises(MCPError):
            await list_resources(b, "not a cursor")
    finally:
        b.close()


def test_every_line_gets_an_answer_and_the_end_of_input_waits_for_them(store):
    """A line that is not an MCP message is answered (-32700 not JSON, -32600 not a request,
    -32602 params not an object), with its id when it had one; the server goes on; and a search
    sent just before stdin closes is answered before the server exits. The SDK alone answered
    none of the bad lines (the client waited for ever) and cancelled the search with
    "Connection closed" (a trial, session 12)."""
    _, env = store
    j = lambda o: (json.dumps(o) + "\n").encode()  # noqa: E731
    frames = [
        j(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "0"},
                },
            }
        ),
        j({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        b"not json\n",
        b"[]\n",
        b'{"jsonrpc":"2.0","id":5}\n',
        b'{"jsonrpc":"1.0","id":6,"method":"tools/list"}\n',
        b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":[1,2]}\n',
        b"\xff\xfe not utf-8\n",
        j({"jsonrpc": "2.0", "id": 8, "method": "tools/list"}),
        b'{"jsonrpc":"2.0","id":3,"result":null,"error":1}\n',  # a bad response of the client's: not answered
        b'{"jsonrpc":"2.0","method":"x/y","params":[1]}\n',  # a bad notification: not answered
        # arguments sent as a JSON string: the object it holds is read, with a note (-32602, empty data, before)
        j(
            {
                "jsonrpc": "2.0",
                "id": 11,
                "method": "tools/call",
                "params": {"name": "read", "arguments": json.dumps({"ref": f"kb:{ADR12}#L1-2"})},
            }
        ),
        j({"jsonrpc": "2.0", "id": 12, "method": "tools/call", "params": {"name": "read", "arguments": "ADR 12"}}),
        j(
            {
                "jsonrpc": "2.0",
                "id": 9,
                "method": "tools/call",
                "params": {"name": "search", "arguments": {"query": "lease recovery", "workspace": "kb"}},
            }
        ),
        j(
            {
                "jsonrpc": "2.0",
                "id": 10,
                "method": "tools/call",
                "params": {"name": "search", "arguments": {"query": "sqlite", "workspace": "kb"}},
            }
        ),
        j({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 10}}),
    ]
    t0 = time.monotonic()
    p = subprocess.run(
        [sys.executable, "-m", "autodoc.cli", "mcp", "--in-process"],
        input=b"".join(frames),
        env=env,
        capture_output=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr.decode()[-500:]
    assert time.monotonic() - t0 < 20, "the end of input waited for a cancelled request"
    got = [m for m in (json.loads(line) for line in p.stdout.splitlines()) if m.get("id") != 10]  # answered or not
    codes = sorted(((m["id"], m["error"]["code"] if "error" in m else None) for m in got), key=str)
    assert codes == sorted(
        [
            (0, None),
            (None, -32700),
            (None, -32600),
            (5, -32600),
            (6, -32600),
            (7, -32602),
            (None, -32700),
            (8, None),
            (9, None),
            (11, None),
            (12, -32602),
        ],
        key=str,
    )  # the order of two writers may vary
    as_string = next(m for m in got if m["id"] == 11)["result"]["structuredContent"]
    assert as_string["ref"] == f"kb:{ADR12}#L1-2" and "arguments sent as a JSON string" in as_string["notes"][0]
    assert next(m for m in got if m["id"] == 12)["error"]["data"] == {"field": "arguments"}
    assert next(m for m in got if m["id"] == 7)["error"]["data"] == {"field": "params"}
    hits = next(m for m in got if m["id"] == 9)["result"]["structuredContent"]["hits"]
    assert hits and _path(hits[0]) == ADR12


async def test_a_search_of_every_workspace_keeps_to_the_budget(tmp_path):
    """The budget is the whole answer's: merging two workspaces' hits counted the hits alone, so
    the names, stages and notes around them went over it (a review, session 12)."""
    env = dict(
        os.environ,
        AUTODOC_STORE=str(tmp_path / "store" / "a.db"),
        AUTODOC_SOCKET=str(tmp_path / "d.sock"),
        XDG_RUNTIME_DIR=str(tmp_path),
    )
    shutil.copytree(CORPUS, tmp_path / "kb", symlinks=True)
    for name, root in (("kb", tmp_path / "kb"), ("runbooks", tmp_path / "kb" / "runbooks")):
        _cli(env, "workspace", "add", name, str(root), "--config", '{"embedding": {"provider": "none"}}')
        _cli(env, "index", name)
    async with Client(_server(env, "--in-process")) as c:
        for budget in (300, 500):
            ans, _, err = await _tool(
                c, "search", {"query": "lease recovery lock stale", "budget_tokens": budget, "limit": 10}
            )
            assert not err and ans["workspaces"] == ["kb", "runbooks"] and ans["hits"]
            assert ans["tokens"] <= budget and ans["truncated"] is True, (budget, ans["tokens"])


@pytest.fixture(scope="module")
def two_workspaces():
    """Workspaces a and b (no model: reading needs none), both with a README.md."""
    base = Path(tempfile.mkdtemp(prefix="ad-mcp2-", dir="/tmp"))
    env = dict(
        os.environ,
        AUTODOC_STORE=str(base / "store" / "a.db"),
        AUTODOC_SOCKET=str(base / "d.sock"),
        XDG_RUNTIME_DIR=str(base),
    )
    for name, files in {
        "a": {"README.md": "# A\n\nline two\nline three\n", "only-a.md": "# Only in A\n\nA's own note.\n"},
        "b": {"README.md": "# B\n\nthe b readme\n"},
    }.items():
        (base / name).mkdir()
        for rel, text in files.items():
            (base / name / rel).write_text(text, encoding="utf-8")
        _cli(env, "workspace", "add", name, str(base / name), "--config", '{"embedding": {"provider": "none"}}')
        _cli(env, "index", "--wait", name)
    _cli(env, "workspace", "configure", "a", '{"description": "Team A: decisions and runbooks"}')
    try:
        yield base, env
    finally:
        _stop_daemon(base / "d.sock")
        shutil.rmtree(base, ignore_errors=True)


async def test_read_never_guesses_a_workspace_and_answers_standard_refs(two_workspaces):
    """`read` took the first workspace that had README.md without a word, ignored a ref whose
    workspace disagreed with `workspace`, and echoed an absolute path back as `b:/abs/path#L1-3`."""
    base, env = two_workspaces
    async with Client(_server(env, "--in-process")) as c:
        ans, _, err = await _tool(c, "read", {"ref": "README.md"})
        assert err and "several workspaces" in ans["error"] and ans["did_you_mean"] == ["a:README.md", "b:README.md"]
        ans, _, err = await _tool(c, "read", {"ref": "only-a.md"})
        assert not err and ans["ref"] == "a:only-a.md#L1-3"
        assert "found in workspace 'a' (the only one of ['a', 'b'] that has it)" in ans["notes"]
        ans, _, err = await _tool(c, "read", {"ref": "a:README.md", "workspace": "b"})
        assert err and "names workspace 'a' and workspace is 'b'" in ans["error"]
        ans, _, err = await _tool(c, "read", {"ref": "a:README.md", "workspace": "A"})  # the same, in another case
        assert not err and ans["workspace"] == "a"
        ans, text, err = await _tool(c, "read", {"ref": f"{base / 'b' / 'README.md'}#L1-2"})
        assert not err and ans["ref"] == "b:README.md#L1-2" and ans["path"] == "README.md"
        assert text.startswith("b:README.md#L1-2 ") and "read the absolute path as b:README.md" in ans["notes"]
        ans, _, err = await _tool(c, "read", {"ref": str(base / "b" / "README.md"), "workspace": "a"})
        assert err and "under the root of workspace 'b', not 'a'" in ans["error"]
        ans, _, err = await _tool(c, "read", {"ref": "/etc/hostname"})
        assert err and "under no workspace's root" in ans["error"] and set(ans["workspaces"]) == {"a", "b"}

        # several refs in one call (a multi-get): each answered as one read answers it
        ans, text, err = await _tool(c, "read", {"refs": ["a:README.md#L3-4", "b:only-a.md", "b:README.md"]})
        assert not err and [d.get("ref") for d in ans["documents"]] == [
            "a:README.md#L3-4",
            "b:only-a.md",
            "b:README.md#L1-3",
        ]
        assert (
            ans["documents"][0]["text"] == "line two\nline three"
            and "not an indexed document" in ans["documents"][1]["error"]
        )
        assert "3\u2502line two" in text and "b:only-a.md: " in text
        ans, _, err = await _tool(c, "read", {"ref": ["a:README.md", "b:README.md"]})
        assert not err and len(ans["documents"]) == 2 and "read the list given as 'ref' as 'refs'" in ans["notes"]
        ans, _, err = await _tool(c, "read", {"refs": ["a:README.md"], "lines": "1-2"})
        assert err and "give each ref its own lines" in ans["error"]

        # one rule for what a model writes loosely: read as meant, and always said in a note
        ans, _, err = await _tool(c, "read", {"ref": "a:README.md", "lines": "4-2"})
        assert not err and (ans["line_start"], ans["line_end"]) == (2, 4)
        assert "lines '4-2' ran backwards: read 2-4" in ans["notes"]
        ans, _, err = await _tool(c, "read", {"ref": "a:README.md", "lines": "0-2"})
        assert (
            not err and ans["line_start"] == 1 and "lines '0-2' starts before line 1: read from line 1" in ans["notes"]
        )
        ans, _, err = await _tool(c, "read", {"ref": "a:README.md", "around": -5, "context": 1})
        assert not err and any(n.startswith("around -5 is outside") for n in ans["notes"])
        ans, _, err = await _tool(c, "list", {"workspace": "a", "limit": 1.7})
        assert not err and len(ans["documents"]) == 2 and "limit 1.7 is not a whole number: used 2" in ans["notes"]
        ans, _, err = await _tool(c, "list", {"workspace": "a", "limit": "1"})
        assert not err and len(ans["documents"]) == 1 and "read limit '1' (a string) as the number 1" in ans["notes"]
        ans, _, err = await _tool(c, "list", {"workspace": "a", "limit": 10_000})
        assert not err and "limit 10000 is outside 1..200: used 200" in ans["notes"]
        ans, _, err = await _tool(c, "list", {"workspace": "a", "limit": "many"})
        assert err and "limit must be a whole number from 1 to 200, not 'many'" in ans["error"]


async def test_tools_declare_their_answers_and_workspaces_say_what_they_hold(two_workspaces):
    """Every tool declares an output schema (the SDK client checks each answer against it: every
    call in these tests is checked), and a workspace's description, set by workspace.configure,
    is shown to an agent choosing among several."""
    _base, env = two_workspaces
    async with Client(_server(env, "--in-process")) as c:
        tools = (await c.list_tools()).tools
        assert all(t.output_schema and t.output_schema["type"] == "object" for t in tools)
        ans, _, err = await _tool(c, "status", {})
        assert not err
        assert {w["workspace"]: w["description"] for w in ans["workspaces"]} == {
            "a": "Team A: decisions and runbooks",
            "b": "",
        }
        ans, _, err = await _tool(c, "list", {})
        assert err and ans["workspaces"] == ["a", "b"] and ans["about"] == {"a": "Team A: decisions and runbooks"}
        for name, args in (("outline", {"ref": "a:README.md"}), ("links", {"ref": "a:README.md"})):
            ans, _, err = await _tool(c, name, args)
            assert not err
            jsonschema.validate(ans, next(t.output_schema for t in tools if t.name == name))


async def test_search_holds_back_what_the_relevance_floor_holds_back_and_says_how_many(store):
    """MCP left out hits under its own 0.05 on top of the server's relevance floor (0.03 on the
    hit's own match): two floors, two rules. Its search now keeps what search.query keeps, in the
    same order, and reports `held_back` as search.query does."""
    _base, env = store
    from autodoc.config import Settings
    from autodoc.service import Service

    svc = Service(Settings.from_env(store=Path(env["AUTODOC_STORE"])), writer=False)
    try:
        async with Client(_server(env, "--in-process")) as c:
            seen_weak = 0
            for q in ("chocolate cake recipe with strawberries", "lease", "how are tags written in notes"):
                ans, text, err = await _tool(c, "search", {"query": q})
                opts = {"answer": "compact", "limit": 5, "per_document": True, "budget_tokens": 32000}
                rpc = svc.search("kb", q, opts)
                shown = [_path(h) for h in ans["hits"]]  # refs: a passage cut to the budget says fewer lines
                kept = [_path(h) for h in rpc["hits"]][:5]
                assert not err and shown == kept[: len(shown)], q
                assert len(shown) == len(kept) or ans["truncated"], q
                assert ans["held_back"] == rpc["held_back"], q
                if rpc["held_back"]:
                    assert f"{rpc['held_back']} held back" in text, text
                seen_weak += sum(h["confidence"] < 0.05 for h in rpc["hits"])
                every, _, err = await _tool(c, "search", {"query": q, "min_confidence": 0})
                assert not err and every["held_back"] == 0 and len(every["hits"]) >= len(ans["hits"])
            assert seen_weak  # a hit the server's floor keeps under 0.05: MCP dropped it
    finally:
        svc.close()


async def test_the_fuzzy_fallback_is_said_in_the_text_the_model_reads(store):
    """search.query reported the fuzzy fallback's `corrections`, but MCP's text did not: an agent
    read passages about 'daemon' for a question about 'Daemn' without being told."""
    _base, env = store
    async with Client(_server(env, "--in-process")) as c:
        ans, text, err = await _tool(c, "search", {"query": "How do we recover a stale lease after the Daemn crashed?"})
        assert not err and ans["hits"]
        assert 'searched "daemon" for "Daemn"' in text, text.split("\n\n")[0]
        assert any('searched "daemon" for "Daemn"' in n for n in ans["notes"])
        _, text, err = await _tool(c, "search", {"query": "recover the lease after a crashed writer"})
        assert not err and "searched" not in text.split("\n\n")[0]
