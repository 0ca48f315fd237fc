"""Ingest, the scan: a workspace folder → the Markdown files to index.

Input: a workspace root. Output: ScanEntry per Markdown file (sorted by
relpath), with skip set when the file must not be read (a symlink leaving
the workspace, a dangling link, a file over the size limit); read_document
turns one entry into raw bytes or raises SkipFile. Only regular files are
read: a FIFO, socket or device named *.md is skipped with a reason (opening a
FIFO would block the index forever), as is a name that is not valid UTF-8
(it could not be stored or sent as text). The scan itself never raises: what
it cannot look at becomes an entry with a reason. is_markdown_path,
is_ignored and entry_for answer the same questions for a single path, for a
file watcher.

Which files are Markdown is the workspace option `markdown` (a MarkdownRule):
extensions (".md", ".html.md.erb") or globs ("*.html.md.erb", "docs/**/*.txt",
".github/**/*.md"), matched case-insensitively. A hidden name (a leading dot)
is matched only by a glob segment that starts with a dot, as in a shell: so
hidden files and folders stay out unless a glob names them, and a hidden
folder is entered only when a glob could match inside it. Files that look like
Markdown but the rule leaves out (a `.md.erb` page, a `.mdx` file the option
dropped, a hidden folder not entered) are counted in a LeftOut, by extension,
so status can say what was left out and which option changes it. .git,
node_modules, the root's _schema/ folder (where the frontmatter schema lives),
the root's .session/ (sessions' reserved paths) and whatever .gitignore files
(root and nested) ignore are never yielded. Every file is read through
ingest/readfile.py; a .gitignore it refuses (a FIFO, a device, over
MAX_GITIGNORE_BYTES or MAX_GITIGNORE_LINES) ignores nothing and is yielded as
a skip entry with its reason (and logged), and the scan goes on.

Runs on: the index job's thread (it reads the disk; nothing shared).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from functools import lru_cache
from pathlib import Path, PurePosixPath

import pathspec

from ..config.defaults import MARKDOWN_FILES
from .readfile import FileRead, Refused, not_regular, read_regular, too_large
from .text import bom_encoding, invalid_utf8

SKIP_DIRS = frozenset({".git", "node_modules"})
SCHEMA_DIR = "_schema"  # the workspace's schema folder (autodoc.fmschema): configuration, not documents
SESSION_DIR = ".session"  # sessions' reserved paths (store/sessions.py): no file may take one
# Suffixes that make a name look like Markdown: a file that has one but the rule leaves out is counted.
MARKDOWNISH = frozenset(MARKDOWN_FILES) | {".mkdn", ".mdwn", ".mdtext", ".mdtxt"}
LEFT_OUT_EXAMPLES = 10
OUTSIDE = "symlink points outside the workspace"
DANGLING = "symlink target does not exist or loops"
BAD_NAME = "file name is not valid UTF-8"
LINKED_INSIDE = "symlink to a folder inside the workspace: not followed (the folder is scanned at its own path)"
LINKED_OUTSIDE = "symlink to a folder outside the workspace: not followed (add that folder as a workspace of its own)"
BINARY_PROBE = 8192
# A .gitignore past either bound is refused (skipped with its reason; it ignores nothing): pathspec
# compiles ~0.4 ms a line and checks each path against every line (0.7 ms a path at 1,000 lines),
# so the 200,000-line one took 85 s for 6 files. Real ones run to a few hundred lines.
MAX_GITIGNORE_LINES = 1_000
MAX_GITIGNORE_BYTES = 64 << 10
# A file whose first BINARY_PROBE bytes are more than this share invalid UTF-8 is not text
# (a Latin-1 note has a few percent: its accented letters); fewer are replaced (ingest/text.py).
BINARY_INVALID_SHARE = 0.3


log = logging.getLogger("autodoc.scan")


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
    ctime_ns: int = 0  # with size, mtime and inode: the change signal (index/job.py)
    inode: int = 0


def _hidden(name: str) -> bool:
    return name.startswith(".")


def _segment(pattern: str, name: str) -> bool:
    """One path segment against one glob segment: a hidden name only against a pattern that starts with a dot."""
    return (not _hidden(name) or pattern.startswith(".")) and fnmatchcase(name.lower(), pattern.lower())


def _match(pats: tuple[str, ...], parts: tuple[str, ...]) -> bool:
    """A whole path against a glob's segments; ** is zero or more segments, none hidden."""
    if not pats:
        return not parts
    if pats[0] == "**":
        return _match(pats[1:], parts) or (bool(parts) and not _hidden(parts[0]) and _match(pats, parts[1:]))
    return bool(parts) and _segment(pats[0], parts[0]) and _match(pats[1:], parts[1:])


