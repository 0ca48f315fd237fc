"""Issue 19: the relaxed OR query's exact MaxScore (search/lexical/maxscore.py) and the
coverage weight's cheaper reads (store/lexical/ftsterms.py) give what FTS5 gives.

On a real store (three real corpora from ../shared/data/corpora in three
workspaces: English prose, Chinese docs, decision records), for sentences taken
from the corpora themselves and for prefix, phrase and CJK queries:
- MaxScore's top k equals the plain `a OR b OR …` query's: the same ids in the
  same order, the scores within 1e-9 (and it did prune: the test fails if it
  never took the pruned path);
- the leg's hits with MaxScore equal its hits without, with and without filters;
- term counts equal FTS5's own COUNT, holders equal FTS5's matches, the chunk
  total equals COUNT(*) FROM chunks after an edit, a delete and a workspace removal.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest
from helpers.queries import sentence_queries

from autodoc.config import Settings
from autodoc.search.lexical import leg as lexical
from autodoc.search.lexical import maxscore
from autodoc.search.lexical.fts import coverage_terms
from autodoc.search.query import parse_query, resolve_facets
from autodoc.service import Service
from autodoc.store.filters import build_filter
from autodoc.store.lexical import ftsterms, matches
from autodoc.store.workspaces import get_workspace

CORPORA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "corpora"
pytestmark = [
    pytest.mark.skipif(not CORPORA.is_dir(), reason=f"no corpora at {CORPORA}"),
    pytest.mark.slow,  # tens of seconds: left out of make test-fast
]
NO_MODEL = {"embedding": {"provider": "none"}}
WORKSPACES = {"jekyll": "jekyll", "zh": "opentelemetry-docs/content/zh", "adr": "simpler-grants-adr"}
EXTRA = [
    "how to set up the collector configur*",  # a trailing prefix
    '"static site" generator with layouts and plugins',  # a phrase
    "收集器 配置 导出器 追踪 数据",  # CJK runs: phrases of bigrams
    "OpenTelemetry 收集器 exporters 配置 pipeline",  # mixed scripts
    "decision record for the grants search api",
    "front matter defaults permalink collections",
]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("maxscore")
    s = Service(Settings.from_env(store=tmp / "store" / "autodoc.db"))
    for name, rel in WORKSPACES.items():
        s.workspace_add(name, str(CORPORA / rel), NO_MODEL)
        s.index(name)
    yield s
    s.close()


def _queries(db, n: int = 90) -> list[str]:
    """Sentence-length queries cut from the corpora's own chunks (every 53rd), plus EXTRA."""
    return sentence_queries(db, n, 53, EXTRA)


def _exprs(q: str) -> list[str]:
    return [e for e, _ in coverage_terms(resolve_facets(parse_query(q), set()).terms)]


@pytest.mark.parametrize("columns", [None, matches.EQUAL_WEIGHTS])
def test_maxscore_equals_the_plain_or_query(store, monkeypatch, columns):
    monkeypatch.setattr(maxscore, "MIN_MATCHES", 0)  # a 5k-chunk store is below the size it pays at
    db = store.store.reader()
    state = ftsterms.index_state(db)
    pruned = checked = 0
    for q in _queries(db):
        exprs = _exprs(q)
        if not exprs:
            continue
        docs = ftsterms.term_docs(db, exprs, state)
        bounds = [maxscore.upper_bound(state.rows, docs[e]) for e in exprs]
        ran: list[str] = []

        def run(m, n):
            ran.append(m)
            return matches.ranked(db, m, n, columns)

        for k in (10, 50):
            plain = matches.ranked(db, " OR ".join(exprs), k, columns)
            got = maxscore.top_any(run, exprs, bounds, [docs[e] for e in exprs], k)
            assert [r for r, _ in got] == [r for r, _ in plain], q
            assert all(abs(a[1] - b[1]) <= 1e-9 for a, b in zip(got, plain)), q
            checked += 1
        pruned += any(" NOT (" in m for m in ran)
    assert checked >= 150
    assert pruned >= 30, f"MaxScore pruned only {pruned} queries: the test checks little"


