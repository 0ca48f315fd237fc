"""Fusion, boosts, cap and demotion are pure functions: properties and cases."""

import random

from hypothesis import given
from hypothesis import strategies as st

from autodoc.search import fusion as F


def legs_strategy():
    ids = st.lists(st.integers(1, 60), unique=True, max_size=25)
    return st.fixed_dictionaries({"lexical": ids, "semantic": ids})


def as_legs(d):
    return {k: [F.LegHit(i, 1.0 / (r + 1)) for r, i in enumerate(v)] for k, v in d.items()}


@given(legs_strategy())
def test_rrf_ignores_the_order_legs_arrive_in(d):
    a = F.fuse_rrf(as_legs(d))
    b = F.fuse_rrf(dict(reversed(list(as_legs(d).items()))))
    assert [(f.chunk_id, f.score, f.ranks) for f in a] == [(f.chunk_id, f.score, f.ranks) for f in b]


@given(st.lists(st.integers(1, 100), unique=True, max_size=30))
def test_single_list_fusion_is_the_identity_order(ids):
    fused = F.fuse_rrf({"lexical": [F.LegHit(i, 1.0) for i in ids]})
    assert [f.chunk_id for f in fused] == ids


@given(legs_strategy())
def test_rrf_scores_and_ranks_are_consistent(d):
    for f in F.fuse_rrf(as_legs(d), k=60):
        expected = sum(1 / (60 + r + 1) for r in f.ranks.values() if r is not None)
        assert abs(f.score - expected) < 1e-12
        assert f.via == [n for n in ("lexical", "semantic") if f.ranks[n] is not None]
        assert 0 <= F.compatibility(f.ranks, 2) <= 1


def test_rank_one_in_every_leg_is_relevance_one():
    fused = F.fuse_rrf(as_legs({"lexical": [7, 8], "semantic": [7, 9]}))
    F.apply_boosts(fused, doc_of={7: 1, 8: 2, 9: 3}, tag_match=set(), inbound={}, max_score=F.rrf_max(2))
    assert fused[0].chunk_id == 7 and fused[0].relevance == 1.0
    # found by one leg only: at most about one half
    assert all(f.relevance <= 0.5 for f in fused[1:])


def test_rrf_weighs_a_hit_by_its_own_weight():
    # the lexical leg's coverage weight: rank 1 holding a tenth of the query loses to rank 2 holding all of it
    fused = F.fuse_rrf({"lexical": [F.LegHit(1, 9.0, 0.1), F.LegHit(2, 8.0, 1.0)]}, k=20)
    assert [f.chunk_id for f in fused] == [2, 1]
    assert abs(fused[1].score - 0.1 / 21) < 1e-12


def test_compatibility_formula():
    assert F.compatibility({"lexical": 0, "semantic": 0}, 2) == 1.0
    assert F.compatibility({"lexical": 0, "semantic": None}, 2) == round(0.6 * 0.5 + 0.4 * 1.0, 6)
    assert F.compatibility({"lexical": 3, "semantic": 1}, 2) == round(0.6 + 0.4 * (0.25 + 0.5) / 2, 6)


def test_tag_and_link_boosts_reorder_ties():
    # the spec's k 60 and link boost 0.1 (the defaults moved: config/defaults.py)
    fused = F.fuse_rrf({"lexical": [F.LegHit(1, 2.0), F.LegHit(2, 1.9), F.LegHit(3, 1.8)]}, k=60)
    F.apply_boosts(
        fused, doc_of={1: 10, 2: 20, 3: 30}, tag_match={30}, inbound={20: 3}, max_score=F.rrf_max(1, 60), link_boost=0.1
    )
    # link boost ×1.2 (3 inbound) and tag boost ×1.2 both beat rank 1's 1/61:
    # 1.2/62 > 1.2/63 > 1/61
    assert [f.chunk_id for f in fused] == [2, 3, 1]
    assert F.link_multiplier(3, 0.1) == 1.2  # 1 + 0.1·log2(4)


