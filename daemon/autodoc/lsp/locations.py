"""Where an LSP answer points: whole lines of a workspace's files, or of read-only copies of their stored text.

A location spans whole lines, from the first line's start to the last line's end (not to the
start of the line after it, which LSP allows too: Neovim lists a range by `end.line + 1`, so a
hit on lines 17-19 showed as 17-20), in the client's units (UTF-16 or UTF-8). Each file is read
once per answer, from the editor's buffer when it has the file open, else from disk. A document
whose workspace root is not a folder on this machine is located in a read-only copy of its
stored text (copies.py), read from the store once per answer.

Runs on: the language server's handler threads (one `FileLines` per answer, never shared).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import unquote

from lsprotocol import types as T
from pygls.workspace import Workspace

from ..errors import DocumentNotFound, GenerationGone
from .copies import Copies

log = logging.getLogger("autodoc.lsp")


def path_uri(path: Path) -> str:
    return path.resolve().as_uri()


class Server(Protocol):
    """What a FileLines reads of the language server (server.py's AutodocLanguageServer)."""

    @property
    def workspace(self) -> Workspace: ...

    @property
    def copies(self) -> Copies: ...

    def ws_call(self, method: str, params: list[Any]) -> Any: ...


class FileLines:
    """Ranges over whole lines of workspace files, for one answer: each file read once, from the
    editor's buffer when it has the file open, else from disk."""

    def __init__(self, ls: Server):
        self.ls = ls
        self._read: dict[Path, list[str]] = {}
        self._copied: dict[tuple[str, str], Path | None] = {}  # (workspace, path) → its copy, once an answer

    def lines(self, path: Path) -> list[str]:
        if path not in self._read:
            doc = self.ls.workspace.text_documents.get(unquote(path_uri(path)))  # pygls keys them unquoted
            if doc is not None:
                self._read[path] = list(doc.lines)
            else:
                try:
                    self._read[path] = path.read_text(encoding="utf-8", errors="replace").split("\n")
                except OSError:
                    self._read[path] = []
        return self._read[path]

    def range(self, path: Path, start: int, end: int) -> T.Range:
        """1-based inclusive lines → the LSP range from the first one's start to the last one's end,
        in the client's units (a line the file no longer has ends at its start)."""
        first = max(start, 1) - 1
        last = max(end, start, 1) - 1
        lines = self.lines(path)
        end_pos = T.Position(line=last, character=0)
        if last < len(lines):
            text = lines[last].rstrip("\r\n")
            codec = self.ls.workspace.position_codec
            end_pos = codec.position_to_client_units(lines, T.Position(line=last, character=len(text)))
        return T.Range(start=T.Position(line=first, character=0), end=end_pos)

    def location(self, path: Path, start: int, end: int) -> T.Location:
        return T.Location(uri=path_uri(path), range=self.range(path, start, end))

    def document(
        self, name: str, root: Path, rel: str, start: int, end: int, generation: int | None = None
    ) -> T.Location | None:
        """Lines of workspace name's document rel: in its file when its root is a folder on this
        machine, else in a read-only copy of its stored text (at `generation`, a hit's, when the
        index still keeps it); None when the store no longer has the document."""
        if root.is_dir():
            return self.location(root / rel, start, end)
        key = (name, rel)
        if key not in self._copied:
            self._copied[key] = self._copy(name, rel, generation)
        path = self._copied[key]
        return None if path is None else self.location(path, start, end)

    def _copy(self, name: str, rel: str, generation: int | None) -> Path | None:
        ls = self.ls
        opts = {} if generation is None else {"generation": generation}
        try:
            try:
                text = ls.ws_call("document.read", [name, rel, opts])["text"]
            except GenerationGone:  # written again since the search: the lines are the newer text's
                text = ls.ws_call("document.read", [name, rel])["text"]
        except DocumentNotFound:
            return None
        try:
            return ls.copies.write(name, rel, text)
        except OSError as e:
            log.warning("no copy of %s:%s could be written: %s", name, rel, e)
            return None
