"""How sure a search is (pure): each hit's `confidence`, the answer's `answerable`, and the
relevance floor that holds weak hits back.

A hit's confidence is the probability that its passage is relevant to the query, from a
logistic model over signals that mean the same on any corpus (search/evidence.py reads them):
how much of the query's informative words the passage holds (each word weighted by its inverse
chunk frequency, so "how do we" counts for little and a rare term for much), how rare the rarest
of them is, how much of the query no passage of the store holds at all (a question about a
product the corpus never names), the hit's place in the answer, and, where the semantic leg
scored the passage, its cosine and how far below the page's best cosine it is. A passage with
no vector yet (pending) or found by the words alone is scored from the words: it is not given
a cosine of 0. BM25 scores and fused relevance are left out: they are relative to one corpus
and one query. The coefficients were fitted per hit (relevant or not) on SciFact train queries
and half the known-item questions, each against its own corpus and against another, by
`python -m bench.agents --calibrate`; SciFact test queries only report (docs/benchmarks/agents.md).

The answer shows confidences that never rise down the list: the hits' own probabilities are
pooled where a later hit scores above an earlier one (pool-adjacent-violators), so a block's
value is its hits' mean and the expected count of relevant hits is kept.

`answerable` is false when the query asks about something by name (a word written as one: a
capital inside it, four capitals or more, or a capital initial away from a sentence's start) that
no chunk holds, or that few chunks hold and no passage of the answer holds beside a fifth of the
rest of the question (NAME_CONTEXT: named in passing is not answered; missing_names): "How
do I rotate the MongoDB Atlas API keys?" against a manual without MongoDB. A name the fuzzy
fallback corrected counts as held only when corrected to a common word the first passage holds
(a typo), and a name corrected otherwise stays unknown to the hit model too; a page the answer
model (below) is NAME_OVERRIDE sure of answers all the same. Otherwise it is true
when a hit holds every informative word of the query and one of them is rare in the store (an
exact match of rare words is never "nothing relevant", vectors or not), or else when a second
logistic model, of the page (ANSWER_FEATURES), reaches THRESHOLD; it was fitted per query on the
same sets plus the tune halves of the answer-span questions and of the unanswerable questions
(bench/answer_spans/). The names rule took `answerable` precision on the tune questions from 0.61
to 0.79 at the same recall (0.96; docs/benchmarks/answers.md), and SciFact train's recall from 0.98
to 0.97 (300 queries).

The floor (PROTOCOL.md, search.query): a hit is held back when its own match, its probability
as if it were listed first, is under the floor (FLOOR unless the caller sets `min_confidence`),
unless it holds every informative word of the query or reads as a paraphrase of it (its cosine
at least PARAPHRASE_COSINE); and where some hit holds every word, a hit found by meaning alone is
held back under WORDLESS_FLOOR. A search by meaning alone holds back only hits whose cosine is
under UNRELATED_COSINE. Depth alone never holds a hit back: a deep page is not padding for that. The
answer counts what was held back. So the page stops where the matches stop.

Runs on: any thread (pure: no I/O, no shared state).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from ..store.lexical.ftstext import STOPWORDS, fts_text

# intercept, then one coefficient per FEATURES entry: fitted by `python -m bench.agents --calibrate`
FEATURES = ("coverage", "rare", "unknown", "log_position", "has_cosine", "cosine", "cosine_gap", "both", "missed")
MODEL = (-1.682, 2.363, 0.589, -1.88, -1.426, -0.584, 0.629, -0.85, 0.942, -1.413)
# answerable: a logistic model of the page (the best hit's log-odds, the share of the query's words
# no chunk holds, the best word coverage, the best cosine, whether any cosine), fitted per query
ANSWER_FEATURES = ("best_logit", "unknown", "best_coverage", "best_cosine", "has_cosine")
ANSWER_MODEL = (0.351, 1.568, -3.233, 3.749, 1.862, -0.87)
THRESHOLD = 0.49  # answerable when the answer model's probability reaches it
FLOOR = 0.03  # a hit whose own match (its probability if listed first) is under this is held back
# beside a hit holding every word of the query, a hit found by meaning alone is held back under
# this: SciFact train and the known-item questions had 0 relevant of 55 such hits
WORDLESS_FLOOR = 0.1
# a passage this close to the query by meaning matches it as a paraphrase does (MiniLM: paraphrase
# pairs 0.5-0.8, unrelated text under 0.2): the floor never holds it back, as it never holds back a
# passage with every word of the query (the hit model weighs the cosine little: on its training sets
# the lexical leg found nearly every relevant passage too)
PARAPHRASE_COSINE = 0.3
# a search by meaning alone (no lexical leg) has no words to weigh: the floor holds back only what
# reads as unrelated text
UNRELATED_COSINE = 0.2
# a word is rare when at most this share of the store's chunks hold it (and at least RARE_CHUNKS may)
RARE_SHARE = 0.02
RARE_CHUNKS = 3
# a rare name of the query is held when a passage holds it beside at least this share (weighted) of
# the rest of the query: on the tune questions the answerable ones' passages held 0.33 and more, the
# unanswerable ones' named it in passing (a Rust mention in an ADR about PDFs: 0.02)
NAME_CONTEXT = 0.2
# a page the answer model is this sure of answers although a name of the query is missing: the rest
# of the question matched so well that the name is spelled another way there (SciFact train: recall
# 0.92 without it, 0.97 with; the tune questions' precision the same)
NAME_OVERRIDE = 0.9

_FACET = re.compile(r"(?:^|\s)-?[\w.-]+:\S+")
_WORD = re.compile(r"\w+", re.UNICODE)

Tokenize = Callable[[str], list[tuple[int, int, str]]]


@dataclass(frozen=True)
class Signals:
    coverage: float  # 0..1: weighted share of the query's informative words in the passage
    cosine: float | None  # the semantic leg's score, None where it did not score the passage
    both: bool  # found by the lexical and the semantic leg
    rare: float = 0.0  # 0..1: the normalised inverse chunk frequency of the rarest query word held
    unknown: float = 0.0  # 0..1: weighted share of the query's words that no chunk of the store holds
    position: int = 0  # 0-based place in the answer's order
    cosine_gap: float = 0.0  # the page's best cosine minus this one (0 without a cosine)
    missed: bool = False  # the semantic leg ran over every vector and did not list the passage
    exact: bool = False  # holds every informative query word, one of them rare in the store
    lexical: bool = False  # found by the lexical leg (its words, or a fuzzy match of them)
    missing: bool = False  # the query names something the answer's passages do not (missing_names)


def query_stems(query: str, tokenize: Tokenize) -> list[str]:
    """The query's informative words as the index stems them: facets and
    stopwords out (all of them kept when the query is nothing else)."""
    return list(dict.fromkeys(s for _, stems in query_words(query, tokenize) for s in stems))


def query_words(query: str, tokenize: Tokenize) -> list[tuple[str, list[str]]]:
    """(word, its stems) for each informative word of the query, in order: query_stems before the
    words are merged (a word alone names its one stem to FTS5: its chunk count is read so)."""
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


def weight(chunks_holding: int, total: int) -> float:
    """A word's inverse chunk frequency, log(1 + N/(1 + n))."""
    return math.log(1 + total / (1 + chunks_holding))


