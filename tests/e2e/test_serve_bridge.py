"""`autodoc serve` on stdio while another daemon holds the store: it becomes a
bridge to that daemon's socket. A real daemon process, two real stdio
`autodoc serve` processes beside it (one per framing), and the agent-facing
answers through them — did_you_mean from the daemon's own handlers, the
start-up status while a real model fills vectors — each checked against
schemas/."""

from __future__ import annotations

import json
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from helpers.daemon import Daemon, isolated_env

from autodoc.rpc import schemas
from autodoc.rpc.framing import CONTENT_LENGTH, NEWLINE, FrameDecoder, encode_message
from autodoc.rpc.transport import socket_answers
from autodoc_client import call_socket

DEADLINE = 30
CORPUS = Path(__file__).parents[1] / "corpora" / "kb"
NO_MODEL = {"embedding": {"provider": "none"}}


CHECKED_ENV = {"AUTODOC_CHECK_RESULTS": "1"}  # every answer checked against schemas/ by the daemon


def env() -> dict[str, str]:
    return isolated_env(extra=CHECKED_ENV)


def serve(store: Path, *args: str, **kw: Any) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "autodoc.cli", "--store", str(store), "serve", *args], env=env(), **kw
    )


class StdioClient:
    """A stdio `autodoc serve` process, driven like an agent's MCP host drives its server."""

    def __init__(self, store: Path, framing: str):
        self.framing = framing
        self.proc = serve(store, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.inbox: queue.Queue = queue.Queue()
        self.next_id = 0
        self.notes: list[dict] = []
        self._stderr: str | None = None
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        decoder = FrameDecoder(framing=self.framing)  # the daemon answers in the framing the client used
        assert self.proc.stdout is not None
        while chunk := self.proc.stdout.read1(65536):
            for frame in decoder.feed(chunk):
                self.inbox.put(json.loads(frame.payload))
        self.inbox.put(None)

    def send(self, msg: dict) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(encode_message(msg, self.framing))
        self.proc.stdin.flush()

    def request(self, method: str, params: Any = None) -> dict:
        self.next_id += 1
        self.send(
            {"jsonrpc": "2.0", "id": self.next_id, "method": method, **({} if params is None else {"params": params})}
        )
        deadline = time.monotonic() + DEADLINE
        while True:
            msg = self.inbox.get(timeout=max(0.1, deadline - time.monotonic()))
            assert msg is not None, f"the bridge closed stdout: {self.stderr()}"
            if msg.get("id") == self.next_id:
                return msg
            self.notes.append(msg)

    def call(self, method: str, params: Any = None) -> Any:
        msg = self.request(method, params)
        assert "error" not in msg, msg
        assert schemas.result_errors(method, msg["result"]) == [], (method, msg["result"])
        return msg["result"]

    def error(self, method: str, params: Any = None) -> dict:
        msg = self.request(method, params)
        assert schemas.error_errors(msg["error"]) == [], msg
        return msg["error"]

    def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        return self.proc.wait(DEADLINE)

    def stderr(self) -> str:
        if self.proc.poll() is None:
            return "(still running)"
        assert self.proc.stderr is not None
        if self._stderr is None:
            self._stderr = self.proc.stderr.read().decode(errors="replace")
        return self._stderr


@pytest.fixture(scope="module")
def daemon():
    short_tmp = Path(tempfile.mkdtemp(prefix="ad-br-", dir="/tmp"))  # a socket path must stay short
    try:
        yield from _daemon(short_tmp)
    finally:
        shutil.rmtree(short_tmp, ignore_errors=True)


def _daemon(short_tmp: Path):
    store, sock, log = short_tmp / "store" / "autodoc.db", short_tmp / "run" / "d.sock", short_tmp / "daemon.log"
    kb = short_tmp / "kb"
    shutil.copytree(CORPUS, kb, symlinks=True)
    d = Daemon(short_tmp, store=store, sock=sock, log=log, env=CHECKED_ENV, timeout=DEADLINE).start()
    try:
        call_socket(sock, "workspace.add", ["kb", str(kb), NO_MODEL], timeout=DEADLINE)
        call_socket(sock, "workspace.reindex", ["kb"], timeout=DEADLINE)
        yield {"proc": d.proc, "store": store, "sock": sock, "base": short_tmp, "log": log}
    finally:
        was_running = d.running()
        code = d.stop()  # SIGTERM; killed, and an AssertionError with the log, past the deadline
        assert not was_running or code == 0, d.log_text()


def test_two_stdio_servers_share_the_daemon_that_holds_the_store(daemon):
    a = StdioClient(daemon["store"], NEWLINE)
    b = StdioClient(daemon["store"], CONTENT_LENGTH)
    try:
        for c in (a, b):
            info = c.call("server.info")
            assert info["pid"] == daemon["proc"].pid and info["socket"] == str(daemon["sock"])
        hits = a.call("search.query", ["kb", "lease recovery", {"limit": 3}])["hits"]
        assert hits and hits[0]["path"].endswith("lease-recovery.md")
        outline = b.call("document.outline", ["kb", hits[0]["path"]])
        assert outline["headings"] and outline["path"] == hits[0]["path"]
        # notifications pass through too: a's subscription sees b's change
        a.call("changes.subscribe", [])
        scratch = daemon["base"] / "scratch"
        scratch.mkdir()
        b.call("workspace.add", ["scratch", str(scratch), NO_MODEL])
        deadline = time.monotonic() + DEADLINE
        while not any(n.get("method") == "workspace.changed" for n in a.notes):
            assert time.monotonic() < deadline, a.notes
            a.call("workspace.list")  # drains what arrived meanwhile into a.notes
        # did_you_mean from the daemon's own handler (changes.subscribe) and from the service
        err = b.error("changes.subscribe", ["KB"])
        assert err["code"] == -32001 and err["data"]["did_you_mean"] == ["kb"]
        err = a.error("document.read", ["kb", "ADR-12"])
        assert err["code"] == -32003 and err["data"]["did_you_mean"][0] == "adrs/0012-lease-recovery.md"
        # one client leaving does not disturb the other or the daemon
        assert a.close() == 0
        said = a.stderr().splitlines()
        assert len(said) == 1 and "bridging stdio to its socket" in said[0] and str(daemon["sock"]) in said[0]
        assert b.call("workspace.status", ["kb"])["files"]["indexed"] > 0
        assert b.close() == 0
        assert daemon["proc"].poll() is None and socket_answers(daemon["sock"])
    finally:
        for c in (a, b):
            if c.proc.poll() is None:
                c.proc.kill()
                c.proc.wait()


def test_a_second_socket_daemon_still_refuses_the_store(daemon):
    other = serve(
        daemon["store"],
        "--socket",
        str(daemon["base"] / "run" / "other.sock"),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = other.communicate(timeout=DEADLINE)
    assert other.returncode == 1 and out == b""
    assert f"pid {daemon['proc'].pid}" in err.decode()


def test_status_through_the_bridge_says_what_is_coming_while_vectors_fill(daemon):
    notes = daemon["base"] / "notes"
    notes.mkdir()
    # Twenty batches of the embed queue: on a fast machine four batches of these short notes
    # were embedded between two polls, so no poll saw a measured rate with chunks still waiting.
    for i in range(320):
        (notes / f"n{i:03d}.md").write_text(f"# Note {i}\n\nA short note number {i} about ferries and harbours.\n")
    c = StdioClient(daemon["store"], NEWLINE)
    try:
        c.call("workspace.add", ["notes", str(notes)])  # the bundled model
        c.call("workspace.index", ["notes"])
        seen: list[dict] = []
        deadline = time.monotonic() + 120
        while True:
            semantic = c.call("server.info")["semantic"]
            status = c.call("workspace.status", ["notes"])["embedding"]
            seen.append({**semantic, "status": status})
            if semantic["state"] == "ready":
                break
            assert semantic["state"] in ("unloaded", "loading", "filling"), semantic
            assert semantic["pending"] >= status["pending"] and semantic["pending"] > 0  # a batch may land between
            if status["rate"] is not None:
                assert status["eta_seconds"] == pytest.approx(status["pending"] / status["rate"], abs=0.1)
            assert time.monotonic() < deadline, seen[-3:]
            time.sleep(0.02)
        assert seen[0]["state"] != "ready"  # 320 chunks were waiting when indexing answered
        assert any(s["state"] == "filling" and s["eta_seconds"] and s["eta_seconds"] > 0 for s in seen), seen
        final = seen[-1]
        assert final["pending"] == 0 and final["eta_seconds"] == 0 and final["status"]["model_state"] == "ready"
        assert c.close() == 0
    finally:
        if c.proc.poll() is None:
            c.proc.kill()
            c.proc.wait()
