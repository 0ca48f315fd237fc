"""The folders that appeared while the live index watches (index/live.py), walked alone.

A folder made or moved into a workspace gets one event, for itself: the watcher is given the
folders the scan would walk under it (`folders_under`) and the index its Markdown files
(`markdown_under`), without walking the whole root again (1.9 s at 1M chunks). A folder made
while the watcher's own walk ran, after the walk passed its parent, gets no event at all: it is
found by a stat of each walked folder changed since the walk began and a listing of those
(`made_since`), not by a second walk of every root. Also the folders a watcher is given at all
(`watched_folders`) and the path facts the live index reads of an event's path.

Runs on: a worker thread (anyio.to_thread, from the live index's event loop); each walks or
lists folders on disk, nothing else.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..fmschema import SCHEMA_DIR
from ..ingest.scan import DEFAULT_RULE, MarkdownRule, is_ignored, scan_folders

# A folder's mtime may lag the clock by a tick, or by 2 s on coarse file systems (FAT): a folder
# changed this long before the walk began is listed again too (a listing, not a walk).
CLOCK_SLACK_NS = 2_000_000_000


def made_since(roots: dict[str, Path], watched: set[Path], since_ns: int, rules: dict[str, MarkdownRule]) -> set[Path]:
    """The folders the scan would walk that are not in `watched` (the walk's, begun at since_ns)
    and sit in a watched folder changed since: made, or moved in, after the walk passed it."""
    out: set[Path] = set()
    for name, root in roots.items():
        rule = rules.get(name, DEFAULT_RULE)
        made: list[tuple[Path, str, MarkdownRule]] = []
        for folder in watched:
            if not folder.is_relative_to(root):
                continue
            try:
                st = folder.stat()
                if max(st.st_mtime_ns, st.st_ctime_ns) < since_ns - CLOCK_SLACK_NS:
                    continue
                subs = [Path(e.path) for e in os.scandir(folder) if e.is_dir(follow_symlinks=False)]
            except OSError:
                continue  # gone: its parent's event says so
            for sub in subs:
                rel = sub.relative_to(root).as_posix()
                if sub not in watched and (rel == SCHEMA_DIR or not is_ignored(root, rel, rule)):
                    made.append((root, rel, rule))
        for d in folders_under(made):
            try:
                str(d).encode("utf-8")  # as live.py's _folders: a name the watcher cannot be given is left out
            except UnicodeEncodeError:
                continue
            out.add(d)
    return out


def folders_under(pairs: list[tuple[Path, str, MarkdownRule]]) -> set[Path]:
    """The folders the scan would walk in these (root, folder, rule) triples, each folder included."""
    out: set[Path] = set()
    for root, folder, rule in pairs:
        for d, dirs, _ in os.walk(root / folder):
            rel_d = Path(d).relative_to(root).as_posix()
            dirs[:] = [x for x in dirs if not is_ignored(root, f"{rel_d}/{x}", rule) and not Path(d, x).is_symlink()]
            out.add(Path(d))
    return out


def markdown_under(root: Path, folders: list[str], rule: MarkdownRule = DEFAULT_RULE) -> list[str]:
    """Workspace-relative paths of the Markdown files the scan would index under
    these folders (walked alone, not the whole root)."""
    out: set[str] = set()
    for folder in folders:
        for d, dirs, files in os.walk(root / folder):
            rel_d = Path(d).relative_to(root).as_posix()
            dirs[:] = [x for x in dirs if not is_ignored(root, f"{rel_d}/{x}", rule) and not Path(d, x).is_symlink()]
            out.update(
                f"{rel_d}/{f}"
                for f in files
                if rule.matches(f"{rel_d}/{f}") and not is_ignored(root, f"{rel_d}/{f}", rule)
            )
    return sorted(out)


def watched_folders(roots: dict[str, Path], rules: dict[str, MarkdownRule] | None = None) -> list[Path]:
    """Every folder to watch: the scanned ones and the schema's. A folder whose name
    is not valid UTF-8 is left out: the watcher could not be given it, and the
    scan skips every file in it."""
    out: list[Path] = []
    for name, root in roots.items():
        schema = root / SCHEMA_DIR
        extra = [schema] if schema.is_dir() and not schema.is_symlink() else []
        for folder in scan_folders(root, (rules or {}).get(name, DEFAULT_RULE)) + extra:
            try:
                str(folder).encode("utf-8")
            except UnicodeEncodeError:
                continue
            out.append(folder)
    return out


def rel_folder(folder: Path, root: Path) -> str:
    """A watched folder relative to its workspace's root ("" the root itself)."""
    return "" if folder == root else folder.relative_to(root).as_posix()


def relative(raw: str, root: Path) -> str | None:
    try:
        rel = Path(raw).relative_to(root)
    except ValueError:
        try:
            rel = Path(raw).relative_to(root.resolve())
        except ValueError:
            return None
    text = rel.as_posix()
    return None if text in ("", ".") else text


def present(path: Path) -> bool:
    """A path still there (a dangling link is: the index skips it, as a scan does)."""
    return path.exists() or path.is_symlink()


def maybe_folder(path: Path) -> bool:
    """A path that is a folder now, or was gone and had no suffix (a folder
    moved or removed: the files inside it got no event of their own)."""
    if path.is_dir():
        return True
    return not path.exists() and not path.suffix
