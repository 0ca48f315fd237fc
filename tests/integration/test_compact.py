"""Compact answers and `answerable` (issue 15) on a real store: the test corpus
indexed and embedded with the bundled model, answers checked against
search.query's result schema, passages against the files' lines."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from autodoc.budget import answer_tokens
from autodoc.config import Settings
from autodoc.errors import InvalidParams
from autodoc.rpc import schemas
from autodoc.service import Service

CORPORA = Path(__file__).parents[1] / "corpora"
REF = re.compile(r"^(?P<ws>[^:]+):(?P<path>.+)#L(?P<a>\d+)(?:-(?P<b>\d+))?$")  # refs.py: #L5 for one line


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    root = tmp_path_factory.mktemp("compact") / "kb"
    shutil.copytree(CORPORA / "kb", root, symlinks=True)
    s = Service(Settings.from_env(store=root.parent / "s.db"))
    s.workspace_add("kb", str(root))
    s.index("kb", embed=True)
    yield s, root
    s.close()


def _valid(answer: dict) -> dict:
    assert schemas.result_errors("search.query", answer) == []
    return answer


def _lines(root, path: str, a: int, b: int) -> str:
    return "\n".join((root / path).read_text(encoding="utf-8").split("\n")[a - 1 : b]).rstrip()


def test_compact_hits_cite_exact_lines_once_per_document(kb):
    svc, root = kb
    a = _valid(svc.search("kb", "lease recovery stale lock", {"answer": "compact", "limit": 4, "budget_tokens": 32000}))
    assert a["answer"] == "compact" and a["truncated"] is False and a["hits"]
    assert a["tokens"] == answer_tokens(a)
    paths = [h["path"] for h in a["hits"]]
    lead = next((i for i, p in enumerate(paths) if p != paths[0]), len(paths))  # the leading document's run
    assert len(paths[lead:]) == len(set(paths[lead:])) <= 3 and paths[0] not in paths[lead:]
    for h in a["hits"]:
        m = REF.match(h["ref"])
        assert m and m["ws"] == "kb" and m["path"] == h["path"]
        assert (int(m["a"]), int(m["b"] or m["a"])) == (h["line_start"], h["line_end"])
        assert h["text"] == _lines(root, h["path"], h["line_start"], h["line_end"])  # whole, not a snippet
        assert not h["section"].startswith(h["title"] + " ›")
        assert h["origin"] == {"kind": "file", "path": h["path"], "title": h["title"]}
        assert 0 <= h["confidence"] <= 1 and h["changed"] is False


def test_per_document_fills_limit_with_distinct_documents_in_answer_order(kb):
    svc, _ = kb
    q = "sqlite lease wal embedding queue"
    full = _valid(svc.search("kb", q, {"limit": 12}))
    first = list(dict.fromkeys(h["path"] for h in full["hits"]))[:4]
    assert len({h["path"] for h in full["hits"]}) < len(full["hits"])  # the full answer repeats documents
    # one passage a document; the leading one also its passages a leg ranks at the top (search/choice.py)
    compact = _valid(svc.search("kb", q, {"answer": "compact", "limit": 4, "budget_tokens": 32000}))
    assert list(dict.fromkeys(h["path"] for h in compact["hits"])) == first
    assert len(compact["hits"]) == len(first) + sum(h["path"] == first[0] for h in compact["hits"][1:])
    per_doc = _valid(svc.search("kb", q, {"limit": 4, "per_document": True}))
    assert [h["path"] for h in per_doc["hits"]] == [h["path"] for h in compact["hits"]]
    several = _valid(
        svc.search("kb", q, {"answer": "compact", "limit": 6, "per_document": False, "budget_tokens": 32000})
    )
    assert len(several["hits"]) == 6 and len({h["path"] for h in several["hits"]}) < 6


def test_budget_cuts_later_passages_and_says_so(kb):
    svc, root = kb
    q = "lease recovery daemon socket"
    whole = _valid(svc.search("kb", q, {"answer": "compact", "limit": 5, "budget_tokens": 32000}))
    assert whole["truncated"] is False
    assert len(whole["hits"]) == 5
    for budget in (300, 600, whole["tokens"] - 40):
        a = _valid(svc.search("kb", q, {"answer": "compact", "limit": 5, "budget_tokens": budget}))
        assert a["truncated"] is True and a["tokens"] == answer_tokens(a) <= budget
        assert 1 <= len(a["hits"]) <= len(whole["hits"])
        for got, full in zip(a["hits"], whole["hits"]):  # the same documents in order, each cut or whole
            # cut to a run of its lines (the first ones, or those holding the query's rarest words)
            assert got["path"] == full["path"] and got["text"] in full["text"]
            assert full["line_start"] <= got["line_start"] <= got["line_end"] <= full["line_end"]
            # cut at a line end: whole lines still (the corpus has no line too long for a passage)
            assert got["text"] == _lines(root, got["path"], got["line_start"], got["line_end"])
    # a budget a little short of the whole answer keeps every document, cutting passages
    assert len(a["hits"]) == len(whole["hits"])
    default = _valid(svc.search("kb", q, {"answer": "compact", "limit": 5}))
    assert default["tokens"] <= 1200


def test_changed_says_the_file_on_disk_is_not_the_one_indexed(kb, tmp_path):
    root = tmp_path / "kb"
    shutil.copytree(CORPORA / "kb", root, symlinks=True)
    svc = Service(Settings.from_env(store=tmp_path / "c.db"))
    try:
        svc.workspace_add("kb", str(root), {"embedding": {"provider": "none"}})
        svc.index("kb")
        opts = {"answer": "compact", "limit": 5, "budget_tokens": 32000}
        before = _valid(svc.search("kb", "lease recovery", opts))
        assert before["hits"] and not any(h["changed"] for h in before["hits"])
        edited = before["hits"][0]["path"]
        with open(root / edited, "a", encoding="utf-8") as f:
            f.write("\nA line written after the index ran.\n")
        after = _valid(svc.search("kb", "lease recovery", opts))
        assert {h["path"]: h["changed"] for h in after["hits"]} == {
            h["path"]: h["path"] == edited for h in after["hits"]
        }
        # the passage is still the indexed text, which is what the ref's lines point into
        assert after["hits"][0]["text"] == before["hits"][0]["text"]
        os.remove(root / edited)
        gone = _valid(svc.search("kb", "lease recovery", opts))
        assert [h["changed"] for h in gone["hits"] if h["path"] == edited] == [True]
        svc.index("kb")
        assert edited not in {h["path"] for h in _valid(svc.search("kb", "lease recovery", opts))["hits"]}
    finally:
        svc.close()


@pytest.mark.parametrize("answer", ["full", "compact"])
def test_answerable_tells_a_real_question_from_an_off_topic_one(kb, answer):
    svc, _ = kb
    on = _valid(svc.search("kb", "how do we recover a stale lease", {"answer": answer}))
    assert on["answerable"] is True and on["hits"]
    for q in ("chemotherapy dosage for pediatric leukemia patients", "how do we bake sourdough bread at home"):
        off = _valid(svc.search("kb", q, {"answer": answer}))
        assert off["answerable"] is False, q
        # what the relevance floor holds back it counts; min_confidence 0 shows everything
        weak = _valid(svc.search("kb", q, {"answer": answer, "min_confidence": 0}))
        assert weak["held_back"] == 0 and weak["answerable"] is False, q
        assert len(weak["hits"]) == len(off["hits"]) + off["held_back"] or answer == "compact", q
        assert max(h["confidence"] for h in weak["hits"]) < max(h["confidence"] for h in on["hits"])
    # no word of this one is in the corpus: what meaning alone finds is held back
    gone = _valid(svc.search("kb", "chemotherapy dosage for pediatric leukemia patients", {"answer": answer}))
    assert gone["hits"] == [] and gone["held_back"] > 0


def test_answerable_in_chinese_and_japanese(kb):
    svc, _ = kb  # CJK words are counted as the index holds them, by overlapping pairs of characters
    for q in ("数据库迁移", "検索エンジンの設定"):
        a = _valid(svc.search("kb", q, {"answer": "compact", "limit": 3}))
        assert a["answerable"] is True and a["hits"][0]["path"] == "notes/cjk-notes.md"


def test_a_facet_only_listing_is_answerable_without_confidence(kb):
    svc, _ = kb
    a = _valid(svc.search("kb", "tag:sqlite", {"answer": "compact"}))
    assert a["mode_used"] == "facet" and a["hits"] and a["answerable"] is True
    assert all(h["confidence"] is None for h in a["hits"])


@pytest.mark.parametrize(
    "opts,field",
    [
        ({"answer": "short"}, "opts.answer"),
        ({"answer": "compact", "budget_tokens": 10}, "opts.budget_tokens"),
        ({"budget_tokens": 1.5}, "opts.budget_tokens"),
        ({"per_document": "yes"}, "opts.per_document"),
    ],
)
def test_bad_answer_options_name_the_field(opts, field):
    with pytest.raises(InvalidParams) as info:
        schemas.bind_params("search.query", ["kb", "q", opts])
    assert info.value.field == field


def test_a_passage_inside_a_long_line_keeps_its_own_text_and_says_where_it_is_cut(tmp_path):
    """A long one-line paragraph is chunked at sentences, so a chunk may start and end inside a
    line. A short rest of a line is taken in, so that a passage is whole lines (a trial found one
    starting "note](https://…"); a long one is not, or the passage would be the line's start and
    miss what matched: it begins or ends inside its line and says so with "…". A budget cut keeps
    whole lines when a line end keeps half of what fits, else cuts at a word, with "…"."""
    from autodoc.budget import ELLIPSIS

    root = tmp_path / "kb"
    root.mkdir()
    sentences = [
        f"Sentence {i} tells of the {w} harbour and its tides."
        for i, w in enumerate(["north", "south", "east", "west"] * 120)
    ]
    sentences[300] = "Sentence 300 names the quokkanite beacon at the harbour mouth."
    (root / "long.md").write_text(
        "# Harbour log\n\nIntro line.\n\n" + " ".join(sentences) + "\n\nLast line.\n"
        "\n## Beacons\n\n" + "A beacon line of some length. " * 60 + "\n"
        "The quokkanite lamp is lit at dusk, a short line.\n"
    )
    s = Service(Settings.from_env(store=tmp_path / "s.db"))
    try:
        s.workspace_add("kb", str(root), {"embedding": {"provider": "none"}})
        s.index("kb")
        full = s.search("kb", "quokkanite", {"stages": ["lexical"]})["hits"]
        inner = next(h for h in full if h["line_start"] == 5)
        data = (root / "long.md").read_bytes()
        assert data[inner["byte_start"] - 1 : inner["byte_start"]] != b"\n", "the chunk should start inside the line"
        a = _valid(
            s.search(
                "kb",
                "quokkanite",
                {"answer": "compact", "stages": ["lexical"], "budget_tokens": 32000, "per_document": False},
            )
        )
        by_line = {h["line_start"]: h for h in a["hits"]}
        h = by_line[5]
        assert (h["line_start"], h["line_end"]) == (5, 5) and h["ref"] == "kb:long.md#L5"
        assert h["text"].startswith(ELLIPSIS) and "quokkanite" in h["text"]  # its own text, not the line's start
        assert h["text"].strip(ELLIPSIS) in _lines(root, "long.md", 5, 5)
        for e in a["hits"]:  # elsewhere whole lines, or marked where they are not
            if ELLIPSIS not in e["text"]:
                assert e["text"] == _lines(root, "long.md", e["line_start"], e["line_end"])
        small = _valid(
            s.search(
                "kb",
                "quokkanite",
                {"answer": "compact", "stages": ["lexical"], "budget_tokens": 300, "per_document": False},
            )
        )
        assert small["truncated"] and small["tokens"] <= 300
        for c in small["hits"]:
            lines = _lines(root, "long.md", c["line_start"], c["line_end"])
            if c["text"].endswith(ELLIPSIS):  # cut inside its last line, at a word
                assert c["text"].strip(ELLIPSIS).rstrip() in lines
            else:
                assert c["text"] == lines
            assert len(c["text"].strip(ELLIPSIS)) >= 100  # not a heading alone (the review's 21 characters)
    finally:
        s.close()


def test_a_budget_cut_keeps_the_lines_that_answer(tmp_path):
    """search.query's own budget cut kept a passage's first lines (only the MCP tool's looked for the
    lines holding the query): at budget_tokens 300 an answer in a long section's last lines was cut
    away. It keeps the run of lines holding the query's rarest words, and its ref says which."""
    root = tmp_path / "kb"
    root.mkdir()
    filler = [f"The replication service copies table {n} from the source database nightly." for n in range(40)]
    answer = "The replication role needs only SELECT grants on the Oracle schema."
    (root / "adr.md").write_text("# Data replication\n\n## Security\n\n" + "\n".join(filler + [answer]) + "\n")
    s = Service(Settings.from_env(store=tmp_path / "s.db"))
    try:
        s.workspace_add("kb", str(root), {"embedding": {"provider": "none"}})
        s.index("kb")
        q = "Which grants does the replication service need on the source Oracle database?"
        a = _valid(s.search("kb", q, {"answer": "compact", "budget_tokens": 300}))
        top = a["hits"][0]
        assert a["truncated"] and a["tokens"] <= 300
        assert top["text"].endswith(answer) and top["line_end"] == 45
        assert top["text"] == _lines(root, "adr.md", top["line_start"], top["line_end"])
        assert top["ref"] == f"kb:adr.md#L{top['line_start']}-45"
    finally:
        s.close()