def _inside(pats: tuple[str, ...], parts: tuple[str, ...]) -> bool:
    """Whether the glob could match a path inside the folder `parts`."""
    if not parts:
        return bool(pats)
    if not pats:
        return False
    if pats[0] == "**":
        return _inside(pats[1:], parts) or (not _hidden(parts[0]) and _inside(pats, parts[1:]))
    return _segment(pats[0], parts[0]) and _inside(pats[1:], parts[1:])


@dataclass(frozen=True)
class MarkdownRule:
    """Which files are Markdown (the workspace option `markdown`; module docstring). An entry that
    starts with a dot and has no slash or glob character is an extension; any other is a glob,
    anchored at the root when it has a slash, else matched against the file name at any depth
    (in folders that are not hidden)."""

    patterns: tuple[str, ...] = MARKDOWN_FILES

    @classmethod
    def of(cls, patterns: object) -> MarkdownRule:
        return cls(tuple(patterns)) if isinstance(patterns, (list, tuple)) else cls()

    @property
    def _parsed(self) -> tuple[tuple[str, ...], tuple[str, ...], tuple[tuple[str, ...], ...]]:
        return _parse_rule(self.patterns)

    def matches(self, relpath: str) -> bool:
        """Whether the file at relpath is Markdown by this rule."""
        parts = tuple(p for p in relpath.replace("\\", "/").split("/") if p)
        if not parts:
            return False
        exts, names, paths = self._parsed
        name = parts[-1]
        if not any(_hidden(p) for p in parts[:-1]):
            low = name.lower()
            if not _hidden(name) and any(low.endswith(e) and len(low) > len(e) for e in exts):
                return True
            if any(_segment(g, name) for g in names):
                return True
        return any(_match(g, parts) for g in paths)

    def enters(self, folder: str) -> bool:
        """Whether a hidden folder (workspace-relative) is walked: some glob could match inside it."""
        parts = tuple(p for p in folder.replace("\\", "/").split("/") if p)
        return any(_inside(g, parts) for g in self._parsed[2])


@lru_cache(maxsize=64)
def _parse_rule(patterns: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...], tuple[tuple[str, ...], ...]]:
    """(extensions, file-name globs, path globs as segments) of a rule's entries."""
    exts: list[str] = []
    names: list[str] = []
    paths: list[tuple[str, ...]] = []
    for raw in patterns:
        p = raw.strip().replace("\\", "/").lstrip("/")
        if not p:
            continue
        if p.startswith(".") and "/" not in p and not any(c in p for c in "*?["):
            exts.append(p.lower())
        elif "/" in p:
            paths.append(tuple(x for x in p.split("/") if x))
        else:
            names.append(p)
    return tuple(exts), tuple(names), tuple(paths)


DEFAULT_RULE = MarkdownRule()


