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
    LeftOut,
    MarkdownRule,
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
    # a few bytes that are not UTF-8 do not make a file binary: ingest/text.py replaces them (issue 35)
    assert read_document(KB / "notes/bad-encoding.md", max_bytes=BIG)[_special["BAD_ENCODING_OFFSET"]] == 0xE9
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
    [
        ("a.md", True),
        ("A.MD", True),
        ("x/y.markdown", True),
        ("a.mdx", True),
        ("a.mdown", True),
        ("a.mkd", True),
        ("md", False),
        (".md", False),
        ("a.md.txt", False),
        ("a.html.md.erb", False),
        (".github/CONTRIBUTING.md", False),
    ],
)
def test_is_markdown_path(rel, ok):
    assert is_markdown_path(rel) is ok


ERB = MarkdownRule((".md", "*.html.md.erb"))
GITHUB = MarkdownRule((".md", ".github/**/*.md"))


@pytest.mark.parametrize(
    "rule, rel, ok",
    [
        (ERB, "source/incident.html.md.erb", True),
        (ERB, "source/x.md.erb", False),  # the glob asks for .html.md.erb
        (ERB, "source/x.mdx", False),  # the rule replaces the defaults
        (MarkdownRule((".md.erb",)), "a/b.html.md.erb", True),  # an extension of two parts
        (GITHUB, ".github/CONTRIBUTING.md", True),
        (GITHUB, ".github/ISSUE_TEMPLATE/bug.md", True),
        (GITHUB, ".other/x.md", False),
        (MarkdownRule(("**/*.md",)), ".github/x.md", False),  # ** never walks into a hidden folder
        (MarkdownRule((".*/**/*.md",)), ".obsidian/x.md", True),  # unless a segment starts with a dot
        (MarkdownRule(("docs/*.txt",)), "docs/a.TXT", True),
        (MarkdownRule(("docs/*.txt",)), "x/docs/a.txt", False),  # a glob with a slash is anchored
        (MarkdownRule((".*.md",)), "notes/.draft.md", True),  # a hidden file named by a dotted glob
    ],
)
def test_markdown_rule(rule, rel, ok):
    assert rule.matches(rel) is ok


def test_the_rule_picks_files_enters_hidden_folders_and_counts_what_it_leaves_out(tmp_path):
    root = write(
        tmp_path / "ws",
        {
            "a.md": "",
            "b.mdx": "",
            "source/incident.html.md.erb": "",
            "source/runbook.html.md.erb": "",
            "source/layout.erb": "",  # not Markdown-looking: not counted
            "README.md.bak": "",
            "notes/.draft.md": "",  # a hidden file: counted apart
            ".github/CONTRIBUTING.md": "",
            ".github/ISSUE_TEMPLATE/bug.md": "",
            ".obsidian/app.json": "",
            ".session/s.md": "",  # sessions' reserved folder: never a file's
            ".git/x.md": "",
        },
    )
    left = LeftOut()
    got = [e.relpath for e in scan_workspace(root, max_bytes=BIG, left_out=left)]
    assert got == ["a.md", "b.mdx"]
    out = left.to_json()
    assert out["files"] == 3 and out["by_extension"] == {".md.erb": 2, ".md.bak": 1} and out["hidden_files"] == 1
    assert out["hidden_folders"] == 2 and ".github/" in out["examples"] and out["setting"] == "markdown"
    rule = MarkdownRule((".md", "*.html.md.erb", ".github/**/*.md", ".session/*.md", ".*.md"))
    left = LeftOut()
    got = [e.relpath for e in scan_workspace(root, max_bytes=BIG, rule=rule, left_out=left)]
    assert got == [
        ".github/CONTRIBUTING.md",
        ".github/ISSUE_TEMPLATE/bug.md",
        "a.md",
        "notes/.draft.md",
        "source/incident.html.md.erb",
        "source/runbook.html.md.erb",
    ]
    assert left.to_json()["by_extension"] == {".md.bak": 1, ".mdx": 1} and left.hidden_folders == 1  # .obsidian
    assert not is_ignored(root, ".github/ISSUE_TEMPLATE/bug.md", rule) and is_ignored(root, ".github/x.md")
    assert is_ignored(root, ".session/s.md", rule)
    assert entry_for(root, "source/incident.html.md.erb", max_bytes=BIG, rule=rule) is not None
    assert entry_for(root, "source/incident.html.md.erb", max_bytes=BIG) is None


def test_mostly_invalid_utf8_is_binary_and_a_utf16_bom_is_text(tmp_path):
    noise = tmp_path / "noise.md"
    noise.write_bytes(bytes(range(128, 256)) * 40)  # no NUL, hardly a valid character
    with pytest.raises(SkipFile, match=r"^binary file \(\d+ of its first 5120 bytes are not UTF-8\)$"):
        read_document(noise, max_bytes=BIG)
    wide = tmp_path / "wide.md"
    wide.write_bytes("\ufeff# x\n".encode("utf-16-le"))  # NUL bytes, but the mark says UTF-16
    assert read_document(wide, max_bytes=BIG).startswith(b"\xff\xfe")