def is_rare(chunks_holding: int, total: int) -> bool:
    return 0 < chunks_holding <= max(RARE_CHUNKS, RARE_SHARE * total)


@dataclass(frozen=True)
class Name:
    """A query word written as a name (name_words), with its stems as the search read them."""

    word: str
    stems: tuple[str, ...]
    absent: bool  # no chunk holds the word as typed (a fuzzy correction to a common word is a typo: held)
    corrected: bool = False  # the fuzzy fallback searched it as the stored word nearest it (`stems`)


@dataclass(frozen=True)
class QueryWords:
    """What the signals need of the query's words: their stems, weights and chunk counts."""

    stems: list[str]
    weights: dict[str, float]
    counts: dict[str, int]
    total: int  # the store's chunks
    # stems the fuzzy fallback searched for a typed word no chunk holds, the stem itself rare: a
    # guess at an unknown word ('Consul' searched as 'consume'), not a typo's fix: unknown
    guessed: frozenset[str] = frozenset()
    names: tuple[Name, ...] = ()

    @property
    def unknown(self) -> float:
        """Weighted share of the stems that no chunk holds (or that stand for a word none holds)."""
        all_w = sum(self.weights.values())
        gone = sum(w for s, w in self.weights.items() if not self.counts.get(s) or s in self.guessed)
        return gone / all_w if all_w else 0.0


