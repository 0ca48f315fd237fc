"""The incremental link resolver (store/links.py) against a resolution from
scratch, in the cases a review of it found: a moved note's own relative links,
names no LIKE pattern can find, a save renaming hundreds of notes at once, and
an index job that fails halfway. Real stores, saves through the live path."""

from __future__ import annotations

from pathlib import Path

import pytest

import autodoc.index.job as job
import autodoc.index.prepare as preparing
import autodoc.store.documents as stored_documents
from autodoc.service import Service
from autodoc.store.links import _resolver_for
from autodoc.store.workspaces import get_workspace

NO_MODEL = {"embedding": {"provider": "none"}}


@pytest.fixture()
def kb(service_factory, tmp_path: Path):
    root = tmp_path / "kb"
    root.mkdir()
    return root, service_factory(store=tmp_path / "s.db")


def stale(svc: Service) -> list[tuple]:
    """Links whose stored target differs from a from-scratch resolution."""
    db = svc.store.reader()
    with db:
        ws = get_workspace(db, "kb")
        resolve = _resolver_for(db, ws.id)
        rows = db.execute(
            "SELECT d.path, l.target, l.target_path FROM links l JOIN documents d "
            "ON d.id = l.source_id WHERE l.workspace_id=?",
            (ws.id,),
        ).fetchall()
    return [(s, t, got, resolve(s, t)) for s, t, got in rows if got != resolve(s, t)]


def links(svc: Service, path: str) -> set[tuple]:
    return {(l["target"], l["target_path"]) for l in svc.document_links("kb", path)["links"]}


@pytest.mark.parametrize("live", [True, False], ids=["index_paths", "index"])
def test_a_moved_note_resolves_its_own_links_from_its_new_folder(kb, live):
    root, s = kb
    (root / "notes").mkdir()
    (root / "notes" / "guide.md").write_text("# Notes guide\n\nbody\n")
    (root / "guide.md").write_text("# Top guide\n\nbody\n")
    (root / "notes" / "source.md").write_text("# Source\n\nSee [[guide]] and [g](guide.md).\n")
    s.workspace_add("kb", str(root), NO_MODEL)
    s.index("kb")
    assert links(s, "notes/source.md") == {("guide", "notes/guide.md"), ("guide.md", "notes/guide.md")}
    (root / "notes" / "source.md").replace(root / "source.md")  # same bytes: stored as a rename
    if live:
        s.index_paths("kb", ["notes/source.md", "source.md"])
    else:
        s.index("kb")
    assert links(s, "source.md") == {("guide", "guide.md"), ("guide.md", "guide.md")}
    assert stale(s) == []


