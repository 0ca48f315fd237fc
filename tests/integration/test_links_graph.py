"""The link graph end to end, in-process: document.links / document.backlinks
(by path, title, alias, ADR number, a schema link field), broken links,
supersede chains (0001 → 0007 → 0012), the opt-in graph leg, and the new
methods through the RPC tables and their JSON schemas."""

from __future__ import annotations

import pytest
from helpers.kb_schema import NO_MODEL, make_kb_schema

from autodoc.config import Settings
from autodoc.connect import invoke
from autodoc.errors import DocumentNotFound, InvalidParams, PathOutsideWorkspace
from autodoc.service import Service
from autodoc.store.workspaces import get_workspace

P1, P7, P12 = "adrs/0001-sqlite-storage.md", "adrs/0007-sqlite-wal-lease.md", "adrs/0012-lease-recovery.md"
RFC, LAYOUT, A18 = "rfcs/sync-protocol.md", "design/storage-layout.md", "adrs/0018-retire-lease-files.md"


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    kb = make_kb_schema(tmp_path_factory.mktemp("kbl") / "kb")
    store = tmp_path_factory.mktemp("store") / "autodoc.db"
    s = Service(Settings.from_env(store=store))
    s.workspace_add("kb", str(kb), NO_MODEL)
    s.index("kb")
    yield s, kb, store
    s.close()


@pytest.fixture(scope="module")
def svc(setup):
    return setup[0]


def paths(answer) -> list[str]:
    return [h["path"] for h in answer["hits"]]


def test_outgoing_links_resolve_by_path_alias_title_and_number(svc):
    got = svc.document_links("kb", A18)
    assert got["path"] == A18
    assert [(l["target"], l["kind"], l["line"], l["target_path"]) for l in got["links"]] == [
        ("RFC 7", "wiki", 18, RFC),  # schema link field rfc: 7
        ("../design/storage-layout.md", "markdown", 19, LAYOUT),  # relative path
        ("storage layout notes", "wiki", 23, LAYOUT),  # alias
        ("No Such Document", "wiki", 24, None),  # broken
    ]
    assert got["links"][0]["target_title"] == "RFC 7: Change sync protocol"
    assert got["links"][1]["label"] == "storage layout" and got["links"][3]["target_title"] is None
    layout = {l["target"]: l["target_path"] for l in svc.document_links("kb", LAYOUT)["links"]}
    assert layout == {"ADR 12": P12, "RFC 7": RFC}  # ADR number, unpadded
    index = {l["target"]: l["target_path"] for l in svc.document_links("kb", "index.md")["links"]}
    assert index["ADR 0007"] == P7  # alias
    conventions = {
        l["target"]: l["target_path"] for l in svc.document_links("kb", "notes/tagging-conventions.md")["links"]
    }
    assert conventions["Hybrid search pipeline"] == "design/search-pipeline.md"  # title
    chain = svc.document_links("kb", P7)["links"]
    assert [(l["kind"], l["target_path"]) for l in chain if l["kind"] in ("supersedes", "superseded_by")] == [
        ("supersedes", P1),
        ("superseded_by", P12),
    ]


def test_backlinks_list_sources_with_lines(svc):
    back = svc.document_backlinks("kb", RFC)["backlinks"]
    assert [(b["source_path"], b["line"], b["target"], b["kind"]) for b in back] == [
        (A18, 18, "RFC 7", "wiki"),
        (LAYOUT, 18, "RFC 7", "wiki"),
    ]
    assert back[0]["source_title"] == "ADR 0018: Retire hand-made lease files"
    to12 = svc.document_backlinks("kb", P12)["backlinks"]
    sources = {b["source_path"] for b in to12}
    assert {P7, LAYOUT, "index.md", "runbooks/lease-recovery.md"} <= sources
    assert any(b["source_path"] == P7 and b["kind"] == "superseded_by" for b in to12)
    assert svc.document_backlinks("kb", "notes/standup-2024-03-14.md")["backlinks"] == []


def test_unknown_and_escaping_paths_are_refused(svc):
    with pytest.raises(DocumentNotFound):
        svc.document_links("kb", "adrs/nope.md")
    with pytest.raises(DocumentNotFound):
        svc.document_backlinks("kb", "_schema/README.md")  # never indexed
    with pytest.raises(PathOutsideWorkspace):
        svc.document_links("kb", "../outside-target.md")
    with pytest.raises(InvalidParams) as e:
        invoke(svc, "document.links", ["kb", ""])
    assert e.value.field == "path"
    with pytest.raises(DocumentNotFound):
        svc.document_problems("kb", "adrs/nope.md")


