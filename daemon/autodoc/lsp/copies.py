"""Read-only copies of stored documents whose files are not on this machine, for the editor to open.

A store read from another machine (a team's PostgreSQL database, indexed by a daemon where the
folders are) names files by the indexer's paths: a location there opens nothing here. Such a
document's stored text (`document.read`, at the generation the hit was found in, so the hit's
lines are the copy's lines) is written once under the user's cache, one folder per store and
workspace, made read-only: an edit there would reach no index. A copy is rewritten only when the
stored text changed. A copy is recognised again (`locate`), so links, hover and references work
from inside it, each target opened as a copy too.

Runs on: the language server's handler threads (each copy written to a temporary name, then
renamed over the old one: a reader never sees half a copy).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from ..config import Settings


def copies_dir(settings: Settings) -> Path:
    """$XDG_CACHE_HOME/autodoc/lsp/<store>: the copies of one store's documents (its name made
    from the redacted connection string or the store file's path, never a password)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    digest = hashlib.sha256(settings.store_shown.encode()).hexdigest()[:16]
    return Path(base) / "autodoc" / "lsp" / digest


class Copies:
    def __init__(self, base: Path):
        self.base = base

    def path(self, workspace: str, rel: str) -> Path | None:
        """Where the copy of workspace/rel goes; None for a path that would leave its folder."""
        folder = self.base / workspace
        out = folder / rel
        if ".." in Path(rel).parts or not out.resolve().is_relative_to(folder.resolve()):
            return None
        return out

    def write(self, workspace: str, rel: str, text: str) -> Path | None:
        """The copy of workspace/rel holding `text` (written if it did not already), read-only."""
        out = self.path(workspace, rel)
        if out is None:
            return None
        data = text.encode("utf-8", "surrogateescape")
        try:
            if out.read_bytes() == data:
                return out
        except OSError:
            pass
        out.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=".copy-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.chmod(tmp, 0o444)
            os.replace(tmp, out)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return out

    def locate(self, path: Path) -> tuple[str, str] | None:
        """(workspace, workspace-relative path) of a copy, else None."""
        try:
            rel = path.relative_to(self.base.resolve())
        except ValueError:
            return None
        parts = rel.parts
        return (parts[0], Path(*parts[1:]).as_posix()) if len(parts) > 1 else None
