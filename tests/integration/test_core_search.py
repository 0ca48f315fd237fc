"""The core end to end, in-process: a real SQLite store, the real corpus,
lexical search with spans, facets, boosts, demotion and stage reporting."""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path

import apsw
import pytest

from autodoc.config import Settings
from autodoc.connect import invoke
from autodoc.errors import InvalidParams, PathOutsideWorkspace, StoreLocked, Unsupported, WorkspaceNotFound
from autodoc.service import Service

CORPUS = Path(__file__).parents[1] / "corpora" / "kb"
NO_MODEL = {"embedding": {"provider": "none"}}  # the lexical core alone


@pytest.fixture()
def kb(tmp_path: Path) -> Path:
    from corpora.make_special import ensure_special_files

    ensure_special_files()
    dst = tmp_path / "kb"
    shutil.copytree(CORPUS, dst, symlinks=True)
    return dst


@pytest.fixture()
def svc(service_factory, tmp_path: Path, kb: Path):
    return service_factory(kb, NO_MODEL, store=tmp_path / "store" / "autodoc.db")


def paths(answer):
    return [h["path"] for h in answer["hits"]]


def test_index_reports_what_it_did_and_why_it_skipped(tmp_path, kb):
    s = Service(Settings.from_env(store=tmp_path / "s.db"))
    s.workspace_add("kb", str(kb), NO_MODEL)
    rep = s.index("kb")
    reasons = {x["path"]: x["reason"] for x in rep["skipped"]}
    assert "binary" in reasons["notes/diagram-export.md"]
    assert "notes/bad-encoding.md" not in reasons  # a few bad bytes are replaced, not a reason to drop it (issue 35)
    assert "outside" in reasons["outside.md"]
    assert rep["added"] >= 12 and rep["modified"] == 0
    again = s.index("kb")
    assert again["added"] == again["modified"] == again["deleted"] == 0
    st = s.workspace_status("kb")
    assert st["files"]["indexed"] == rep["added"]
    assert {x["path"] for x in st["files"]["skipped"]} == set(reasons)
    assert any(p["path"] == "notes/broken-frontmatter.md" for p in st["problems"])
    s.close()


def test_hits_carry_exact_spans(svc, kb):
    ans = svc.search("kb", "reclaimBatch")
    assert ans["hits"], ans
    for h in ans["hits"]:
        data = (kb / h["path"]).read_bytes()
        piece = data[h["byte_start"] : h["byte_end"]].decode()
        lines = data.decode().split("\n")[h["line_start"] - 1 : h["line_end"]]
        if h["kind"] == "section":
            assert "\n".join(lines).find(piece.strip().split("\n")[0]) >= 0
        assert "«reclaimBatch»" in h["snippet"] or "«reclaimbatch»" in h["snippet"].lower()
        read = svc.document_read("kb", h["path"], {"byte_start": h["byte_start"], "byte_end": h["byte_end"]})
        assert read["text"] == piece and read["line_start"] == h["line_start"]


def test_operators_and_codes_are_plain_words(svc):
    for q in ["-32069", "a3f9c2e", "NEAR AND (lease", 'lease"', "body:lease", "*"]:
        ans = svc.search("kb", q)  # never an FTS5 error
        assert ans["stages"]["requested"] == ["lexical", "semantic", "rerank"]
    assert "adrs/0012-lease-recovery.md" in paths(svc.search("kb", "a3f9c2e"))
    assert all("-«32069»" in h["snippet"] for h in svc.search("kb", "-32069")["hits"])


def test_cjk_substrings_are_findable(svc):
    assert paths(svc.search("kb", "迁移"))[:1] == ["notes/cjk-notes.md"]
    assert "notes/cjk-notes.md" in paths(svc.search("kb", "エンジン"))


def test_and_then_relaxed_to_any(svc):
    strict = svc.search("kb", "lease reclaimBatch", {"limit": 1})
    assert strict["lexical_match"] == "all"
    relaxed = svc.search("kb", "lease reclaimBatch", {"limit": 30})
    assert relaxed["lexical_match"] == "mixed"  # some chunks had both words: not "any" (issue 18)
    both = [h for h in relaxed["hits"] if "reclaimbatch" in h["snippet"].lower() and "lease" in h["snippet"].lower()]
    assert relaxed["hits"][0] in both  # chunks with every word stay on top
    loose = svc.search("kb", "why would anyone pick an embedded relational store for zebras")
    assert loose["lexical_match"] == "any" and loose["hits"]