def test_broken_links_are_reported(svc):
    broken = {(b["path"], b["target"], b["line"]) for b in svc.workspace_status("kb")["broken_links"]}
    assert (A18, "No Such Document", 24) in broken
    assert ("notes/tagging-conventions.md", "Not A Link", 24) not in broken  # inside a code fence: not a link
    assert not any(b[1] in ("RFC 7", "ADR 12") for b in broken)


def test_site_absolute_links_resolve_from_the_workspace_root(tmp_path):
    """issue 18: `[ADR-51](/adr/ADR-51)` (a static site's link to a page) was dropped, not even
    reported broken; it names a path from the workspace root, with or without `.md`."""
    root = tmp_path / "kb"
    (root / "adr").mkdir(parents=True)
    (root / "docs").mkdir()
    (root / "adr" / "ADR-51.md").write_text("# ADR 51: Use queues\n\nQueues.\n")
    (root / "docs" / "guide.md").write_text("# Guide\n\nText.\n")
    (root / "docs" / "ADR-52.md").write_text("# Not the ADR\n\nA stem twin.\n")
    (root / "index.md").write_text(
        "# Index\n\nSee [ADR-51](/adr/ADR-51), [the guide](/docs/guide.md#setup), [trailing](/docs/guide/),\n"
        "[gone](/adr/ADR-52), [logo](/img/logo.png) and [home](/).\n"
    )
    s = Service(Settings.from_env(store=tmp_path / "s.db"))
    try:
        s.workspace_add("kb", str(root), NO_MODEL)
        s.index("kb")
        got = [(l["target"], l["target_path"]) for l in s.document_links("kb", "index.md")["links"]]
        assert got == [
            ("/adr/ADR-51", "adr/ADR-51.md"),
            ("/docs/guide.md", "docs/guide.md"),
            ("/docs/guide", "docs/guide.md"),
            ("/adr/ADR-52", None),
        ]  # no stem guess elsewhere
        assert [b["source_path"] for b in s.document_backlinks("kb", "adr/ADR-51.md")["backlinks"]] == ["index.md"]
        broken = {(b["path"], b["target"]) for b in s.workspace_status("kb")["broken_links"]}
        assert broken == {("index.md", "/adr/ADR-52")}
    finally:
        s.close()


def test_link_fields_come_from_the_schema(tmp_path):
    kb = make_kb_schema(tmp_path / "kb", schema=False)
    s = Service(Settings.from_env(store=tmp_path / "s.db"))
    try:
        s.workspace_add("kb", str(kb), NO_MODEL)
        s.index("kb")
        links = {l["target"]: l["target_path"] for l in s.document_links("kb", LAYOUT)["links"]}
        assert links == {"ADR 12": P12, "RFC 7": None}  # ADR numbers resolve without a schema; rfc does not
        assert any(b["target"] == "RFC 7" for b in s.workspace_status("kb")["broken_links"])
        (kb / "_schema" / "frontmatter.yaml").write_text("types:\n  rfc:\n    rfc: {type: integer, link: true}\n")
        s.index_paths("kb", ["_schema/frontmatter.yaml"])
        links = {l["target"]: l["target_path"] for l in s.document_links("kb", LAYOUT)["links"]}
        assert links == {"ADR 12": P12, "RFC 7": RFC}
    finally:
        s.close()


def test_supersede_chain_sits_below_its_successor(svc):
    ans = svc.search("kb", "sqlite", {"limit": 50})
    order = paths(ans)
    assert {P1, P7, P12} <= set(order)
    first = {p: order.index(p) for p in (P1, P7, P12)}
    last = {p: len(order) - 1 - order[::-1].index(p) for p in (P1, P7, P12)}
    assert first[P7] == last[P12] + 1 and first[P1] == last[P7] + 1  # C's hits, then B's, then A's
    by = {h["path"]: h["superseded_by"] for h in ans["hits"]}
    assert by[P12] is None and by[P7] == P12 and by[P1] == P7  # each names its direct successor
    # the middle missing: A anchors below C, still naming B
    gap = svc.search("kb", "sqlite -adr:7", {"limit": 50})
    order = paths(gap)
    assert P7 not in order and order.index(P1) > max(i for i, p in enumerate(order) if p == P12)
    assert all(h["superseded_by"] == P7 for h in gap["hits"] if h["path"] == P1)
    off = svc.search("kb", "sqlite", {"limit": 50, "retrieval": {"demote_superseded": False}})
    assert all(h["superseded_by"] is None for h in off["hits"])
    assert sorted(paths(off)) == sorted(paths(ans))