@dataclass
class LeftOut:
    """Files that look like Markdown (MARKDOWNISH) but the rule leaves out, and hidden folders not
    entered: what workspace.status and `autodoc index` report under files.left_out."""

    files: int = 0  # not hidden, an extension the rule does not take
    by_extension: dict[str, int] = field(default_factory=dict)
    hidden_files: int = 0  # a Markdown-looking file whose own name is hidden (.draft.md)
    hidden_folders: int = 0
    examples: list[str] = field(default_factory=list)

    def add(self, rel: str, key: str | None) -> None:
        if key is None:
            self.hidden_folders += 1
        elif _hidden(rel.rsplit("/", 1)[-1]):
            self.hidden_files += 1
        else:
            self.files += 1
            self.by_extension[key] = self.by_extension.get(key, 0) + 1
        if len(self.examples) < LEFT_OUT_EXAMPLES:
            self.examples.append(rel + ("/" if key is None else ""))

    def to_json(self) -> dict:
        return {
            "files": self.files,
            "by_extension": dict(sorted(self.by_extension.items(), key=lambda kv: (-kv[1], kv[0]))),
            "hidden_files": self.hidden_files,
            "hidden_folders": self.hidden_folders,
            "examples": sorted(self.examples),
            "setting": "markdown",
        }


def markdownish(name: str) -> str | None:
    """The compound extension that makes a file name look like Markdown (".md.erb"), or None."""
    suffixes = [x.lower() for x in PurePosixPath(name.lstrip(".") or name).suffixes]
    for i, x in enumerate(suffixes):
        if x in MARKDOWNISH:
            return "".join(suffixes[i:])
    return None


def is_markdown_path(relpath: str, rule: MarkdownRule = DEFAULT_RULE) -> bool:
    return rule.matches(relpath)


def scan_workspace(
    root: Path, *, max_bytes: int, rule: MarkdownRule = DEFAULT_RULE, left_out: LeftOut | None = None
) -> Iterator[ScanEntry]:
    """Every Markdown file under root that is not ignored, sorted by relpath; `left_out` (when
    given) counts what looks like Markdown but the rule leaves out."""
    root = Path(root)
    real_root = root.resolve()
    found: list[ScanEntry] = []
    _walk(root, real_root, _specs_in(root, "", (), found), max_bytes, found, rule=rule, left=left_out)
    found.sort(key=lambda e: e.relpath)
    yield from found


def scan_folders(root: Path, rule: MarkdownRule = DEFAULT_RULE) -> list[Path]:
    """The folders scan_workspace walks: root and every readable, non-ignored,
    non-symlinked folder inside it. A file watcher watches exactly these, so it
    never follows a link out of the root nor watches what the scan skips."""
    folders: list[Path] = []
    _walk(Path(root), Path(root).resolve(), _specs_in(Path(root), "", ()), 0, None, folders, rule=rule)
    return sorted(folders)


_Specs = tuple[tuple[str, pathspec.PathSpec], ...]


def _walk(
    root: Path,
    real_root: Path,
    specs: _Specs,
    max_bytes: int,
    out: list[ScanEntry] | None,
    folders: list[Path] | None = None,
    *,
    rule: MarkdownRule = DEFAULT_RULE,
    left: LeftOut | None = None,
) -> None:
    """Folders from a stack, not by recursion: a tree 1,000 folders deep must not end the scan.
    out=None walks the folders only (into `folders`), without looking at a file."""
    todo: list[tuple[Path, str, _Specs]] = [(root, "", specs)]
    while todo:
        d, rel, specs = todo.pop()
        try:
            items = sorted(os.scandir(d), key=lambda e: e.name)
        except OSError as e:
            if rel and out is not None:  # an unreadable folder: say so (the root's own absence is the caller's)
                out.append(ScanEntry(_display(rel) + "/", d, 0, 0, f"folder is unreadable: {_why(e)}"))
            continue
        if folders is not None:
            folders.append(d)
        for it in items:
            if it.name in SKIP_DIRS or (not rel and it.name in (SCHEMA_DIR, SESSION_DIR)):
                continue
            r = f"{rel}/{it.name}" if rel else it.name
            try:
                link = it.is_symlink()
                folder = not link and it.is_dir(follow_symlinks=False)
            except OSError:
                link = folder = False
            if folder:
                if _hidden(it.name) and not rule.enters(r):
                    if left is not None and not _ignored(specs, r, True):
                        left.add(r, None)
                elif not _ignored(specs, r, True):
                    todo.append((Path(it.path), r, _specs_in(Path(it.path), r, specs, out)))
            # Never descend into linked folders: outside ones leave the workspace,
            # inside ones are scanned under their real path anyway (and could loop). Say so.
            elif link and out is not None and (why := _linked_folder(Path(it.path), real_root)) is not None:
                if not _ignored(specs, r, True):
                    out.append(ScanEntry(_display(r) + "/", Path(it.path), 0, 0, why))
            elif out is not None and not _ignored(specs, r, False):
                if rule.matches(r):
                    got = _entry_or_reason(Path(it.path), r, real_root, max_bytes)
                    if got is not None:
                        out.append(got)
                elif left is not None and (key := markdownish(it.name)) is not None:
                    left.add(_display(r), key)


