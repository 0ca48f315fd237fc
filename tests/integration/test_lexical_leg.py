"""The lexical leg ranks inside FTS5 and filters the ranked rows afterwards.
With one workspace in the store and no filter it skips the filter; with
several it widens the window until enough rows pass or falls back to the exact
join. Either way the rows must equal the exact join's (real store, real FTS5)."""

from __future__ import annotations

from pathlib import Path

import pytest

from autodoc.config import Settings
from autodoc.search import fusion as F
from autodoc.search.lexical import leg as lexical
from autodoc.search.lexical.fts import build_match
from autodoc.search.query import parse_query
from autodoc.service import Service
from autodoc.store.filters import build_filter
from autodoc.store.lexical import matches
from autodoc.store.workspaces import get_workspace

NO_MODEL = {"embedding": {"provider": "none"}}


def _write(root: Path, n: int, body: str) -> None:
    root.mkdir(parents=True)
    for i in range(n):
        (root / f"note-{i:03d}.md").write_text(f"# Note {i}\n\n{body} {i}.\n", encoding="utf-8")


def _exact(db, ws_id: int, query: str, top: int = 50):
    filt = build_filter(ws_id, facets=[], opt_facets={}, tags=(), paths=(), include_abstract=True)
    match = build_match(parse_query(query).terms, "all")
    return [(cid, round(-s, 6)) for cid, s in db.execute(matches.lexical_sql(filt), (match, ws_id, top))]


def _leg(db, ws_id: int, query: str, **kw):
    filt = build_filter(ws_id, facets=[], opt_facets={}, tags=(), paths=(), include_abstract=True, **kw)
    got = lexical.run_lexical(db, ws_id, parse_query(query).terms, filt, want=10)
    return [(h.chunk_id, h.score) for h in got.hits], got.match


@pytest.fixture()
def two(service_factory, tmp_path: Path):
    # "big" buries "small": 300 notes that say "gear" three times against 3 that say it once,
    # so small's rows sit below FTS5's first windows of 50 and 200 ranked rows
    _write(tmp_path / "big", 300, "gear gear gear train")
    _write(tmp_path / "small", 3, "a gear among many other words in a longer sentence about nothing much")
    return service_factory(tmp_path / "big", NO_MODEL, name="big", store=tmp_path / "store" / "autodoc.db"), tmp_path


def test_sole_workspace_skips_the_filter_and_matches_the_exact_join(two):
    s, _ = two
    db = s.store.reader()
    ws = get_workspace(db, "big")
    assert matches.sole_workspace(db, ws.id)
    rows, used = _leg(db, ws.id, "gear")
    assert used == "all" and len(rows) == 50
    assert rows == _exact(db, ws.id, "gear")


def test_buried_workspace_widens_the_window_and_matches_the_exact_join(two):
    s, root = two
    s.workspace_add("small", str(root / "small"), NO_MODEL)
    s.index("small")
    db = s.store.reader()
    small, big = get_workspace(db, "small"), get_workspace(db, "big")
    assert not matches.sole_workspace(db, small.id) and not matches.sole_workspace(db, big.id)
    rows, _ = _leg(db, small.id, "gear")
    assert len(rows) == 3
    assert rows == _exact(db, small.id, "gear")
    rows, _ = _leg(db, big.id, "gear")
    assert rows == _exact(db, big.id, "gear") and len(rows) == 50
    # and through the whole search: only small's notes come back
    answer = s.search("small", "gear", {"limit": 10})
    assert sorted(h["path"] for h in answer["hits"]) == ["note-000.md", "note-001.md", "note-002.md"]


def test_filtered_search_in_a_sole_workspace_matches_the_exact_join(two):
    s, _ = two
    db = s.store.reader()
    ws = get_workspace(db, "big")
    filt = build_filter(
        ws.id,
        facets=[],
        opt_facets={},
        tags=(),
        paths=tuple(f"note-{i:03d}.md" for i in range(250, 300)),
        include_abstract=True,
    )
    assert not filt.empty
    hits = lexical.run_lexical(db, ws.id, parse_query("gear").terms, filt, want=10).hits
    exact = db.execute(
        matches.lexical_sql(filt), (build_match(parse_query("gear").terms, "all"), ws.id, *filt.params, 50)
    ).fetchall()
    assert [h.chunk_id for h in hits] == [cid for cid, _ in exact] and len(hits) == 50


