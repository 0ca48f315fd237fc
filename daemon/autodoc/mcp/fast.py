"""`autodoc mcp` on stdio: `initialize` and `tools/list` answered before the SDK is imported.

An agent's client starts the server and waits for these two answers before it shows the tools;
importing the SDK (mcp, mcp_types, pydantic, anyio) takes most of a second here, longer than
everything else the server does before its first tool call (issue 37). Both answers are known
before any of it runs: the handshake is the SDK's (handshake.py), and the tool list is
specs.TOOLS, which the SDK sends as it is. So this module owns the wire:

- the main thread reads stdin. The first `initialize` whose params are a plain offer is answered
  here and still passed to the SDK, which must see it to serve the session; its own answer to that
  request is dropped (and compared: a difference is logged, and tests/e2e/test_mcp_fast.py fails
  on it). A `tools/list` without params is answered here until the SDK runs. Every other
  message, and everything once the SDK runs, goes to the SDK unchanged.
- "autodoc-mcp-sdk" imports server.py and runs the SDK's server (its event loop) on two pipes.
- "autodoc-mcp-out" copies the SDK's messages to stdout, one line each, under the lock the main
  thread writes with.

Descriptors 0 and 1 are pointed at /dev/null and stderr while serving (as the SDK's own stdio
transport does), so a library or a child that prints cannot tear the wire.

Runs on: the main thread, "autodoc-mcp-sdk" and "autodoc-mcp-out".
"""

from __future__ import annotations

import json
import logging
import os
import threading
from typing import Any

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


class Wire:
    """stdin and stdout for the SDK's server, with the two answers that need no SDK."""

    def __init__(self, settings: Settings, spawn: bool):
        self.settings = settings
        self.spawn = spawn
        self.lock = threading.Lock()  # one message at a time on stdout
        self.sdk_ready = threading.Event()
        self.dropped: dict[Any, dict[str, Any]] = {}  # request id → the answer sent here for it
        self.initialized_here = False
        self.failed: BaseException | None = None

    def serve(self) -> int:
        wire_in = os.fdopen(os.dup(0), "rb")
        self.out = os.fdopen(os.dup(1), "wb")
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(2, 1)
        to_sdk_r, to_sdk_w = os.pipe()
        from_sdk_r, from_sdk_w = os.pipe()
        sdk = threading.Thread(target=self._sdk, args=(to_sdk_r, from_sdk_w), name="autodoc-mcp-sdk", daemon=True)
        out = threading.Thread(target=self._copy_out, args=(from_sdk_r,), name="autodoc-mcp-out", daemon=True)
        sdk.start()
        out.start()
        with os.fdopen(to_sdk_w, "wb") as to_sdk:
            for line in wire_in:
                if not self._answered_here(line):
                    to_sdk.write(line if line.endswith(b"\n") else line + b"\n")
                    to_sdk.flush()
        sdk.join()  # the SDK answers what it read before the end of input (stdio.py), then stops
        out.join()
        return 70 if self.failed is not None else 0

    def _answered_here(self, line: bytes) -> bool:
        """Answer `initialize` (then pass it on too) or an early `tools/list` here; True when
        the SDK must not see the line."""
        if self.sdk_ready.is_set() and self.initialized_here:
            return False
        try:
            msg = json.loads(line)
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
            self.dropped[rid] = result
            self._send({"jsonrpc": "2.0", "id": rid, "result": result})
            return False  # the SDK's session starts with it
        if method == "tools/list" and self.initialized_here and not self.sdk_ready.is_set():
            if msg.get("params") not in (None, {}):
                return False  # a cursor or _meta: the SDK's
            self._send({"jsonrpc": "2.0", "id": rid, "result": tools_list_result()})
            return True
        return False

    def _send(self, msg: dict[str, Any]) -> None:
        data = json.dumps(msg, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
        with self.lock:
            self.out.write(data)
            self.out.flush()

    def _copy_out(self, fd: int) -> None:
        with os.fdopen(fd, "rb") as sdk_out:
            for line in sdk_out:
                if self.dropped and self._drop(line):
                    continue
                with self.lock:
                    self.out.write(line)
                    self.out.flush()

    def _drop(self, line: bytes) -> bool:
        """The SDK's answer to a request answered here: not sent twice; compared with ours."""
        try:
            msg = json.loads(line)
        except ValueError:
            return False
        rid = _id(msg) if isinstance(msg, dict) and "method" not in msg else None
        if rid is None or rid not in self.dropped:
            return False
        ours = self.dropped.pop(rid)
        if msg.get("result") != ours:
            log.warning(
                "the SDK's answer to initialize differs from the one sent before it ran "
                "(mcp/fast.py is out of date): %s, sent %s",
                msg.get("result", msg.get("error")),
                ours,
            )
        return True

    def _sdk(self, read_fd: int, write_fd: int) -> None:
        try:
            import anyio

            from .server import serve_stdio

            self.sdk_ready.set()
            with os.fdopen(read_fd, "rb") as r, os.fdopen(write_fd, "wb") as w:
                anyio.run(serve_stdio, self.settings, self.spawn, (r, w))
        except Exception as e:  # a broken install or a bug: said where the client's log shows it
            self.failed = e
            log.exception("the MCP server stopped")
            os._exit(70)  # the main thread waits on stdin, which may never end