def test_term_counts_and_holders_are_fts5s(store):
    db = store.store.reader()
    state = ftsterms.index_state(db)
    assert state.rows == db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
    qs = _queries(db, 30)
    exprs = list(dict.fromkeys(e for q in qs for e in _exprs(q)))
    assert any(e.endswith("*") for e in exprs) and any(" " in e for e in exprs)  # prefixes and phrases too
    docs = ftsterms.term_docs(db, exprs, state)
    for e in exprs:
        holders = {r for (r,) in db.execute("SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ?", (e,))}
        assert docs[e] == len(holders), e
        sample = sorted(holders)[:20] + list(range(1, state.rows, max(1, state.rows // 40)))
        rows = ftsterms.indexed_rows(db, sample)
        parsed = ftsterms.parse_expr(db, e)
        assert {c for c in sample if c in rows and ftsterms.holds(rows[c], parsed)} == holders & set(sample), e


def test_tokenizer_is_the_tables(store):
    db = store.store.reader()
    sql = db.execute("SELECT sql FROM sqlite_master WHERE name='chunks_fts'").fetchone()[0]
    name, args = ftsterms.TOKENIZER
    assert f"tokenize='{' '.join([name, *args])}'" in sql


def _leg(db, ws_id, q, paths=()):
    filt = build_filter(ws_id, facets=[], opt_facets={}, tags=(), paths=paths, include_abstract=True)
    got = lexical.run_lexical(db, ws_id, resolve_facets(parse_query(q), set()).terms, filt, want=10)
    return [(h.chunk_id, h.score, h.weight) for h in got.hits], got.match


@pytest.mark.parametrize("kw", [{}, {"paths": ("docs/",)}])
def test_leg_with_maxscore_equals_the_leg_without(store, monkeypatch, kw):
    """Three workspaces in one store: the ranked window is filtered to one, then widened."""
    monkeypatch.setattr(maxscore, "MIN_MATCHES", 0)
    db = store.store.reader()
    ws = get_workspace(db, "jekyll")
    for q in _queries(db, 40):
        with_ms = _leg(db, ws.id, q, **kw)
        monkeypatch.setattr(maxscore, "ENABLED", False)
        without = _leg(db, ws.id, q, **kw)
        monkeypatch.setattr(maxscore, "ENABLED", True)
        assert with_ms == without, q


@pytest.mark.parametrize("scan", [0, 10**12])
def test_coverage_reads_holders_either_way_alike(store, monkeypatch, scan):
    """The hits' own tokens and a pass over each word's doclist give the same weights."""
    db = store.store.reader()
    ws = get_workspace(db, "zh")
    checked = 0
    for q in _queries(db, 25) + [" ".join(q.split()[i : i + 2]) for q in _queries(db, 25) for i in (0, 4)]:
        terms = resolve_facets(parse_query(q), set()).terms
        filt = build_filter(ws.id, facets=[], opt_facets={}, tags=(), paths=(), include_abstract=True)
        ids = [h.chunk_id for h in lexical.run_lexical(db, ws.id, terms, filt, want=10, weigh=False).hits]
        monkeypatch.setattr(lexical, "HOLDERS_SCAN", 10**12)
        want = lexical.coverage(db, terms, ids)
        monkeypatch.setattr(lexical, "HOLDERS_SCAN", scan)
        assert lexical.coverage(db, terms, ids) == want, q
        # the chunks the AND query matched hold every word: told so, it reads no holders for them
        strict = lexical.run_lexical(db, ws.id, terms, filt, want=10, weigh=False).strict
        assert lexical.coverage(db, terms, ids, strict & set(ids)) == want, q
        checked += bool(strict & set(ids))
    assert checked >= 5, checked  # the strict path was exercised


def test_counts_follow_every_write(tmp_path):
    root = tmp_path / "kb"
    shutil.copytree(CORPORA / "foam-docs", root)
    s = Service(Settings.from_env(store=tmp_path / "store" / "autodoc.db"))
    try:
        s.workspace_add("foam", str(root), NO_MODEL)
        s.workspace_add("adr", str(CORPORA / "simpler-grants-adr"), NO_MODEL)
        s.index("foam")
        s.index("adr")

        def check():
            db = s.store.reader()
            state = ftsterms.index_state(db)
            assert ftsterms.chunk_total(db) == state.rows == db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
            for e in ('"wikilink"', '"graph"', '"note"', '"publish*"', '"daily note"', '"decision"'):
                fts = db.execute("SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?", (e,)).fetchone()[0]
                assert ftsterms.term_docs(db, [e], state)[e] == fts, e
            return state.key

        keys = [check()]
        md = sorted(root.rglob("*.md"))
        md[0].write_text(
            md[0].read_text(encoding="utf-8") + "\n\nA wikilink graph note, daily note.\n", encoding="utf-8"
        )
        md[1].unlink()
        s.index("foam")
        keys.append(check())
        s.workspace_remove("adr")
        keys.append(check())
        assert len(set(keys)) == 3  # every write gave the counts a new key
    finally:
        s.close()


def test_upper_bound_is_above_every_single_term_score(store):
    """Each term's bound is above what FTS5 gives any row for that term alone (any column weights)."""
    db = store.store.reader()
    state = ftsterms.index_state(db)
    for q in _queries(db, 15):
        exprs = _exprs(q)
        docs = ftsterms.term_docs(db, exprs, state)
        for e in exprs:
            for columns in (None, (10.0, 5.0, 1.0, 0.5)):
                best = matches.ranked(db, e, 1, columns)
                if best:
                    assert -best[0][1] < maxscore.upper_bound(state.rows, docs[e]), e
    assert math.isinf(maxscore.upper_bound(state.rows, None))
