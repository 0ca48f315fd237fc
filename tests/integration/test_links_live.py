"""Links resolve as documents come and go, without re-resolving the whole
workspace on every edit: a link to a missing note resolves once the note
appears, breaks when it is deleted, and follows a retitled target."""

from pathlib import Path

from autodoc.config import Settings
from autodoc.service import Service
from autodoc.store.workspaces import get_workspace


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


def test_incremental_name_tables_agree_with_a_full_rebuild(tmp_path):
    # A save updates the link resolver's name tables one document at a time and re-resolves
    # only the links that could change; after every kind of save (new note, retitle, alias,
    # move, delete, body edit) each link must resolve as a rebuild from scratch resolves it.
    import json
    import random

    from autodoc.config import Settings
    from autodoc.service import Service
    from autodoc.store.links import _tables_for

    rng = random.Random(7)
    root = tmp_path / "ws"
    (root / "sub").mkdir(parents=True)
    names = ["alpha", "beta", "gamma", "delta", "adr-0012-lease", "sub/alpha", "sub/omega"]
    titles = ["Lease Recovery", "Storage Layout", "Über Uns", "Sync Protocol", "Alpha"]
    targets = [
        "alpha",
        "Lease Recovery",
        "storage layout",
        "ADR 12",
        "sub/omega",
        "../alpha.md",
        "Über uns",
        "omega",
        "beta.md",
        "Sync  Protocol",
        "nothing here",
        "gamma",
    ]

    def write(path: str) -> None:
        title = rng.choice(titles)
        alias = rng.choice(titles + ["", ""])
        links = " ".join(f"[[{t}]]" for t in rng.sample(targets, 3))
        fm = f"---\ntitle: {title}\n" + (f"aliases: [{alias}]\n" if alias else "") + "---\n"
        (root / f"{path}.md").write_text(f"{fm}\nSee {links} and [x]({rng.choice(targets)}.md).\n")

    for n in names[:5]:
        write(n)
    s = Service(Settings.from_env(store=tmp_path / "store" / "autodoc.db"))
    try:
        s.workspace_add("w", str(root), {"embedding": {"provider": "none"}})
        s.index("w")
        checked = 0
        for step in range(40):
            present = [n for n in names if (root / f"{n}.md").exists()]
            op = rng.choice(["write", "write", "delete", "move"]) if present else "write"
            if op == "write":
                n = rng.choice(names)
                write(n)
                changed = [f"{n}.md"]
            elif op == "delete":
                n = rng.choice(present)
                (root / f"{n}.md").unlink()
                changed = [f"{n}.md"]
            else:
                a = rng.choice(present)
                b = rng.choice([x for x in names if x != a])
                (root / f"{a}.md").replace(root / f"{b}.md")
                changed = [f"{a}.md", f"{b}.md"]
            s.index_paths("w", changed)
            db = s.store.reader()
            with db:
                ws = get_workspace(db, "w")
                fresh = _tables_for(db, ws.id)
                rows = db.execute(
                    "SELECT d.path, l.target, l.target_path FROM links l JOIN documents d "
                    "ON d.id = l.source_id WHERE l.workspace_id=? AND l.kind IN ('wiki', 'markdown')",
                    (ws.id,),
                ).fetchall()
            checked += len(rows)
            for src, target, got in rows:
                assert got == fresh.resolve(src, target), (step, op, changed, src, target, json.dumps(got))
        assert checked > 200  # links were there to check at most steps
    finally:
        s.close()
