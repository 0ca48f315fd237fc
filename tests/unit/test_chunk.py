"""chunk_document on the kb corpus and on small hand-made documents."""

from __future__ import annotations

import hashlib
import itertools
import runpy
from pathlib import Path

from autodoc.ingest.chunk import chunk_document
from autodoc.ingest.markdown import parse_markdown
from autodoc.ingest.scan import SkipFile, read_document, scan_workspace
from autodoc.ingest.text import prepared_text
from autodoc.ingest.tokens import wordpiece_tokens

CORPORA = Path(__file__).parents[1] / "corpora"
KB = runpy.run_path(str(CORPORA / "make_special.py"))["ensure_special_files"]()


def _readable() -> list[Path]:
    out = []
    for e in scan_workspace(KB, max_bytes=1 << 20):
        try:
            read_document(e.path, max_bytes=1 << 20)
        except SkipFile:
            continue
        if e.skip is None:
            out.append(e.path)
    return out


READABLE = _readable()


def chunks_of(text: str, **kw):
    return chunk_document(text, parse_markdown(text), **kw)


def corpus(rel: str, **kw):
    raw = (KB / rel).read_bytes()
    text = raw.decode()
    d = parse_markdown(text)
    return raw, d, chunk_document(text, d, **kw)


def test_every_corpus_chunk_is_an_exact_slice_with_correct_lines():
    assert len(READABLE) == 16  # notes/bad-encoding.md too: its bad bytes are replaced, not a skip
    for p in READABLE:
        # chunks are cut from the indexed text (bad bytes replaced, secrets masked) and its UTF-8
        raw = prepared_text(p.name, p.read_bytes())[0].encode()
        for c in chunks_of(raw.decode()):
            if c.kind == "abstract":
                continue
            assert raw[c.byte_start : c.byte_end].decode() == c.text, p
            assert c.line_start == raw[: c.byte_start].count(b"\n") + 1
            assert c.line_end == raw[: c.byte_end - 1].count(b"\n") + 1
            assert c.text_hash == hashlib.sha256((c.breadcrumb + "\n" + c.text).encode()).hexdigest()
            assert c.tokens == wordpiece_tokens(c.text) <= 350


def test_long_section_is_split_inside_the_long_paragraph():
    _raw, _d, cs = corpus("adrs/0012-lease-recovery.md")
    crumb = "ADR 0012: Lease recovery after a crashed writer › Recovery in detail"
    long = [c for c in cs if c.breadcrumb == crumb]
    assert len(long) >= 5
    assert long[0].text.startswith("## Recovery in detail\n\nThe first question")
    # The ~330-word paragraph on line 83 has no blank line: it must be cut at a
    # sentence boundary, so two consecutive chunks share that line.
    shared = [(a, b) for a, b in itertools.pairwise(long) if a.line_end == b.line_start]
    assert shared, [(c.line_start, c.line_end) for c in long]
    a, b = shared[0]
    assert a.text.endswith(".") and b.text[0].isupper()
    assert all(c.tokens <= 350 for c in long)


def test_abstract_chunk_comes_first_and_points_at_the_field():
    raw, d, cs = corpus("adrs/0015-embedding-queue.md")
    a = cs[0]
    assert (a.ordinal, a.kind, a.breadcrumb) == (0, "abstract", "ADR 0015: Asynchronous embedding queue › Abstract")
    assert a.text == d.abstract
    assert (a.byte_start, a.byte_end, a.line_start, a.line_end) == d.abstract_span
    assert raw[a.byte_start : a.byte_end].startswith(b"abstract: >")
    assert [c.ordinal for c in cs] == list(range(len(cs)))
    without = chunk_document(raw.decode(), d, abstract_chunk=False)
    assert [c.kind for c in without] == ["section"] * (len(cs) - 1)
    assert [c.text for c in without] == [c.text for c in cs[1:]] and without[0].ordinal == 0


def test_breadcrumbs_and_heading_only_sections_join_their_child():
    _, _, cs = corpus("adrs/0015-embedding-queue.md")
    got = [(c.breadcrumb, c.text.split("\n", 1)[0]) for c in cs if c.kind == "section"]
    t = "ADR 0015: Asynchronous embedding queue"
    assert got == [
        (f"{t} › Context", "# ADR 0015: Asynchronous embedding queue"),
        (f"{t} › Decision › Queue rows", "## Decision"),
        (f"{t} › Decision › Batching", "### Batching"),
        (f"{t} › Decision › Provider errors", "### Provider errors"),
        (f"{t} › Consequences", "## Consequences"),
    ]


def test_cjk_title_differs_from_h1_so_both_appear():
    _, _, cs = corpus("notes/cjk-notes.md")
    assert [c.breadcrumb for c in cs] == [
        "多言語メモ › 数据库迁移指南",
        "多言語メモ › 数据库迁移指南 › 常见问题",
        "多言語メモ › 検索エンジンの設定",
        "多言語メモ › 検索エンジンの設定 › 絵文字とタグ",
    ]


