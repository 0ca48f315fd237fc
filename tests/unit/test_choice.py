"""Issue 35: the passage that stands for a document is not its table of contents, a list of links
or its front matter (search/choice.py). Passages cut from real files of ../shared/data/corpora
(read in place), and the re-slotting checked on fused records."""

from __future__ import annotations

from pathlib import Path

import pytest

from autodoc.search import choice
from autodoc.search import fusion as F

CORPORA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "corpora"
needs_corpora = pytest.mark.skipif(not CORPORA.is_dir(), reason=f"no corpora at {CORPORA}")


def _lines(rel: str, first: int, last: int) -> str:
    """Lines first..last (1-based, inclusive) of a corpus file, as a chunk holds them."""
    return "\n".join((CORPORA / rel).read_text(encoding="utf-8").split("\n")[first - 1 : last])


def _section(rel: str, heading: str) -> str:
    """A section of a corpus file: its heading line up to the next heading of any level."""
    lines = (CORPORA / rel).read_text(encoding="utf-8").split("\n")
    start = next(i for i, line in enumerate(lines) if line.lstrip("#").strip() == heading and line.startswith("#"))
    end = next((j for j in range(start + 1, len(lines)) if lines[j].startswith("#")), len(lines))
    return "\n".join(lines[start:end])


GLOBAL_ACTORS = "swift-evolution/proposals/0316-global-actors.md"


@needs_corpora
@pytest.mark.parametrize(
    "text,breadcrumb",
    [
        (lambda: _section(GLOBAL_ACTORS, "Table of Contents"), "Global actors › Table of Contents"),
        # the rest of a long table of contents, cut off its heading: known by its breadcrumb
        (lambda: _lines(GLOBAL_ACTORS, 25, 34), "Global actors › Table of Contents"),
        (lambda: _section("foam-docs/docs/index.md", "Table of Contents"), "What is Foam? › Table of Contents"),
    ],
)
def test_a_table_of_contents_is_navigation(text, breadcrumb):
    assert choice.navigational(text(), breadcrumb) == 1.0


@needs_corpora
@pytest.mark.parametrize(
    "rel,first,last",
    [
        (GLOBAL_ACTORS, 1, 7),  # the title and the proposal's front matter as a list: Proposal, Authors, Status
        ("opentelemetry-docs/content/en/docs/concepts/components.md", 8, 19),  # a list of in-page links
        ("opentelemetry-docs/content/en/docs/collector/deploy/other/agent-to-gateway/_index.md", 469, 480),
        ("swift-evolution/proposals/0306-actors.md", 41, 48),  # "Swift-evolution threads:" and its links
    ],
)
def test_link_lists_and_front_matter_are_navigation(rel, first, last):
    assert choice.navigational(_lines(rel, first, last)) >= 0.75


@needs_corpora
@pytest.mark.parametrize(
    "rel,heading",
    [
        (GLOBAL_ACTORS, "Global actor function types"),  # prose and code
        (GLOBAL_ACTORS, "Introduction"),  # prose with a few links in it
        ("foam-docs/docs/index.md", "Key Features"),  # a list of bold terms and prose, not links
        (
            "opentelemetry-docs/content/en/docs/collector/deploy/other/agent-to-gateway/_index.md",
            "Example agent-to-gateway architecture",
        ),
    ],
)
def test_sections_that_say_something_are_not(rel, heading):
    assert choice.navigational(_section(rel, heading), f"T › {heading}") == 0.0


def test_a_heading_alone_is_navigation_and_code_is_content():
    assert choice.navigational("## Proposed solution\n") == 1.0
    code = "## Links\n\n```md\n- [a](a.md)\n- [b](b.md)\n- [c](c.md)\n```\n"
    assert choice.navigational(code) == 0.0
    assert choice.navigational("") == 0.0


def _fused(cid: int, score: float) -> F.Fused:
    return F.Fused(cid, score, {"lexical": 0}, {"lexical": 1.0}, relevance=score, via=["lexical"])