_NAME_PART = re.compile(r"[^\W_]+", re.UNICODE)
_SENTENCE_END = (".", "?", "!", ":", ";")


def _written_as_name(word: str, *, initial: bool) -> bool:
    """A capital inside (OpenAI, ClamAV), four capitals or more (COBOL, TOML), or, with `initial`, a
    capital first letter (Evernote). Not letters with digits nor short acronyms: SciFact's claims
    name genes and proteins so (HOXB4, PSP) that their abstracts spell another way."""
    letters = [c for c in word if c.isalpha()]
    if len(letters) < 2 or any(c.isdigit() for c in word):
        return False
    if all(c.isupper() for c in letters):
        return len(letters) >= 4
    return any(c.isupper() for c in word[1:]) or (initial and word[0].isupper())


def name_words(query: str) -> list[str]:
    """The query's informative words written as names: what a question asks about by name (a
    product, a tool, a language), which a corpus that can answer it names too. A capital first
    letter counts away from a sentence's start, and not in a query whose every word has one
    (Title Case says nothing then)."""
    parts: list[tuple[str, bool]] = []  # (word, at a sentence's start)
    start = True
    for token in _FACET.sub(" ", query).split():
        for w in _NAME_PART.findall(token):
            parts.append((w, start))
            start = False
        start = start or token.endswith(_SENTENCE_END)
    words = [(w, st) for w, st in parts if w.lower() not in STOPWORDS and sum(c.isalpha() for c in w) >= 2]
    title_case = all(w[0].isupper() for w, _ in words)
    return list(dict.fromkeys(w for w, st in words if _written_as_name(w, initial=not st and not title_case)))


def missing_names(q: QueryWords, passages: Sequence[set[str] | frozenset[str]]) -> list[str]:
    """The names of the query (name_words) the answer does not hold: "How do I rotate the MongoDB
    Atlas API keys?" against a manual without MongoDB. `passages`: the stems of the answer's
    passages, in order. Missing: a name no chunk holds; a name few chunks hold (is_rare) that no
    passage holds beside at least NAME_CONTEXT of the rest of the query (weighted: a passage that
    names it in passing, about something else, does not answer a question about it); a name the
    fuzzy fallback corrected unless the first passage holds the correction (a typo: 'Daemn' for
    'daemon'; 'Consul' searched as 'consume' is not)."""
    first = passages[0] if passages else frozenset()
    out = []
    for n in q.names:
        if n.absent or (n.corrected and any(s not in first for s in n.stems)):
            out.append(n.word)
        elif any(is_rare(q.counts.get(s, 0), q.total) for s in n.stems):
            rest = [s for s in q.stems if s not in n.stems]
            beside = [coverage_of(rest, q.weights, p) if rest else 1.0 for p in passages if set(n.stems) <= p]
            if max(beside, default=0.0) < NAME_CONTEXT:
                out.append(n.word)
    return out


def passage_signals(
    q: QueryWords,
    present: set[str] | frozenset[str],
    *,
    cosine: float | None,
    best_cosine: float | None,
    both: bool,
    missed: bool,
    position: int,
) -> Signals:
    """One passage's signals from the stems it holds and its place in the answer."""
    held = [s for s in q.stems if s in present]
    top = math.log(1 + q.total) if q.total else 1.0
    rare = max((q.weights[s] / top for s in held if q.counts.get(s)), default=0.0)
    everything = bool(q.stems) and len(held) == len(q.stems)
    return Signals(
        coverage=coverage_of(q.stems, q.weights, present),
        cosine=cosine,
        both=both,
        rare=min(1.0, rare),
        unknown=q.unknown,
        position=position,
        cosine_gap=max(0.0, (best_cosine or 0.0) - cosine) if cosine is not None else 0.0,
        missed=missed,
        exact=everything and any(is_rare(q.counts.get(s, 0), q.total) for s in held),
    )


