"""Issue 19: the postings index (store/lexical/postings.py) and its numpy bm25
(search/lexical/impact.py) rank the relaxed OR query as FTS5 does.

On a real store (real corpora from ../shared/data/corpora: an editable copy of
foam-docs, decision records, Chinese docs), for sentences cut from the corpora:
the impact ranking's rows equal FTS5's `… MATCH 'a OR b …' ORDER BY bm25, rowid`
(same ids in the same order, the same scores to the bit), with both column
weightings, with and without pruning, on the delta alone, after a merge, after
edits, deletes, renames and a retitle (delta and dead list), after a compaction,
after a workspace removal, and rebuilt from the chunks as an older store would
be. The leg's hits and coverage weights are the same with the index as without
(the hits' word holdings read from the postings instead of FTS5's tokenizer, an
AND the postings prove empty skipped), and an AND proved empty is empty in FTS5.
An older store (no postings tables) migrates, answers through FTS5 while
its postings are not built, and builds them at its next index job.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import apsw
import numpy as np
import pytest
from helpers.queries import sentence_queries

from autodoc.config import Settings
from autodoc.search.lexical import impact
from autodoc.search.lexical import leg as lexical
from autodoc.search.lexical.fts import build_match, coverage_terms, term_match
from autodoc.search.query import parse_query, resolve_facets
from autodoc.service import Service
from autodoc.store.filters import build_filter
from autodoc.store.lexical import matches, postings
from autodoc.store.workspaces import get_workspace

CORPORA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "corpora"
pytestmark = pytest.mark.skipif(not CORPORA.is_dir(), reason=f"no corpora at {CORPORA}")
NO_MODEL = {"embedding": {"provider": "none"}}
EXTRA = [
    "wikilink graph note daily publish template",
    "decision record for the grants search api",
    "收集器 配置 导出器",
    "how to set up the collector configur*",
    '"daily note" template graph',
]


def _queries(db, n: int = 30) -> list[str]:
    return sentence_queries(db, n, 37, EXTRA)


def _check(db, *, want_fast: int = 15) -> int:
    """Every query's impact ranking equals FTS5's; returns how many the postings answered."""
    fast = 0
    for columns in (None, matches.EQUAL_WEIGHTS):
        for q in _queries(db):
            terms = resolve_facets(parse_query(q), set()).terms
            exprs = [e for e, _ in coverage_terms(terms)]
            relaxed = build_match(terms, "any")
            if not exprs or " OR ".join(exprs) != relaxed:
                continue
            rank = impact.ranker(db, exprs, columns)
            if rank is None:
                continue
            fast += 1
            for k in (10, 50):
                want = matches.ranked(db, relaxed, k, columns)
                for prune_min in (impact.PRUNE_MIN, 0):  # as configured, and pruning on these small corpora too
                    with pytest.MonkeyPatch.context() as mp:
                        mp.setattr(impact, "PRUNE_MIN", prune_min)
                        got = impact.ranker(db, exprs, columns)(relaxed, k)
                    assert [r[0] for r in got] == [r[0] for r in want], (q, k)
                    assert [r[1] for r in got] == [r[1] for r in want], (q, k)  # to the bit
    assert fast >= want_fast, fast
    _check_and(db)
    return fast


def _check_and(db) -> None:
    """The AND of a query's first words (and of all of them), ranked from the postings where each
    is one token, equals FTS5's ranking of it to the bit; an AND the postings prove empty is empty."""
    ranked = empty = 0
    for columns in (None, matches.EQUAL_WEIGHTS):
        for q in _queries(db):
            terms = resolve_facets(parse_query(q), set()).terms
            every = [e for e in dict.fromkeys(term_match(t) for t in terms) if e]
            for m in (every[:2], every[:3], every, every[:3] + ['"zzqxnotaword"']):
                rank = impact.all_ranker(db, m, columns)
                want = matches.ranked(db, " AND ".join(m), 1000, columns)
                if rank is impact.EMPTY:
                    assert not want, m
                    empty += 1
                elif rank is not None:
                    for k in (10, 1000):
                        assert rank(" AND ".join(m), k) == want[:k], (m, k)  # ids, order, scores to the bit
                    ranked += bool(want)
    assert ranked >= 10 and empty >= 10, (ranked, empty)


