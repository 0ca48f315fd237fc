"""Ingest, stage 0: a workspace folder → the Markdown files to index.

Input: a workspace root. Output: ScanEntry per Markdown file (sorted by
relpath), with skip set when the file must not be read (a symlink leaving
the workspace, a dangling link, a file over the size limit); read_document
turns one entry into raw bytes or raises SkipFile. is_markdown_path,
is_ignored and entry_for answer the same questions for a single path, for a
file watcher. Hidden files and folders, .git, node_modules, the root's
_schema/ folder (where the frontmatter schema lives) and whatever .gitignore
files (root and nested) ignore are never yielded.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import Iterator

import pathspec

MARKDOWN_SUFFIXES = (".md", ".markdown")
SKIP_DIRS = frozenset({".git", "node_modules"})
SCHEMA_DIR = "_schema"  # the workspace's schema folder (autodoc.fmschema): configuration, not documents
OUTSIDE = "symlink points outside the workspace"
DANGLING = "symlink target does not exist or loops"
BINARY_PROBE = 8192


class SkipFile(Exception):
    """A file that is present but must not be indexed; reason says why."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class ScanEntry:
    relpath: str  # forward slashes, relative to the workspace root
    path: Path
    size: int
    mtime_ns: int
    skip: str | None = None


def is_markdown_path(relpath: str) -> bool:
    return PurePosixPath(relpath.replace("\\", "/")).suffix.lower() in MARKDOWN_SUFFIXES


def scan_workspace(root: Path, *, max_bytes: int) -> Iterator[ScanEntry]:
    """Every Markdown file under root that is not ignored, sorted by relpath."""
    root = Path(root)
    real_root = root.resolve()
    found: list[ScanEntry] = []
    _walk(root, real_root, "", _specs_in(root, "", ()), max_bytes, found)
    found.sort(key=lambda e: e.relpath)
    yield from found


_Specs = tuple[tuple[str, pathspec.PathSpec], ...]


def _walk(d: Path, real_root: Path, rel: str, specs: _Specs, max_bytes: int, out: list[ScanEntry]) -> None:
    try:
        items = sorted(os.scandir(d), key=lambda e: e.name)
    except OSError:
        return  # unreadable folder: nothing we can index in it
    for it in items:
        if it.name.startswith(".") or it.name in SKIP_DIRS or (not rel and it.name == SCHEMA_DIR):
            continue
        r = f"{rel}/{it.name}" if rel else it.name
        if it.is_symlink():
            # Never descend into linked folders: outside ones leave the
            # workspace, inside ones are scanned under their real path anyway
            # (and could loop).
            if is_markdown_path(it.name) and not _ignored(specs, r, False):
                out.append(_entry(Path(it.path), r, real_root, max_bytes))
        elif it.is_dir(follow_symlinks=False):
            if not _ignored(specs, r, True):
                _walk(Path(it.path), real_root, r, _specs_in(Path(it.path), r, specs), max_bytes, out)
        elif is_markdown_path(it.name) and not _ignored(specs, r, False):
            out.append(_entry(Path(it.path), r, real_root, max_bytes))


def _entry(path: Path, rel: str, real_root: Path, max_bytes: int) -> ScanEntry:
    if path.is_symlink():
        st = path.lstat()
        try:
            target = path.resolve()
        except (OSError, RuntimeError):  # a symlink loop
            return ScanEntry(rel, path, st.st_size, st.st_mtime_ns, DANGLING)
        if not target.is_relative_to(real_root):
            return ScanEntry(rel, path, st.st_size, st.st_mtime_ns, OUTSIDE)
        if not target.is_file():
            return ScanEntry(rel, path, st.st_size, st.st_mtime_ns, DANGLING)
    st = path.stat()
    skip = f"larger than {max_bytes} bytes" if st.st_size > max_bytes else None
    return ScanEntry(rel, path, st.st_size, st.st_mtime_ns, skip)


def entry_for(root: Path, relpath: str, *, max_bytes: int) -> ScanEntry | None:
    """The ScanEntry a scan would yield for relpath, or None (not Markdown, ignored, gone)."""
    relpath = relpath.replace("\\", "/").strip("/")
    if not is_markdown_path(relpath) or is_ignored(root, relpath):
        return None
    path = Path(root) / relpath
    if not path.is_symlink() and not path.is_file():
        return None
    try:
        return _entry(path, relpath, Path(root).resolve(), max_bytes)
    except OSError:
        return None


def is_ignored(root: Path, relpath: str) -> bool:
    """Whether scan_workspace would never look at relpath (hidden, .git, node_modules, .gitignore)."""
    parts = [p for p in relpath.replace("\\", "/").split("/") if p]
    if any(p.startswith(".") or p in SKIP_DIRS for p in parts) or (parts and parts[0] == SCHEMA_DIR):
        return True
    root = Path(root)
    specs = _specs_in(root, "", ())
    for i in range(1, len(parts) + 1):
        rel = "/".join(parts[:i])
        is_dir = i < len(parts) or (root / rel).is_dir()
        if _ignored(specs, rel, is_dir):
            return True
        if is_dir:
            specs = _specs_in(root / rel, rel, specs)
    return False


def _ignored(specs: _Specs, rel: str, is_dir: bool) -> bool:
    """Git's rule: the last matching pattern wins, deeper .gitignore files last."""
    verdict = False
    for base, spec in specs:
        sub = rel[len(base) + 1 :] if base else rel
        res = spec.check_file(sub + "/" if is_dir else sub)
        if res.include is not None:
            verdict = res.include
    return verdict


def _specs_in(d: Path, rel: str, specs: _Specs) -> _Specs:
    f = d / ".gitignore"
    try:
        st = f.stat()
    except OSError:
        return specs
    spec = _load_spec(str(f), st.st_mtime_ns, st.st_size)
    return specs + ((rel, spec),) if spec is not None else specs


@lru_cache(maxsize=256)
def _load_spec(path: str, mtime_ns: int, size: int) -> pathspec.PathSpec | None:
    """Parsed .gitignore, cached by (path, mtime, size) so a watcher can ask per event."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return pathspec.GitIgnoreSpec.from_lines(fh.read().splitlines())
    except (OSError, ValueError, TypeError):
        return None  # an unreadable or malformed .gitignore ignores nothing


def read_document(path: Path, *, max_bytes: int) -> bytes:
    """Raw bytes of a Markdown file, or SkipFile (too large, binary, not UTF-8).

    OSError (vanished, unreadable) propagates: that is not a property of the file's content.
    """
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > max_bytes:
            raise SkipFile(f"larger than {max_bytes} bytes")
        data = fh.read(max_bytes + 1)  # the file may grow between fstat and read
    if len(data) > max_bytes:
        raise SkipFile(f"larger than {max_bytes} bytes")
    nul = data.find(b"\0", 0, BINARY_PROBE)
    if nul >= 0:
        raise SkipFile(f"binary file (NUL byte at byte {nul})")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SkipFile(f"not valid UTF-8 at byte {e.start}") from None
    return data