def features(s: Signals) -> list[float]:
    has = s.cosine is not None
    return [
        s.coverage,
        s.rare,
        s.unknown,
        math.log1p(s.position),
        float(has),
        s.cosine or 0.0,
        s.cosine_gap,
        float(s.both),
        float(s.missed),
    ]


def probability(s: Signals, model: Sequence[float] = MODEL) -> float:
    z = model[0] + sum(b * x for b, x in zip(model[1:], features(s)))
    return 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, z))))


def confidence(s: Signals, model: Sequence[float] = MODEL) -> float:
    return round(probability(s, model), 4)


def monotone(values: Sequence[float]) -> list[float]:
    """The closest non-increasing sequence (least squares, pool-adjacent-violators): a block of
    hits where a later one scored higher shows their mean."""
    blocks: list[list[float]] = []  # [sum, count]
    for v in values:
        blocks.append([v, 1.0])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] < blocks[-1][0] / blocks[-1][1]:
            s, n = blocks.pop()
            blocks[-1][0] += s
            blocks[-1][1] += n
    out: list[float] = []
    for s, n in blocks:
        out.extend([round(s / n, 4)] * int(n))
    return out


def words_matched(signals: Sequence[Signals]) -> bool:
    """Some hit holds every informative word of the query: beside it a hit found by meaning alone
    is padding unless it is confident."""
    return any(s.coverage >= 1.0 for s in signals)


def match_probability(s: Signals, model: Sequence[float] = MODEL) -> float:
    """The hit's probability as if it were listed first: how well the passage itself matches, for the
    floor (a deep hit is less likely relevant, but a deep page is not padding for that alone)."""
    return probability(replace(s, position=0), model)


def held_back_by_meaning(s: Signals, floor: float) -> bool:
    """The floor of a search without a lexical leg: unrelated by meaning (min_confidence 0 keeps all)."""
    return floor > 0 and s.cosine is not None and s.cosine < UNRELATED_COSINE


def held_back(s: Signals, conf: float, floor: float, *, words_matched: bool) -> bool:
    """`conf` (match_probability) under the floor and the hit neither holding every informative word
    of the query nor a paraphrase of it (PARAPHRASE_COSINE); or, when `words_matched`, found by meaning alone (no lexical match, none of the
    words) and under WORDLESS_FLOOR (scaled down with a lower floor: min_confidence 0 keeps all)."""
    if s.coverage >= 1.0 or (s.cosine is not None and s.cosine >= PARAPHRASE_COSINE):
        return False
    if conf < floor:
        return True
    wordless = not s.lexical and s.coverage == 0.0
    return words_matched and wordless and conf < min(floor * WORDLESS_FLOOR / FLOOR, WORDLESS_FLOOR)


def answer_features(signals: Sequence[Signals], probabilities: Sequence[float]) -> list[float]:
    """What `answerable` reads of the whole page (ANSWER_FEATURES)."""
    best = min(max(probabilities, default=0.0), 1 - 1e-6)
    cosines = [s.cosine for s in signals if s.cosine is not None]
    return [
        math.log(max(best, 1e-6) / (1 - best)),
        signals[0].unknown if signals else 1.0,
        max((s.coverage for s in signals), default=0.0),
        max(cosines, default=0.0),
        float(bool(cosines)),
    ]


def answer_probability(
    signals: Sequence[Signals], probabilities: Sequence[float], model: Sequence[float] = ANSWER_MODEL
) -> float:
    z = model[0] + sum(b * x for b, x in zip(model[1:], answer_features(signals, probabilities)))
    return 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, z))))


def answerable(
    signals: Sequence[Signals],
    probabilities: Sequence[float],
    *,
    facet_hits: bool = False,
    model: Sequence[float] = ANSWER_MODEL,
    threshold: float = THRESHOLD,
) -> bool:
    """Something relevant was found: an exact match of rare words, or the page's model says so. A
    facet-only query's listing is answerable when it lists anything (every file matched the filter)."""
    if facet_hits:
        return True
    if not signals:
        return False
    p = answer_probability(signals, probabilities, model)
    if signals[0].missing and p < NAME_OVERRIDE:
        return False
    return any(s.exact for s in signals) or p >= threshold