def test_stage_record_is_honest_without_models(svc):
    ans = svc.search("kb", "lease")
    st = ans["stages"]
    assert st["performed"] == ["lexical"]
    assert set(st["skipped"]) == {"semantic", "rerank"} and all(st["skipped"].values())
    assert ans["mode_used"] == "lexical" and ans["semantic"] == "off"
    only_lex = svc.search("kb", "lease", {"stages": ["lexical"]})
    assert only_lex["stages"]["skipped"] == {} and only_lex["stages"]["requested"] == ["lexical"]
    with pytest.raises(Unsupported):
        svc.search("kb", "lease", {"stages": ["semantic"]})
    with pytest.raises(Unsupported):
        svc.search("kb", "lease", {"mode": "semantic"})


def test_per_document_cap(svc):
    ans = svc.search("kb", "lease", {"limit": 50})
    counts = {}
    for h in ans["hits"]:
        counts[h["path"]] = counts.get(h["path"], 0) + 1
    assert max(counts.values()) <= 3


def test_superseded_documents_sit_below_their_successors(svc):
    ans = svc.search("kb", "sqlite lease writer", {"limit": 30})
    order = paths(ans)
    p12, p7 = "adrs/0012-lease-recovery.md", "adrs/0007-sqlite-wal-lease.md"
    if p7 in order and p12 in order:
        last12 = max(i for i, p in enumerate(order) if p == p12)
        first7 = min(i for i, p in enumerate(order) if p == p7)
        assert first7 == last12 + 1
        assert all(h["superseded_by"] == p12 for h in ans["hits"] if h["path"] == p7)
    off = svc.search("kb", "sqlite lease writer", {"limit": 30, "retrieval": {"demote_superseded": False}})
    assert all(h["superseded_by"] is None for h in off["hits"])


def test_facets_filter_and_wordless_browse(svc):
    adrs = svc.search("kb", "lease type:adr", {"limit": 50})
    assert adrs["hits"] and all(p.startswith("adrs/") for p in paths(adrs))
    not_sup = svc.search("kb", "sqlite -status:superseded", {"limit": 50})
    assert "adrs/0007-sqlite-wal-lease.md" not in paths(not_sup)
    browse = svc.search("kb", "type:adr status:accepted")
    assert browse["mode_used"] == "facet" and paths(browse) == sorted(paths(browse))
    assert "adrs/0012-lease-recovery.md" in paths(browse)
    tag = svc.search("kb", "tag:sqlite", {"limit": 50})
    assert tag["mode_used"] == "facet" and "adrs/0007-sqlite-wal-lease.md" in paths(tag)
    words = svc.search("kb", "nosuchfield:lease")  # undeclared → words
    assert words["mode_used"] == "lexical"
    scoped = svc.search("kb", "lease", {"paths": ["runbooks"], "limit": 50})
    assert scoped["hits"] and all(p.startswith("runbooks/") for p in paths(scoped))


def test_abstract_chunk_can_be_excluded(svc):
    with_abs = svc.search("kb", "stale writer lease reclaimed", {"limit": 50})
    assert any(h["kind"] == "abstract" for h in with_abs["hits"])
    without = svc.search("kb", "stale writer lease reclaimed", {"limit": 50, "retrieval": {"abstract_chunk": False}})
    assert all(h["kind"] != "abstract" for h in without["hits"])


def test_bad_params_name_the_field(svc):
    for opts, field in [
        ({"limit": 0}, "opts.limit"),
        ({"stages": ["rerank"]}, "opts.stages"),
        ({"ranker": {"window": 5}}, "opts.ranker.window"),
        ({"bogus": 1}, "opts.bogus"),
        ({"fusion": {"method": "x"}}, "opts.fusion.method"),
    ]:
        with pytest.raises(InvalidParams) as e:
            invoke(svc, "search.query", ["kb", "lease", opts])
        assert e.value.field == field
    with pytest.raises(WorkspaceNotFound):
        svc.search("nope", "lease")


def test_repeat_searches_are_byte_identical(svc):
    import json

    a = json.dumps(svc.search("kb", "sqlite lease recovery", {"limit": 20}))
    b = json.dumps(svc.search("kb", "sqlite lease recovery", {"limit": 20}))
    assert a == b


