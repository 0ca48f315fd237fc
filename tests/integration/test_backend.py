"""connect.Backend, the one client-side backend, without a daemon: a reader beside another writer,
the writer it becomes once asked to write, and its index_paths seam (a writable Service here only)."""

from __future__ import annotations

from autodoc.config import Settings
from autodoc.connect import Backend, Local


def test_a_reader_beside_a_writer_chooses_again_for_a_write(tmp_path):
    root = tmp_path / "kb"
    root.mkdir()
    (root / "a.md").write_text("# A\n\nThe writer holds a lease.\n", encoding="utf-8")
    settings = Settings.from_env(store=tmp_path / "store" / "autodoc.db", socket=str(tmp_path / "none.sock"))
    writer = Local(settings, writer=True)
    writer.call("workspace.add", {"name": "kb", "root": str(root), "config": {"embedding": {"provider": "none"}}})
    reader = Backend(settings, rechoose_for_writes=True)
    try:
        assert reader.mode.startswith("in-process (read-only")
        assert not reader.indexes_here
        assert reader.index_paths("kb", ["a.md"]) is False  # another process's to do
        assert [w["name"] for w in reader.call("workspace.list", {})["workspaces"]] == ["kb"]
        writer.close()
        report = reader.call("workspace.index", {"workspace": "kb"})  # a write: the lease is free now
        assert report["added"] == 1 and reader.mode == "in-process" and reader.indexes_here
        (root / "b.md").write_text("# B\n\nA second note.\n", encoding="utf-8")
        assert reader.index_paths("kb", ["b.md"]) is True
        assert reader.call("workspace.list", {})["workspaces"][0]["documents"] == 2
    finally:
        reader.close()
        writer.close()
