"""Issue 18: one document must not fill a page. A document's later passages are discounted
(search/fusion.py LATER_PASSAGE), so a page of 10 hits shows more documents, while the
documents' order (each at its best passage) stays what fusion made it.

Real corpus (../shared/data/corpora/foam-docs, read in place), real store and FTS5; lexical
only (the discount is the same step for every leg), so no model is needed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from autodoc.config import Settings
from autodoc.search import fusion as F
from autodoc.service import Service

FOAM = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "corpora" / "foam-docs"

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


@pytest.mark.parametrize("query", ["tags", "daily note", "publish"])
def test_a_page_shows_more_documents_in_the_same_order(foam, monkeypatch, query):
    monkeypatch.setattr(F, "LATER_PASSAGE", 1.0)  # no discount: up to 3 passages a document in fused order
    before, before_long = foam.search("foam", query, {"limit": 10}), foam.search("foam", query, {"limit": 60})
    monkeypatch.setattr(F, "LATER_PASSAGE", 0.5)
    after, after_long = foam.search("foam", query, {"limit": 10}), foam.search("foam", query, {"limit": 60})
    assert len(_docs(after)) > len(_docs(before)) + 2
    # every document still at its best passage's place: the old order is a prefix of the new one
    assert _docs(after_long)[: len(_docs(before_long))] == _docs(before_long)
    scores = [h["score"] for h in after["hits"]]  # the discounted score is the one the page is sorted by
    assert scores == sorted(scores, reverse=True)