def test_edit_writes_a_new_generation_and_keeps_unchanged_chunks(svc, kb):
    db = svc.store.reader()
    path = "adrs/0012-lease-recovery.md"
    before = dict(
        db.execute(
            "SELECT c.text_hash, c.id FROM chunks c JOIN documents d ON d.id=c.document_id WHERE d.path=?", (path,)
        ).fetchall()
    )
    gen0 = db.execute("SELECT generation FROM documents WHERE path=?", (path,)).fetchone()[0]
    f = kb / path
    f.write_text(f.read_text().replace("## Consequences", "## Consequences\n\nA new paragraph about zanzibar.\n", 1))
    rep = svc.index("kb")
    assert rep["modified"] == 1
    after = dict(
        db.execute(
            "SELECT c.text_hash, c.id FROM chunks c JOIN documents d ON d.id=c.document_id WHERE d.path=?", (path,)
        ).fetchall()
    )
    gen1 = db.execute("SELECT generation FROM documents WHERE path=?", (path,)).fetchone()[0]
    assert gen1 > gen0
    kept = set(before) & set(after)
    assert kept and all(before[h] == after[h] for h in kept)  # same rows, not rewritten
    assert len(set(after) - set(before)) >= 1
    hits = svc.search("kb", "zanzibar")["hits"]
    assert hits and hits[0]["path"] == path and hits[0]["generation"] == gen1


def test_change_log_and_cursor(svc, kb):
    start = svc.changes_since("kb", 0)
    assert {c["op"] for c in start["changes"]} == {"add"}
    cur = start["next_cursor"]
    (kb / "notes" / "new-note.md").write_text("# New note\n\nquokka\n")
    (kb / "runbooks" / "lease-recovery.md").rename(kb / "runbooks" / "lease-recovery-v2.md")
    (kb / "index.md").unlink()
    svc.index("kb")
    ch = svc.changes_since("kb", cur)["changes"]
    ops = {(c["op"], c["path"]) for c in ch}
    assert ("add", "notes/new-note.md") in ops
    assert ("delete", "index.md") in ops
    assert any(c["op"] == "rename" and c["old_path"] == "runbooks/lease-recovery.md" for c in ch)
    assert all(b["cursor"] > a["cursor"] for a, b in itertools.pairwise(ch))


def test_a_renamed_file_titled_by_its_name_is_found_by_its_new_name(svc, kb):
    """No H1 and no frontmatter title: the file name is the title and is in every breadcrumb,
    so a rename (which keeps the rows of an unchanged file) must rewrite them."""
    (kb / "zanzibar-ferries.md").write_text("Ferries leave the harbour at dawn.\n\n## Winter\n\nFewer crossings.\n")
    svc.index("kb")
    cur = svc.changes_since("kb", 0)["next_cursor"]
    (kb / "zanzibar-ferries.md").rename(kb / "quokka-ferries.md")
    report = svc.index("kb")
    assert report["renamed"] == 1
    lex = {"stages": ["lexical"]}
    assert set(paths(svc.search("kb", "quokka", lex))) == {"quokka-ferries.md"}
    assert {h["title"] for h in svc.search("kb", "quokka", lex)["hits"]} == {"quokka-ferries"}
    assert svc.search("kb", "zanzibar", lex)["hits"] == []
    ops = [(c["op"], c["path"]) for c in svc.changes_since("kb", cur)["changes"]]
    assert ops[0] == ("rename", "quokka-ferries.md")  # the move is logged as a move, then its new rows


def test_expired_cursor_is_a_distinct_error(svc, kb):
    from autodoc.errors import CursorExpired
    from autodoc.store import changes

    db = svc.store.writer()
    with db:
        db.execute("UPDATE changes SET time = time - 8*86400")
        changes.trim(db, keep_entries=1)
    with pytest.raises(CursorExpired):
        svc.changes_since("kb", 1)  # a client that read entry 1, which is gone
    # 0 is a client that never read any: it starts from what is kept
    kept = svc.changes_since("kb", 0)
    assert len(kept["changes"]) == 1 and kept["next_cursor"] == kept["changes"][0]["cursor"]


def test_second_writer_is_refused_naming_the_holder(tmp_path):
    store = tmp_path / "x.db"
    a = Service(Settings.from_env(store=store), holder={"socket": "/tmp/a.sock"})
    with pytest.raises(StoreLocked) as e:
        Service(Settings.from_env(store=store))
    assert "pid" in e.value.message and "/tmp/a.sock" in e.value.message and "talk to that daemon" in e.value.message
    a.close()
    b = Service(Settings.from_env(store=store))  # free again; held now by a writer with no socket (an LSP)
    with pytest.raises(StoreLocked) as e:
        Service(Settings.from_env(store=store))
    assert "talk to" not in e.value.message and "stop it first" in e.value.message
    b.close()


