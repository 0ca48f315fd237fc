"""Issue 36 High 2 and 3: a file the product reads can neither block it nor flood it.

Every file AutoDoc reads (Markdown, .gitignore, _schema/frontmatter.yaml, a
transcript) goes through one reader, ingest/readfile.py, which opens without
blocking, refuses what is not a regular file by the opened descriptor, and
reads at most a bound. Here the real things: a FIFO named .gitignore (the
index used to wait on it forever, holding the writer), a .gitignore that is a
symlink to /dev/zero (2 GB of RSS in 4 s), a 200,000-line .gitignore (a
minute for six files), and the same shapes for the other files.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from autodoc.config import Settings
from autodoc.service import Service

pytestmark = pytest.mark.slow  # a few seconds: subprocesses, a FIFO, a large .gitignore


@pytest.fixture
def svc(short_tmp):
    s = Service(Settings.from_env(store=short_tmp / "store.db"))
    yield s
    s.close()


def _kb(root):
    (root / "sub").mkdir(parents=True)
    (root / "a.md").write_text("# a\n\nalpha\n")
    (root / "sub" / "b.md").write_text("# b\n\nbravo\n")
    return root


def _release(fifo):
    """Give a reader blocked on the FIFO its end of file, so a failing test ends."""
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        return
    os.close(fd)


def test_a_fifo_named_gitignore_does_not_block_the_index(svc, short_tmp):
    kb = _kb(short_tmp / "kb")
    fifo = kb / "sub" / ".gitignore"
    os.mkfifo(fifo)
    svc.workspace_add("kb", str(kb), {"embedding": {"provider": "none"}})
    out: dict = {}
    t = threading.Thread(target=lambda: out.update(svc.index("kb")), daemon=True)
    t.start()
    t.join(20)
    blocked = t.is_alive()
    while t.is_alive():
        _release(fifo)
        t.join(0.2)
    assert not blocked, "the index waited on the FIFO"
    assert out["added"] == 2, out
    (skip,) = [s for s in out["skipped"] if s["path"] == "sub/.gitignore"]
    assert "FIFO" in skip["reason"]
    # the live index (a watcher's path) asks is_ignored, which reads the same .gitignore
    (kb / "sub" / "c.md").write_text("# c\n\ncharlie\n")
    t = threading.Thread(target=lambda: out.update(svc.index_paths("kb", ["sub/c.md"])), daemon=True)
    t.start()
    t.join(20)
    blocked = t.is_alive()
    while t.is_alive():
        _release(fifo)
        t.join(0.2)
    assert not blocked, "the live index waited on the FIFO"
    assert out["added"] == 1, out


_SCAN = textwrap.dedent(
    """
    import json, resource, sys
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))  # a failing reader stops here, not at 2 GB
    from autodoc.ingest.scan import scan_workspace
    entries = [(e.relpath, e.skip) for e in scan_workspace(sys.argv[1], max_bytes=1 << 20)]
    # VmHWM: this program's peak (ru_maxrss would count the forking pytest's pages too)
    hwm = next(int(x.split()[1]) for x in open("/proc/self/status") if x.startswith("VmHWM:"))
    print(json.dumps({"entries": entries, "maxrss_kb": hwm}))
    """
)


def _scan_in_child(root):
    got = subprocess.run([sys.executable, "-c", _SCAN, str(root)], capture_output=True, text=True, timeout=120)
    assert got.returncode == 0, got.stderr[-2000:]
    import json

    return json.loads(got.stdout)


@pytest.mark.parametrize("target", ["/dev/zero", "/dev/urandom"])
def test_a_gitignore_linked_to_a_device_is_refused_not_read(short_tmp, target):
    kb = _kb(short_tmp / "kb")
    (kb / "sub" / ".gitignore").symlink_to(target)
    out = _scan_in_child(kb)
    assert out["maxrss_kb"] < 200_000, out["maxrss_kb"]  # it read nothing of the device (20 MB; 1 GB before)
    entries = dict(map(tuple, out["entries"]))
    assert entries["a.md"] is None and entries["sub/b.md"] is None, entries
    assert "character device" in entries["sub/.gitignore"], entries


@pytest.mark.parametrize("lines", ["200k", "over"])
def test_a_gitignore_over_the_bound_is_refused_and_fast(svc, short_tmp, lines):
    from autodoc.ingest.scan import MAX_GITIGNORE_BYTES, MAX_GITIGNORE_LINES

    kb = _kb(short_tmp / "kb")
    for i in range(4):
        (kb / "sub" / f"n{i}.md").write_text(f"# n{i}\n\nnote {i}\n")
    n, bound = (
        (200_000, f"larger than {MAX_GITIGNORE_BYTES}") if lines == "200k" else (MAX_GITIGNORE_LINES + 1, "lines")
    )
    (kb / "sub" / ".gitignore").write_text("".join(f"d{i}/f{i}.md\n" for i in range(n)))
    svc.workspace_add("kb", str(kb), {"embedding": {"provider": "none"}})
    started = time.monotonic()
    report = svc.index("kb")
    took = time.monotonic() - started
    assert report["added"] == 6, report
    (skip,) = [s for s in report["skipped"] if s["path"] == "sub/.gitignore"]
    assert bound in skip["reason"] and "not applied" in skip["reason"], skip
    assert took < 10, took  # 200,000 lines: 85 s before


def test_a_gitignore_at_the_bound_still_ignores(short_tmp):
    from autodoc.ingest.scan import MAX_GITIGNORE_LINES, scan_workspace

    kb = _kb(short_tmp / "kb")
    lines = [f"dir{i}/" for i in range(MAX_GITIGNORE_LINES - 1)] + ["b.md"]
    (kb / "sub" / ".gitignore").write_text("\n".join(lines) + "\n")
    assert [(e.relpath, e.skip) for e in scan_workspace(kb, max_bytes=1 << 20)] == [("a.md", None)]


def test_every_file_the_product_reads_refuses_what_is_not_a_regular_file(short_tmp):
    from autodoc.ingest.readfile import Refused, read_regular

    d = short_tmp
    os.mkfifo(d / "fifo")
    (d / "zero").symlink_to("/dev/zero")
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(d / "sock"))
    (d / "big").write_bytes(b"x" * 5000)
    (d / "ok").write_bytes(b"fine\n")
    (d / "link").symlink_to(d / "ok")
    try:
        for name, why in (("fifo", "FIFO"), ("zero", "character device"), ("big", "larger than 4096")):
            with pytest.raises(Refused, match=why):
                read_regular(d / name, max_bytes=4096)
        with pytest.raises(OSError):  # a socket cannot be opened at all: an OSError, as a vanished file
            read_regular(d / "sock", max_bytes=4096)
        got = read_regular(d / "ok", max_bytes=4096)
        st = os.stat(d / "ok")
        assert (got.data, got.size, got.mtime_ns, got.inode) == (b"fine\n", 5, st.st_mtime_ns, st.st_ino)
        assert read_regular(d / "link", max_bytes=4096).data == b"fine\n"
        with pytest.raises(Refused, match="symbolic link"):
            read_regular(d / "link", max_bytes=4096, follow_symlinks=False)
    finally:
        s.close()


def test_the_schema_file_as_a_fifo_or_device_does_not_block(svc, short_tmp):
    kb = _kb(short_tmp / "kb")
    (kb / "_schema").mkdir()
    fifo = kb / "_schema" / "frontmatter.yaml"
    os.mkfifo(fifo)
    svc.workspace_add("kb", str(kb), {"embedding": {"provider": "none"}})
    out: dict = {}
    t = threading.Thread(target=lambda: out.update(svc.index("kb")), daemon=True)
    t.start()
    t.join(20)
    blocked = t.is_alive()
    while t.is_alive():
        _release(fifo)
        t.join(0.2)
    assert not blocked and out["added"] == 2, out


def test_a_transcript_that_is_a_fifo_is_refused(short_tmp):
    from autodoc.sessioncli import SessionUsage, _read_transcript

    fifo = short_tmp / "t.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(SessionUsage, match="FIFO"):
        _read_transcript(fifo, [])
    (short_tmp / "z.jsonl").symlink_to("/dev/zero")
    with pytest.raises(SessionUsage, match="character device"):
        _read_transcript(short_tmp / "z.jsonl", [])
