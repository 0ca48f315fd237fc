"""The stdio wire of a server whose library loads on a thread while the first answers go out.

`autodoc lsp` (pygls) and `autodoc mcp` (the MCP SDK) answer a client's first requests before
their library is imported (issue 37): lsp/fast.py and mcp/fast.py know those answers. What they
share is here, and only the framing (LSP's Content-Length frames, MCP's lines) and which requests
are answered early are theirs:

- the main thread reads stdin; a request answered early either still goes to the library (which
  must see `initialize` to serve the session) or not at all. Every other message goes to the
  library unchanged, in order.
- the library runs on a thread on two pipes; a thread copies its messages to stdout under the lock
  the main thread writes with, dropping its own answer to a request answered early and comparing
  it with the one sent (a difference is logged; the drift tests, tests/e2e/test_lsp_fast.py and
  test_mcp_fast.py, fail on it).

Descriptors 0 and 1 are pointed at /dev/null and stderr while serving, so a library or a child that
prints cannot tear the wire. Stdlib only: importing it must not cost what the early answers save.

Runs on: the main thread, the library's thread and the copying thread (each subclass names them).
"""

from __future__ import annotations

import json
import logging
import os
import select
import threading
from typing import Any


class Frames:
    """Messages off a descriptor, each as (raw bytes to pass on, its JSON body)."""

    def __init__(self, fd: int):
        self.fd = fd
        self.buf = b""

    def take(self) -> tuple[bytes, bytes] | None:
        """One whole message off the front of the buffer; None until one is there."""
        raise NotImplementedError

    def rest(self) -> tuple[bytes, bytes]:
        """What is left in the buffer at the end of input."""
        raise NotImplementedError

    def next(self, stop: threading.Event | None = None) -> tuple[bytes, bytes] | None:
        """The next message; None at the end of input or, once `stop` is set, while none is waiting."""
        while True:
            if (frame := self.take()) is not None:
                return frame
            if stop is not None:
                while not select.select([self.fd], [], [], 0.2)[0]:
                    if stop.is_set():
                        return None
            data = os.read(self.fd, 1 << 16)
            if not data:
                return self.rest() if self.buf else None
            self.buf += data


class Wire:
    """stdin and stdout for a library's server, with the answers that need no library."""

    frames: type[Frames]
    log: logging.Logger
    library = "the library"  # how the log names it
    module = "fast.py"  # the module that is out of date when the answers differ
    threads = ("autodoc-server", "autodoc-out")

    def __init__(self) -> None:
        self.lock = threading.Lock()  # one message at a time on stdout
        self.dropped: dict[str, dict[str, Any]] = {}  # request id (JSON) → the answer sent here for it
        self.initialized_here = False
        self.done = threading.Event()  # the library stopped (the end of its input, or `exit`)

    # what a protocol supplies
    def encode(self, msg: dict[str, Any]) -> bytes:
        raise NotImplementedError

    def answered_here(self, body: bytes) -> bool:
        """Answer what needs no library (through answer()); True when the library must not see it."""
        raise NotImplementedError

    def run_library(self, read_fd: int, write_fd: int) -> None:
        """Import the library and serve on these pipes until its input ends."""
        raise NotImplementedError

    def serve(self) -> int:
        wire_in = os.dup(0)
        self.out = os.fdopen(os.dup(1), "wb")
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(2, 1)
        to_r, to_w = os.pipe()
        from_r, from_w = os.pipe()
        server_name, out_name = self.threads
        server = threading.Thread(target=self._server, args=(to_r, from_w), name=server_name, daemon=True)
        out = threading.Thread(target=self._copy_out, args=(from_r,), name=out_name, daemon=True)
        server.start()
        out.start()
        reader = self.frames(wire_in)
        with os.fdopen(to_w, "wb") as to_server:
            try:
                while (frame := reader.next(self.done)) is not None:
                    raw, body = frame
                    if not self.answered_here(body):
                        to_server.write(raw)
                        to_server.flush()
            except BrokenPipeError:  # the library stopped reading (after `exit`)
                pass
        server.join()  # it answers what it read before the end of its input, then stops
        out.join()
        os.close(wire_in)
        return 0

    def answer(self, rid: Any, result: dict[str, Any], *, passed_on: bool) -> None:
        """Send `result` for request `rid`; when the library sees the request too, its own answer
        is dropped and compared."""
        if passed_on:
            self.dropped[json.dumps(rid)] = result
        self._send(self.encode({"jsonrpc": "2.0", "id": rid, "result": result}))

    def _send(self, data: bytes) -> None:
        with self.lock:
            self.out.write(data)
            self.out.flush()

    def _copy_out(self, fd: int) -> None:
        reader = self.frames(fd)
        while (frame := reader.next()) is not None:
            raw, body = frame
            if self.dropped and self._drop(body):
                continue
            self._send(raw)
        os.close(fd)

    def _drop(self, body: bytes) -> bool:
        """The library's answer to a request answered here: not sent twice; compared with ours."""
        try:
            msg = json.loads(body)
        except ValueError:
            return False
        if not isinstance(msg, dict) or "method" in msg or "id" not in msg:
            return False
        ours = self.dropped.pop(json.dumps(msg["id"]), None)
        if ours is None:
            return False
        if msg.get("result") != ours:
            self.log.warning(
                "%s's answer to initialize differs from the one sent before it ran (%s is out of date): %s, sent %s",
                self.library,
                self.module,
                msg.get("result", msg.get("error")),
                ours,
            )
        return True

    def _server(self, read_fd: int, write_fd: int) -> None:
        try:
            self.run_library(read_fd, write_fd)
        except Exception:  # a broken install or a bug: said where the client's log shows it
            self.log.exception("%s stopped", self.library)
            os._exit(70)  # the main thread may wait on stdin for ever
        finally:
            self.done.set()