def test_cap_keeps_three_per_document_in_order():
    fused = F.fuse_rrf({"lexical": [F.LegHit(i, 1.0) for i in range(1, 8)]})
    doc_of = {1: 1, 2: 1, 3: 2, 4: 1, 5: 1, 6: 2, 7: 3}
    assert [f.chunk_id for f in F.cap_per_document(fused, doc_of, 3, later=1.0)] == [1, 2, 3, 4, 6, 7]


def test_cap_discounts_a_documents_later_passages():
    # 1/11 .. 1/17; a document's 2nd passage × 0.5, its 3rd × 0.25: another document's first passage
    # (3: 1/13, 7: 1/17) now comes before them, and the documents keep their order (1, 2, 3)
    # (the second leg found nothing of these: their scores are the lexical leg's alone)
    fused = F.fuse_rrf({"lexical": [F.LegHit(i, 1.0) for i in range(1, 8)], "semantic": [F.LegHit(99, 0.5)]}, k=10)
    fused = [f for f in fused if f.chunk_id != 99]
    doc_of = {1: 1, 2: 1, 3: 2, 4: 1, 5: 1, 6: 2, 7: 3}
    out = F.cap_per_document(fused, doc_of, 3, later=0.5)
    assert [f.chunk_id for f in out] == [1, 3, 7, 2, 6, 4]
    assert [round(f.score * 1000, 3) for f in out] == [90.909, 76.923, 58.824, 41.667, 31.25, 17.857]
    # one leg alone keeps its order (the lexical leg's strict matches lead)
    alone = F.fuse_rrf({"lexical": [F.LegHit(i, 1.0) for i in range(1, 8)]}, k=10)
    assert [f.chunk_id for f in F.cap_per_document(alone, doc_of, 3, later=0.5)] == [1, 2, 3, 4, 6, 7]


def _order(ids, doc_of, successor):
    fused = F.fuse_rrf({"lexical": [F.LegHit(i, 1.0) for i in ids]})
    path_of = {d: f"doc{d}.md" for d in range(1, 11)}
    out = F.demote_superseded(fused, doc_of, successor, path_of)
    return [f.chunk_id for f in out], {f.chunk_id: f.superseded_by for f in out}


def test_superseded_moves_right_below_its_successor():
    # chunk → doc: 1→A(1) 2→X(9) 3→B(2); A superseded by B
    ids, sup = _order([1, 2, 3], {1: 1, 2: 9, 3: 2}, {1: 2})
    assert ids == [2, 3, 1]
    assert sup == {1: "doc2.md", 2: None, 3: None}


def test_chain_lists_newest_then_older():
    # A(1) → B(2) → C(3): C's hits, then B's, then A's, each naming its direct successor
    ids, sup = _order([10, 20, 30, 40], {10: 1, 20: 2, 30: 9, 40: 3}, {1: 2, 2: 3})
    assert ids == [30, 40, 20, 10]
    assert sup[20] == "doc3.md" and sup[10] == "doc2.md"


def test_chain_with_a_missing_middle_anchors_to_the_next_present():
    ids, sup = _order([10, 30, 40], {10: 1, 30: 9, 40: 3}, {1: 2, 2: 3})
    assert ids == [30, 40, 10] and sup[10] == "doc2.md"


def test_no_successor_present_changes_nothing_and_cycles_lose_nothing():
    ids, sup = _order([1, 2], {1: 1, 2: 9}, {1: 5})
    assert ids == [1, 2] and sup == {1: None, 2: None}
    ids, _ = _order([1, 2, 3], {1: 1, 2: 2, 3: 3}, {1: 2, 2: 1})
    assert sorted(ids) == [1, 2, 3]


