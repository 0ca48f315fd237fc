"""What the confidence model (answerable.py) reads for the hits of one answer: the query's words
with their chunk counts, and each passage's stems, cosine and place.

Input: the search's snapshot, the query, the page's fused records and their rows, and what the
semantic leg did. Output: one answerable.Signals per hit, in order.

Runs on: the search's thread, on its read snapshot (FTS5's term counts, cached per index state).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..store.interface import Snapshot
from ..store.lexical import ftsterms
from ..store.lexical.ftstext import fts_text
from . import answerable as A
from . import fusion as F
from .lexical.tokens import stems as passage_stems
from .lexical.tokens import tokenize

_PREFIX = re.compile(r"(\w+)\*")  # a trailing `prefix*` (search/query.py)


def prefix_stems(query: str) -> set[str]:
    """The stems of the query's `prefix*` words: a passage holds one when any of its stems begins
    with it (`lea*` is in a passage about leases, whose stem is `leas`)."""
    return {s for m in _PREFIX.finditer(query) for _, _, s in tokenize(fts_text(m.group(1)))}


def _stems(word: str) -> tuple[str, ...]:
    return tuple(s for _, _, s in tokenize(fts_text(word)))


def query_words(db: Snapshot, query: str, corrections: Mapping[str, str] | None = None) -> A.QueryWords:
    """The query's informative stems, with how many chunks of the store hold each (every workspace:
    the counts only need to tell rare words from common ones and known ones from unknown), and the
    words it names (answerable.name_words). `query` is the query searched; `corrections` the fuzzy
    fallback's {word typed: word searched} (a typed word no chunk holds, searched as the stored word
    nearest it): a name corrected to a rare word is a guess, and the name stays unknown."""
    corrections = corrections or {}
    stems = A.query_stems(query, tokenize)
    state = ftsterms.index_state(db)
    counts = ftsterms.token_docs(db, stems, state) if stems else {}
    typed = query
    for word, to in corrections.items():
        typed = re.sub(rf"(?<!\w){re.escape(to)}(?!\w)", word, typed)
    guessed: set[str] = set()
    names = []
    for word in A.name_words(typed):
        if word in corrections:
            searched = _stems(corrections[word])
            typo = all(not A.is_rare(counts.get(s, 0), state.rows) for s in searched)
            if not typo:
                guessed.update(searched)
            names.append(A.Name(word, searched, absent=not typo, corrected=True))
        else:
            own = _stems(word)
            held = ftsterms.token_docs(db, [s for s in own if s not in counts], state)
            names.append(A.Name(word, own, absent=any(not (counts.get(s) or held.get(s)) for s in own)))
    return A.QueryWords(
        stems,
        {s: A.weight(counts[s], state.rows) for s in stems},
        counts,
        state.rows,
        guessed=frozenset(guessed),
        names=tuple(names),
    )


def hit_signals(
    db: Snapshot,
    query: str,
    page: Sequence[F.Fused],
    rows: Mapping[int, Mapping[str, Any]],
    *,
    cosines_comparable: bool,
    every_vector: bool,
    corrections: Mapping[str, str] | None = None,
) -> list[A.Signals]:
    """The signals of each hit of `page`. cosines_comparable: the semantic leg ran with the model
    the confidence was fitted on (not the instant tier); every_vector: it scanned every passage's
    vector (state ready), so a passage it did not list was scored lower than all it listed;
    corrections: the fuzzy fallback's, `query` being the query searched (query_words)."""
    q = query_words(db, query, corrections)
    prefixes = prefix_stems(query) & set(q.stems)
    cos: list[float | None] = [
        f.scores.get("semantic") if cosines_comparable and f.scores.get("semantic") is not None else None for f in page
    ]
    best = max((c for c in cos if c is not None), default=None)
    out = []
    held: set[str] = set()  # every stem the page's passages hold, for the names the query asks about
    first: set[str] = set()
    for i, (f, c) in enumerate(zip(page, cos)):
        row = rows[f.chunk_id]
        present = passage_stems(fts_text(row["breadcrumb"] + "\n" + row["text"])) if q.stems else set()
        if prefixes:
            present = set(present) | {p for p in prefixes if any(w.startswith(p) for w in present)}
        held.update(present)
        if i == 0:
            first = set(present)
        via = f.via
        s = A.passage_signals(
            q,
            present,
            cosine=c,
            best_cosine=best,
            both="lexical" in via and "semantic" in via,
            missed=cosines_comparable and every_vector and c is None,
            position=i,
        )
        out.append(replace(s, lexical="lexical" in via))
    if q.names and A.missing_names(q, held, first):
        out = [replace(s, missing=True) for s in out]
    return out
