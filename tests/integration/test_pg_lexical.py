"""Issue 34's acceptance for the lexical leg: the same folders indexed into SQLite and into PostgreSQL
(the pg_uri fixture) by the real index job answer every lexical search byte for byte alike: hits,
spans, snippets, order, scores, the match mode, the fuzzy corrections, facet counts.

SQLite ranks with FTS5; Postgres has no FTS5 and ranks from the product's postings with FTS5's own
bm25 arithmetic (store/lexical/bm25.py, docs/dev/postgres.md section 2). Two workspaces: a real
corpus (../shared/data/corpora/foam-docs, read in place) and a few notes of this test's own (CJK,
a phrase, a tag), so that neither workspace is the store's only one and every ranking goes through
the filtered path as well. Then an edit, a rename and a delete on both, and the answers again.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from urllib.parse import quote

import pytest
from helpers.pg import missing_reason

FOAM = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "corpora" / "foam-docs"

pytestmark = [
    pytest.mark.skipif(missing_reason() is not None, reason=missing_reason() or ""),
    pytest.mark.skipif(not FOAM.is_dir(), reason=f"no corpus at {FOAM}"),
]

NOTES = {
    "cjk.md": "# 数据库迁移\n\n数据库迁移需要先备份。迁移脚本放在 migrations 目录。\n\n## 回滚\n\n回滚时先停服务。\n",
    "daily.md": "---\ntags: [journal, planning]\n---\n# Daily planning\n\nA daily note holds the plan of the day. "
    "Planning weekly reviews keeps the graph of notes tidy.\n",
    "graph.md": "# Graph views\n\nThe graph view shows how notes link; a daily note links to yesterday's.\n",
}

QUERIES = [
    "graph",  # one word
    "tags wikilinks",  # keywords, ANDed
    "how do I link my notes to each other with backlinks",  # a sentence: relaxed to OR
    '"daily note"',  # a phrase
    '"note templates" graph',  # a phrase and a word
    "wo*",  # a prefix
    "temp* note",  # a word and a prefix
    "wikilnks",  # a typo: the fuzzy fallback
    "markdown previw graph",  # a typo beside known words
    "graph tag:journal",  # a tag filter
    "link path:docs/user/features",  # a path filter
    "数据库",  # CJK: a phrase of bigrams
    "迁",  # one CJK character: a bigram prefix
    "zzqx nothinghere",  # nothing matches
]


def _in_schema(uri: str, schema: str) -> str:
    sep = "&" if "?" in uri else "?"
    return f"{uri}{sep}options={quote(f'-csearch_path={schema}')}"


@pytest.fixture(scope="module")
def services(pg_uri, tmp_path_factory):
    import psycopg

    from autodoc.config import Settings
    from autodoc.service import Service

    notes = tmp_path_factory.mktemp("notes")
    for name, text in NOTES.items():
        (notes / name).write_text(text)
    schema = f"lex_{uuid.uuid4().hex[:10]}"
    out = []
    for store in (tmp_path_factory.mktemp("lite") / "autodoc.db", _in_schema(pg_uri, schema)):
        s = Service(Settings.from_env(store=store))
        for name, root in (("foam", FOAM), ("notes", notes)):
            s.workspace_add(name, str(root), {"embedding": {"provider": "none"}})
            s.index(name)
        out.append(s)
    yield out[0], out[1], notes
    for s in out:
        s.close()
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _answer(service, workspace: str, query: str, opts: dict) -> str:
    ans = service.search(workspace, query, {"stages": ["lexical"], **opts})
    ans.pop("took_ms", None)
    return json.dumps(ans, sort_keys=True, ensure_ascii=False)


def _same(lite, pg, workspace: str, query: str, opts: dict) -> dict:
    a, b = _answer(lite, workspace, query, opts), _answer(pg, workspace, query, opts)
    assert a == b, f"{workspace}: {query!r} {opts}"
    return json.loads(a)


@pytest.mark.parametrize("query", QUERIES)
def test_lexical_answers_are_byte_identical(services, query):
    lite, pg, _ = services
    seen = 0
    for workspace in ("foam", "notes"):
        for opts in ({"limit": 10}, {"limit": 50, "facet_counts": ["tag"]}):
            ans = _same(lite, pg, workspace, query, opts)
            seen += len(ans["hits"]) + ans["held_back"]  # (the relevance floor holds back a lone CJK character's)
    if not query.startswith("zzqx"):
        assert seen, "a query of this set that finds nothing compares nothing"


def test_the_set_covers_what_it_says(services):
    """The queries reach the paths they are there for (else the comparison proves less than it claims)."""
    lite, _, _ = services
    modes = {q: lite.search("foam", q, {"stages": ["lexical"], "limit": 10})["lexical_match"] for q in QUERIES}
    assert modes["how do I link my notes to each other with backlinks"] in ("any", "mixed")
    assert modes["wikilnks"] == "fuzzy"
    assert lite.search("notes", "数据库", {"stages": ["lexical"]})["hits"][0]["path"] == "cjk.md"
    assert lite.search("notes", "graph tag:journal", {"stages": ["lexical"]})["hits"][0]["path"] == "daily.md"


def test_still_identical_after_edits_renames_and_deletes(services):
    """The postings' delta and dead rows (and Postgres's own totals) as writes leave them."""
    lite, pg, notes = services
    (notes / "graph.md").write_text("# Graph views\n\nThe graph view draws wikilinks between notes; daily notes too.\n")
    (notes / "daily.md").rename(notes / "journal-daily.md")
    (notes / "cjk.md").unlink()
    (notes / "more.md").write_text("# More planning\n\nPlanning the graph of daily notes, weekly.\n")
    for s in (lite, pg):
        s.index("notes")
    for query in ("graph", "daily planning", '"daily notes"', "plan*", "journal", "数据库", "graph notes wikilinks"):
        for workspace in ("notes", "foam"):
            _same(lite, pg, workspace, query, {"limit": 20})


# MATCH expressions as search/lexical/fts.py and maxscore.py write them, and their edge cases: a
# phrase with no token ("_"), a diacritic, a hyphenated prefix, CJK bigrams, NOT and parentheses
EXPRESSIONS = [
    '"graph"',
    '"graph" AND "note"',
    '"graph" OR "note" OR "daily"',
    '"daily note"',
    '"note templates"*',
    '"wo"*',
    '"wiki-li"*',
    '"_"',
    '"graph" AND "_"',
    '"graph" OR "_"',
    '"naïve" OR "Straße" OR "graph"',
    '("graph" OR "daily") NOT ("note")',
    '("graph" OR "daily") AND ("note" OR "templates")',
    '"数据 据库"',
    '"迁"*',
    '"graph" OR "daily note" OR "temp"*',
    '"graph graph graph graph"',  # longer than a title that holds its one word (positions past its end)
]


@pytest.mark.parametrize("columns", [None, (1.0, 1.0, 1.0, 1.0)])
def test_match_and_bm25_agree_with_fts5(services, columns):
    """store/lexical/matches.py's ranking and matching, FTS5's on SQLite and the postings' on Postgres:
    the same rows, order and scores to the bit, and the same document counts."""
    from autodoc.store.lexical import ftsterms, matches

    lite, pg, _ = services
    with lite.store.read() as a, pg.store.read() as b:
        assert ftsterms.index_state(a).rows == ftsterms.index_state(b).rows
        assert ftsterms.index_state(a).tokens == ftsterms.index_state(b).tokens
        for e in EXPRESSIONS:
            want = matches.ranked(a, e, 10_000, columns)
            assert matches.ranked(b, e, 10_000, columns) == want, e
            assert matches.matching_rowids(b, e) == sorted(matches.matching_rowids(a, e)), e
        terms = [e for e in EXPRESSIONS if not any(op in e for op in (" AND ", " OR ", " NOT "))]
        assert ftsterms.term_docs(b, terms) == ftsterms.term_docs(a, terms)
        assert all(matches.ranked(a, e, 5) for e in EXPRESSIONS[:7])  # (the set finds something)


def test_still_identical_once_the_delta_is_merged_and_the_dead_compacted(services):
    """An index job's end folds the delta into the segments and purges dead records (postings.maintain):
    after it, the Postgres store reads its segments alone, and answers as before."""
    from autodoc.store.lexical import postings
    from autodoc.store.sql import scalar

    lite, pg, _ = services
    for s in (lite, pg):
        with s.store.locked() as db:
            postings.maintain(db, force=True)
    with pg.store.read() as db:
        assert scalar(db, "SELECT COUNT(*) FROM postings_delta") == 0
        assert scalar(db, "SELECT COUNT(*) FROM postings_dead") == 0
        assert scalar(db, "SELECT COUNT(*) FROM postings") > 0
    for query in QUERIES + ["daily planning", '"daily notes"', "plan*", "graph notes wikilinks"]:
        for workspace in ("notes", "foam"):
            _same(lite, pg, workspace, query, {"limit": 20})