def test_graph_leg_adds_linked_documents(svc):
    plain = svc.search("kb", "zanzibar")
    assert paths(plain) == [RFC] and "graph" not in plain["hits"][0]["scores"]
    ans = svc.search("kb", "zanzibar", {"stages": ["lexical", "graph"]})
    assert ans["stages"] == {"requested": ["lexical", "graph"], "performed": ["lexical", "graph"], "skipped": {}}
    assert paths(ans)[0] == RFC and set(paths(ans)) == {RFC, LAYOUT, A18}
    top = ans["hits"][0]
    assert top["via"] == ["lexical"] and top["scores"]["graph"] is None and top["ranks"]["graph"] is None
    linked = [h for h in ans["hits"] if h["path"] != RFC]
    assert all(h["via"] == ["graph"] and h["scores"]["graph"] == 1 and h["ranks"]["graph"] in (0, 1) for h in linked)
    # a document stands for itself by its first chunk that the filter admits
    assert all(h["line_start"] >= 1 and h["kind"] in ("section", "abstract") for h in linked)
    # the filter applies to the graph leg too
    filtered = svc.search("kb", "zanzibar -type:design", {"stages": ["lexical", "graph"]})
    assert set(paths(filtered)) == {RFC, A18}
    # repeatable
    assert svc.search("kb", "zanzibar", {"stages": ["lexical", "graph"]}) == ans


def test_graph_leg_ranks_by_links_to_seeds(svc):
    ans = svc.search("kb", "lease recovery", {"stages": ["lexical", "graph"], "limit": 50})
    graph = sorted(
        (h["ranks"]["graph"], h["scores"]["graph"], h["path"]) for h in ans["hits"] if h["ranks"]["graph"] is not None
    )
    assert graph and [s for _, s, _ in graph] == sorted((s for _, s, _ in graph), reverse=True)
    assert ans["stages"]["performed"] == ["lexical", "graph"]


def test_graph_stage_options_and_skips(svc):
    assert svc.search("kb", "lease")["stages"]["requested"] == ["lexical", "semantic", "rerank"]
    assert svc.search("kb", "lease", {"mode": "hybrid"})["stages"]["requested"] == ["lexical", "semantic", "rerank"]
    for stages in (["graph"], ["graph", "rerank"], ["bogus"]):
        with pytest.raises(InvalidParams) as e:
            invoke(svc, "search.query", ["kb", "lease", {"stages": stages}])
        assert e.value.field in ("opts.stages", "opts.stages[0]")  # the list, or its unknown item
    ordered = svc.search("kb", "lease", {"stages": ["rerank", "graph", "semantic", "lexical"]})
    assert ordered["stages"]["requested"] == ["lexical", "semantic", "graph", "rerank"]
    nothing = svc.search("kb", "nothingmatcheszzz", {"stages": ["lexical", "graph"]})
    assert "graph" in nothing["stages"]["skipped"] and nothing["hits"] == []
    weighted = svc.search("kb", "zanzibar", {"stages": ["lexical", "graph"], "fusion": {"method": "weighted"}})
    assert "weighted" in weighted["stages"]["skipped"]["graph"] and "graph" not in weighted["stages"]["performed"]
    browse = svc.search("kb", "type:rfc", {"stages": ["lexical", "graph"]})
    assert browse["mode_used"] == "facet" and paths(browse) == [RFC]


def test_new_methods_through_the_rpc_tables(setup):
    from autodoc.api import METHODS
    from autodoc.connect import call as call_in_process
    from autodoc.rpc import schemas

    svc, _kb, store = setup
    settings = Settings.from_env(store=store)
    calls = [
        ("document.links", ["kb", A18]),
        ("document.backlinks", {"workspace": "kb", "path": RFC}),
        ("document.problems", ["kb"]),
        ("document.problems", ["kb", "adrs/0020-broken-record.md"]),
        ("search.query", ["kb", "zanzibar", {"stages": ["lexical", "graph"], "facet_counts": ["type"]}]),
        ("search.query", ["kb", "type:adr", {"facet_counts": ["status"]}]),
        ("workspace.status", ["kb"]),
        ("workspace.tags", ["kb", "s"]),
    ]
    for method, params in calls:
        assert method in METHODS
        named = schemas.bind_params(method, params)
        result = call_in_process(settings, method, params)
        assert schemas.result_errors(method, result) == [], (method, schemas.result_errors(method, result))
        assert named["workspace"] == "kb"
    assert call_in_process(settings, "document.problems", ["kb"]) == svc.document_problems("kb")
    with pytest.raises(InvalidParams):
        schemas.bind_params("document.links", ["kb"])
    with pytest.raises(InvalidParams):
        schemas.bind_params("search.query", ["kb", "x", {"facet_counts": "status"}])


