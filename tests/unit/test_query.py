"""Query parsing and FTS5 MATCH building: no input may reach FTS5's grammar."""

import apsw
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autodoc.search.lexical.fts import build_match, fts_text
from autodoc.search.query import Term, parse_query, resolve_facets


@pytest.fixture(scope="module")
def fts():
    db = apsw.Connection(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(body, tokenize='porter unicode61 remove_diacritics 2')")
    for text in [
        "the store takes an exclusive lease beside autodoc.db",
        "error -32069 while reclaimBatch ran at commit a3f9c2e",
        "NEAR AND OR NOT are words here: body:foo (x)",
        fts_text("数据库迁移指南 と 検索エンジンの設定"),
        "migrations are applied in order",
    ]:
        db.execute("INSERT INTO t VALUES (?)", (text,))
    return db


def match(db, q, mode="all"):
    expr = build_match(resolve_facets(parse_query(q), set()).terms, mode)
    if expr is None:
        return []
    return [r[0] for r in db.execute("SELECT rowid FROM t WHERE t MATCH ? ORDER BY rowid", (expr,))]


@pytest.mark.parametrize(
    "query,expected",
    [
        ("stores lease", [1]),  # stemmed, ANDed
        ('"exclusive lease"', [1]),
        ('"lease exclusive"', []),  # a phrase keeps its order
        ("-32069", [2]),
        ("reclaimBatch", [2]),
        ("a3f9c2e", [2]),
        ("NEAR AND OR", [3]),  # operators are words
        ("body:foo", [3]),  # undeclared field → words
        ("migr*", [5]),  # trailing prefix
        ("数据库", [4]),  # CJK substring
        ("迁移", [4]),
        ("エンジン", [4]),
        ("検索エンジンの設定", [4]),
    ],
)
def test_queries_find_what_a_person_expects(fts, query, expected):
    assert match(fts, query) == expected


def test_prefix_only_on_the_last_word():
    p = parse_query("migr* lease*")
    assert p.terms == [Term("migr*"), Term("lease", prefix=True)]


def test_facets_are_split_out_and_unknown_fields_fall_back_to_words():
    p = parse_query('migration type:adr -status:superseded tag:sqlite foo:bar owner:"Ana Lima"')
    assert [t.text for t in p.terms] == ["migration"]
    assert [(f.field, f.value, f.negate) for f in p.facets] == [
        ("type", "adr", False),
        ("status", "superseded", True),
        ("tag", "sqlite", False),
        ("foo", "bar", False),
        ("owner", "Ana Lima", False),
    ]
    r = resolve_facets(p, {"type", "status"})
    assert [f.field for f in r.facets] == ["type", "status", "tag"]
    assert [t.text for t in r.terms] == ["migration", "foo:bar", "owner:Ana Lima"]
    assert all(t.phrase for t in r.terms[1:])  # kept whole: the words of foo:bar, adjacent
    assert r.text == 'migration "foo:bar" "owner:Ana Lima"'


def test_any_mode_splits_words_drops_stopwords_but_keeps_phrases():
    terms = parse_query('is the UCP1-dependent path "the store" of sqlite migr*').terms
    assert build_match(terms, "any") == '"UCP1" OR "dependent" OR "path" OR "the store" OR "sqlite" OR "migr"*'
    assert build_match(terms, "all").startswith('"is" AND "the" AND "UCP1-dependent"')


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=60))
def test_no_input_raises_an_fts5_error(fts, query):
    # Any text at all: the built MATCH is accepted by FTS5 in both modes.
    for mode in ("all", "any"):
        expr = build_match(parse_query(query).terms + [Term(f.raw) for f in parse_query(query).facets], mode)
        if expr is not None:
            fts.execute("SELECT rowid FROM t WHERE t MATCH ?", (expr,)).fetchall()


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            ['"', "(", ")", "*", ":", "-", "^", "+", "NEAR", "AND", "OR", "NOT", "{", "}", "a", "b c", "x:y", "\\"]
        ),
        max_size=12,
    )
)
def test_operator_soup_never_errors(fts, parts):
    q = "".join(parts) + " " + " ".join(parts)
    for mode in ("all", "any"):
        expr = build_match(parse_query(q).terms, mode)
        if expr is not None:
            fts.execute("SELECT rowid FROM t WHERE t MATCH ?", (expr,)).fetchall()


def test_snippets_mark_what_fts5_matched():
    from autodoc.search.lexical.tokens import tokenize
    from autodoc.search.snippet import make_snippet

    text = "Stores were storing the stored lease; migrations ran. Café owners 数据库迁移 worked."
    snip = make_snippet(text, parse_query("store cafe 迁移 migr*").terms, tokenize)
    assert "«Stores»" in snip and "«storing»" in snip and "«stored»" in snip
    assert "«migrations»" in snip and "«Café»" in snip and "«迁移»" in snip
    assert "«lease»" not in snip
    # stopwords are marked only when the query is nothing else
    assert "«the»" not in make_snippet(text, parse_query("the lease").terms, tokenize)
    assert "«the»" in make_snippet(text, parse_query("the").terms, tokenize)


def test_relaxed_query_drops_contraction_tails_only_after_an_apostrophe(fts):
    # "D" of "vitamin D" and "T" of "T-cell" name things; the "m" of "I'm" and the "t" of "don't" do not
    terms = parse_query("I'm asking about vitamin D and T-cell counts we’ve seen").terms
    expr = build_match(terms, "any")
    assert expr == '"asking" OR "about" OR "vitamin" OR "D" OR "T" OR "cell" OR "counts" OR "seen"'


def test_relaxed_query_names_a_word_once_whatever_its_case(fts):
    # FTS5 folds case: "Gastric … gastric" ORed twice made BM25 count the word twice
    expr = build_match(parse_query("Gastric infection raises gastric cancer risk").terms, "any")
    assert expr == '"Gastric" OR "infection" OR "raises" OR "cancer" OR "risk"'
    assert build_match(parse_query("Gastric gastric").terms, "all") == '"Gastric"'


def test_case_duplicates_go_but_words_unicode61_keeps_apart_stay():
    from autodoc.search.lexical.fts import build_match
    from autodoc.search.query import parse_query

    got = build_match(parse_query("Straße strasse ﬁle file Gastric gastric").terms, "any")
    assert got == '"Straße" OR "strasse" OR "ﬁle" OR "file" OR "Gastric"'
