"""Issue 16: every real Markdown file in ../shared/data/corpora is scanned, read, parsed and chunked.

The corpora (1,981 files from five public projects; their README lists the
odd ones) are read in place, never copied. Each corpus goes through the real
scanner and read_document, then parse_markdown and chunk_document with the
word-count estimate (no model), as the index job would: 0 exceptions, every
skip has a reason, counts and the known odd files asserted.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.ingest_walk import check_document, ingest_tree

from autodoc.config import MAX_FILE_BYTES
from autodoc.ingest.text import prepared_text

CORPORA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "corpora"

pytestmark = [
    pytest.mark.skipif(not CORPORA.is_dir(), reason=f"no corpora at {CORPORA}"),
    pytest.mark.slow,  # tens of seconds: left out of make test-fast
]

# Files the scanner yields per corpus (README counts, and why they differ).
SEEN = {
    "opentelemetry-docs": 913,
    "swift-evolution": 575,
    "foam-docs": 86,
    "simpler-grants-adr": 91,  # 90 decision records and LICENSE.md, which is Markdown too
    "jekyll": 307,  # 317 less the 10 under .github/, a hidden folder the scanner never enters
}
SKIPPED: dict[str, dict[str, str]] = {}  # the UTF-16LE file is read by its byte-order mark (issue 35)
# (path, line, code, start of the message): the only problems in all five corpora.
PROBLEMS = {
    "jekyll": [
        ("test/source/_broken/bad_post.md", 3, "frontmatter", "invalid YAML frontmatter: while parsing a flow node"),
        ("test/source/_encodings/Unicode16LECRLFandBOM.md", 1, "encoding", "UTF-16LE text (byte-order mark)"),
        ("test/source/_includes/sig.markdown", 1, "frontmatter", "frontmatter is not closed"),
    ],
}


@pytest.fixture(scope="module")
def ingested():
    cache: dict[str, dict] = {}

    def get(name: str) -> dict:
        if name not in cache:
            cache[name] = ingest_tree(CORPORA / name, max_bytes=MAX_FILE_BYTES)
        return cache[name]

    return get


@pytest.mark.parametrize("name", sorted(SEEN))
def test_corpus_ingests_with_every_skip_explained(name, ingested):
    got = ingested(name)
    assert len(got) == SEEN[name]
    skips = {rel: o.skip for rel, o in got.items() if o.skip}
    assert skips == SKIPPED.get(name, {})
    problems = []
    for rel, o in got.items():
        if o.skip:
            continue
        text = prepared_text(rel, (CORPORA / name / rel).read_bytes())[0]
        check_document(text, o.doc, o.chunks)
        json.dumps(o.doc.frontmatter, allow_nan=False)
        if text[o.doc.body_byte :].strip():
            assert o.chunks, rel
        problems += [(rel, p.line, p.code, p.message) for p in o.doc.problems]
    expected = PROBLEMS.get(name, [])
    assert [p[:3] for p in sorted(problems)] == [p[:3] for p in expected]
    for got_p, want in zip(sorted(problems), expected):
        assert got_p[3].startswith(want[3]), got_p


def test_jekyll_odd_files(ingested):
    got = ingested("jekyll")
    bom = got["test/source/_encodings/UTF8CRLFandBOM.md"].doc
    assert bom.title == "UTF8CRLFandBOM" and bom.frontmatter["categories"] == "bom"  # the BOM hides no frontmatter
    wide = got["test/source/_encodings/Unicode16LECRLFandBOM.md"].doc  # UTF-16LE: indexed by its mark
    assert wide.frontmatter and wide.problems[0].code == "encoding"
    assert got["test/source/_posts/2015-12-27-extra-spaces.markdown"].doc.frontmatter == {"extra": "spaces"}
    assert got["docs/_posts/2015-10-26-jekyll-3-0-released.markdown"].doc.frontmatter["version"] == 3.0
    assert got["test/source/_dates/date_without_time.md"].doc.frontmatter["date"] == "2015-10-01"
    assert got["test/source/_dates/time_without_timezone.md"].doc.frontmatter["date"] == "2015-10-01T01:00:00"
    for odd in (
        "test/source/+/%# +.md",
        "test/source/_methods/escape-+ #%20[].md",
        "test/source/_posts/2009-03-12-hash-#1.markdown",
    ):
        assert got[odd].skip is None and got[odd].chunks, odd


def test_foam_wikilinks_and_swift_unclosed_fences(ingested):
    foam = ingested("foam-docs")
    wiki = {rel: sum(1 for ln in o.doc.links if ln.kind == "wiki") for rel, o in foam.items()}
    assert sum(1 for n in wiki.values() if n) == 42 and sum(wiki.values()) == 199  # the README's counts
    swift = ingested("swift-evolution")
    for rel in ("proposals/0239-codable-range.md", "proposals/0313-actor-isolation-control.md"):
        doc = swift[rel].doc
        assert doc.title and swift[rel].chunks  # a fence left open runs to the end; the text still chunks
