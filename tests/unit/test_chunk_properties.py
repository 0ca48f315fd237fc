"""Property tests: chunks are exact, ordered, complete and within budget.

Two generators: structured documents (we know where every heading, code block
and tag is) and wild strings of Markdown-ish fragments (to find crashes and
broken invariants in odd input).
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autodoc.ingest.chunk import chunk_document
from autodoc.ingest.markdown import parse_markdown
from autodoc.ingest.tokens import wordpiece_tokens

WORDS = [
    "lease", "recovery", "WAL", "reclaimBatch", "-32069", "a3f9c2e", "SQLite", "queue", "the", "of",
    "数据库迁移", "検索エンジン", "設定", "🔍", "👩‍💻", "naïve", "café", "x", "embedding", "snake_case",
]  # fmt: skip
LONG_WORDS = ["x" * 700, "数据库" * 150, "ab" * 400]
CODE_LINES = ["# fake heading", "#notatag = 1", "", "x = reclaim(batch)", "    indented()", "## also fake", "数据 = 1"]
COUNTERS = {
    "estimate": wordpiece_tokens,
    "words": lambda s: len(s.split()),
    "chars": len,
}


def _words(draw, lo=1, hi=12):
    return " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=lo, max_size=hi)))


@st.composite
def structured(draw):
    """A document plus what we put in it: headings, code blocks, inline tags."""
    nl = draw(st.sampled_from(["\n", "\r\n"]))
    text = ""
    headings, code_spans, tags = [], [], []
    if draw(st.booleans()):
        text += f"---{nl}title: {_words(draw, 1, 3)}{nl}"
        if draw(st.booleans()):
            text += f"abstract: {_words(draw, 1, 20)}{nl}"
        text += f"---{nl}"
    blocks = draw(st.lists(st.sampled_from(["h", "p", "p", "code", "long"]), max_size=25))
    for i, kind in enumerate(blocks):
        sep = draw(st.sampled_from([nl, nl * 2, nl * 3]))
        if i or text:
            text += sep
        line = text.count("\n") + 1
        if kind == "h":
            level = draw(st.integers(1, 6))
            words = _words(draw, 1, 4)
            headings.append((level, words, line))
            text += "#" * level + " " + words
        elif kind == "code":
            fence = draw(st.sampled_from(["```", "~~~", "````"]))
            # Fence lines of the other kind (or shorter) inside must not close the block.
            inner = {"```": ["~~~", "~~~~"], "~~~": ["```", "``` x"], "````": ["```", "~~~~"]}[fence]
            body = nl.join(draw(st.lists(st.sampled_from(CODE_LINES + inner), max_size=40)))
            start = len(text)
            text += fence + draw(st.sampled_from(["", "python"])) + nl + (body + nl if body else "") + fence
            code_spans.append((start, len(text)))
        else:
            sentences = []
            for _ in range(draw(st.integers(1, 30 if kind == "long" else 4))):
                s = _words(draw) + draw(st.sampled_from([".", "!", "?", "。", ""]))
                if draw(st.integers(0, 9)) == 0:
                    tag = draw(st.sampled_from(["ops", "lease/wal", "on-call", "検索"]))
                    tags.append(tag)
                    s += f" #{tag}"
                if draw(st.integers(0, 19)) == 0:
                    s += " " + draw(st.sampled_from(LONG_WORDS))
                sentences.append(s)
            joiner = draw(st.sampled_from([" ", nl]))
            text += joiner.join(sentences)
    text += draw(st.sampled_from(["", nl]))
    return text, headings, code_spans, tags


FRAGMENTS = [
    "\n", "\n\n", " ", "\t", "\r\n", "# H\n", "## H2 ##\n", "###### six\n", "#tag ", "`#code` ",
    "\n```\n", "\n~~~\n", "```py\n", "---\n", "===\n", "Title\n===\n", "- item\n", "> quote\n",
    "| a | b |\n", "[[Wiki|label]] ", "[x](y.md#z) ", "![i](p.png) ", "lease recovery. ", "数据库迁移。",
    "検索エンジンの設定", "🔍", "👩‍💻", "\u3000", "\ufeff", "x" * 300, "word " * 40,
]  # fmt: skip
wild = st.lists(
    st.one_of(st.sampled_from(FRAGMENTS), st.text(st.characters(blacklist_categories=("Cs",)), max_size=15)),
    max_size=60,
).map("".join)
wild_with_fm = st.tuples(
    st.sampled_from(["", "---\ntitle: T\n---\n", "---\nabstract: A\n---\n", "---\ntags: [x\n---\n"]), wild
).map("".join)


def check_invariants(text: str, budget: int, counter_name: str):
    """The contract every chunking must keep; returns (doc, section chunks)."""
    count = COUNTERS[counter_name]
    raw = text.encode("utf-8")
    doc = parse_markdown(text)
    chunks = chunk_document(text, doc, section_tokens=budget, count_tokens=count)
    assert chunks == chunk_document(text, doc, section_tokens=budget, count_tokens=count)  # deterministic
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    sections = [c for c in chunks if c.kind == "section"]
    covered = [0] * len(text)
    prev_end = doc.body_byte
    for c in sections:
        assert prev_end <= c.byte_start < c.byte_end <= len(raw)
        prev_end = c.byte_end
        assert raw[c.byte_start : c.byte_end].decode("utf-8") == c.text
        assert c.line_start == raw[: c.byte_start].count(b"\n") + 1
        assert c.line_end == raw[: c.byte_end - 1].count(b"\n") + 1
        assert c.tokens == count(c.text)
        # Over budget only when there is nowhere left to cut: no whitespace inside.
        assert c.tokens <= budget or not any(ch.isspace() for ch in c.text), (budget, c.text)
        a = len(raw[: c.byte_start].decode("utf-8"))
        for k in range(a, a + len(c.text)):
            covered[k] += 1
    body = len(raw[: doc.body_byte].decode("utf-8"))
    missing = [k for k in range(body, len(text)) if not text[k].isspace() and covered[k] != 1]
    assert not missing, [text[k] for k in missing[:10]]
    return doc, sections


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(structured(), st.integers(3, 400), st.sampled_from(sorted(COUNTERS)))
def test_structured_documents(case, budget, counter_name):
    text, headings, code_spans, tags = case
    doc, sections = check_invariants(text, budget, counter_name)
    assert [(h.level, h.text, h.line) for h in doc.headings] == headings
    assert "notatag" not in doc.tags and set(tags) <= set(doc.tags)
    count = COUNTERS[counter_name]
    for a, b in code_spans:
        if count(text[a:b]) <= budget:
            cuts = [(len(text.encode()[: c.byte_start].decode()), c) for c in sections]
            for start, c in cuts:
                end = start + len(c.text)
                assert not (a < start < b) and not (a < end < b), "a code block that fits was cut"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(wild_with_fm, st.integers(1, 200), st.sampled_from(sorted(COUNTERS)))
def test_wild_markdown(text, budget, counter_name):
    check_invariants(text, budget, counter_name)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=60))
def test_byte_map_matches_the_encoded_prefix(text):
    from autodoc.ingest.lines import ByteMap

    m = ByteMap(text)
    assert [m.byte(i) for i in range(len(text) + 1)] == [len(text[:i].encode("utf-8")) for i in range(len(text) + 1)]
