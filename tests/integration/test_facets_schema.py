"""Typed facets end to end, in-process, on the kb corpus with a frontmatter
schema (tests/corpora/kb-schema overlaid on kb): coercion, ranges, negation,
wordless browsing, facet counts, -32602 for undeclared structured facets,
validation problems with lines, and a schema edit taking effect live."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.kb_schema import NO_MODEL, make_kb_schema

from autodoc.config import Settings
from autodoc.errors import InvalidParams
from autodoc.service import Service

SCHEMA = "_schema/frontmatter.yaml"


@pytest.fixture(scope="module")
def kb(tmp_path_factory) -> Path:
    return make_kb_schema(tmp_path_factory.mktemp("kbs") / "kb")


@pytest.fixture(scope="module")
def svc(tmp_path_factory, kb: Path):
    s = Service(Settings.from_env(store=tmp_path_factory.mktemp("store") / "autodoc.db"))
    s.workspace_add("kb", str(kb), NO_MODEL)
    s.index("kb")
    yield s
    s.close()


@pytest.fixture()
def fresh(tmp_path):
    """A private corpus and store, for tests that edit files."""
    kb = make_kb_schema(tmp_path / "kb")
    s = Service(Settings.from_env(store=tmp_path / "store" / "autodoc.db"))
    s.workspace_add("kb", str(kb), NO_MODEL)
    s.index("kb")
    yield s, kb
    s.close()


def paths(answer) -> list[str]:
    return [h["path"] for h in answer["hits"]]


def browse(svc, q, **opts) -> list[str]:
    ans = svc.search("kb", q, {"limit": 200, **opts})
    assert ans["mode_used"] == "facet", ans["mode_used"]
    assert paths(ans) == sorted(paths(ans))
    return paths(ans)


ADRS_2024_ON = ["adrs/0012-lease-recovery.md", "adrs/0015-embedding-queue.md", "adrs/0018-retire-lease-files.md"]


def test_integers_coerce_and_take_ranges(svc):
    assert browse(svc, "adr:12") == browse(svc, "adr:0012") == ["adrs/0012-lease-recovery.md"]
    assert browse(svc, "adr:10..20") == ADRS_2024_ON
    assert browse(svc, "adr:>=15") == ["adrs/0015-embedding-queue.md", "adrs/0018-retire-lease-files.md"]
    assert browse(svc, "adr:<3") == ["adrs/0001-sqlite-storage.md"]
    assert browse(svc, "adr:>=5 adr:<=9") == ["adrs/0007-sqlite-wal-lease.md", "adrs/0009-porter-stemming.md"]
    assert browse(svc, "adr:..3") == ["adrs/0001-sqlite-storage.md", "adrs/0003-fts5-tokenizer.md"]
    assert browse(svc, "adr:twenty") == ["adrs/0020-broken-record.md"]  # a bad value stays findable as text


def test_dates_compare_as_dates(svc):
    assert browse(svc, "type:adr date:>=2024-01-01") == ADRS_2024_ON
    assert browse(svc, "type:adr date:2023") == [
        "adrs/0001-sqlite-storage.md",
        "adrs/0003-fts5-tokenizer.md",
        "adrs/0007-sqlite-wal-lease.md",
        "adrs/0009-porter-stemming.md",
    ]
    assert browse(svc, "date:2024-01..2024-03") == ["adrs/0012-lease-recovery.md", "design/search-pipeline.md"]
    assert browse(svc, "date:>2024") == ["adrs/0018-retire-lease-files.md"]
    assert browse(svc, "date:2024-05-10") == ["design/storage-layout.md"]


def test_numbers_booleans_lists_and_enums(svc):
    assert browse(svc, "effort:>2") == browse(svc, "effort:2.5") == ["design/storage-layout.md"]
    assert (
        browse(svc, "reviewed:yes")
        == browse(svc, "reviewed:true")
        == ["adrs/0018-retire-lease-files.md", "design/storage-layout.md"]
    )
    assert browse(svc, "reviewers:priya.raman") == ["design/storage-layout.md"]
    assert browse(svc, "status:Accepted") == ["adrs/0009-porter-stemming.md", "adrs/0012-lease-recovery.md"]
    assert browse(svc, "status:accepted status:proposed") == [
        "adrs/0009-porter-stemming.md",
        "adrs/0012-lease-recovery.md",
        "adrs/0015-embedding-queue.md",
    ]
    assert browse(svc, "tag:sqlite owner:jonas.lindqvist") == ["adrs/0012-lease-recovery.md"]


def test_negation_excludes_before_ranking(svc):
    got = browse(svc, "type:adr -status:superseded -status:deprecated")
    assert got == [
        "adrs/0009-porter-stemming.md",
        "adrs/0012-lease-recovery.md",
        "adrs/0015-embedding-queue.md",
        "adrs/0020-broken-record.md",
    ]
    assert "adrs/0018-retire-lease-files.md" not in browse(svc, "type:adr -adr:15..20")
    words = svc.search("kb", "lease -status:superseded", {"limit": 50})
    assert words["mode_used"] == "lexical" and words["hits"]
    assert not {"adrs/0001-sqlite-storage.md", "adrs/0007-sqlite-wal-lease.md"} & set(paths(words))


def test_facets_with_words_filter_before_the_ranking_limit(svc):
    ans = svc.search("kb", "lease type:design", {"limit": 1})
    assert paths(ans) == ["design/storage-layout.md"]  # found though far below the top lease hits
    ans = svc.search("kb", "lease", {"facets": {"adr": ["12"]}})
    assert set(paths(ans)) == {"adrs/0012-lease-recovery.md"}
    ans = svc.search("kb", "lease", {"facets": {"date": [">=2025-01-01"], "type": ["adr"]}})
    assert set(paths(ans)) == {"adrs/0018-retire-lease-files.md"}


def test_undeclared_fields(svc):
    # inline: searched as words (aliases is in frontmatter but not declared)
    ans = svc.search("kb", "brokenrecord nosuchfield:x")
    assert ans["mode_used"] == "lexical" and paths(ans) == ["adrs/0020-broken-record.md"]
    assert ans["lexical_match"] == "any"  # the token's words are not in the document, brokenrecord is
    ans = svc.search("kb", "zanzibar aliases:x")
    assert ans["mode_used"] == "lexical" and paths(ans) == ["rfcs/sync-protocol.md"]
    # structured: -32602 naming the field
    for opts, field in [
        ({"facets": {"nosuch": ["x"]}}, "opts.facets.nosuch"),
        ({"facets": {"aliases": ["x"]}}, "opts.facets.aliases"),
        ({"facet_counts": ["status", "aliases"]}, "opts.facet_counts"),
    ]:
        with pytest.raises(InvalidParams) as e:
            svc.search("kb", "lease", opts)
        assert e.value.field == field and e.value.code == -32602
    assert svc.search("kb", "lease", {"facets": {"tag": ["sqlite"]}})["hits"]


def test_facet_counts_cover_the_whole_matching_set(svc):
    ans = svc.search("kb", "type:adr", {"facet_counts": ["status", "type"], "limit": 1})
    assert len(ans["hits"]) == 1
    assert ans["facet_counts"] == {
        "status": {"superseded": 3, "accepted": 2, "approved": 1, "deprecated": 1, "proposed": 1},
        "type": {"adr": 8},
    }
    assert list(ans["facet_counts"]["status"]) == ["superseded", "accepted", "approved", "deprecated", "proposed"]
    words = svc.search("kb", "lease", {"facet_counts": ["type", "adr"], "limit": 1})
    full = svc.search("kb", "lease", {"limit": 200})
    assert words["facet_counts"]["type"]["adr"] == len({p for p in paths(full) if p.startswith("adrs/")})
    assert sum(words["facet_counts"]["type"].values()) <= len(set(paths(full)))
    assert words["facet_counts"]["adr"]["12"] == 1
    narrowed = svc.search("kb", "lease type:runbook", {"facet_counts": ["type"]})
    assert narrowed["facet_counts"] == {"type": {"runbook": 2}}
    assert svc.search("kb", "lease")["facet_counts"] == {}  # always present
    assert svc.search("kb", "nothingmatcheszzz", {"facet_counts": ["status"]})["facet_counts"] == {"status": {}}


def test_violations_are_reported_with_lines_and_the_document_is_indexed(svc):
    st = svc.workspace_status("kb")
    assert st["schema"]["fields"]["adr"] == "number" and st["schema"]["fields"]["date"] == "date"
    assert st["schema"]["types"] == ["adr", "design", "rfc"] and st["schema"]["link_fields"] == ["adr", "rfc"]
    bad = [(p["line"], p["code"], p["message"]) for p in st["problems"] if p["path"] == "adrs/0020-broken-record.md"]
    assert bad == [
        (1, "schema.required", "owner: required for type adr but is missing"),
        (4, "schema.type", "adr: expected an integer, got 'twenty'"),
        (5, "schema.enum", "status: 'approved' is not one of proposed, accepted, superseded, deprecated"),
        (6, "schema.type", "date: expected a date (YYYY-MM-DD), got 'soon'"),
        (7, "schema.type", "reviewed: expected a boolean (true or false), got 'maybe'"),
    ]
    assert {p["path"] for p in st["problems"]} == {
        "adrs/0020-broken-record.md",
        "notes/bad-encoding.md",  # indexed with its bad bytes replaced, and says so (issue 35)
        "notes/broken-frontmatter.md",
    }
    assert paths(svc.search("kb", "brokenrecord")) == ["adrs/0020-broken-record.md"]
    one = svc.document_problems("kb", "adrs/0020-broken-record.md")
    assert one["path"] == "adrs/0020-broken-record.md" and len(one["problems"]) == 5
    assert svc.document_problems("kb", "adrs/0012-lease-recovery.md")["problems"] == []
    everything = svc.document_problems("kb")
    assert everything["path"] is None and everything["problems"] == st["problems"]


def test_schema_folder_is_not_indexed(svc):
    assert svc.search("kb", "zzschemareadme")["hits"] == []
    assert not any(p.startswith("_schema/") for p in browse(svc, "tag:schema") + browse(svc, "type:adr"))


def test_schema_edit_takes_effect_live_without_rechunking(fresh):
    svc, kb = fresh
    db = svc.store.reader()
    before = db.execute("SELECT id, document_id, generation, text_hash FROM chunks ORDER BY id").fetchall()
    docs_before = db.execute("SELECT path, generation FROM documents ORDER BY path").fetchall()
    text = (kb / SCHEMA).read_text()
    # owner becomes an enum the corpus mostly breaks; effort is no longer declared; priority is new
    text = text.replace("  owner: string\n", "  owner: {type: enum, values: [mira.okafor]}\n  priority: integer\n")
    text = text.replace("    effort: number\n", "")
    (kb / SCHEMA).write_text(text)
    svc.index_paths("kb", [SCHEMA])  # what the watcher hands over when the file changes
    after = db.execute("SELECT id, document_id, generation, text_hash FROM chunks ORDER BY id").fetchall()
    assert after == before
    assert db.execute("SELECT path, generation FROM documents ORDER BY path").fetchall() == docs_before
    owners = {(p["path"], p["line"]) for p in svc.workspace_status("kb")["problems"] if p["code"] == "schema.enum"}
    # ADRs keep their own owner spec (types.adr.owner: string); the others are held to the enum
    assert owners == {
        ("design/search-pipeline.md", 8),
        ("rfcs/sync-protocol.md", 8),
        ("runbooks/embedding-queue-stuck.md", 5),
        ("runbooks/lease-recovery.md", 6),
        ("adrs/0020-broken-record.md", 5),
    }  # (its status, as before)
    ans = svc.search("kb", "effort:2.5")
    assert ans["mode_used"] == "lexical"  # undeclared now: words
    with pytest.raises(InvalidParams):
        svc.search("kb", "x", {"facets": {"effort": ["2.5"]}})
    assert browse(svc, "priority:..10") == []
    # removing the schema returns to schemaless facets: every field, compared as text (numbers too)
    (kb / SCHEMA).unlink()
    svc.index("kb")
    assert browse(svc, "effort:2.5") == ["design/storage-layout.md"]
    assert browse(svc, "adr:0012") == ["adrs/0012-lease-recovery.md"]
    assert browse(svc, "type:adr date:>=2025-01-01") == ["adrs/0018-retire-lease-files.md"]
    assert all(not p["code"].startswith("schema.") for p in svc.workspace_status("kb")["problems"])
    assert svc.search("kb", "x", {"facets": {"aliases": ["adr 0012"]}})["hits"] is not None  # a field documents have
    with pytest.raises(InvalidParams) as e:
        svc.search("kb", "x", {"facets": {"nosuch": ["x"]}})
    assert e.value.field == "opts.facets.nosuch"


def test_a_broken_schema_file_is_reported_and_ignored(fresh):
    svc, kb = fresh
    (kb / SCHEMA).write_text("common:\n  owner: string\n  date: {type: daytime}\n  tags: [unclosed\n")
    svc.index("kb")
    probs = [p for p in svc.workspace_status("kb")["problems"] if p["path"] == SCHEMA]
    assert probs and probs[0]["code"] == "schema.invalid" and probs[0]["line"] >= 4
    assert svc.document_problems("kb", SCHEMA)["problems"] == probs
    assert svc.workspace_status("kb")["schema"] is None
    assert browse(svc, "aliases:stemming") == ["adrs/0009-porter-stemming.md"]  # schemaless again
    (kb / SCHEMA).write_text("common:\n  owner: string\n  date: {type: daytime}\n")
    svc.index("kb")
    probs = [p for p in svc.workspace_status("kb")["problems"] if p["path"] == SCHEMA]
    assert [(p["line"], p["code"]) for p in probs] == [(3, "schema.invalid")] and "daytime" in probs[0]["message"]
    assert svc.search("kb", "aliases:stemming")["mode_used"] == "lexical"  # the rest of the schema applies


def test_schema_change_is_picked_up_by_a_full_index_run_too(fresh):
    svc, kb = fresh
    both = ["adrs/0018-retire-lease-files.md", "design/storage-layout.md"]
    assert browse(svc, "reviewed:1") == browse(svc, "reviewed:on") == both  # a boolean
    (kb / SCHEMA).write_text((kb / SCHEMA).read_text().replace("  reviewed: boolean\n", "  reviewed: string\n"))
    svc.index("kb")
    assert browse(svc, "reviewed:1") == browse(svc, "reviewed:on") == []  # compared as text now
    assert browse(svc, "reviewed:true") == both  # (YAML itself reads `yes` as true)
    assert browse(svc, "reviewed:maybe") == ["adrs/0020-broken-record.md"]
    assert not any(p["line"] == 7 for p in svc.document_problems("kb", "adrs/0020-broken-record.md")["problems"])


def test_a_store_from_before_typed_facets_is_migrated_and_derived_again(tmp_path):
    import apsw

    from autodoc.store.migrations import MIGRATIONS, schema_version

    store = tmp_path / "old.db"
    db = apsw.Connection(str(store))
    with db:
        MIGRATIONS[0](db)
        db.execute("PRAGMA user_version = 1")
    db.close()
    kb = make_kb_schema(tmp_path / "kb")
    s = Service(Settings.from_env(store=store))  # migrates
    try:
        assert schema_version(s.store.writer()) == len(MIGRATIONS) >= 2
        s.workspace_add("kb", str(kb), NO_MODEL)
        s.index("kb")
        assert browse(s, "adr:10..20") == ADRS_2024_ON
        # rows from before the schema state was recorded: derived again by the next index run
        w = s.store.writer()
        with w:
            w.execute("DELETE FROM schemas")
            w.execute("UPDATE facets SET num = NULL, date = NULL")
        assert browse(s, "adr:10..20") == []
        s.index("kb")
        assert browse(s, "adr:10..20") == ADRS_2024_ON
    finally:
        s.close()
