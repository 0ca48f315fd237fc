"""scan_workspace, read_document, is_ignored and entry_for, on the corpus and on tmp trees."""

from __future__ import annotations

import os
import runpy
from pathlib import Path

import pytest

from autodoc.ingest.scan import (
    DANGLING,
    LINKED_INSIDE,
    LINKED_OUTSIDE,
    OUTSIDE,
    SkipFile,
    entry_for,
    is_ignored,
    is_markdown_path,
    read_document,
    scan_workspace,
)

CORPORA = Path(__file__).parents[1] / "corpora"
_special = runpy.run_path(str(CORPORA / "make_special.py"))
KB = _special["ensure_special_files"]()
BIG = 1 << 20

EXPECTED = [
    "adrs/0001-sqlite-storage.md",
    "adrs/0003-fts5-tokenizer.md",
    "adrs/0007-sqlite-wal-lease.md",
    "adrs/0009-porter-stemming.md",
    "adrs/0012-lease-recovery.md",
    "adrs/0015-embedding-queue.md",
    "design/search-pipeline.md",
    "index.md",
    "notes/bad-encoding.md",
    "notes/broken-frontmatter.md",
    "notes/cjk-notes.md",
    "notes/diagram-export.md",
    "notes/standup-2024-03-14.md",
    "notes/tagging-conventions.md",
    "outside.md",
    "runbooks/embedding-queue-stuck.md",
    "runbooks/lease-recovery.md",
    "runbooks/restore-from-backup.markdown",
]


def test_corpus_scan():
    entries = list(scan_workspace(KB, max_bytes=BIG))
    assert [e.relpath for e in entries] == EXPECTED
    skips = {e.relpath: e.skip for e in entries if e.skip}
    assert skips == {"outside.md": OUTSIDE}
    e = entries[0]
    st = (KB / e.relpath).stat()
    assert e.path == KB / e.relpath and (e.size, e.mtime_ns) == (st.st_size, st.st_mtime_ns)


def test_read_document_reasons():
    with pytest.raises(SkipFile, match=f"^not valid UTF-8 at byte {_special['BAD_ENCODING_OFFSET']}$"):
        read_document(KB / "notes/bad-encoding.md", max_bytes=BIG)
    with pytest.raises(SkipFile, match=r"^binary file \(NUL byte at byte 8\)$"):
        read_document(KB / "notes/diagram-export.md", max_bytes=BIG)
    with pytest.raises(SkipFile, match="^larger than 100 bytes$"):
        read_document(KB / "index.md", max_bytes=100)
    raw = read_document(KB / "notes/cjk-notes.md", max_bytes=BIG)
    assert raw == (KB / "notes/cjk-notes.md").read_bytes()


def test_scan_marks_oversized_files():
    skips = {e.relpath: e.skip for e in scan_workspace(KB, max_bytes=1000)}
    assert skips["adrs/0012-lease-recovery.md"] == "larger than 1000 bytes"
    assert skips["index.md"] is None


def test_nul_after_the_probe_window_is_not_binary(tmp_path):
    p = tmp_path / "late.md"
    p.write_bytes(b"a" * 9000 + b"\0")
    assert read_document(p, max_bytes=BIG).endswith(b"\0")


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    return root


def test_ignore_rules(tmp_path):
    root = write(
        tmp_path / "ws",
        {
            ".gitignore": "*.tmp.md\nbuild/\n/top-only.md\n",
            "a.md": "",
            "B.MD": "",
            "c.markdown": "",
            "notes.txt": "",
            "x.tmp.md": "",
            "top-only.md": "",
            "build/out.md": "",
            "sub/top-only.md": "",  # anchored pattern: only the root one is ignored
            "sub/.gitignore": "!keep.tmp.md\nlocal/\n",
            "sub/keep.tmp.md": "",
            "sub/drop.tmp.md": "",
            "sub/local/y.md": "",
            "other/local/z.md": "",  # the nested rule applies only under sub/
            ".hidden/h.md": "",
            "sub/.dot.md": "",
            "node_modules/pkg/readme.md": "",
            ".git/info.md": "",
            "深い/メモ.md": "",
        },
    )
    got = [e.relpath for e in scan_workspace(root, max_bytes=BIG)]
    assert got == sorted(
        ["B.MD", "a.md", "c.markdown", "other/local/z.md", "sub/keep.tmp.md", "sub/top-only.md", "深い/メモ.md"]
    )
    for rel in ["x.tmp.md", "build/out.md", "build/new.md", "top-only.md", "sub/drop.tmp.md", "sub/local/y.md",
                ".hidden/h.md", "sub/.dot.md", "node_modules/pkg/readme.md", ".git/info.md"]:  # fmt: skip
        assert is_ignored(root, rel), rel
    for rel in got + ["sub/new.md", "fresh/dir/new.md"]:
        assert not is_ignored(root, rel), rel


def test_is_ignored_sees_gitignore_edits(tmp_path):
    root = write(tmp_path, {".gitignore": "a.md\n", "a.md": "", "b.md": ""})
    assert is_ignored(root, "a.md") and not is_ignored(root, "b.md")
    (root / ".gitignore").write_text("b.md\n# now b instead\n")
    assert not is_ignored(root, "a.md") and is_ignored(root, "b.md")


def test_symlinks(tmp_path):
    outside = write(tmp_path / "outside", {"secret.md": "# secret\n", "dir/s.md": ""})
    root = write(tmp_path / "ws", {"real.md": "# real\n", "docs/d.md": ""})
    os.symlink(outside / "secret.md", root / "out.md")
    os.symlink("real.md", root / "alias.md")
    os.symlink("missing.md", root / "dangling.md")
    os.symlink(outside / "dir", root / "outdir")
    os.symlink("docs", root / "docs-link")
    os.symlink("loop.md", root / "loop.md")
    entries = {e.relpath: e.skip for e in scan_workspace(root, max_bytes=BIG)}
    assert entries == {
        "alias.md": None,
        "dangling.md": DANGLING,
        "docs/d.md": None,
        "docs-link/": LINKED_INSIDE,  # linked folders are not followed, and say so (a trial found them silent)
        "loop.md": DANGLING,
        "out.md": OUTSIDE,
        "outdir/": LINKED_OUTSIDE,
        "real.md": None,
    }
    assert entry_for(root, "out.md", max_bytes=BIG).skip == OUTSIDE
    assert entry_for(root, "alias.md", max_bytes=BIG).size == len("# real\n")


def test_entry_for(tmp_path):
    root = write(tmp_path, {".gitignore": "drafts/\n", "a.md": "hello", "drafts/b.md": "", "c.txt": ""})
    e = entry_for(root, "a.md", max_bytes=BIG)
    assert (e.relpath, e.size, e.skip) == ("a.md", 5, None)
    assert entry_for(root, "a.md", max_bytes=2).skip == "larger than 2 bytes"
    assert entry_for(root, "drafts/b.md", max_bytes=BIG) is None
    assert entry_for(root, "c.txt", max_bytes=BIG) is None
    assert entry_for(root, "gone.md", max_bytes=BIG) is None


@pytest.mark.parametrize(
    "rel, ok",
    [("a.md", True), ("A.MD", True), ("x/y.markdown", True), ("a.mdx", False), ("md", False), ("a.md.txt", False)],
)
def test_is_markdown_path(rel, ok):
    assert is_markdown_path(rel) is ok