def _check_leg(db, monkeypatch) -> None:
    """The leg's hits and coverage weights are the same with the postings index as without it
    (FTS5's ranking, and which hits hold a word read by FTS5's tokenizer over the hits)."""
    monkeypatch.setattr(lexical, "HOLDERS_SCAN", 0)  # the small corpora would read the holders from FTS5
    used = empty = 0
    for name in ("foam", "zh"):
        ws = get_workspace(db, name)
        filt = build_filter(ws.id, facets=[], opt_facets={}, tags=(), paths=(), include_abstract=True)
        for q in _queries(db, 15):
            terms = resolve_facets(parse_query(q), set()).terms
            got = {}
            for on in (False, True):
                monkeypatch.setattr(impact, "ENABLED", on)
                res = lexical.run_lexical(db, ws.id, terms, filt, want=50, weigh=True)
                got[on] = [(h.chunk_id, h.score, h.weight) for h in res.hits]
            assert got[True] == got[False], q
            ids = [h[0] for h in got[True]]
            used += impact.held(db, [e for e, _ in coverage_terms(terms)], ids) is not None and bool(ids)
            every = [e for e in dict.fromkeys(term_match(t) for t in terms) if e]
            for m in (every, every + ['"zzqxnotaword"']):  # (a word no chunk holds: the AND is empty)
                if impact.none_holds_all(db, m):
                    assert not matches.ranked(db, " AND ".join(m), 1), q
                    empty += 1
                else:
                    assert len(m) < 2 or matches.ranked(db, " AND ".join(m), 1) or impact.tokens_of(db, m) is None, q
    monkeypatch.setattr(impact, "ENABLED", True)
    assert used >= 10 and empty >= 15, (used, empty)


@pytest.fixture()
def pruned(monkeypatch):
    """Counts the queries whose commonest terms were only looked up for the candidates."""
    seen = []
    real = impact._looked_up

    def spy(terms, later, *args):
        seen.append(len(later))
        return real(terms, later, *args)

    monkeypatch.setattr(impact, "_looked_up", spy)
    return seen


def test_impact_equals_fts5_through_every_write(tmp_path, pruned, monkeypatch):
    root = tmp_path / "kb"
    shutil.copytree(CORPORA / "foam-docs", root)
    s = Service(Settings.from_env(store=tmp_path / "store" / "autodoc.db"))
    try:
        for name, path in (
            ("foam", root),
            ("adr", CORPORA / "simpler-grants-adr"),
            ("zh", CORPORA / "opentelemetry-docs" / "content" / "zh"),
        ):
            s.workspace_add(name, str(path), NO_MODEL)
            s.index(name)
        w = s.store.writer()
        assert postings.complete(w)  # a store created with the tables needs no build
        assert w.execute("SELECT COUNT(*) FROM postings_delta").fetchone()[0] > 0
        _check(s.store.reader())  # the delta alone
        with s.store.locked() as db:
            postings.maintain(db, force=True)
        assert w.execute("SELECT COUNT(*) FROM postings_delta").fetchone()[0] == 0
        _check(s.store.reader())  # merged
        md = sorted(root.rglob("*.md"))
        md[0].write_text(
            md[0].read_text(encoding="utf-8") + "\n\nA wikilink graph note, a daily note.\n", encoding="utf-8"
        )
        md[1].unlink()
        md[2].rename(md[2].with_name("renamed-" + md[2].name))
        text = md[3].read_text(encoding="utf-8")  # a new title: every kept chunk's FTS row changes
        md[3].write_text(
            "---\ntitle: Graph publishing template notes\n---\n" + re.sub(r"\A---\n.*?\n---\n", "", text, flags=re.S),
            encoding="utf-8",
        )
        s.index("foam")
        assert w.execute("SELECT COUNT(*) FROM postings_dead").fetchone()[0] > 0
        _check(s.store.reader())  # main minus dead, plus delta
        _check_leg(s.store.reader(), monkeypatch)
        with s.store.locked() as db:
            postings.maintain(db, force=True)
        assert w.execute("SELECT COUNT(*) FROM postings_dead").fetchone()[0] == 0
        _check(s.store.reader())  # compacted and merged
        s.workspace_remove("adr")
        _check(s.store.reader())
        with s.store.write() as db:  # rebuilt from the chunks, as a store that predates the tables
            db.execute(
                "DELETE FROM postings; DELETE FROM postings_delta; DELETE FROM postings_dead; "
                "UPDATE meta SET value='0' WHERE key='postings_built'"
            )
        assert impact.ranker(s.store.reader(), ['"graph"', '"note"', '"daily"'], None) is None
        postings.build_all(w)
        _check(s.store.reader())
        assert any(pruned)  # the pruned path ran
    finally:
        s.close()