@pytest.fixture()
def comms(service_factory, tmp_path: Path):
    """Four notes hold both "comms" and "architecture"; six hold only "architecture"."""
    root = tmp_path / "kb"
    root.mkdir()
    for i in range(4):
        (root / f"both-{i}.md").write_text(f"# Decision {i}\n\nThe comms architecture of part {i} uses queues.\n")
    for i in range(6):
        (root / f"one-{i}.md").write_text(f"# Other {i}\n\nThe storage architecture of part {i} uses files.\n")
    (root / "deadline.md").write_text(
        "# Comms architecture\n\n## Deadline\n\nDate: Q4 2025\n\n"
        "## Context\n\nWe chose a message bus for comms because the architecture needs fan-out to many services.\n"
    )
    return service_factory(root, NO_MODEL, store=tmp_path / "store.db")


def test_relaxed_match_reports_what_the_page_holds(comms):
    # issue 18: AND found five chunks with both words, fewer than limit 20, so the leg relaxed to OR;
    # the answer said "any" ("no chunk had every word") although five had
    wide = comms.search("kb", "comms architecture", {"limit": 20, "stages": ["lexical"]})
    assert wide["lexical_match"] == "mixed"
    both = [h for h in wide["hits"] if h["path"].startswith(("both-", "deadline"))]
    assert [h["path"] for h in wide["hits"][: len(both)]] == [h["path"] for h in both]  # the full matches lead
    narrow = comms.search("kb", "comms architecture", {"limit": 2, "stages": ["lexical"]})
    assert narrow["lexical_match"] == "all"  # the leg relaxed, but every hit shown holds both words
    none = comms.search("kb", "comms storage", {"limit": 20, "stages": ["lexical"]})
    assert none["lexical_match"] == "any"  # no note says both
    full = comms.search("kb", "architecture", {"limit": 5, "stages": ["lexical"]})
    assert full["lexical_match"] == "all"


def test_a_section_matching_on_its_title_alone_weighs_less(comms):
    """The title (and breadcrumb) is indexed into every chunk, so "## Deadline / Date: Q4 2025"
    holds both words through its title only; a word found only there counts half (before the power)."""
    db = comms.store.reader()
    ws = get_workspace(db, "kb")
    filt = build_filter(ws.id, facets=[], opt_facets={}, tags=(), paths=(), include_abstract=True)
    got = lexical.run_lexical(db, ws.id, parse_query("comms architecture").terms, filt, want=10)
    crumbs = dict(db.execute("SELECT id, breadcrumb FROM chunks"))
    weight = {crumbs[h.chunk_id]: h.weight for h in got.hits}
    assert weight["Comms architecture › Deadline"] == 0.5**lexical.COVERAGE_POWER  # half of each word
    assert weight["Comms architecture › Context"] == 1.0
    # BM25 puts the short section first; fused with a semantic leg that ranks both alike, it falls behind
    order = [crumbs[h.chunk_id] for h in got.hits]
    assert order.index("Comms architecture › Deadline") < order.index("Comms architecture › Context")
    semantic = [F.LegHit(h.chunk_id, 0.5) for h in got.hits]
    fused = F.fuse_rrf({"lexical": got.hits, "semantic": semantic}, k=20)
    fused_order = [crumbs[f.chunk_id] for f in fused]
    assert fused_order.index("Comms architecture › Context") < fused_order.index("Comms architecture › Deadline")
    # a lexical-only search has nothing to weigh against: BM25's order and the leg's own scores,
    # but for passage choice (search/choice.py): the document's "Date: Q4 2025" section is
    # metadata, so its prose section stands first in its place
    alone = comms.search("kb", "comms architecture", {"limit": 20, "stages": ["lexical"]})
    shown = [h["chunk_id"] for h in alone["hits"]]
    leg = [h.chunk_id for h in got.hits][:20]
    ids = {crumb: cid for cid, crumb in crumbs.items()}
    deadline, context = ids["Comms architecture › Deadline"], ids["Comms architecture › Context"]
    assert shown.index(context) < shown.index(deadline)
    swapped = [{deadline: context, context: deadline}.get(c, c) for c in shown]
    assert swapped == leg


def test_a_relaxed_hit_weighs_by_the_share_of_the_query_it_holds(comms):
    db = comms.store.reader()
    ws = get_workspace(db, "kb")
    filt = build_filter(ws.id, facets=[], opt_facets={}, tags=(), paths=(), include_abstract=True)
    got = lexical.run_lexical(db, ws.id, parse_query("comms architecture").terms, filt, want=20)
    paths = dict(db.execute("SELECT c.id, d.path FROM chunks c JOIN documents d ON d.id = c.document_id"))
    w = {paths[h.chunk_id]: h.weight for h in got.hits if paths[h.chunk_id] != "deadline.md"}
    assert all(w[f"both-{i}.md"] == 1.0 for i in range(4))
    # "architecture" is in 11 of 13 chunks and "comms" in 6: the common word is worth less than half
    assert all(0 < w[f"one-{i}.md"] < 0.5 for i in range(6))


