"""`autodoc lsp` answers `initialize` before pygls is imported (lsp/fast.py, issue 37): the answer
must be the one pygls builds for the server's features and the client's offer, sent once, and
the session after it pygls's. The capabilities are compared with pygls's own for several clients'
offers (Neovim 0.11's among them); the real command is driven over its stdio as an editor drives it."""

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

from autodoc.config import Settings
from autodoc.lsp.fast import initialize_result

NVIM_CAPS = {  # the parts of Neovim 0.11's offer that pygls reads
    "general": {"positionEncodings": ["utf-8", "utf-16", "utf-32"]},
    "textDocument": {"synchronization": {"didSave": True, "willSave": True, "willSaveWaitUntil": True}},
    "workspace": {"workspaceFolders": True, "symbol": {"dynamicRegistration": False}},
    "window": {"workDoneProgress": True},
}
OFFERS = [
    {},
    NVIM_CAPS,
    {"general": {"positionEncodings": ["utf-32"]}},
    {"general": {"positionEncodings": ["latin-1"]}},
    {"textDocument": {"synchronization": {"willSave": False}}},
    {"notebookDocument": {"synchronization": {}}, "workspace": {"fileOperations": {"didCreate": True}}},
]


def _pygls_answer(caps: dict[str, Any], tmp: Path) -> dict[str, Any]:
    from lsprotocol import types as T

    from autodoc.lsp.server import build_server

    server = build_server(Settings.from_env(store=tmp / "unused.db"))
    proto = server.protocol
    params = proto._converter.structure({"processId": None, "rootUri": None, "capabilities": caps}, T.InitializeParams)
    steps = proto.lsp_initialize(params)
    try:
        while True:
            next(steps)
    except StopIteration as done:
        return json.loads(json.dumps(proto._converter.unstructure(done.value)))


@pytest.mark.parametrize("caps", OFFERS, ids=["none", "nvim", "utf-32", "unknown-encoding", "willsave-false", "more"])
def test_the_early_answer_is_pyglss(caps, tmp_path):
    assert initialize_result({"processId": None, "capabilities": caps}) == _pygls_answer(caps, tmp_path)


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


def _frame(msg: dict[str, Any]) -> bytes:
    body = json.dumps(msg).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def _messages(data: bytes) -> list[dict[str, Any]]:
    out = []
    while (end := data.find(b"\r\n\r\n")) >= 0:
        n = next(int(h.split(b":")[1]) for h in data[:end].split(b"\r\n") if h.lower().startswith(b"content-length"))
        out.append(json.loads(data[end + 4 : end + 4 + n]))
        data = data[end + 4 + n :]
    return out


def test_an_editor_session_over_stdio(daemon, tmp_path):
    err = tmp_path / "lsp.err"
    with open(err, "wb") as e:
        p = subprocess.Popen(
            [sys.executable, "-m", "autodoc.cli", "lsp"],
            env={**daemon.env, "AUTODOC_LOG": "INFO"},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=e,
        )
    assert p.stdin is not None and p.stdout is not None
    kb = daemon.base / "kb"
    init = {"processId": os.getpid(), "rootUri": kb.as_uri(), "capabilities": NVIM_CAPS}
    p.stdin.write(_frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}))
    p.stdin.flush()
    got = b""
    deadline = time.monotonic() + 60
    while not _messages(got):
        assert select.select([p.stdout], [], [], max(0.0, deadline - time.monotonic()))[0], "no answer to initialize"
        got += os.read(p.stdout.fileno(), 1 << 16)
    first = _messages(got)[0]
    assert first["id"] == 1 and first["result"] == initialize_result(init)
    assert first["result"]["capabilities"]["positionEncoding"] == "utf-8"
    p.stdin.write(_frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
    p.stdin.write(_frame({"jsonrpc": "2.0", "id": 2, "method": "workspace/symbol", "params": {"query": "lease"}}))
    p.stdin.flush()
    while not any(m.get("id") == 2 for m in _messages(got)):  # pygls cancels what runs when shutdown comes
        assert select.select([p.stdout], [], [], max(0.0, deadline - time.monotonic()))[0], "no symbols"
        got += os.read(p.stdout.fileno(), 1 << 16)
    p.stdin.write(_frame({"jsonrpc": "2.0", "id": 3, "method": "shutdown"}))
    p.stdin.write(_frame({"jsonrpc": "2.0", "method": "exit"}))
    p.stdin.flush()
    rest, _ = p.communicate(timeout=60)
    assert p.returncode == 0
    answers = [m for m in _messages(got + rest) if "id" in m and "method" not in m]
    assert [m["id"] for m in answers] == [1, 2, 3]  # initialize once: pygls's own answer was dropped
    symbols = answers[1]["result"]
    assert symbols and all(s["location"]["uri"].startswith(kb.as_uri()) for s in symbols)
    assert "differs" not in err.read_text()


def test_the_server_ends_when_the_editor_closes_its_stdin(daemon):
    p = subprocess.Popen(
        [sys.executable, "-m", "autodoc.cli", "lsp"],
        env=daemon.env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    init = {"processId": None, "rootUri": None, "capabilities": {}}
    out, _ = p.communicate(_frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}), timeout=60)
    assert [m["id"] for m in _messages(out)] == [1]
