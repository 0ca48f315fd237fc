"""Ingest, reading one file: the one way AutoDoc reads a file it did not write itself.

Markdown, .gitignore files, _schema/frontmatter.yaml, transcripts: each is read
with read_regular, which never blocks and never reads more than a bound. The
open is non-blocking (a FIFO would otherwise wait for a writer that may never
come, holding the index job and the writer slot behind it); the type is then
checked on the opened descriptor itself (fstat), so a file swapped for a FIFO
or a device between a stat and the open is still refused, and at most
max_bytes + 1 bytes are read, so a file that grows while read (or one that
lies about its size) is refused too. The stat returned is the opened file's,
taken before the read: its mtime can be older than the bytes read, never
newer, so a change during the read is seen again next time.

Refused is what a caller reports as a skip ("not a regular file (a FIFO)",
"larger than N bytes"); an OSError (vanished, no permission, a socket that
cannot be opened) is left to the caller.

Runs on: any thread (it reads the disk; nothing shared).
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

_CHUNK = 1 << 20  # read in slices of this: a file's size says nothing a growing file keeps to


class Refused(Exception):
    """A file that is there but must not be read; reason says why."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class FileRead:
    """A file's bytes and the stat of the descriptor they were read from (taken before the read)."""

    data: bytes
    size: int
    mtime_ns: int
    ctime_ns: int
    inode: int
    device: int


def kind_of(mode: int) -> str | None:
    """What a non-regular file is ("a FIFO"), or None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    for test, name in (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISLNK, "a symbolic link"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def not_regular(mode: int) -> str | None:
    """The reason a file of this mode is not read, or None for a regular file."""
    kind = kind_of(mode)
    return None if kind is None else f"not a regular file ({kind})"


def too_large(max_bytes: int) -> str:
    return f"larger than {max_bytes} bytes"


def read_regular(path: str | os.PathLike[str], *, max_bytes: int, follow_symlinks: bool = True) -> FileRead:
    """The bytes of a regular file of at most max_bytes, or Refused; OSError when it cannot be opened.
    follow_symlinks=False refuses a symlink itself (O_NOFOLLOW) instead of reading its target."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    if not follow_symlinks:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        if not follow_symlinks and e.errno == errno.ELOOP and Path(path).is_symlink():
            raise Refused(not_regular(stat.S_IFLNK) or "") from None
        raise
    try:
        st = os.fstat(fd)
        if (odd := not_regular(st.st_mode)) is not None:
            raise Refused(odd)
        if st.st_size > max_bytes:
            raise Refused(too_large(max_bytes))
        parts: list[bytes] = []
        left = max_bytes + 1  # one byte more than allowed: a file that grew past the bound is refused
        while left > 0:
            got = os.read(fd, min(left, max(st.st_size + 1, 8192), _CHUNK))
            if not got:
                break
            parts.append(got)
            left -= len(got)
    finally:
        os.close(fd)
    data = parts[0] if len(parts) == 1 else b"".join(parts)
    if len(data) > max_bytes:
        raise Refused(too_large(max_bytes))
    return FileRead(data, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)