def test_a_document_keeps_its_places_and_its_answer_takes_the_first():
    # document 1: a table of contents (chunk 10) fused first, its section (11) third; document 2 between
    fused = [_fused(10, 0.9), _fused(20, 0.5), _fused(11, 0.3), _fused(12, 0.05)]
    doc_of = {10: 1, 11: 1, 12: 1, 20: 2}
    out = choice.choose(fused, doc_of, {10: 1.0})
    assert [f.chunk_id for f in out] == [11, 20, 10, 12]  # 0.3 beats 0.9 × 0.1; 0.05 does not
    assert [f.score for f in out] == [0.9, 0.5, 0.3, 0.05]  # the places' scores, in order
    assert [f.relevance for f in out] == [0.9, 0.5, 0.3, 0.05]
    # a table of contents far ahead of anything else its document has keeps its place
    far = [_fused(10, 0.9), _fused(11, 0.05)]
    assert [f.chunk_id for f in choice.choose(far, doc_of, {10: 1.0})] == [10, 11]
    # nothing navigational: the same records, untouched
    assert choice.choose(fused, doc_of, {}) == fused


@needs_corpora
def test_link_reference_definitions_do_not_make_a_section_a_list():
    """foam ends every note with a block of `[id]: target` lines, which fall into its last section:
    embeds.md's Troubleshooting (the answer to a question of bench/answer_spans) scored 0.6."""
    embeds = "foam-docs/docs/user/features/embeds.md"
    lines = (CORPORA / embeds).read_text(encoding="utf-8").split("\n")
    start = next(i for i, line in enumerate(lines) if line == "### Troubleshooting") + 1
    assert choice.navigational(_lines(embeds, start, len(lines)), "Note Embeds › Image Sizing › Troubleshooting") == 0
    refs = "\n".join(line for line in lines if line.startswith("[") and "]: " in line)
    assert refs and choice.navigational(refs) == 1.0  # nothing but definitions: nothing to read


def _legs(cid: int, score: float, lexical: int | None, semantic: int | None) -> F.Fused:
    ranks = {"lexical": lexical, "semantic": semantic}
    return F.Fused(cid, score, ranks, {"lexical": None, "semantic": None}, relevance=score, via=[])


def test_the_leading_documents_shown_passages_follow_its_first():
    """bench/answer_spans swift-05 as fused over swift-evolution: 0413-typed-throws.md (document 1)
    leads; the answer (3) and another of its passages (4) are to be shown with it (search/passages.py
    chose them), ahead of 0235-add-result.md (document 2), whose first stays next."""
    fused = [
        _legs(1, 0.109, 0, 35),  # When to use typed throws
        _legs(20, 0.090, 1, 3),  # 0235-add-result.md
        _legs(2, 0.066, 4, 9),  # Effect on API resilience
        _legs(3, 0.062, 44, 0),  # Multiple thrown error types: the answer
        _legs(4, 0.061, 11, 1),  # Throwing within a function that declares a typed error
        _legs(21, 0.050, 2, None),  # 0235-add-result.md again
        _legs(5, 0.041, 30, 7),
    ]
    doc_of = {1: 1, 2: 1, 3: 1, 4: 1, 5: 1, 20: 2, 21: 2}
    out = choice.follow(fused, [3, 4], doc_of)
    assert [f.chunk_id for f in out] == [1, 3, 4, 20, 2, 21, 5]
    assert out[1] is fused[3]  # the records as fused: their own scores and ranks
    assert choice.follow(fused, [], doc_of)[:2] == [fused[0], fused[1]]
    # the leading run is the first passage and those named: a passage fused second but not named
    # (a table of contents) goes behind the next document
    toc_second = [fused[0], fused[2], fused[1], fused[3]]
    assert [f.chunk_id for f in choice.follow(toc_second, [], doc_of)] == [1, 20, 2, 3]
    assert [f.chunk_id for f in choice.follow(toc_second, [3], doc_of)] == [1, 3, 20, 2]
    assert choice.follow([], [], doc_of) == []


def test_one_passage_a_document_keeps_the_leading_documents_run():
    from autodoc.search.compact import one_per_document

    def h(path: str, line: int) -> dict:
        return {"workspace": "kb", "path": path, "line_start": line}

    hits = [h("a.md", 1), h("a.md", 40), h("a.md", 90), h("b.md", 5), h("a.md", 200), h("c.md", 7), h("b.md", 9)]
    got = [(x["path"], x["line_start"]) for x in one_per_document(hits, 2)]
    assert got == [("a.md", 1), ("a.md", 40), ("a.md", 90), ("b.md", 5)]  # a.md's later passage: after b.md's
    assert [(x["path"], x["line_start"]) for x in one_per_document(hits, 3)][-1] == ("c.md", 7)
    # a later document's second passage is never kept, even right behind its first
    later = [h("a.md", 1), h("b.md", 5), h("b.md", 9), h("c.md", 7)]
    assert [x["path"] for x in one_per_document(later, 3)] == ["a.md", "b.md", "c.md"]