def test_legs_reach_past_the_page_before_the_per_document_cap(tmp_path: Path):
    """Each leg stopped at 50 chunks before the 3-per-document cap: 30 documents of 5 matching
    sections each filled those 50 from 10 documents, so limit 60 returned 30 hits, not 60."""
    root = tmp_path / "kb"
    root.mkdir()
    for d in range(30):
        body = "".join(f"## Part {p}\n\nThe turbine blade {d}-{p} wears.\n\n" for p in range(5))
        (root / f"doc-{d:02d}.md").write_text(f"# Doc {d}\n\n{body}")
    s = Service(Settings.from_env(store=tmp_path / "store.db"))
    try:
        s.workspace_add("kb", str(root), NO_MODEL)
        s.index("kb")
        answer = s.search("kb", "turbine blade", {"limit": 60, "stages": ["lexical"]})
        assert len(answer["hits"]) == 60
        assert len({h["path"] for h in answer["hits"]}) == 20
    finally:
        s.close()


def test_compatibility_divides_by_the_legs_requested(comms):
    """Seed 001: agreement is the share of the legs asked for. The same first lexical hit
    scored 1.0 when the graph leg found nothing and 0.8-ish when it found something."""
    alone = comms.search("kb", "comms architecture", {"limit": 1, "stages": ["lexical"]})["hits"][0]
    position = 0.4 / (1 + alone["ranks"]["lexical"])
    assert alone["compatibility"] == round(0.6 + position, 6)
    # semantic asked for but skipped (no model), graph asked for and found no link: 1 of 3 legs agree
    three = comms.search("kb", "comms architecture", {"limit": 1, "stages": ["lexical", "semantic", "graph"]})
    assert three["stages"]["skipped"].keys() == {"semantic"} and "graph" in three["stages"]["performed"]
    assert three["hits"][0]["chunk_id"] == alone["chunk_id"]
    assert three["hits"][0]["compatibility"] == round(0.6 / 3 + position, 6)


def test_a_word_in_a_heading_line_only_counts_as_title_from_the_postings(tmp_path: Path, monkeypatch):
    """Whether a hit holds a word in its prose is read from the postings' body count less the
    heading lines' (search/lexical/leg.py _Prose), not by tokenizing every hit: the same weights as
    the tokenizing path, a word on the chunk's heading line only taking the title credit."""
    from autodoc.search.lexical import impact

    root = tmp_path / "kb"
    root.mkdir()
    (root / "plan.md").write_text(
        "# Plan\n\n## Rollout\n\nThe rollout starts with staging, then canary.\n\n"
        "## Canary\n\nStaging first.\n\n### Rollback\nNothing rolls back by itself.\n"
    )
    (root / "notes.md").write_text("# Notes\n\nNothing about a rollback is automatic.\n")
    for i in range(5):
        (root / f"other-{i}.md").write_text(f"# Other {i}\n\nStaging of part {i} waits for the canary.\n")
    s = Service(Settings.from_env(store=tmp_path / "store.db"))
    s.workspace_add("kb", str(root), NO_MODEL)
    s.index("kb")
    try:
        db = s.store.reader()
        ws = get_workspace(db, "kb")
        filt = build_filter(ws.id, facets=[], opt_facets={}, tags=(), paths=(), include_abstract=True)
        crumbs = dict(db.execute("SELECT id, breadcrumb FROM chunks"))
        texts = {crumbs[c]: t for c, t in db.execute("SELECT id, text FROM chunks")}

        def weights(query: str) -> dict[str, float]:
            got = lexical.run_lexical(db, ws.id, parse_query(query).terms, filt, want=20)
            return {crumbs[h.chunk_id]: h.weight for h in got.hits}

        tokenized: list[str] = []
        real = lexical._prose_stems
        monkeypatch.setattr(lexical, "_prose_stems", lambda text: tokenized.append(text) or real(text))
        queries = ["rollout staging", "rollback nothing", "canary staging", "rollout canary rollback"]
        fast = {q: weights(q) for q in queries}
        assert not tokenized  # every word here is one token the postings count
        monkeypatch.setattr(impact, "ENABLED", False)  # FTS5 and the tokenizer answer instead
        assert {q: weights(q) for q in queries} == fast
        assert tokenized
        assert texts["Plan › Canary › Rollback"].startswith("### Rollback\n")
        # "rollout" is on its section's heading line and in its prose: a full word
        assert fast["rollout staging"]["Plan › Rollout"] == 1.0
        # "rollback" is in the body of both, but on a heading line only in the plan's section
        assert fast["rollback nothing"]["Notes"] == 1.0
        assert fast["rollback nothing"]["Plan › Canary › Rollback"] < 1.0
    finally:
        s.close()
