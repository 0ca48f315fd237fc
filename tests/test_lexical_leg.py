"""The lexical leg ranks inside FTS5 and filters the ranked rows afterwards.
With one workspace in the store and no filter it skips the filter; with
several it widens the window until enough rows pass or falls back to the exact
join. Either way the rows must equal the exact join's (real store, real FTS5)."""

from __future__ import annotations

from pathlib import Path

import pytest

from autodoc.store.workspaces import get_workspace
from autodoc.config import Settings
from autodoc.search import lexical
from autodoc.store import matches
from autodoc.store.filters import build_filter
from autodoc.search.fts import build_match
from autodoc.search.query import parse_query
from autodoc.service import Service

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
    hits, used = lexical.run_lexical(db, ws_id, parse_query(query).terms, filt, want=10)
    return [(h.chunk_id, h.score) for h in hits], used


@pytest.fixture()
def two(tmp_path: Path):
    # "big" buries "small": 300 notes that say "gear" three times against 3 that say it once,
    # so small's rows sit below FTS5's first windows of 50 and 200 ranked rows
    _write(tmp_path / "big", 300, "gear gear gear train")
    _write(tmp_path / "small", 3, "a gear among many other words in a longer sentence about nothing much")
    s = Service(Settings.from_env(store=tmp_path / "store" / "autodoc.db"))
    s.workspace_add("big", str(tmp_path / "big"), NO_MODEL)
    s.index("big")
    yield s, tmp_path
    s.close()


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
    filt = build_filter(ws.id, facets=[], opt_facets={}, tags=(), paths=tuple(f"note-{i:03d}.md" for i in range(250, 300)), include_abstract=True)
    assert not filt.empty
    hits, _ = lexical.run_lexical(db, ws.id, parse_query("gear").terms, filt, want=10)
    exact = db.execute(matches.lexical_sql(filt), (build_match(parse_query("gear").terms, "all"), ws.id,
                                                   *filt.params, 50)).fetchall()
    assert [h.chunk_id for h in hits] == [cid for cid, _ in exact] and len(hits) == 50
