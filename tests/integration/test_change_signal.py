"""Issue 36 Low 7: a same-size rewrite that keeps the mtime is never taken for unchanged.

`cp -p`, `rsync -t` and `touch -r` put the old mtime back on new bytes of the
same size; the index compared size and mtime only and said "unchanged". It now
compares size, mtime, ctime and inode (what a process cannot put back), and a
file whose stat was taken while it could still change within the same clock
tick is compared by content next time (git's "racily clean" entries).
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from autodoc.config import Settings
from autodoc.ingest import scan
from autodoc.service import Service


@pytest.fixture
def svc(short_tmp):
    s = Service(Settings.from_env(store=short_tmp / "store.db"))
    yield s
    s.close()


def _ws(svc, short_tmp):
    kb = short_tmp / "kb"
    kb.mkdir()
    (kb / "a.md").write_text("# a\n\nversion one\n")
    (kb / "b.md").write_text("# b\n\nbravo\n")
    svc.workspace_add("kb", str(kb), {"embedding": {"provider": "none"}})
    assert svc.index("kb")["added"] == 2
    return kb


def _same_size_same_mtime(path, text):
    st = os.stat(path)
    path.write_text(text)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # touch -r: the old mtime on the new bytes
    assert os.stat(path).st_size == st.st_size and os.stat(path).st_mtime_ns == st.st_mtime_ns


def test_touch_r_after_a_same_size_rewrite_is_seen(svc, short_tmp):
    kb = _ws(svc, short_tmp)
    _same_size_same_mtime(kb / "a.md", "# a\n\nversion TWO\n")
    report = svc.index("kb")
    assert report["modified"] == 1 and report["unchanged"] == 1, report
    assert "version TWO" in svc.document_read("kb", "a.md")["text"]


def test_cp_p_over_the_file_is_seen(svc, short_tmp):
    kb = _ws(svc, short_tmp)
    src = short_tmp / "other.md"
    src.write_text("# a\n\nversion TWO\n")
    st = os.stat(kb / "a.md")
    os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns))
    if shutil.which("cp"):
        subprocess.run(["cp", "-p", str(src), str(kb / "a.md")], check=True)
    else:
        shutil.copy2(src, kb / "a.md")
    report = svc.index("kb")
    assert report["modified"] == 1, report
    assert "version TWO" in svc.document_read("kb", "a.md")["text"]


def test_a_settled_file_is_not_read_again_and_a_racy_one_is(svc, short_tmp, monkeypatch):
    from autodoc.index import job

    read: list[str] = []
    real = scan.read_regular

    def counting(path, **kw):
        read.append(os.path.basename(path))
        return real(path, **kw)

    monkeypatch.setattr(scan, "read_regular", counting)
    kb = _ws(svc, short_tmp)  # written just now: within the window, so compared by content next time
    read.clear()
    assert svc.index("kb")["unchanged"] == 2
    assert sorted(read) == ["a.md", "b.md"]  # read and hashed, not re-chunked
    monkeypatch.setattr(job, "RACY_NS", 0)  # as if they had settled
    read.clear()
    svc.index("kb")
    assert sorted(read) == ["a.md", "b.md"]  # the doubtful stat is replaced by a settled one
    read.clear()
    assert svc.index("kb")["unchanged"] == 2
    assert read == []  # size, mtime, ctime and inode all match: nothing read
    (kb / "b.md").write_text("# b\n\nBRAVO\n")
    os.utime(kb / "b.md", ns=(os.stat(kb / "a.md").st_atime_ns, os.stat(kb / "a.md").st_mtime_ns))
    assert svc.index("kb")["modified"] == 1


def test_a_file_indexed_with_other_bytes_than_its_own_is_not_read_again(svc, short_tmp, monkeypatch):
    """A masked secret or a replaced bad byte makes the indexed text differ from the file: its
    stored size must still be the file's, or every scan takes it for changed and reads it again."""
    from autodoc.index import job

    read: list[str] = []
    real = scan.read_regular

    def counting(path, **kw):
        read.append(os.path.basename(path))
        return real(path, **kw)

    monkeypatch.setattr(scan, "read_regular", counting)
    monkeypatch.setattr(job, "RACY_NS", 0)  # as if written long ago
    kb = _ws(svc, short_tmp)
    (kb / "key.md").write_text("# key\n\naws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYzQ8vR3kLmN\n")
    (kb / "bytes.md").write_bytes(b"# bytes\n\ncaf\xe9 au lait\n")
    svc.index("kb")
    assert "wJalrXUtnFEMI" not in svc.document_read("kb", "key.md")["text"]  # masked: other bytes
    read.clear()
    assert svc.index("kb")["unchanged"] == 4
    assert read == []
