"""`autodoc mcp` on stdio: `initialize` and `tools/list` answered before the SDK is imported.

An agent's client starts the server and waits for these two answers before it shows the tools;
importing the SDK (mcp, mcp_types, pydantic, anyio) takes most of a second here, longer than
everything else the server does before its first tool call (issue 37). Both answers are known
before any of it runs: the handshake is the SDK's (handshake.py), and the tool list is
specs.TOOLS, which the SDK sends as it is. So this module owns the wire (the part it shares with
lsp/fast.py is earlywire.py):

- the main thread reads stdin. The first `initialize` whose params are a plain offer is answered
  here and still passed to the SDK, which must see it to serve the session; its own answer to that
  request is dropped (and compared: a difference is logged, and tests/e2e/test_mcp_fast.py fails
  on it). A `tools/list` without params is answered here until the SDK runs. Every other
  message, and everything once the SDK runs, goes to the SDK unchanged.
- "autodoc-mcp-sdk" imports server.py and runs the SDK's server (its event loop) on two pipes.
- "autodoc-mcp-out" copies the SDK's messages to stdout, one line each, under the lock the main
  thread writes with.

Runs on: the main thread, "autodoc-mcp-sdk" and "autodoc-mcp-out".
"""

from __future__ import annotations

import json
import logging
import os
import threading
from typing import Any

from .. import earlywire
from ..config import Settings
from .handshake import initialize_result, tools_list_result

log = logging.getLogger("autodoc.mcp")


def run(settings: Settings, *, http: str | None = None, spawn: bool = True) -> int:
    """`autodoc mcp`: stdio through the wire here; HTTP straight to the SDK's server."""
    if http is not None:
        from .server import run as run_sdk

        return run_sdk(settings, http=http, spawn=spawn)
    return Wire(settings, spawn).serve()


def _id(msg: dict[str, Any]) -> Any:
    rid = msg.get("id")
    return rid if isinstance(rid, (str, int)) and not isinstance(rid, bool) else None


class Lines(earlywire.Frames):
    """MCP's stdio messages: one JSON line each."""

    def take(self) -> tuple[bytes, bytes] | None:
        end = self.buf.find(b"\n")
        if end < 0:
            return None
        raw, self.buf = self.buf[: end + 1], self.buf[end + 1 :]
        return raw, raw

    def rest(self) -> tuple[bytes, bytes]:  # a last line without its newline
        raw, self.buf = self.buf, b""
        return raw + b"\n", raw


class Wire(earlywire.Wire):
    """stdin and stdout for the SDK's server, with the two answers that need no SDK."""

    frames = Lines
    log = log
    library = "the SDK"
    module = "mcp/fast.py"
    threads = ("autodoc-mcp-sdk", "autodoc-mcp-out")

    def __init__(self, settings: Settings, spawn: bool):
        super().__init__()
        self.settings = settings
        self.spawn = spawn
        self.sdk_ready = threading.Event()

    def encode(self, msg: dict[str, Any]) -> bytes:
        return json.dumps(msg, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"

    def answered_here(self, body: bytes) -> bool:
        """Answer `initialize` (then pass it on too) or an early `tools/list` here; True when
        the SDK must not see the line."""
        if self.sdk_ready.is_set() and self.initialized_here:
            return False
        try:
            msg = json.loads(body)
        except ValueError:
            return False
        if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0" or (rid := _id(msg)) is None:
            return False
        method = msg.get("method")
        if method == "initialize" and not self.initialized_here:
            result = initialize_result(msg.get("params"))
            if result is None:
                return False
            self.initialized_here = True
            self.answer(rid, result, passed_on=True)
            return False  # the SDK's session starts with it
        if method == "tools/list" and self.initialized_here and not self.sdk_ready.is_set():
            if msg.get("params") not in (None, {}):
                return False  # a cursor or _meta: the SDK's
            self.answer(rid, tools_list_result(), passed_on=False)
            return True
        return False

    def run_library(self, read_fd: int, write_fd: int) -> None:
        import anyio

        from .server import serve_stdio

        self.sdk_ready.set()
        with os.fdopen(read_fd, "rb") as r, os.fdopen(write_fd, "wb") as w:
            anyio.run(serve_stdio, self.settings, self.spawn, (r, w))
