"""The fuzzy fallback's pure parts (search/lexical/fuzzy.py): edit distance, the edits allowed by
a stem's length, the choice among candidates, the query rewritten with its corrections."""

from __future__ import annotations

from autodoc.search.lexical import fuzzy


def test_distance_counts_a_swap_of_neighbours_as_one_edit():
    assert fuzzy.distance("colector", "collector", 2) == 1  # a letter dropped
    assert fuzzy.distance("teh", "the", 2) == 1  # two neighbours swapped
    assert fuzzy.distance("kitten", "sitting", 3) == 3
    assert fuzzy.distance("abcdef", "uvwxyz", 2) == 3  # past `most`: most + 1, not the full count


def test_short_stems_are_never_corrected_and_long_ones_by_two():
    assert [fuzzy.allowed(s) for s in ("abc", "abcd", "abcdefgh", "abcdefghi")] == [0, 1, 1, 2]


def test_the_nearest_has_the_fewest_edits_then_the_most_chunks():
    got = fuzzy.nearest("colector", ["collector", "corrector", "colectar", "cofactor"], {"collector": 3, "colectar": 9})
    assert got == ["colectar", "collector"]  # one edit each, more chunks first; two-edit words are out
    assert fuzzy.nearest("colector", ["collector"], {"collector": 0}) == []  # no chunk holds it any more


def test_the_query_is_rewritten_word_by_word():
    assert fuzzy.corrected("deboucing in Swift, deboucing2", {"deboucing": "debounce"}) == (
        "debounce in Swift, deboucing2"
    )


def test_a_word_less_its_ending_is_tried_after_its_stem():
    assert fuzzy.roots("deplyment", "deplyment") == [("deplyment", ""), ("deply", "ment")]
    assert fuzzy.roots("deboucing", "debouc") == [("debouc", "")]  # the stem already is the root
    assert fuzzy.roots("colectors", "colector") == [("colector", "")]
    assert fuzzy.roots("things", "thing") == [("thing", "")]
    assert fuzzy.roots("runs", "run") == [("run", "")]
    # a root of four letters is one edit from too many words ("reat" from "relat": SciFact's "reatment")
    assert fuzzy.roots("reatment", "reatment") == [("reatment", "")]
    assert fuzzy.roots("coatmer", "coatmer") == [("coatmer", ""), ("coatm", "er")]
