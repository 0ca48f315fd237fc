"""What the confidence model (answerable.py) reads for the hits of one answer: the query's words
with their chunk counts, and each passage's stems, cosine and place.

Input: the search's snapshot, the query, the page's fused records and their rows, and what the
semantic leg did. Output: one answerable.Signals per hit, in order.

The chunk counts are the searched workspace's when the store holds others (a name on every page
of another workspace is unknown to this one): its chunks' ids kept from the postings' records of
each word (store/lexical/postread.py); the store's own counts (fts5vocab) when the workspace is the
store's only one, no workspace is named, or the postings are still being built.

Runs on: the search's thread, on its read snapshot (the counts cached per index state).
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ..store import workspaces
from ..store.interface import Snapshot
from ..store.lexical import ftsterms, postings, postread
from ..store.lexical.ftstext import fts_text
from ..store.lexical.matches import sole_workspace
from . import answerable as A
from . import fusion as F
from .lexical.tokens import stems as passage_stems
from .lexical.tokens import tokenize

_PREFIX = re.compile(r"(\w+)\*")  # a trailing `prefix*` (search/query.py)


def prefix_stems(query: str) -> set[str]:
    """The stems of the query's `prefix*` words: a passage holds one when any of its stems begins
    with it (`lea*` is in a passage about leases, whose stem is `leas`)."""
    return {s for m in _PREFIX.finditer(query) for _, _, s in tokenize(fts_text(m.group(1)))}


_lock = threading.Lock()
_own: OrderedDict[tuple, tuple[np.ndarray, dict[str, int]]] = OrderedDict()  # (state, workspace) → ids, counts
_KEEP = 8  # (index state, workspace) pairs kept


def chunk_counts(
    db: Snapshot, tokens: list[str], state: ftsterms.IndexState, workspace_id: int | None
) -> tuple[dict[str, int], int]:
    """({token: chunks holding it}, chunks): of the workspace when the store holds others, else
    of the store (see the module's docstring)."""
    if workspace_id is None or sole_workspace(db, workspace_id) or not postings.complete(db):
        return (ftsterms.token_docs(db, tokens, state) if tokens else {}), state.rows
    key = (postread.cache_key(db, state.key), workspace_id)
    with _lock:
        got = _own.get(key)
    if got is None:
        got = (np.array(workspaces.chunk_ids(db, workspace_id), dtype=np.uint32), {})
    ids, known = got
    missing = [t for t in dict.fromkeys(tokens) if t not in known]
    if missing:
        recs = postread.read_terms(db, missing, key[0])
        known.update({t: int(np.isin(recs[t]["id"], ids, assume_unique=True).sum()) for t in missing})
    with _lock:
        _own[key] = got
        _own.move_to_end(key)
        while len(_own) > _KEEP:
            _own.popitem(last=False)
    return {t: known[t] for t in tokens}, len(ids)


def _stems(word: str) -> tuple[str, ...]:
    return tuple(s for _, _, s in tokenize(fts_text(word)))


def query_counts(
    db: Snapshot, query: str, workspace_id: int | None
) -> tuple[list[str], dict[str, int], int, ftsterms.IndexState]:
    """The query's informative stems, how many chunks hold each and of how many (chunk_counts), and
    the index state they were counted in."""
    stems = A.query_stems(query, tokenize)
    state = ftsterms.index_state(db)
    counts, total = chunk_counts(db, stems, state, workspace_id)
    return stems, counts, total, state


def query_words(
    db: Snapshot, query: str, corrections: Mapping[str, str] | None = None, workspace_id: int | None = None
) -> A.QueryWords:
    """The query's informative stems, with how many chunks hold each (chunk_counts: the workspace's
    when it names one), and the words it names (answerable.name_words). `query` is the query
    searched; `corrections` the fuzzy fallback's {word typed: word searched} (a typed word no chunk
    holds, searched as the stored word nearest it): a name corrected to a rare word is a guess, and
    the name stays unknown."""
    corrections = corrections or {}
    stems, counts, total, state = query_counts(db, query, workspace_id)
    typed = query
    for word, to in corrections.items():
        typed = re.sub(rf"(?<!\w){re.escape(to)}(?!\w)", word, typed)
    guessed: set[str] = set()
    names = []
    for word in A.name_words(typed):
        if word in corrections:
            searched = _stems(corrections[word])
            typo = all(not A.is_rare(counts.get(s, 0), total) for s in searched)
            if not typo:
                guessed.update(searched)
            names.append(A.Name(word, searched, absent=not typo, corrected=True))
        else:
            own = _stems(word)
            missing = [s for s in own if s not in counts]  # a name's stems are mostly the query's, counted above
            held = chunk_counts(db, missing, state, workspace_id)[0] if missing else {}
            names.append(A.Name(word, own, absent=any(not (counts.get(s) or held.get(s)) for s in own)))
    return A.QueryWords(
        stems,
        {s: A.weight(counts[s], total) for s in stems},
        counts,
        total,
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
    workspace_id: int | None = None,
) -> list[A.Signals]:
    """The signals of each hit of `page`. cosines_comparable: the semantic leg ran with the model
    the confidence was fitted on (not the instant tier); every_vector: it scanned every passage's
    vector (state ready), so a passage it did not list was scored lower than all it listed;
    corrections: the fuzzy fallback's, `query` being the query searched; workspace_id: the
    workspace searched, whose chunks count the words (query_words)."""
    q = query_words(db, query, corrections, workspace_id)
    prefixes = prefix_stems(query) & set(q.stems)
    # a passage no leg found but its document's whole scoring chose (search/passages.py) has its cosine as "within"
    cos: list[float | None] = [
        (f.scores.get("semantic") if f.scores.get("semantic") is not None else f.scores.get("within"))
        if cosines_comparable
        else None
        for f in page
    ]
    best = max((c for c in cos if c is not None), default=None)
    held: list[set[str]] = []  # each passage's stems
    named: list[set[str]] = []  # with its document's title and path, as the index holds them: for names
    for f in page:
        row = rows[f.chunk_id]
        present = passage_stems(fts_text(row["breadcrumb"] + "\n" + row["text"])) if q.stems else set()
        if prefixes:
            present = set(present) | {p for p in prefixes if any(w.startswith(p) for w in present)}
        held.append(set(present))
        if q.names:
            named.append(held[-1] | passage_stems(fts_text(row["title"] + "\n" + row["path"])))
    first = named[0] if named else set()
    unconfirmed = {s for n in q.names if n.corrected and not set(n.stems) <= first for s in n.stems}
    if unconfirmed:  # a name corrected to a word the first passage lacks is no typo of it: unknown
        q = replace(q, guessed=q.guessed | unconfirmed)
    out = []
    for i, (f, c, present) in enumerate(zip(page, cos, held)):
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
    if q.names and A.missing_names(q, named):
        out = [replace(s, missing=True) for s in out]
    return out