# (existing files, the new note that should now win the link: it sorts first)
CASES = {
    "title without a word": (
        {"zz.md": "---\ntitle: '???'\n---\nbody\n", "src.md": "# Src\n\nSee [[???]].\n"},
        ("aa.md", "---\ntitle: '???'\n---\nbody\n"),
    ),
    "emoji alias": (
        {"zz.md": "---\naliases: ['🚀']\n---\n# Zz\n", "src.md": "# Src\n\nSee [[🚀]].\n"},
        ("aa.md", "---\naliases: ['🚀']\n---\n# Aa\n"),
    ),
    # the Kelvin sign lowers to ASCII "k" in Python; SQLite's LIKE does not fold it
    "kelvin sign": (
        {"zz.md": "---\ntitle: Kelvin\n---\nbody\n", "src.md": "# Src\n\nSee [[\u212aelvin]].\n"},
        ("kelvin.md", "# Other\n\nbody\n"),
    ),
    # Python's \d and int() read fullwidth digits; LIKE '%12%' does not match them
    "fullwidth ADR number": (
        {"zz.md": "---\nadr: 12\n---\n# Zz\n", "src.md": "# Src\n\nSee [[ADR \uff11\uff12]].\n"},
        ("aa.md", "---\nadr: 12\n---\n# Aa\n"),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_names_no_like_pattern_finds_are_still_re_resolved(kb, case):
    root, s = kb
    files, (new, text) = CASES[case]
    for p, t in files.items():
        (root / p).write_text(t)
    s.workspace_add("kb", str(root), NO_MODEL)
    s.index("kb")
    assert [l for l in links(s, "src.md") if l[1]] and stale(s) == []
    (root / new).write_text(text)
    s.index_paths("kb", [new])
    assert stale(s) == [] and links(s, "src.md") == {(next(iter(links(s, "src.md")))[0], new)}


def _notes(root: Path, gen: str, n: int = 200) -> None:
    for i in range(n):
        (root / f"n{i:04d}.md").write_text(
            f"---\ntitle: {gen}title{i:04d}\naliases: [{gen}alias{i:04d}]\n---\n\nSee [[{gen}title{(i + 1) % n:04d}]].\n"
        )


@pytest.mark.parametrize("live", [True, False], ids=["index_paths", "index"])
def test_a_save_renaming_hundreds_of_notes(kb, live):
    # each renamed note brings several words to look for: one OR per word once broke
    # SQLite's expression depth limit and rolled the whole save back
    root, s = kb
    _notes(root, "old")
    s.workspace_add("kb", str(root), NO_MODEL)
    s.index("kb")
    _notes(root, "new")
    if live:
        s.index_paths("kb", [f"n{i:04d}.md" for i in range(200)])
    else:
        s.index("kb")
    assert links(s, "n0000.md") == {("newtitle0001", "n0001.md")}
    assert stale(s) == []


def test_a_job_that_fails_halfway_leaves_no_stale_names(kb, monkeypatch):
    root, s = kb
    (root / "seed.md").write_text("# Seed\n\nbody\n")
    s.workspace_add("kb", str(root), NO_MODEL)
    s.index("kb")  # the name tables are cached now
    for i in range(job.WRITE_BATCH):  # one whole batch is committed before the failure
        (root / f"a{i:03d}.md").write_text(f"# Note {i}\n\nbody\n")
    (root / "zzz-bad.md").write_text("# Bad\n\nbody\n")

    def progress(done, total, rel):  # the job stops there, as a cancelled index run does
        if rel == "zzz-bad.md":
            raise RuntimeError("cancelled")

    with pytest.raises(RuntimeError):
        s.index("kb", progress=progress)
    (root / "zzz-bad.md").unlink()
    (root / "link.md").write_text("# Link\n\nSee [[Note 5]].\n")
    s.index_paths("kb", ["link.md"])
    assert links(s, "link.md") == {("Note 5", "a005.md")}


def test_one_file_that_breaks_the_parser_is_skipped_with_its_reason(kb, monkeypatch):
    root, s = kb
    for name in ("a", "b", "c"):
        (root / f"{name}.md").write_text(f"# Note {name}\n\nSee [[Note a]].\n")
    real = preparing.prepare

    def prepare(rel, *args):  # a parser bug on one file: a fault no fixed parser lets a real file cause
        if rel == "b.md":
            raise ValueError("day is out of range for month")
        return real(rel, *args)

    monkeypatch.setattr(preparing, "prepare", prepare)  # inline: conftest starts no parsing workers
    s.workspace_add("kb", str(root), NO_MODEL)
    report = s.index("kb")
    assert report["added"] == 2
    assert [x["path"] for x in report["skipped"]] == ["b.md"]
    assert "day is out of range" in report["skipped"][0]["reason"]
    status = s.workspace_status("kb")
    assert status["files"]["indexed"] == 2 and [x["path"] for x in status["files"]["skipped"]] == ["b.md"]
    live = s.index_paths("kb", ["b.md", "c.md"])
    assert [x["path"] for x in live["skipped"]] == ["b.md"]
    monkeypatch.setattr(preparing, "prepare", real)
    assert s.index("kb")["added"] == 1 and s.workspace_status("kb")["files"]["skipped"] == []


def test_one_document_that_cannot_be_written_leaves_the_rest_of_its_batch(kb, monkeypatch):
    root, s = kb
    for name in ("a", "b", "c"):
        (root / f"{name}.md").write_text(f"# Note {name}\n\nbody {name}\n")
    real = stored_documents.write_document

    def write_document(db, ws, path, **kw):  # a store fault on one row: not causable by a real file on demand
        if path == "b.md":
            raise ValueError("cannot store this")
        return real(db, ws, path, **kw)

    monkeypatch.setattr(stored_documents, "write_document", write_document)
    s.workspace_add("kb", str(root), NO_MODEL)
    report = s.index("kb")
    assert report["added"] == 2 and [x["path"] for x in report["skipped"]] == ["b.md"]
    assert [x["path"] for x in s.workspace_status("kb")["files"]["skipped"]] == ["b.md"]
    assert {h["path"] for h in s.search("kb", "body")["hits"]} == {"a.md", "c.md"}