def _linked_folder(path: Path, real_root: Path) -> str | None:
    """Why a symlink to a folder is not followed; None when it does not lead to a folder."""
    try:
        target = path.resolve(strict=True)
        if not target.is_dir():
            return None
    except (OSError, RuntimeError):  # dangling, or a loop: not a folder to speak of
        return None
    if target.is_relative_to(real_root):
        return LINKED_INSIDE
    return LINKED_OUTSIDE


def _display(rel: str) -> str:
    """rel as valid text: bytes of a non-UTF-8 name (held as surrogate escapes) become \\xNN."""
    try:
        rel.encode("utf-8")
        return rel
    except UnicodeEncodeError:
        return os.fsencode(rel).decode("utf-8", "backslashreplace")


def _why(e: OSError) -> str:
    return e.strerror or type(e).__name__


def _not_regular(mode: int) -> str | None:
    return not_regular(mode)


def _entry_or_reason(path: Path, rel: str, real_root: Path, max_bytes: int) -> ScanEntry | None:
    """_entry, with an OSError turned into a skip (None when the file vanished meanwhile)."""
    try:
        return _entry(path, rel, real_root, max_bytes)
    except FileNotFoundError:
        return None
    except OSError as e:
        return ScanEntry(_display(rel), path, 0, 0, f"unreadable: {_why(e)}")


def _entry(path: Path, rel: str, real_root: Path, max_bytes: int) -> ScanEntry:
    shown = _display(rel)
    if shown != rel:
        st = path.lstat()
        return ScanEntry(shown, path, st.st_size, st.st_mtime_ns, BAD_NAME)
    if path.is_symlink():
        st = path.lstat()
        try:
            target = path.resolve()
        except (OSError, RuntimeError):  # a symlink loop
            return ScanEntry(rel, path, st.st_size, st.st_mtime_ns, DANGLING)
        if not target.is_relative_to(real_root):
            return ScanEntry(rel, path, st.st_size, st.st_mtime_ns, OUTSIDE)
        try:
            target_mode = target.stat().st_mode
        except OSError:
            return ScanEntry(rel, path, st.st_size, st.st_mtime_ns, DANGLING)
        if (odd := _not_regular(target_mode)) is not None:
            return ScanEntry(rel, path, st.st_size, st.st_mtime_ns, odd)
    st = path.stat()
    skip = _not_regular(st.st_mode)
    if skip is None and st.st_size > max_bytes:
        skip = too_large(max_bytes)
    return ScanEntry(rel, path, st.st_size, st.st_mtime_ns, skip, st.st_ctime_ns, st.st_ino)


def entry_for(root: Path, relpath: str, *, max_bytes: int, rule: MarkdownRule = DEFAULT_RULE) -> ScanEntry | None:
    """The ScanEntry a scan would yield for relpath, or None (not Markdown, ignored, gone)."""
    relpath = relpath.replace("\\", "/").strip("/")
    if not rule.matches(relpath) or is_ignored(root, relpath, rule):
        return None
    path = Path(root) / relpath
    try:
        if not path.is_symlink() and (not path.exists() or path.is_dir()):
            return None
    except OSError:
        return None
    return _entry_or_reason(path, relpath, Path(root).resolve(), max_bytes)


