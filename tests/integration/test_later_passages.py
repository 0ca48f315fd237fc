"""Issue 18: one document must not fill a page. When legs are fused, a document's later passages
are discounted (search/fusion.py LATER_PASSAGE), so a page of 10 hits shows more documents while
the documents' order (each at its best passage) stays what fusion made it. One leg alone keeps
its own order (the lexical leg's strict matches lead, as `lexical_match: "mixed"` says).

Real corpus (../shared/data/corpora/foam-docs, read in place), real store and FTS5. The legs
fused are lexical and graph (foam's wikilinks), so no model is needed: the step is the same
whichever legs were fused.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from autodoc.config import Settings
from autodoc.search import fusion as F
from autodoc.service import Service

FOAM = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "corpora" / "foam-docs"
FUSED = {"stages": ["lexical", "graph"]}

pytestmark = pytest.mark.skipif(not FOAM.is_dir(), reason=f"no corpus at {FOAM}")


@pytest.fixture(scope="module")
def foam(tmp_path_factory):
    s = Service(Settings.from_env(store=tmp_path_factory.mktemp("foam") / "autodoc.db"))
    s.workspace_add("foam", str(FOAM), {"embedding": {"provider": "none"}})
    s.index("foam")
    yield s
    s.close()


def _docs(ans) -> list[str]:
    return list(dict.fromkeys(h["path"] for h in ans["hits"]))


def _both(foam, monkeypatch, query: str, opts: dict) -> tuple[dict, dict]:
    monkeypatch.setattr(F, "LATER_PASSAGE", 1.0)  # no discount: up to 3 passages a document in fused order
    before = foam.search("foam", query, opts)
    monkeypatch.setattr(F, "LATER_PASSAGE", 0.5)
    return before, foam.search("foam", query, opts)


@pytest.mark.parametrize("query", ["tags", "graph"])
def test_a_fused_page_shows_more_documents_in_the_same_order(foam, monkeypatch, query):
    before, after = _both(foam, monkeypatch, query, {**FUSED, "limit": 10})
    assert after["stages"]["performed"] == ["lexical", "graph"]
    assert len(_docs(after)) > len(_docs(before))
    before_long, after_long = _both(foam, monkeypatch, query, {**FUSED, "limit": 60})
    # every document still at its best passage's place: the old order is a prefix of the new one
    assert _docs(after_long)[: len(_docs(before_long))] == _docs(before_long)
    scores = [h["score"] for h in after["hits"]]  # the discounted score is the one the page is sorted by
    assert scores == sorted(scores, reverse=True)


def test_one_leg_keeps_its_order(foam, monkeypatch):
    before, after = _both(foam, monkeypatch, "tags", {"stages": ["lexical"], "limit": 10})
    assert [h["chunk_id"] for h in after["hits"]] == [h["chunk_id"] for h in before["hits"]]
    assert len(_docs(after)) < 10  # a page this query's documents fill several times over
