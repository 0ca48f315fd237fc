"""Issue 36 Medium 6: the live index stats the very file it read.

The live index used to read a file and then call path.stat() outside its try:
a file deleted between the two raised FileNotFoundError and dropped the whole
live batch (every other change in it); and the mtime it stored was taken after
the read, so it could belong to a newer version than the bytes stored, which a
later scan then took for unchanged. Here the file really is deleted or
rewritten right after its bytes are read (a hook around the real reader).
"""

from __future__ import annotations

import os

import pytest

from autodoc.config import Settings
from autodoc.ingest import scan
from autodoc.service import Service


@pytest.fixture
def svc(short_tmp):
    s = Service(Settings.from_env(store=short_tmp / "store.db"))
    yield s
    s.close()


def _after_reading(monkeypatch, name, then):
    """Run then(path) right after the real reader has read a file called name."""
    real = scan.read_regular

    def read(path, **kw):
        got = real(path, **kw)
        if os.path.basename(path) == name:
            then(path)
        return got

    monkeypatch.setattr(scan, "read_regular", read)


def test_a_file_deleted_after_its_read_does_not_drop_the_live_batch(svc, short_tmp, monkeypatch):
    kb = short_tmp / "kb"
    kb.mkdir()
    svc.workspace_add("kb", str(kb), {"embedding": {"provider": "none"}})
    svc.index("kb")
    (kb / "a.md").write_text("# a\n\nalpha\n")
    (kb / "b.md").write_text("# b\n\nbravo\n")
    _after_reading(monkeypatch, "a.md", os.unlink)
    report = svc.index_paths("kb", ["a.md", "b.md"])
    assert "bravo" in svc.document_read("kb", "b.md")["text"], report
    monkeypatch.undo()
    svc.index_paths("kb", ["a.md"])  # the watcher's next event: a.md is gone
    assert svc.index("kb")["unchanged"] == 1


@pytest.mark.parametrize("live", [True, False], ids=["live", "full"])
def test_the_stored_mtime_is_the_read_versions(svc, short_tmp, monkeypatch, live):
    kb = short_tmp / "kb"
    kb.mkdir()
    (kb / "a.md").write_text("# a\n\nversion one\n")
    os.utime(kb / "a.md", ns=(10**18, 10**18))
    svc.workspace_add("kb", str(kb), {"embedding": {"provider": "none"}})
    svc.index("kb")

    def rewrite(path):  # same size, a newer mtime: a save that lands during the read
        with open(path, "w") as fh:
            fh.write("# a\n\nversion TWO\n")
        os.utime(path, ns=(10**18 + 2 * 10**9, 10**18 + 2 * 10**9))

    (kb / "a.md").write_text("# a\n\nversion 1.5\n")  # what the read sees
    os.utime(kb / "a.md", ns=(10**18 + 10**9, 10**18 + 10**9))
    _after_reading(monkeypatch, "a.md", rewrite)
    svc.index_paths("kb", ["a.md"]) if live else svc.index("kb")
    assert "version 1.5" in svc.document_read("kb", "a.md")["text"]
    monkeypatch.undo()
    report = svc.index("kb")  # the stored mtime is version 1.5's: the rewrite is seen
    assert report["modified"] == 1, report
    assert "version TWO" in svc.document_read("kb", "a.md")["text"]
