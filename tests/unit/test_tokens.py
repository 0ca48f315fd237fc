"""Snippet marking uses FTS5's own tokenizer, whose offsets are bytes; the
product maps them to characters by stepping over the non-ASCII characters
only. Checked against the plain per-character mapping on arbitrary text."""

from __future__ import annotations

import apsw
from hypothesis import given, settings
from hypothesis import strategies as st

from autodoc.search.lexical.tokens import _tokenizer, tokenize


def reference(text: str) -> list[tuple[int, int, str]]:
    raw = _tokenizer()(text.encode("utf-8"), apsw.FTS5_TOKENIZE_DOCUMENT, None)
    char_at, b = {}, 0
    for i, ch in enumerate(text):
        char_at[b] = i
        b += len(ch.encode("utf-8"))
    char_at[b] = len(text)
    return [(char_at[s], char_at[e], w) for s, e, w in raw]


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=80))
def test_character_offsets_match_the_plain_mapping(text):
    assert tokenize(text) == reference(text)


def test_offsets_slice_the_words_out_of_mixed_text():
    text = "Naïve café — βcells 数据库 running"
    toks = tokenize(text)
    assert [text[s:e] for s, e, _ in toks] == ["Naïve", "café", "βcells", "数据库", "running"]
    assert [w for _, _, w in toks] == ["naiv", "cafe", "βcell", "数据库", "run"]
