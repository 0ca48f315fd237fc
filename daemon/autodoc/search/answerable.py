"""Whether a search found anything relevant (pure): each hit's `confidence`
and the answer's `answerable`.

A hit's confidence is a logistic model over signals that mean the same on
any corpus: how much of the query's informative words the passage holds
(each word weighted by its inverse chunk frequency, so "how do we" counts
for little and a rare term for much), the semantic leg's cosine for the
passage, and whether both legs found it. BM25 scores and fused relevance are left out: they are
relative to one corpus and one query. The coefficients and the threshold
were fitted on SciFact train queries and the known-item questions, each
against its own corpus (answerable) and against the other's (not), by
bench/agent_tokens.py --calibrate; SciFact test queries only report.

Runs on: any thread (pure: no I/O, no shared state).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..store.lexical.ftstext import STOPWORDS, fts_text

# (intercept, coverage, cosine, both legs): fitted by bench/agent_tokens.py --calibrate
HYBRID = (-7.835, 6.181, 15.471, 0.837)
# the same without a semantic leg (no model, or lexical asked for alone)
LEXICAL = (-4.082, 11.331, 0.0, 0.0)
THRESHOLD = 0.34  # answerable when the best hit's confidence reaches it (refitted after RRF k 10 / semantic 0.6)

_FACET = re.compile(r"(?:^|\s)-?[\w.-]+:\S+")
_WORD = re.compile(r"\w+", re.UNICODE)

Tokenize = Callable[[str], list[tuple[int, int, str]]]


@dataclass(frozen=True)
class Signals:
    coverage: float  # 0..1: weighted share of the query's informative words in the passage
    cosine: float | None  # the semantic leg's score, None where that leg did not run
    both: bool  # found by the lexical and the semantic leg


def query_stems(query: str, tokenize: Tokenize) -> list[str]:
    """The query's informative words as the index stems them: facets and
    stopwords out (all of them kept when the query is nothing else)."""
    return list(dict.fromkeys(s for _, stems in query_words(query, tokenize) for s in stems))


def query_words(query: str, tokenize: Tokenize) -> list[tuple[str, list[str]]]:
    """(word, its stems) for each informative word of the query, in order: query_stems before the
    words are merged (a word alone names its one stem to FTS5: search/compact.py reads its count so)."""
    text = _FACET.sub(" ", query)
    words = list(_WORD.findall(text))
    content = [w for w in words if w.lower() not in STOPWORDS] or words
    # CJK runs as the index holds them (bigrams), so weights and coverage see the same words
    return [(w, [s for _, _, s in tokenize(fts_text(w))]) for w in content]


def coverage(stems: list[str], weights: Mapping[str, float], passage: str, tokenize: Tokenize) -> float:
    if not stems:
        return 0.0
    return coverage_of(stems, weights, {s for _, _, s in tokenize(fts_text(passage))})


def coverage_of(stems: list[str], weights: Mapping[str, float], present: set[str] | frozenset[str]) -> float:
    """coverage() given the passage's stems as the index holds them (fts_text, then FTS5's tokenizer)."""
    if not stems:
        return 0.0
    total = sum(weights.get(s, 1.0) for s in stems)
    return sum(weights.get(s, 1.0) for s in stems if s in present) / total if total else 0.0


def signals(hit: Mapping[str, Any], cov: float, semantic_ran: bool) -> Signals:
    cos = hit["scores"].get("semantic")
    via = hit.get("via") or []
    return Signals(
        coverage=cov,
        cosine=(float(cos) if cos is not None else (0.0 if semantic_ran else None)),
        both="lexical" in via and "semantic" in via,
    )


def confidence(s: Signals) -> float:
    b = HYBRID if s.cosine is not None else LEXICAL
    z = b[0] + b[1] * s.coverage + b[2] * (s.cosine or 0.0) + b[3] * s.both
    return round(1.0 / (1.0 + math.exp(-z)), 4)


def answerable(confidences: Iterable[float | None], *, facet_hits: bool = False) -> bool:
    """Something relevant was found: the best hit is confident enough. A facet-only
    query's listing is answerable when it lists anything (every file matched the filter)."""
    if facet_hits:
        return True
    return any(c is not None and c >= THRESHOLD for c in confidences)
