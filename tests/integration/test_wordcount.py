"""The chunker's token counts summed from per-word counts (embed/wordcount.py) equal the
bundled tokenizer's own counts: on slices of every real corpus file (English, Chinese,
Japanese, code, tables) cut at random places, and on the characters where Python's
whitespace and the tokenizer's differ (they take the tokenizer's path)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from autodoc.embed import wordcount
from autodoc.embed.onnx import default_tokenizer_path, load_tokenizer

CORPORA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "corpora"


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer(default_tokenizer_path(), None)


def test_the_bundled_tokenizer_is_counted_by_words(tok):
    assert wordcount.applies(tok)


EDGES = [
    "",
    " ",
    "word",
    "two words",
    "  leading and trailing  ",
    "tab\tnew\nline\r\nreturn",
    "vertical\x0btab",
    "form\x0cfeed",
    "file\x1cseparator",
    "unit\x1fsep",
    "next\x85line",
    "line\u2028sep",
    "no\u00a0break",
    "ideographic\u3000space",
    "zero\u200bwidth",
    "bom\ufeffhere",
    "nul\x00byte",
    "rep\ufffdlacement",
    "café naïve résumé",
    "e\u0301 combining",
    "中文分词测试",
    "日本語のテキスト",
    "[MASK] and x[SEP]y",
    "a" * 150,
    "x" * 99 + " " + "y" * 101,
    "https://example.com/path?q=1&r=2#frag",
    "snake_case CamelCase kebab-case",
    "Ünïcödé ÀÉÎÕÜ ß ﬁ ligature",
    "emoji 🙂 👍🏽 mix",
    "math ∑ ∫ √ ≤",
    "arabic مرحبا hebrew שלום",
]


def test_edge_cases_equal_the_tokenizer(tok):
    wc = wordcount.WordCounter(tok)
    for text in EDGES:
        assert wc.count([text]) == [len(tok.encode(text).ids)], repr(text)
    assert wc.count(EDGES) == [len(e.ids) for e in tok.encode_batch(EDGES)]


@pytest.mark.skipif(not CORPORA.is_dir(), reason=f"no corpora at {CORPORA}")
def test_real_files_cut_anywhere_equal_the_tokenizer(tok):
    wc = wordcount.WordCounter(tok)
    rng = random.Random(11)
    files = sorted(p for p in CORPORA.rglob("*") if p.suffix in (".md", ".markdown") and p.is_file())
    texts = []
    for f in rng.sample(files, 400):
        t = f.read_text(encoding="utf-8", errors="replace")
        for _ in range(4):
            a = rng.randrange(max(1, len(t)))
            texts.append(t[a : a + rng.choice([40, 300, 1500, 6000])])
    got = [wc.count([t])[0] for t in texts]
    want = [len(e.ids) for e in tok.encode_batch(texts)]
    assert got == want
    assert sum(1 for t in texts if not t.isascii()) > 100  # the non-ASCII files took the fast path too
