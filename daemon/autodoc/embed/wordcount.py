"""Token counts for the chunker, summed from a cache of per-word counts.

The chunker counts many overlapping slices of a document (a section, its
pieces, runs of pieces) and counting was most of an index job (25 s of 36 s
for 11k chunks through the tokenizer). A BERT tokenizer's normaliser works on
each character alone and its pre-tokeniser splits at whitespace (and at
punctuation, inside a word), and WordPiece then runs per pre-token, so a
text's token count is its special tokens plus the sum of its whitespace-
separated words' counts; and an ASCII punctuation mark is always a
pre-token of its own, so words split there too (fewer distinct ones: "word,"
and "word." are "word"). Words repeat across a knowledge base, so each is
tokenised once.

Only for a tokenizer built that way (normaliser, pre-tokeniser and model
checked), and only for text where Python's `str.split()` and the tokenizer
agree on what separates words. They differ on the characters Python splits at
that the normaliser deletes as control characters, joining the words around
them (\\x0b, \\x0c, \\x1c-\\x1f, \\x85); a text with one of those, or a lone
surrogate, is counted by the tokenizer itself; so is one holding an added
token ("[MASK]"), which the tokenizer matches before it splits at "[".

Runs on: any thread (the cache is a dict: a race only counts a word twice).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

_UNSAFE = re.compile("[\x0b\x0c\x1c-\x1f\x85\ud800-\udfff]")
_WORDS = re.compile(
    r"[^\s!-/:-@\[-`{-~]+|[!-/:-@\[-`{-~]"
)  # runs between whitespace and ASCII punctuation, and each mark
MAX_WORDS = 500_000  # cache entries before it starts again (~50 MB at worst)


def applies(tok) -> bool:
    """True for a WordPiece tokenizer with BERT's normaliser and pre-tokeniser (the bundled one)."""
    try:
        spec = json.loads(tok.to_str())
    except Exception:
        return False
    norm, pre, model = spec.get("normalizer") or {}, spec.get("pre_tokenizer") or {}, spec.get("model") or {}
    return (
        norm.get("type") == "BertNormalizer"
        and pre.get("type") == "BertPreTokenizer"
        and model.get("type") == "WordPiece"
        and not any(a.get("normalized") for a in spec.get("added_tokens") or ())
    )  # matched after lowercasing


class WordCounter:
    """count(texts) equal to len(tok.encode(text).ids) for each text."""

    def __init__(self, tok):
        self._tok = tok
        self._frame = len(tok.encode("").ids)  # [CLS] and [SEP]
        self._words: dict[str, int] = {}
        self._added = [t.content for t in tok.get_added_tokens_decoder().values() if t.content]

    def count(self, texts: Sequence[str]) -> list[int]:
        out: list[int | None] = []
        slow: list[int] = []
        words = self._words
        for i, t in enumerate(texts):
            if _UNSAFE.search(t) or any(a in t for a in self._added):
                slow.append(i)
                out.append(None)
                continue
            split = _WORDS.findall(t)
            new = [w for w in set(split) if w not in words]
            if new:
                if len(words) > MAX_WORDS:
                    words.clear()
                for w, e in zip(new, self._tok.encode_batch(new, add_special_tokens=False)):
                    words[w] = len(e.ids)
            get = words.get
            out.append(self._frame + sum(get(w) or self._word(w) for w in split))
        if slow:
            encs = (
                self._tok.encode_batch([texts[i] for i in slow])
                if len(slow) > 1
                else [self._tok.encode(texts[slow[0]])]
            )
            for i, e in zip(slow, encs):
                out[i] = len(e.ids)
        return out  # type: ignore[return-value]

    def _word(self, w: str) -> int:
        """A word the cache lost between filling and summing (cleared by another thread)."""
        n = self._words[w] = len(self._tok.encode(w, add_special_tokens=False).ids)
        return n
