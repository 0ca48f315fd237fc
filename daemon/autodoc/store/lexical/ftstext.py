"""The text the FTS index holds (pure): CJK runs rewritten as overlapping
bigrams, since unicode61 does not segment Chinese, Japanese or Korean. The
store writes it; the search leg's MATCH building (search/lexical/fts.py) reads the
same rules, so both sides split text alike.

Runs on: any thread (pure: no I/O, no shared state).
"""

from __future__ import annotations

import re

# Han, Hiragana, Katakana, Hangul (syllables + jamo), CJK punctuation excluded.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af\u1100-\u11ff\u3130-\u318f"
CJK_RUN = re.compile(f"[{_CJK}]+")
WORDISH = re.compile(r"\w", re.UNICODE)

# Lucene's English stop set (33 words), as published BM25 baselines use. A
# longer list (NLTK's) measured worse on SciFact: it drops words like "after"
# and "between" that carry meaning in a claim (docs/benchmarks/quality.md).
STOPWORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there "
    "these they this to was will with".split()
)
TOKEN = re.compile(r"[^\W_]+", re.UNICODE)  # what unicode61 keeps as a token


def _bigrams(run: str) -> str:
    if len(run) == 1:
        return run
    return " ".join(run[i : i + 2] for i in range(len(run) - 1))


def fts_text(text: str) -> str:
    """Text as it is written into the FTS index (CJK runs as bigrams)."""
    if not CJK_RUN.search(text):
        return text
    return CJK_RUN.sub(lambda m: f" {_bigrams(m.group(0))} ", text)
