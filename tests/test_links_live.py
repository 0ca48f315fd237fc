"""Links resolve as documents come and go, without re-resolving the whole
workspace on every edit: a link to a missing note resolves once the note
appears, breaks when it is deleted, and follows a retitled target."""

from pathlib import Path

from autodoc.config import Settings
from autodoc.service import Service


def links(svc, path):
    return {(l["target"], l["target_path"]) for l in svc.document_links("kb", path)["links"]}


def test_links_follow_documents_as_they_change(tmp_path: Path):
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "a.md").write_text("# A\n\nSee [[Beta notes]] and [[c]].\n")
    svc = Service(Settings.from_env(store=tmp_path / "s.db"))
    svc.workspace_add("kb", str(kb), {"embedding": {"provider": "none"}})
    svc.index("kb")
    assert links(svc, "a.md") == {("Beta notes", None), ("c", None)}
    (kb / "b.md").write_text("# Beta notes\n\nbody\n")
    svc.index_paths("kb", ["b.md"])
    assert links(svc, "a.md") == {("Beta notes", "b.md"), ("c", None)}
    # a body edit: the resolver is reused, the edited file's own links still resolve
    (kb / "a.md").write_text("# A\n\nSee [[Beta notes]] and [[c]], edited.\n")
    svc.index_paths("kb", ["a.md"])
    assert links(svc, "a.md") == {("Beta notes", "b.md"), ("c", None)}
    # retitle: the old title no longer names it
    (kb / "b.md").write_text("# Gamma\n\nbody\n")
    svc.index_paths("kb", ["b.md"])
    assert links(svc, "a.md") == {("Beta notes", None), ("c", None)}
    (kb / "c.md").write_text("# C\n\n[[A]]\n")
    svc.index_paths("kb", ["c.md"])
    assert links(svc, "a.md") == {("Beta notes", None), ("c", "c.md")}
    assert {b["source_path"] for b in svc.document_backlinks("kb", "a.md")["backlinks"]} == {"c.md"}
    (kb / "c.md").unlink()
    svc.index_paths("kb", ["c.md"])
    assert links(svc, "a.md") == {("Beta notes", None), ("c", None)}
    svc.close()
