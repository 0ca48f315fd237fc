"""Smoke test of bench/answers.py (answer-in-passage, compact answers and confidence, issue 35):
its metrics on hand-made answers with known values, the frozen question files against the real
corpora, and a run of a few questions through the real MCP search tool and search.query on
tests/corpora/kb (lexical only, seconds). Figures of the real run are not asserted here."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench import answers as A  # noqa: E402

CORPORA = REPO.parent / "shared" / "data" / "corpora"
KB = REPO / "tests" / "corpora" / "kb"


def test_holds_is_overlap_with_an_answer_span_of_the_same_file():
    ans = [{"path": "a.md", "lines": [10, 12]}, {"path": "b.md", "lines": [5, 5]}]
    assert A.holds("a.md", 1, 10, ans)  # touches the first line
    assert A.holds("a.md", 12, 40, ans)  # touches the last line
    assert A.holds("a.md", 11, 11, ans)
    assert not A.holds("a.md", 1, 9, ans)
    assert not A.holds("a.md", 13, 20, ans)
    assert not A.holds("c.md", 10, 12, ans)  # the right lines of another file
    assert A.holds("b.md", 5, None, ans)  # a one-line hit
    assert not A.holds(None, 10, 12, ans)


def test_passage_metrics_known_values():
    q = {"answers": [{"path": "t.md", "lines": [20, 25]}]}
    rows = [
        A._rows(q, [["t.md", 20, 30], ["x.md", 1, 5]]),  # right document, right passage, first
        A._rows(q, [["t.md", 1, 10], ["x.md", 1, 5]]),  # right document first, wrong passage (its intro)
        A._rows(q, [["x.md", 1, 5], ["y.md", 1, 5], ["t.md", 18, 22]]),  # right passage third
        A._rows(q, [["x.md", 1, 5]]),  # not found
        # a second passage of a listed document counts for that document, at its place
        A._rows(q, [["t.md", 1, 10], ["x.md", 1, 5], ["t.md", 24, 26]]),
    ]
    assert rows[4]["docs"] == ["t.md", "x.md"] and rows[4]["holds"] == [True, False]
    m = A.passage_metrics(rows)
    assert m["n"] == 5
    assert m["AiP@1"] == pytest.approx(2 / 5)
    assert m["AiP@3"] == pytest.approx(3 / 5)
    assert m["doc@1"] == pytest.approx(3 / 5)
    assert m["doc@3"] == pytest.approx(4 / 5)
    assert m["n_doc@3"] == 4 and m["passage|doc@3"] == pytest.approx(3 / 4)


def test_reliability_and_ece_known_values():
    # 0.95 twice, one right: gap 0.45; 0.15 twice, none right: gap 0.15; ECE = (2*0.45 + 2*0.15) / 4
    r = A.reliability([(0.95, True), (0.95, False), (0.15, False), (0.15, False)])
    assert r["n"] == 4
    assert r["ece"] == pytest.approx(0.3)
    assert [b["bin"] for b in r["bins"]] == ["0.1-0.2", "0.9-1.0"]
    assert A.reliability([(1.0, True)])["bins"][0]["bin"] == "0.9-1.0"  # 1.0 lands in the last bin
    pr = A.precision_recall([True, True, False], [True, False, False, False])
    assert pr["precision"] == pytest.approx(2 / 3) and pr["recall"] == pytest.approx(2 / 3)
    assert (pr["tp"], pr["fp"], pr["fn"], pr["tn"]) == (2, 1, 1, 3)


def test_mcp_hits_reads_fields_or_refs_and_grouped_passages():
    out = {
        "hits": [
            {"path": "a.md", "line_start": 3, "line_end": 9, "text": 'say "x"\n', "confidence": 0.9},
            {"ref": "kb:b/c.md#L4-7", "text": "t"},  # a hit that says its place only in its ref
            {"path": "d.md", "passages": [{"line_start": 1, "line_end": 2, "text": "p"}, {"ref": "kb:d.md#L8-9"}]},
        ]
    }
    rows = A.mcp_hits(out)
    assert [(r["path"], r["start"], r["end"]) for r in rows] == [
        ("a.md", 3, 9),
        ("b/c.md", 4, 7),
        ("d.md", 1, 2),
        ("d.md", 8, 9),
    ]
    assert rows[0]["confidence"] == 0.9
    assert A.escaped_len(rows[0]["text"]) == len('say \\"x\\"\\n')


@pytest.mark.skipif(not CORPORA.is_dir(), reason="../shared/data/corpora not present")
def test_frozen_question_files_match_the_corpora():
    qs, neg = A.load(A.QUESTIONS), A.load(A.UNANSWERABLE)
    assert len(qs) >= 60 and all(10 <= sum(q["corpus"] == c for q in qs) <= 15 for c in A.CORPORA)
    assert all(sum(q["corpus"] == c for q in neg) >= 20 for c in A.CORPORA)
    assert {q["style"] for q in qs} == set(A.STYLES) and {q["split"] for q in qs} == {"tune", "test"}
    # spans inside their files; unanswerable questions' words absent (grep) unless named near misses
    assert A.check_files(CORPORA, qs, neg) == []


@pytest.fixture(scope="module")
def kb_store(tmp_path_factory):
    """tests/corpora/kb indexed once, lexical only (no model: seconds)."""
    from autodoc.config import Settings
    from autodoc.service import Service

    store = tmp_path_factory.mktemp("kb") / "autodoc.db"
    svc = Service(Settings.from_env(store=store))
    try:
        svc.workspace_add("kb", str(KB), {"embedding": {"provider": "none"}})
        svc.index("kb")
    finally:
        svc.close()
    return store


def test_run_on_tiny_corpus_through_the_mcp_tool_and_the_legs(kb_store):
    store = kb_store
    qs = [
        {
            "id": "t1",
            "corpus": "kb",
            "style": "sentence",
            "split": "tune",
            "query": "wal file grows hundreds of MB old snapshot reader",
            "answers": [{"path": "runbooks/lease-recovery.md", "lines": [32, 39]}],
        },
        {
            "id": "t2",
            "corpus": "kb",
            "style": "keywords",
            "split": "test",
            "query": "lease written by another host NFS",
            "answers": [{"path": "runbooks/lease-recovery.md", "lines": [43, 44]}],
        },
    ]
    neg = [{"id": "n1", "corpus": "kb", "style": "keywords", "split": "tune", "query": "zzzqqq xxyyzz"}]
    runs = A.run_corpus(store, "kb", qs, neg)
    assert set(runs) == {"t1", "t2", "n1"}
    for qid in ("t1", "t2"):
        mcp = runs[qid]["mcp"]
        assert set(mcp) == set(A.MCP_CALLS)
        for call in mcp.values():
            assert not call.get("error"), call
            assert call["chars"] > 0 and 0 < call["passage_chars"] < call["chars"]
            # every hit is a passage of a real file of the workspace, with its lines
            for path, start, end, _conf, _chars in call["hits"]:
                assert (KB / path).is_file() and 1 <= start <= end
        assert runs[qid]["legs"]["lexical"]["hits"], runs[qid]["legs"]["lexical"]
    assert not runs["n1"]["mcp"]["default"]["hits"]  # words that are nowhere: nothing shown
    s = A.summarise(qs, neg, runs)
    assert s["legs"]["lexical"]["all"]["n"] == 2
    assert s["mcp_size"]["default"]["all"]["n"] == 2
    assert s["answerable"]["mcp"]["all"]["tn"] + s["answerable"]["mcp"]["all"]["fp"] == 1
    doc = {
        "command": "test",
        "commit": "x",
        "date": "d",
        "product": "p",
        "machine": {"cpu": "c", "nproc": 1, "load": [0]},
        "split": "all",
        "corpora_run": ["kb"],
        "not_run": None,
        "digests": {},
        "questions_run": qs,
        "negatives_run": neg,
        "summary": s,
        "runs": runs,
    }
    md = A.render(doc)
    assert "## The MCP `search` tool" in md and "ECE" in md


def test_doc_signals_reorders_and_measures_a_tiny_corpus(kb_store):
    """bench/doc_signals.py: its re-ordering on known values, and a run of its signals on
    tests/corpora/kb (lexical only: the cosine signals are 0, the words' are not)."""
    from bench import doc_signals as D

    cands = [{"path": "a", "s": 0.1}, {"path": "b", "s": 0.9}, {"path": "c", "s": 0.5}]
    assert D.reorder(cands, None) == ["a", "b", "c"]
    assert D.reorder(cands, "s", alone=True) == ["b", "c", "a"]
    # fused: a is 1/10 + 1/12, b 1/11 + 1/10, c 1/12 + 1/11 (k 10): b, then a and c
    assert D.reorder(cands, "s", k=10)[0] == "b"

    q = {
        "id": "t1",
        "split": "tune",
        "query": "lease written by another host NFS",
        "answers": [{"path": "runbooks/lease-recovery.md", "lines": [43, 44]}],
    }
    [row] = D.corpus_features(kb_store, "kb", [q])
    assert row["want"] == {"runbooks/lease-recovery.md"} and row["cands"]
    lease = next(c for c in row["cands"] if c["path"] == "runbooks/lease-recovery.md")
    assert lease["bm25"] > 0 and 0 < lease["coverage"] <= 1 and lease["max"] == 0.0
    assert "| fused order (the product) | " in D.table([row])