def test_older_store_answers_then_builds(tmp_path):
    store = tmp_path / "store" / "autodoc.db"
    s = Service(Settings.from_env(store=store))
    s.workspace_add("adr", str(CORPORA / "simpler-grants-adr"), NO_MODEL)
    s.index("adr")
    s.close()
    db = apsw.Connection(str(store))  # back to schema 4, as written before the postings existed
    db.execute(
        "DROP TABLE postings; DROP TABLE postings_delta; DROP TABLE postings_dead; "
        "DELETE FROM meta WHERE key='postings_built'; PRAGMA user_version = 4"
    )
    db.close()
    s = Service(Settings.from_env(store=store))
    try:
        r = s.store.reader()
        assert postings.built(r) == "0"  # migrated; not built yet
        ws = get_workspace(r, "adr")
        q = "decision record for the grants search api and its database"
        terms = resolve_facets(parse_query(q), set()).terms
        before = lexical.run_lexical(
            r,
            ws.id,
            terms,
            build_filter(ws.id, facets=[], opt_facets={}, tags=(), paths=(), include_abstract=True),
            want=50,
            weigh=False,
        )
        assert before.match in ("any", "mixed") and before.hits  # answered through FTS5
        s.index("adr")  # nothing changed on disk; the job's end builds the postings
        r = s.store.reader()
        assert postings.complete(r)
        after = lexical.run_lexical(
            r,
            ws.id,
            terms,
            build_filter(ws.id, facets=[], opt_facets={}, tags=(), paths=(), include_abstract=True),
            want=50,
            weigh=False,
        )
        assert [(h.chunk_id, h.score) for h in after.hits] == [(h.chunk_id, h.score) for h in before.hits]
        _check(r, want_fast=10)
    finally:
        s.close()


def test_the_daemon_builds_an_older_stores_postings_without_an_index_job(tmp_path, daemon_factory):
    """A store that predates the postings gets them from the daemon's background builder, in
    small slices between writes: a 1M-chunk store would otherwise wait for ~15 min of index jobs.
    The daemon runs without its watcher, so no index job runs at all."""
    import time

    from helpers.daemon import daemon_argv

    store = tmp_path / "store" / "autodoc.db"
    s = Service(Settings.from_env(store=store))
    s.workspace_add("adr", str(CORPORA / "simpler-grants-adr"), NO_MODEL)
    s.index("adr")
    s.close()
    db = apsw.Connection(str(store))
    db.execute(
        "DROP TABLE postings; DROP TABLE postings_delta; DROP TABLE postings_dead; "
        "DELETE FROM meta WHERE key='postings_built'; PRAGMA user_version = 4"
    )
    db.close()
    sock = tmp_path / "d.sock"
    # the plugin's daemon (tests/e2e/test_nvim.py): none of this shell's AUTODOC_*, a 2 s shutdown deadline
    argv = daemon_argv(store, sock, "--no-watch")
    env = {"AUTODOC_SHUTDOWN_DEADLINE": "2"}
    proc = daemon_factory(tmp_path, store=store, sock=sock, argv=argv, clean_env=True, env=env)
    try:
        deadline = time.monotonic() + 60
        while True:
            r = apsw.Connection(str(store), flags=apsw.SQLITE_OPEN_READONLY)
            try:
                if postings.has_tables(r) and postings.complete(r):
                    _check(r, want_fast=10)  # and what it built ranks as FTS5 does
                    break
            finally:
                r.close()
            assert proc.running() and time.monotonic() < deadline, proc.log_text()
            time.sleep(0.1)
    finally:
        proc.stop()


