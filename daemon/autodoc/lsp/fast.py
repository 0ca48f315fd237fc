"""`autodoc lsp`: `initialize` answered before pygls is imported.

An editor waits for the answer to `initialize` before it sends anything else, and importing pygls
and lsprotocol (hundreds of attrs classes, each compiled at import) took most of a second here, the
largest part of the server's start (issue 37). The answer is known before any of it runs: the
capabilities pygls builds from the features server.py registers, the position encoding chosen from
the client's offer (pygls's ServerCapabilitiesBuilder). So this module owns the wire (the part it
shares with mcp/fast.py is earlywire.py):

- the main thread reads stdin (LSP's Content-Length frames). The first `initialize` is answered
  here and still passed to pygls, which must see it to serve the session; pygls's own answer to it
  is dropped and compared (a difference is logged; tests/e2e/test_lsp_fast.py fails on it). Every
  other message goes to pygls unchanged, in order.
- "autodoc-lsp-server" imports server.py and runs pygls on two pipes.
- "autodoc-lsp-out" copies pygls's messages to stdout under the lock the main thread writes with.

Runs on: the main thread, "autodoc-lsp-server" and "autodoc-lsp-out".
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

from .. import __version__, earlywire
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


class FrameReader(earlywire.Frames):
    """LSP's Content-Length frames."""

    def take(self) -> tuple[bytes, bytes] | None:
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            return None
        length = None
        for line in self.buf[:end].split(b"\r\n"):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length" and value.strip().isdigit():
                length = int(value)
        if length is None:  # not a frame we can measure: pass the bytes on as they are
            raw, self.buf = self.buf[: end + 4], self.buf[end + 4 :]
            return raw, b""
        if len(self.buf) < end + 4 + length:
            return None
        raw, self.buf = self.buf[: end + 4 + length], self.buf[end + 4 + length :]
        return raw, raw[end + 4 :]

    def rest(self) -> tuple[bytes, bytes]:
        raw, self.buf = self.buf, b""
        return raw, b""


def serve(settings: Settings) -> int:
    return Wire(settings).serve()


class Wire(earlywire.Wire):
    frames = FrameReader
    log = log
    library = "pygls"
    module = "lsp/fast.py"
    threads = ("autodoc-lsp-server", "autodoc-lsp-out")

    def __init__(self, settings: Settings):
        super().__init__()
        self.settings = settings

    def encode(self, msg: dict[str, Any]) -> bytes:
        body = json.dumps(msg, ensure_ascii=False, separators=(",", ":")).encode()
        return b"Content-Length: %d\r\n\r\n" % len(body) + body

    def answered_here(self, body: bytes) -> bool:
        """The first plain `initialize`, answered here and passed on: pygls must see it too."""
        if self.initialized_here or b'"initialize"' not in body:
            return False
        try:
            msg = json.loads(body)
        except ValueError:
            return False
        if not isinstance(msg, dict) or msg.get("method") != "initialize" or "id" not in msg:
            return False
        result = initialize_result(msg.get("params"))
        if result is not None:
            self.initialized_here = True
            self.answer(msg["id"], result, passed_on=True)
        return False

    def run_library(self, read_fd: int, write_fd: int) -> None:
        from .server import serve as serve_pygls

        with os.fdopen(read_fd, "rb") as r, os.fdopen(write_fd, "wb") as w:
            serve_pygls(self.settings, (r, w))
