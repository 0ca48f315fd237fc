"""search/passages.py: every passage of the leading document scored (pure parts)."""

from __future__ import annotations

from collections import Counter

import pytest

from autodoc.search import passages as P


def test_bm25_weighs_rare_words_and_short_passages():
    counts = [Counter({"leas": 1, "the": 5}), Counter({"recoveri": 2, "leas": 1}), Counter({"the": 3})]
    weights = {"leas": 0.5, "recoveri": 3.0}
    s = P.bm25(counts, weights)
    assert s[1] > s[0] > s[2] == 0.0
    # the same words in a longer passage score lower
    longer = P.bm25([Counter({"recoveri": 1, "x": 40}), Counter({"recoveri": 1, "x": 2})], {"recoveri": 1.0})
    assert longer[1] > longer[0]


def test_order_averages_the_scaled_signals_and_discounts_navigation():
    ps = [
        P.Passage(1, 0.70, 10.0, 1.0),  # a table of contents: both signals highest
        P.Passage(2, 0.65, 8.0, 0.0),  # the answer
        P.Passage(3, 0.30, 9.0, 0.0),  # words without meaning
        P.Passage(4, 0.60, 0.0, 0.0),  # meaning without words
    ]
    ranked = P.order(ps)
    assert [c for c, _ in ranked][:2] == [2, 3]
    assert ranked[-1][0] == 1  # the contents keeps a tenth of its score
    # one signal alone decides when the other is absent everywhere
    alone = P.order([P.Passage(1, None, 1.0, 0.0), P.Passage(2, None, 3.0, 0.0)])
    assert [c for c, _ in alone] == [2, 1]
    # a passage without a vector counts as the document's lowest cosine, not as zero meaning missing
    pending = P.order([P.Passage(1, None, 5.0, 0.0), P.Passage(2, 0.9, 5.0, 0.0), P.Passage(3, 0.1, 5.0, 0.0)])
    assert next(c for c, _ in pending) == 2
    assert dict(pending)[1] == dict(pending)[3]
    assert P.order([]) == []


def test_fusion_breaks_near_ties_within_the_document():
    ps = [P.Passage(1, 0.50, 5.0, 0.0), P.Passage(2, 0.52, 5.2, 0.0), P.Passage(3, 0.10, 1.0, 0.0)]
    assert P.order(ps)[0][0] == 2
    assert P.order(ps, fused=[1])[0][0] == 1  # the legs' first of the document, the scores close
    # but not a clear loser within the document
    assert P.order(ps, fused=[3])[0][0] == 2


@pytest.mark.parametrize(
    ("scores", "nav", "want"),
    [
        ([(1, 1.0), (2, 0.9), (3, 0.7), (4, 0.65)], {}, [1, 2, 3]),  # SHOWN at most
        ([(1, 1.0), (2, 0.5), (3, 0.4)], {}, [1]),  # under FOLLOW_SHARE of the best
        ([(1, 1.0), (2, 0.9), (3, 0.8)], {2: 0.8}, [1, 3]),  # navigation never follows
        ([], {}, []),
    ],
)
def test_shown(scores, nav, want):
    assert P.shown(scores, nav) == want


def test_idf_is_bm25s():
    w = P.idf({"rare": 1, "common": 90, "absent": 0}, 100)
    assert w["rare"] > w["common"] > 0
    assert "absent" not in w