def _older_store(tmp_path, workspace="adr", corpus="simpler-grants-adr", before_drop=None):
    store = tmp_path / "store" / "autodoc.db"
    s = Service(Settings.from_env(store=store))
    s.workspace_add(workspace, str(CORPORA / corpus), NO_MODEL)
    s.index(workspace)
    s.close()
    db = apsw.Connection(str(store))
    if before_drop:
        db.execute(before_drop)
    db.execute(
        "DROP TABLE postings; DROP TABLE postings_delta; DROP TABLE postings_dead; "
        "DELETE FROM meta WHERE key='postings_built'; PRAGMA user_version = 4"
    )
    db.close()
    return Service(Settings.from_env(store=store))


def test_a_merge_during_the_build_leaves_the_unbuilt_ids_to_it(tmp_path, monkeypatch):
    """A large index batch on an older store merges its delta while the build has not reached
    those ids: they must not land in the segments twice (review finding: 28,617 duplicates)."""
    s = _older_store(tmp_path)
    try:
        w = s.store.writer()
        assert postings.built(w) == "0"
        monkeypatch.setattr(postings, "MERGE_ROWS", 100)  # stands for 200k rows of a big batch at 1M
        s.workspace_add("foam", str(CORPORA / "foam-docs"), NO_MODEL)
        with monkeypatch.context() as m:  # the batch's end merges, the build does not move
            m.setattr(postings, "build_slice", lambda db, size=0: False)
            s.index("foam")
        postings.build_all(w)
        for _term, wide, data in w.execute("SELECT term, wide, data FROM postings"):
            ids = postings.decode(wide, data)["id"]
            assert len(ids) == len(np.unique(ids))
        _check(s.store.reader(), want_fast=1)
    finally:
        s.close()


@pytest.fixture()
def foam_merged(tmp_path):
    """An editable copy of foam-docs indexed into a fresh store, its delta merged: (root, service)."""
    root = tmp_path / "kb"
    shutil.copytree(CORPORA / "foam-docs", root)
    s = Service(Settings.from_env(store=tmp_path / "store" / "autodoc.db"))
    try:
        s.workspace_add("foam", str(root), NO_MODEL)
        s.index("foam")
        with s.store.locked() as db:
            postings.maintain(db, force=True)
        yield root, s
    finally:
        s.close()


def test_maintenance_does_not_leave_readers_a_stale_dead_list(foam_merged):
    """Compaction and merge change the postings without touching FTS5: a reader's cached dead list
    must not outlive them (review finding: a re-indexed chunk vanished from every OR ranking)."""
    root, s = foam_merged
    md = max(root.rglob("*.md"), key=lambda p: p.stat().st_size)
    text = md.read_text(encoding="utf-8")
    md.write_text(
        "---\ntags: [zebrafish]\n---\n" + re.sub(r"\A---\n.*?\n---\n", "", text, flags=re.S), encoding="utf-8"
    )
    s.index("foam")  # its chunks are rewritten under their ids: dead, and in the delta
    exprs = ['"zebrafish"', '"graph"']
    r = s.store.reader()
    assert impact.ranker(r, exprs, None)("x", 5) == matches.ranked(r, " OR ".join(exprs), 5)  # caches filled
    with s.store.locked() as db:
        postings.maintain(db, force=True)  # compact + merge
    r = s.store.reader()
    assert impact.ranker(r, exprs, None)("x", 5) == matches.ranked(r, " OR ".join(exprs), 5)


