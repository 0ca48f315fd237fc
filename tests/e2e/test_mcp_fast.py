"""`autodoc mcp` answers `initialize` and `tools/list` before the SDK runs (mcp/fast.py, issue 37):
those answers must be the very ones the SDK gives, each request answered once, and everything
else left to the SDK. Raw JSON lines to the real command beside a real daemon, so the test sees
the wire as a client does: which answer arrives, how often, and in what form."""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import CORPORA, NO_MODEL
from helpers.daemon import Daemon

from autodoc.mcp.handshake import HANDSHAKE_VERSIONS, initialize_result

DEADLINE = 60.0


@pytest.fixture(scope="module")
def daemon():
    base = Path(tempfile.mkdtemp(prefix="ad-", dir="/tmp"))
    shutil.copytree(CORPORA / "kb", base / "kb", symlinks=True)
    d = Daemon(base).start()
    try:
        d.call("workspace.add", {"name": "kb", "root": str(base / "kb"), "config": NO_MODEL})
        d.call("workspace.index", {"workspace": "kb"})
        yield d
    finally:
        d.close()
        shutil.rmtree(base, ignore_errors=True)


class Server:
    """`autodoc mcp` over raw newline-delimited JSON."""

    def __init__(self, env: dict[str, str], errlog: Path):
        self.err = open(errlog, "wb")
        self.p = subprocess.Popen(
            [sys.executable, "-m", "autodoc.cli", "mcp"],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.err,
        )
        self.buf = b""
        self.seen: list[dict[str, Any]] = []

    def send(self, msg: dict[str, Any] | bytes) -> None:
        assert self.p.stdin is not None
        self.p.stdin.write(msg if isinstance(msg, bytes) else json.dumps(msg).encode() + b"\n")
        self.p.stdin.flush()

    def answer(self, rid: Any) -> dict[str, Any]:
        assert self.p.stdout is not None
        deadline = time.monotonic() + DEADLINE
        while True:
            for m in self.seen:
                if m.get("id") == rid and "method" not in m:
                    return m
            while b"\n" not in self.buf:
                assert select.select([self.p.stdout], [], [], max(0.0, deadline - time.monotonic()))[0], (
                    f"no answer to {rid}"
                )
                data = os.read(self.p.stdout.fileno(), 1 << 16)
                assert data, f"the server closed stdout before answering {rid}"
                self.buf += data
            line, self.buf = self.buf.split(b"\n", 1)
            self.seen.append(json.loads(line))

    def finish(self) -> list[dict[str, Any]]:
        """Close stdin; every message the server still writes before it exits."""
        assert self.p.stdin is not None and self.p.stdout is not None
        self.p.stdin.close()
        rest = self.p.stdout.read()
        assert self.p.wait(DEADLINE) == 0
        self.err.close()
        return self.seen + [json.loads(x) for x in (self.buf + rest).splitlines() if x.strip()]


def _init(version: Any, rid: int) -> dict[str, Any]:
    params = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}
    return {"jsonrpc": "2.0", "id": rid, "method": "initialize", "params": params}


def test_the_early_answers_are_the_sdks_and_each_request_is_answered_once(daemon, tmp_path):
    errlog = tmp_path / "mcp.err"
    s = Server({**daemon.env, "AUTODOC_LOG": "INFO"}, errlog)
    s.send(b"{not json\n")  # the SDK's: stdio.py's parse error
    bad = _init("2025-06-18", 1)
    del bad["params"]["clientInfo"]
    s.send(bad)  # not a plain offer: the SDK answers it (an error), the fast path does not
    assert "error" in s.answer(1)
    s.send(_init("2025-06-18", 2))
    early_init = s.answer(2)["result"]
    s.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    s.send({"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
    early_tools = s.answer(3)["result"]
    s.send({"jsonrpc": "2.0", "id": 4, "method": "ping"})  # only the SDK answers a ping: it runs now
    assert s.answer(4)["result"] == {}
    s.send({"jsonrpc": "2.0", "id": 5, "method": "tools/list"})
    assert s.answer(5)["result"] == early_tools  # the SDK's own list, equal to the one sent before it ran
    assert [t["name"] for t in early_tools["tools"]][:2] == ["search", "read"]
    offers = [*HANDSHAKE_VERSIONS, "2026-07-28", "1999-01-01"]
    for i, version in enumerate(offers):  # the SDK answers each initialize after the first, and its list
        sent = _init(version, 10 + i)
        s.send(sent)
        assert s.answer(10 + i)["result"] == initialize_result(sent["params"]), version
        s.send({"jsonrpc": "2.0", "id": 40 + i, "method": "tools/list"})
        assert s.answer(40 + i)["result"] == early_tools, version  # the same list in every protocol version
    assert early_init == initialize_result(_init("2025-06-18", 2)["params"])
    s.send({"jsonrpc": "2.0", "id": 30, "method": "tools/call", "params": {"name": "status", "arguments": {}}})
    assert s.answer(30)["result"]["isError"] is False
    every = s.finish()
    answers = [m["id"] for m in every if "method" not in m]
    want = [None, 1, 2, 3, 4, 5, *range(10, 10 + len(offers)), *range(40, 40 + len(offers)), 30]
    assert sorted(answers, key=str) == sorted(want, key=str)
    assert "differs" not in errlog.read_text()


def test_a_client_that_closes_at_once_gets_its_answers(daemon, tmp_path):
    """Everything in one write, then the end of input: the early answers, and the SDK's to the rest."""
    s = Server(daemon.env, tmp_path / "mcp.err")
    s.send(
        b"".join(
            json.dumps(m).encode() + b"\n"
            for m in (
                _init("2025-11-25", 1),
                {"jsonrpc": "2.0", "method": "notifications/initialized"},
                {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                {"jsonrpc": "2.0", "id": 3, "method": "resources/templates/list"},
            )
        )
    )
    every = s.finish()
    by_id = {m["id"]: m for m in every if "method" not in m}
    assert sorted(by_id) == [1, 2, 3] and len(every) == 3
    assert by_id[1]["result"]["protocolVersion"] == "2025-11-25"
    assert by_id[3]["result"]["resourceTemplates"]