def is_ignored(root: Path, relpath: str, rule: MarkdownRule = DEFAULT_RULE) -> bool:
    """Whether scan_workspace would never look at relpath (a hidden folder the rule does not
    enter, a hidden file it does not match, .git, node_modules, .gitignore)."""
    parts = [p for p in relpath.replace("\\", "/").split("/") if p]
    if any(p in SKIP_DIRS for p in parts) or (parts and parts[0] in (SCHEMA_DIR, SESSION_DIR)):
        return True
    for i, p in enumerate(parts):
        here = "/".join(parts[: i + 1])
        if _hidden(p) and not rule.enters(here) and not (i == len(parts) - 1 and rule.matches(here)):
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


def _specs_in(d: Path, rel: str, specs: _Specs, out: list[ScanEntry] | None = None) -> _Specs:
    """specs plus the .gitignore in d; one that is refused adds a skip entry to out (when given)."""
    f = d / ".gitignore"
    try:
        st = f.stat()
    except OSError:
        return specs
    spec, refused = _load_spec(str(f), st.st_mtime_ns, st.st_size, st.st_ino)
    if refused is not None and out is not None:
        shown = _display(f"{rel}/.gitignore" if rel else ".gitignore")
        out.append(ScanEntry(shown, f, st.st_size, st.st_mtime_ns, f"{refused}: not applied"))
    return specs + ((rel, spec),) if spec is not None else specs


@lru_cache(maxsize=256)
def _load_spec(path: str, mtime_ns: int, size: int, inode: int) -> tuple[pathspec.PathSpec | None, str | None]:
    """(the parsed .gitignore, None), or (None, why it is refused): cached by the file's
    (path, mtime, size, inode) so a watcher can ask per event, and a refusal is logged once."""
    try:
        text = read_regular(path, max_bytes=MAX_GITIGNORE_BYTES).data.decode("utf-8", "replace")
        lines = text.splitlines()
        if len(lines) > MAX_GITIGNORE_LINES:
            raise Refused(f"more than {MAX_GITIGNORE_LINES} lines")
        return pathspec.GitIgnoreSpec.from_lines(lines), None
    except Refused as e:
        reason = e.reason
    except OSError as e:
        reason = f"unreadable: {_why(e)}"
    except Exception as e:  # a malformed .gitignore ignores nothing
        reason = f"not a valid .gitignore ({type(e).__name__}: {e})"
    log.warning("%s is not applied: %s", path, reason)
    return None, reason


def read_document(path: Path, *, max_bytes: int) -> bytes:
    """Raw bytes of a Markdown file, or SkipFile (not a regular file, too large, binary).

    OSError (vanished, unreadable) propagates: that is not a property of the file's content.
    """
    return read_file(path, max_bytes=max_bytes).data


def read_file(path: Path, *, max_bytes: int) -> FileRead:
    """read_document's read, with the opened file's stat (taken before the read): the size and
    mtime stored beside the bytes are those of the very file that was read. SkipFile for a file
    that is not Markdown to read (see read_document); OSError propagates."""
    try:
        got = read_regular(path, max_bytes=max_bytes)
    except Refused as r:
        raise SkipFile(r.reason) from None
    _checked(got.data)
    return got


def _checked(data: bytes) -> bytes:
    """data, or SkipFile for a file that is not text. A UTF-16/32 byte-order mark makes it text
    (its NULs are its encoding); otherwise a NUL, or mostly invalid UTF-8, in the first
    BINARY_PROBE bytes makes it binary. A few invalid bytes do not: ingest/text.py replaces them."""
    if bom_encoding(data) is not None:
        return data
    nul = data.find(b"\0", 0, BINARY_PROBE)
    if nul >= 0:
        raise SkipFile(f"binary file (NUL byte at byte {nul})")
    probe = data[:BINARY_PROBE]
    bad = invalid_utf8(probe)
    if bad > BINARY_INVALID_SHARE * len(probe) and bad > 3:  # 3: a character cut by the probe's end
        raise SkipFile(f"binary file ({bad} of its first {len(probe)} bytes are not UTF-8)")
    return data