def test_text_before_first_heading_and_fallback_title():
    _, _d, cs = corpus("notes/standup-2024-03-14.md")
    assert [c.breadcrumb for c in cs] == ["", "Action items"]
    assert cs[0].text.startswith("Standup notes") and cs[0].line_start == 1
    _, _, named = corpus("notes/standup-2024-03-14.md", fallback_title="standup-2024-03-14")
    assert [c.breadcrumb for c in named] == ["standup-2024-03-14", "standup-2024-03-14 › Action items"]


NESTED = """---
title: Ops guide
---
Intro before any heading.

# Ops guide

Overview.

## Storage

Text.

### WAL

Text.

##### Deep

Skipped a level.

### Lease

Text.

## Search

Text.
"""


def test_nested_breadcrumbs():
    got = [c.breadcrumb for c in chunks_of(NESTED)]
    assert got == [
        "Ops guide",
        "Ops guide",
        "Ops guide › Storage",
        "Ops guide › Storage › WAL",
        "Ops guide › Storage › WAL › Deep",
        "Ops guide › Storage › Lease",
        "Ops guide › Search",
    ]


def test_h1_not_the_title_stays_in_the_path():
    got = [c.breadcrumb for c in chunks_of("---\ntitle: ADR 0203\n---\n# Storage\n\nx\n\n## Constants\n\ny\n")]
    assert got == ["ADR 0203 › Storage", "ADR 0203 › Storage › Constants"]


def test_small_code_block_is_never_cut():
    code = "```python\n" + "\n".join(f"x{i} = reclaim_batch({i})" for i in range(12)) + "\n```"
    text = "# T\n\n" + "Some prose here. " * 20 + "\n\n" + code + "\n\n" + "More prose. " * 20 + "\n"
    assert wordpiece_tokens(code) < 120
    cs = chunks_of(text, section_tokens=120)
    assert len(cs) >= 3
    holders = [c for c in cs if "x0 = " in c.text]
    assert len(holders) == 1 and code in holders[0].text


def test_oversized_code_block_is_cut_at_line_boundaries():
    lines = [f"    step_{i}(lease, wal, queue)  # call {i}" for i in range(60)]
    text = "# T\n\n```\n" + "\n".join(lines) + "\n```\n"
    raw = text.encode()
    cs = chunks_of(text, section_tokens=80)
    assert len(cs) > 3
    for c in cs[1:]:
        assert raw[c.byte_start - 1 : c.byte_start] == b"\n"  # starts at a line start (indent kept)
        assert all(c.tokens <= 80 for c in cs)


def test_heading_does_not_break_into_a_code_block_that_fits():
    code = "```\n" + "\n".join(f"call_{i}(lease)" for i in range(8)) + "\n```"
    text = "## A heading of several words here\n" + code + "\n\nTail sentence.\n"
    budget = wordpiece_tokens(code) + 2
    assert wordpiece_tokens(text) > budget
    cs = chunks_of(text, section_tokens=budget)
    assert [c for c in cs if code in c.text], [c.text for c in cs]


def test_heading_travels_with_its_first_sentence():
    text = "## Heading\n" + " ".join(f"Sentence number {i} is here." for i in range(40)) + "\n"
    cs = chunks_of(text, section_tokens=40)
    assert cs[0].text.startswith("## Heading\nSentence number 0")


def test_cjk_paragraph_without_spaces_splits_at_full_stops():
    para = "".join(f"数据库迁移第{i}步需要先停止守护进程。" for i in range(40))
    cs = chunks_of("# 指南\n\n" + para + "\n", section_tokens=60)
    assert len(cs) > 3
    assert all(c.text.endswith("。") for c in cs)
    assert all(c.tokens <= 60 for c in cs)


def test_custom_counter_replaces_the_estimate():
    words = lambda s: len(s.split())  # noqa: E731
    text = "# T\n\n" + "alpha beta gamma delta. " * 30 + "\n"
    cs = chunks_of(text, section_tokens=10, count_tokens=words)
    assert len(cs) > 10 and all(c.tokens == words(c.text) <= 10 for c in cs)


def test_hash_depends_on_breadcrumb_and_text():
    a = chunks_of("# A\n\nIntro.\n\n## Same\n\nShared boilerplate paragraph.\n")
    b = chunks_of("# B\n\nIntro.\n\n## Same\n\nShared boilerplate paragraph.\n")
    assert a[-1].text == b[-1].text and a[-1].text_hash != b[-1].text_hash
    c = chunks_of("---\ntitle: A\n---\n## Same\n\nShared boilerplate paragraph.\n")
    assert c[-1].breadcrumb == a[-1].breadcrumb and c[-1].text_hash == a[-1].text_hash


def test_empty_documents_give_no_chunks():
    for text in ("", "\n \n", "---\ntitle: x\n---\n", "---\ntags: [a\n---\n\n"):
        assert chunks_of(text) == []
    only_abstract = chunks_of("---\ntitle: X\nabstract: the thesis\n---\n")
    assert [(c.kind, c.text, c.breadcrumb) for c in only_abstract] == [("abstract", "the thesis", "X › Abstract")]