def test_the_build_rewrites_fts_rows_an_old_retitle_left_behind(tmp_path):
    """Before documents.py refreshed kept chunks on a retitle, their FTS rows kept the old title:
    the build rewrites such rows from the store's text, so FTS5 and the postings agree."""
    s = _older_store(
        tmp_path,
        before_drop="UPDATE documents SET title='Zebrafish ' || title WHERE id=(SELECT MIN(id) FROM documents)",
    )
    try:
        postings.build_all(s.store.writer())
        r = s.store.reader()
        exprs = ['"zebrafish"', '"decision"']
        fts = matches.ranked(r, " OR ".join(exprs), 3)
        assert impact.ranker(r, exprs, None)("x", 3) == fts
        first = r.execute("SELECT MIN(id) FROM documents").fetchone()[0]
        assert r.execute("SELECT document_id FROM chunks WHERE id=?", (fts[0][0],)).fetchone()[0] == first
        _check(r, want_fast=1)
    finally:
        s.close()


def test_a_large_batch_builds_its_records_after_writing_them(foam_merged, monkeypatch):
    """A batch of many chunks leaves their records to build_slice before its transaction ends
    (open_tail/close_tail), instead of writing them row by row to the delta (the indexing regression
    of session 4). The ids SQLite hands out again (the largest chunk's, dead) keep to the delta,
    so their stale records stay dead and the new ones count once."""
    root, s = foam_merged
    w = s.store.writer()
    last = w.execute(
        "SELECT d.path FROM chunks c JOIN documents d ON d.id = c.document_id ORDER BY c.id DESC LIMIT 1"
    ).fetchone()[0]
    (root / last).unlink()
    s.index("foam")
    dead_top = w.execute("SELECT MAX(chunk) FROM postings_dead").fetchone()[0]
    assert dead_top is not None
    opened = []
    real = postings.open_tail
    monkeypatch.setattr(postings, "open_tail", lambda db: opened.append(real(db)) or opened[-1])
    shutil.copytree(CORPORA / "simpler-grants-adr", root / "adr")
    s.index("foam")
    assert True in opened and postings.complete(w)
    in_delta = {r[0] for r in w.execute("SELECT DISTINCT chunk FROM postings_delta")}
    assert in_delta and max(in_delta) <= dead_top  # the reused ids, and no others
    assert w.execute("SELECT COUNT(*) FROM chunks WHERE id > ?", (dead_top,)).fetchone()[0] > 200
    _check(s.store.reader())
    with s.store.locked() as db:
        postings.maintain(db, force=True)
    _check(s.store.reader())
    for _term, wide, data in w.execute("SELECT term, wide, data FROM postings"):
        ids = postings.decode(wide, data)["id"]
        assert (np.diff(ids.astype(np.int64)) > 0).all()  # sorted, each chunk once


def test_the_and_check_counts_words_by_their_own_token(tmp_path, monkeypatch):
    """The AND check orders and budgets its words by their chunk counts: counted by the stemmed
    token itself, not by a quoted expression that stems it again ("decision" → "decis" → "deci":
    0 chunks, so the commonest word was read first and whole, past the budget; review finding)."""
    from autodoc.store.lexical import ftsterms

    s = Service(Settings.from_env(store=tmp_path / "store" / "autodoc.db"))
    try:
        s.workspace_add("adr", str(CORPORA / "simpler-grants-adr"), NO_MODEL)
        s.index("adr")
        r = s.store.reader()
        tok = ftsterms.parse_expr(r, '"decision"').tokens[0]
        assert ftsterms.parse_expr(r, f'"{tok}"').tokens != (tok,)  # the stemmer is not idempotent here
        held = matches.ranked(r, '"decision"', 100_000)
        assert ftsterms.token_docs(r, [tok])[tok] == len(held) > 0
        monkeypatch.setattr(impact, "AND_BUDGET", len(held) - 1)
        with impact.one_search():
            assert impact.all_ranker(r, ['"decision"', '"the"'], None) is None  # over budget: FTS5 answers
    finally:
        s.close()
