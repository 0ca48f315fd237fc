"""A file the index cannot take (a dangling or looping symlink, one grown past max_file_bytes) is
reported the same way by a full index and by the live index: skipped, with its reason, not
deleted, though a document stored at that path leaves the index (one `delete` in the change log)
either way. Real SQLite stores, one per way of indexing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

DANGLING = "symlink target does not exist or loops"


def _world(root: Path) -> None:
    root.mkdir()
    (root / "keep.md").write_text("# Keep\n\nstays\n")
    (root / "linked.md").write_text("# Linked\n\nbecomes a dangling link\n")
    (root / "big.md").write_text("# Big\n\nsmall for now\n")


def _break(root: Path) -> list[str]:
    (root / "linked.md").unlink()
    os.symlink(root / "nowhere.md", root / "linked.md")
    os.symlink(root / "loop.md", root / "loop.md")
    (root / "big.md").write_text("# Big\n\n" + "grown past the limit " * 200)
    return ["big.md", "linked.md", "loop.md"]


@pytest.mark.parametrize("live", [False, True], ids=["index", "index_paths"])
def test_a_file_that_cannot_be_indexed_is_skipped_not_deleted(service_factory, tmp_path: Path, live):
    root = tmp_path / "kb"
    _world(root)
    svc = service_factory(root, {"embedding": {"provider": "none"}, "max_file_bytes": 1024})
    head = svc.changes_since("kb", 0, 100)["next_cursor"]
    changed = _break(root)
    report = svc.index_paths("kb", changed) if live else svc.index("kb")
    assert (report["added"], report["modified"], report["deleted"], report["renamed"]) == (0, 0, 0, 0), report
    skipped = {s["path"]: s["reason"] for s in report["skipped"]}
    assert sorted(skipped) == ["big.md", "linked.md", "loop.md"], skipped
    assert skipped["linked.md"] == skipped["loop.md"] == DANGLING
    assert "1024" in skipped["big.md"] or "large" in skipped["big.md"], skipped["big.md"]
    got = sorted((c["path"], c["op"]) for c in svc.changes_since("kb", head, 100)["changes"])
    assert got == [("big.md", "delete"), ("linked.md", "delete")]
    assert [h["path"] for h in svc.search("kb", "stays", {"stages": ["lexical"]})["hits"]] == ["keep.md"]