def test_graph_leg_seeds_from_the_semantic_leg_too(svc):
    from autodoc.config import WorkspaceConfig
    from autodoc.search import engine
    from autodoc.search.fusion import LegHit
    from autodoc.search.options import parse_options
    from autodoc.search.semantic.leg import SemanticOutcome
    from autodoc.store.facets import active_schema

    db = svc.store.reader()
    with db:
        ws = get_workspace(db, "kb")
        rfc_chunk = db.execute(
            "SELECT c.id FROM chunks c JOIN documents d ON d.id = c.document_id "
            "WHERE d.path = ? ORDER BY c.ordinal LIMIT 1",
            (RFC,),
        ).fetchone()[0]

        def semantic(filt):  # a stand-in embedding leg: "meaning" finds the RFC
            return SemanticOutcome([LegHit(rfc_chunk, 0.9)], "ready")

        schema = active_schema(db, ws.id)
        ctx = engine.Context(db=db, ws=ws, known_fields=schema.declared, semantic=semantic, facet_kinds=schema.kinds)
        opts = parse_options({"stages": ["lexical", "semantic", "graph"]}, WorkspaceConfig.from_json(ws.config))
        ans = engine.search(ctx, "qqqqnothinglexical", opts)
    assert ans["stages"]["performed"] == ["lexical", "semantic", "graph"] and ans["mode_used"] == "hybrid"
    assert paths(ans)[0] == RFC and set(paths(ans)) == {RFC, LAYOUT, A18}
    assert all(h["via"] == ["graph"] for h in ans["hits"][1:])


def test_links_across_write_batches_resolve_when_the_job_ends(tmp_path, monkeypatch):
    # batches of 64 are written one transaction each; links resolve once, at the end of the job,
    # so a link to a document written in a later batch (and one back) must resolve all the same
    import autodoc.index.job as job

    monkeypatch.setattr(job, "WRITE_BATCH", 3)
    root = tmp_path / "ws"
    root.mkdir()
    for i in range(10):
        (root / f"n{i}.md").write_text(f"# Note {i}\n\nSee [[n{(i + 7) % 10}]] and [back](n{(i + 9) % 10}.md).\n")
    s = Service(Settings.from_env(store=tmp_path / "store" / "autodoc.db"))
    try:
        s.workspace_add("w", str(root), {"embedding": {"provider": "none"}})
        s.index("w")
        for i in range(10):
            out = s.document_links("w", f"n{i}.md")["links"]
            assert sorted(l["target_path"] for l in out) == sorted([f"n{(i + 7) % 10}.md", f"n{(i + 9) % 10}.md"])
        assert {b["source_path"] for b in s.document_backlinks("w", "n0.md")["backlinks"]} == {"n3.md", "n1.md"}
    finally:
        s.close()


def test_workspace_tags_count_documents_per_tag(setup):
    import collections
    import json

    svc, _kb, _store = setup
    got = svc.workspace_tags("kb")["tags"]
    # independently: the tags each document row keeps (frontmatter and inline), lowercased
    want: collections.Counter = collections.Counter()
    db = svc.store.reader()
    for (tags,) in db.execute(
        "SELECT d.tags FROM documents d JOIN workspaces w ON w.id = d.workspace_id WHERE w.name = 'kb'"
    ):
        want.update({t.lower() for t in json.loads(tags)})
    assert {t["tag"]: t["documents"] for t in got} == dict(want) and want
    assert [t["documents"] for t in got] == sorted((t["documents"] for t in got), reverse=True)
    first = got[0]["tag"]
    some = svc.workspace_tags("kb", first[:2].upper(), 2)["tags"]
    assert 0 < len(some) <= 2 and all(t["tag"].startswith(first[:2]) for t in some)
    assert svc.workspace_tags("kb", "no-tag-starts-like-this")["tags"] == []
    with pytest.raises(InvalidParams, match="limit"):
        invoke(svc, "workspace.tags", ["kb", None, 0])
    with pytest.raises(InvalidParams, match="prefix"):
        invoke(svc, "workspace.tags", ["kb", 7])
