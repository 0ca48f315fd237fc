"""`autodoc lsp`: `initialize` answered before pygls is imported.

An editor waits for the answer to `initialize` before it sends anything else, and importing pygls
and lsprotocol (hundreds of attrs classes, each compiled at import) took most of a second here, the
largest part of the server's start (issue 37). The answer is known before any of it runs: the
capabilities pygls builds from the features server.py registers, the position encoding chosen from
the client's offer (pygls's ServerCapabilitiesBuilder). So this module owns the wire:

- the main thread reads stdin (LSP's Content-Length frames). The first `initialize` is answered
  here and still passed to pygls, which must see it to serve the session; pygls's own answer to it
  is dropped and compared (a difference is logged; tests/e2e/test_lsp_fast.py fails on it). Every
  other message goes to pygls unchanged, in order.
- "autodoc-lsp-server" imports server.py and runs pygls on two pipes.
- "autodoc-lsp-out" copies pygls's messages to stdout under the lock the main thread writes with.

Descriptors 0 and 1 are pointed at /dev/null and stderr while serving, so nothing that prints can
tear the wire.

Runs on: the main thread, "autodoc-lsp-server" and "autodoc-lsp-out".
"""

from __future__ import annotations

import json
import logging
import os
import select
import threading
from typing import Any

from .. import __version__
from ..config import Settings

log = logging.getLogger("autodoc.lsp")

ENCODINGS = ("utf-8", "utf-16", "utf-32")  # pygls's _SUPPORTED_ENCODINGS
# what pygls answers for server.py's features (textDocument/didOpen, didSave, completion after `[`
# and `#`, hover, definition, references, workspace/symbol) with incremental sync
TEXT_SYNC = {"openClose": True, "change": 2, "save": True}
PROVIDERS = {
    "completionProvider": {"triggerCharacters": ["[", "#"]},
    "hoverProvider": True,
    "definitionProvider": True,
    "referencesProvider": True,
    "workspaceSymbolProvider": {"resolveProvider": False},
    "executeCommandProvider": {"commands": []},
    "workspace": {"workspaceFolders": {"supported": True, "changeNotifications": True}, "fileOperations": {}},
}


def initialize_result(params: Any) -> dict[str, Any] | None:
    """pygls's answer to `initialize` with these params (pure); None when they are not a plain
    request (pygls answers those itself)."""
    if not isinstance(params, dict) or not isinstance(caps := params.get("capabilities"), dict):
        return None
    general = caps.get("general")
    offered = general.get("positionEncodings") if isinstance(general, dict) else None
    if offered is not None and not isinstance(offered, list):
        return None
    encoding = next((e for e in offered or () if e in ENCODINGS), "utf-16")
    sync = dict(TEXT_SYNC)
    doc = caps.get("textDocument")
    client_sync = doc.get("synchronization") if isinstance(doc, dict) else None
    if isinstance(client_sync, dict):  # pygls sends false for what the client names and the server lacks
        for key in ("willSave", "willSaveWaitUntil"):
            if client_sync.get(key) is not None:
                sync[key] = False
    sync = {k: sync[k] for k in ("openClose", "change", "willSave", "willSaveWaitUntil", "save") if k in sync}
    return {
        "capabilities": {"positionEncoding": encoding, "textDocumentSync": sync, **PROVIDERS},
        "serverInfo": {"name": "autodoc", "version": __version__},
    }


class FrameReader:
    """Content-Length frames off a descriptor: (raw bytes of the frame, its body)."""

    def __init__(self, fd: int):
        self.fd = fd
        self.buf = b""

    def next(self, stop: threading.Event | None = None) -> tuple[bytes, bytes] | None:
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end >= 0:
                length = None
                for line in self.buf[:end].split(b"\r\n"):
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length" and value.strip().isdigit():
                        length = int(value)
                if length is None:  # not a frame we can measure: pass the bytes on as they are
                    raw, self.buf = self.buf[: end + 4], self.buf[end + 4 :]
                    return raw, b""
                if len(self.buf) >= end + 4 + length:
                    raw = self.buf[: end + 4 + length]
                    self.buf = self.buf[end + 4 + length :]
                    return raw, raw[end + 4 :]
            if stop is not None:
                while not select.select([self.fd], [], [], 0.2)[0]:
                    if stop.is_set():
                        return None
            data = os.read(self.fd, 1 << 16)
            if not data:
                return (self.buf, b"") if self.buf else None
            self.buf += data


def _frame(msg: dict[str, Any]) -> bytes:
    body = json.dumps(msg, ensure_ascii=False, separators=(",", ":")).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def serve(settings: Settings) -> int:
    return Wire(settings).serve()


class Wire:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.lock = threading.Lock()
        self.dropped: dict[Any, dict[str, Any]] = {}
        self.initialized_here = False
        self.done = threading.Event()  # pygls stopped (`exit`, or the end of its input)

    def serve(self) -> int:
        wire_in = os.dup(0)
        self.out = os.fdopen(os.dup(1), "wb")
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(2, 1)
        to_r, to_w = os.pipe()
        from_r, from_w = os.pipe()
        out = threading.Thread(target=self._copy_out, args=(from_r,), name="autodoc-lsp-out", daemon=True)
        server = threading.Thread(target=self._server, args=(to_r, from_w), name="autodoc-lsp-server", daemon=True)
        out.start()
        server.start()
        reader = FrameReader(wire_in)
        with os.fdopen(to_w, "wb") as to_server:
            try:
                while (frame := reader.next(self.done)) is not None:
                    raw, body = frame
                    self._maybe_answer(body)
                    to_server.write(raw)
                    to_server.flush()
            except BrokenPipeError:  # pygls stopped reading (after `exit`)
                pass
        server.join()
        out.join()
        os.close(wire_in)
        return 0

    def _maybe_answer(self, body: bytes) -> None:
        if self.initialized_here or b'"initialize"' not in body:
            return
        try:
            msg = json.loads(body)
        except ValueError:
            return
        if not isinstance(msg, dict) or msg.get("method") != "initialize" or "id" not in msg:
            return
        result = initialize_result(msg.get("params"))
        if result is None:
            return
        self.initialized_here = True
        self.dropped[json.dumps(msg["id"])] = result
        self._send(_frame({"jsonrpc": "2.0", "id": msg["id"], "result": result}))

    def _send(self, data: bytes) -> None:
        with self.lock:
            self.out.write(data)
            self.out.flush()

    def _copy_out(self, fd: int) -> None:
        reader = FrameReader(fd)
        while (frame := reader.next()) is not None:
            raw, body = frame
            if self.dropped and self._drop(body):
                continue
            self._send(raw)

    def _drop(self, body: bytes) -> bool:
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
            log.warning(
                "pygls's answer to initialize differs from the one sent before it ran "
                "(lsp/fast.py is out of date): %s, sent %s",
                msg.get("result", msg.get("error")),
                ours,
            )
        return True

    def _server(self, read_fd: int, write_fd: int) -> None:
        try:
            from .server import serve as serve_pygls

            with os.fdopen(read_fd, "rb") as r, os.fdopen(write_fd, "wb") as w:
                serve_pygls(self.settings, (r, w))
        except Exception:
            log.exception("the language server stopped")
            os._exit(70)  # the main thread may wait on stdin for ever
        finally:
            self.done.set()