def test_newer_schema_is_refused(tmp_path):
    from autodoc.errors import StoreTooNew

    store = tmp_path / "n.db"
    Service(Settings.from_env(store=store)).close()
    db = apsw.Connection(str(store))
    db.execute("PRAGMA user_version = 99")
    db.close()
    with pytest.raises(StoreTooNew):
        Service(Settings.from_env(store=store))


def test_document_read_refuses_escapes(svc):
    for p in ["../outside-target.md", "/etc/hostname", "outside.md", "adrs/../../x.md"]:
        with pytest.raises(PathOutsideWorkspace):
            svc.document_read("kb", p)
    r = svc.document_read("kb", "adrs/0012-lease-recovery.md", {"line_start": 2, "line_end": 3})
    assert r["text"].startswith("title:") and r["line_start"] == 2 and r["line_end"] == 3


def test_section_size_rechunks(svc):
    n0 = svc.workspace_status("kb")["chunks"]
    svc.workspace_section_size("kb", 64)
    n1 = svc.workspace_status("kb")["chunks"]
    assert n1 > n0
    with pytest.raises(InvalidParams):
        invoke(svc, "workspace.section_size", ["kb", 5])


def test_a_root_the_file_system_cannot_use_is_a_params_error(svc, tmp_path):
    # found by fuzzing: each answered -32603 before
    for root in ("~nosuchuser-autodoc/kb", str(tmp_path / ("é" * 200))):
        with pytest.raises(InvalidParams) as e:
            svc.workspace_add("w", root)
        assert e.value.field == "root"


def test_the_store_its_wal_and_its_lease_are_the_owners_alone(svc):
    import stat

    svc.search("kb", "lease")  # the WAL exists once something was written and read
    store = svc.store_path
    for f in (store, store.with_name(store.name + "-wal"), store.with_name(store.name + ".lease")):
        assert f.exists(), f
        assert stat.S_IMODE(f.stat().st_mode) & 0o077 == 0, (f, oct(f.stat().st_mode))


def test_the_whole_machine_or_home_is_not_a_workspace_unless_forced(svc):
    home = str(Path.home())
    for root in ("/", home):
        with pytest.raises(InvalidParams) as e:
            invoke(svc, "workspace.add", ["w", root])
        assert e.value.field == "root" and "force" in e.value.message
    added = invoke(
        svc, "workspace.add", {"name": "w", "root": home, "config": {"embedding": {"provider": "none"}}, "force": True}
    )
    assert added["root"] == str(Path(home).resolve())  # added, not indexed: nothing is read until workspace.index
    svc.workspace_remove("w")


def test_a_live_index_of_a_skipped_file_keeps_the_other_skip_records(tmp_path):
    """Saving one unreadable file while the daemon watches indexed that path alone, and the
    record of it replaced every other skip record of the workspace (a review, session 12)."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / "good.md").write_text("# Good\n\nwords\n")
    (root / "latin1.md").write_bytes(b"\x89PNG\r\n\x1a\n\0\0")  # binary: skipped
    svc = Service(Settings.from_env(store=tmp_path / "s.db"))
    try:
        svc.workspace_add("kb", str(root), NO_MODEL)
        svc.index("kb")
        assert [s["path"] for s in svc.workspace_status("kb")["files"]["skipped"]] == ["latin1.md"]
        (root / "nul.md").write_bytes(b"# A\n\0\n")
        svc.index_paths("kb", ["nul.md"])
        assert [s["path"] for s in svc.workspace_status("kb")["files"]["skipped"]] == ["latin1.md", "nul.md"]
        (root / "latin1.md").write_text("# Cafe\n\nfixed\n")
        svc.index_paths("kb", ["latin1.md"])  # indexed now: its record goes, the other stays
        assert [s["path"] for s in svc.workspace_status("kb")["files"]["skipped"]] == ["nul.md"]
        svc.index("kb")  # a full scan still forgets what is no longer skipped
        (root / "nul.md").unlink()
        svc.index("kb")
        assert svc.workspace_status("kb")["files"]["skipped"] == []
    finally:
        svc.close()