def test_weighted_sum_threshold_and_scale():
    legs = {"lexical": [F.LegHit(1, 9.0), F.LegHit(2, 4.5)], "semantic": [F.LegHit(1, 0.8), F.LegHit(3, 0.3)]}
    out = F.fuse_weighted(legs)
    scores = {f.chunk_id: f.score for f in out}
    # BM25 scaled to the leg's best of the query, capped at seed 000's strong-match 0.3
    assert abs(scores[1] - (0.6 * 0.8 + 0.4 * 0.3)) < 1e-9
    assert 2 not in scores  # 0.4·0.15 < 0.2
    assert 3 not in scores  # 0.6·0.3 = 0.18 < 0.2


def test_weighted_sum_never_passes_a_lexical_only_hit():
    """Seed 000: a lexical match alone, however strong, stays under the 0.2 threshold
    (raw BM25 through s/(s+1) read 0.8–0.93 and let 30 of 50 through)."""
    legs = {"lexical": [F.LegHit(i, 14.0 - i) for i in range(1, 11)], "semantic": [F.LegHit(50, 0.4)]}
    out = F.fuse_weighted(legs)
    assert [f.chunk_id for f in out] == [50]
    both = F.fuse_weighted({"lexical": [F.LegHit(1, 13.0)], "semantic": [F.LegHit(1, 0.2)]})
    assert [f.chunk_id for f in both] == [1]  # 0.12 + 0.12: lexical helps a weak semantic hit over the line


def test_weighted_sum_without_a_semantic_leg_keeps_the_lexical_hits_in_bm25_order():
    """The threshold keeps a hybrid's lexical-only hits out; a search with no semantic leg (no
    model, or stages [lexical]) must not come back empty because of it."""
    out = F.fuse_weighted({"lexical": [F.LegHit(1, 9.0), F.LegHit(2, 4.5), F.LegHit(3, 0.5)]})
    assert [f.chunk_id for f in out] == [1, 2, 3]


def test_fusion_is_deterministic_under_shuffled_equal_scores():
    ids = list(range(1, 30))
    base = [
        f.chunk_id
        for f in F.fuse_rrf({"a": [F.LegHit(i, 1) for i in ids], "b": [F.LegHit(i, 1) for i in reversed(ids)]})
    ]
    for seed in range(5):
        random.seed(seed)
        legs = {"b": [F.LegHit(i, 1) for i in reversed(ids)], "a": [F.LegHit(i, 1) for i in ids]}
        assert [f.chunk_id for f in F.fuse_rrf(legs)] == base


def test_convex_normalises_each_leg_and_weighs_them():
    legs = {
        "lexical": [F.LegHit(1, 12.0), F.LegHit(2, 7.0), F.LegHit(3, 2.0)],
        "semantic": [F.LegHit(3, 0.9), F.LegHit(1, 0.5), F.LegHit(4, 0.1)],
    }
    out = {f.chunk_id: f for f in F.fuse_convex(legs)}
    assert abs(out[1].score - (0.6 * 1.0 + 0.4 * 0.5)) < 1e-12
    assert abs(out[3].score - (0.6 * 0.0 + 0.4 * 1.0)) < 1e-12
    assert abs(out[2].score - 0.6 * 0.5) < 1e-12 and out[2].scores["semantic"] is None
    assert out[4].score == 0.0 and out[4].via == ["semantic"]
    order = [f.chunk_id for f in F.fuse_convex(legs, weights={"semantic": 0.9, "lexical": 0.1})]
    assert order[0] == 3


@given(legs_strategy())
def test_convex_is_order_independent_and_bounded(d):
    legs = {k: [F.LegHit(i, float(len(v) - r)) for r, i in enumerate(v)] for k, v in d.items()}
    a = F.fuse_convex(legs)
    b = F.fuse_convex(dict(reversed(list(legs.items()))))
    assert [(f.chunk_id, f.score) for f in a] == [(f.chunk_id, f.score) for f in b]
    assert all(0.0 <= f.score <= 1.0 + 1e-12 for f in a)
