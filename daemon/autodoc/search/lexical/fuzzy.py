"""The lexical leg's fuzzy fallback: a query word that no chunk holds ("deboucing",
"opentelemtry") is replaced by the stored word nearest to it, and the answer says so
(`lexical_match: "fuzzy"`, `corrections`).

Nearest: the fewest edits (insert, delete, substitute, swap two neighbours) between the word's
stem and a stored stem, at most 1 for a stem of 4 to 8 letters and 2 from 9 (shorter words are
left alone: one edit from a three-letter word is another word); ties go to the stem more chunks
hold. The candidates are the stored stems that share the word's first letters and are within that
many letters of its length (store/lexical/vocab.py: index ranges, bounded at any store size).
A word the index holds is never corrected, nor a phrase, a prefix, a number or a CJK run.
When nothing is near its stem, the word less a common ending is tried the same way: the stemmer
strips an ending only from a long enough stem, so "deplyment" keeps its "-ment" and is three edits
from "deploy" (the stem of "deployment"), while "deply" is one.

Runs on: the search's thread, on its snapshot.
"""

from __future__ import annotations

import re
from dataclasses import replace

import apsw

from ...store.interface import Snapshot
from ...store.lexical import ftsterms, vocab
from ...store.lexical.ftstext import CJK_RUN
from ..query import Term
from .fts import term_match

MIN_LETTERS = 4  # a stem shorter than this is never corrected
TWO_EDITS = 9  # a stem this long may be two edits away ("colector" is one from "collector", two from "cofactor")
# endings tried off a word whose stem has nothing near ("deplyment" -> "deply"), longest first; the
# root left must have ROOT_LETTERS: one edit from "reat" ("reatment", SciFact) is "relat", another word
ROOT_LETTERS = 5
ENDINGS = ("ations", "ation", "ments", "ment", "ness", "ings", "ing", "ions", "ion", "ers", "er", "ed", "es", "s")


def allowed(stem: str) -> int:
    return 0 if len(stem) < MIN_LETTERS else (1 if len(stem) < TWO_EDITS else 2)


def distance(a: str, b: str, most: int) -> int:
    """Edits from a to b (optimal string alignment: a swap of neighbours is one), or most + 1
    once it is known to exceed `most`."""
    if abs(len(a) - len(b)) > most:
        return most + 1
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            v = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                v = min(v, prev2[j - 2] + 1)
            cur[j] = v
        if min(cur) > most:
            return most + 1
        prev2, prev = prev, cur
    return prev[-1]


def nearest(stem: str, candidates: list[str], docs: dict[str, int]) -> list[str]:
    """The candidates within the allowed edits, best first (fewest edits, then most chunks)."""
    most = allowed(stem)
    letters = set(stem)
    scored = []
    for c in candidates:
        if len(letters.symmetric_difference(c)) > 2 * most:  # each edit changes at most two letters' presence
            continue
        d = distance(stem, c, most)
        if d <= most and docs.get(c, 1):
            scored.append((d, -docs.get(c, 0), c))
    return [c for _, _, c in sorted(scored)]


def roots(word: str, stem: str) -> list[tuple[str, str]]:
    """What to look for stored stems near, in order, each with the ending to put back on the one
    found: the word's stem (""), then the word less the longest common ending it has (at least
    ROOT_LETTERS left), when that differs from the stem: ("deply", "ment") for "deplyment"."""
    out = [(stem, "")]
    low = word.lower()
    for end in ENDINGS:
        if low.endswith(end) and len(low) - len(end) >= ROOT_LETTERS:
            if low[: -len(end)] != stem:
                out.append((low[: -len(end)], end))
            break
    return out


def correct(db: Snapshot, terms: list[Term]) -> tuple[list[Term], dict[str, str]]:
    """The terms with each unknown word replaced by its nearest stored stem, and {word typed: stem}."""
    state = ftsterms.index_state(db)
    words: dict[int, tuple[str, str]] = {}  # term index → its expression and its one stem
    for i, t in enumerate(terms):
        if t.phrase or t.prefix or CJK_RUN.search(t.text) or not t.text.isalpha():
            continue
        expr = term_match(t)
        if expr is None:
            continue
        toks = ftsterms.parse_expr(db, expr).tokens
        if len(toks) == 1 and allowed(toks[0]):
            words[i] = (expr, toks[0])
    if not words:
        return terms, {}
    # counted by expression: the leg's own counts (coverage, MaxScore) then come from the same cache
    known = ftsterms.term_docs(db, [e for e, _ in words.values()], state)
    out, fixed = list(terms), {}
    for i, (expr, stem) in words.items():
        if not known[expr]:
            found = _nearest_word(db, state, stem, terms[i].text)
            if found:
                out[i] = replace(terms[i], text=found)
                fixed[terms[i].text] = found
    return out, fixed


def _nearest_word(db: Snapshot, state: ftsterms.IndexState, stem: str, typed: str) -> str | None:
    """The word to search for `typed` (its stem `stem` unknown): a stored stem near it, searched as a
    word only when the tokenizer reads it back as that stem; by its root, the stem with the typed
    ending put back ("deploy" + "ment": the stem "deploy" alone reads back as "deploi")."""
    for root, ending in roots(typed, stem):
        cands = vocab.near(db, root, allowed(root))
        pre = nearest(root, cands, {}) if cands else []  # by edits alone: count only the few that are near
        docs = ftsterms.token_docs(db, pre, state) if pre else {}
        for c in nearest(root, pre, docs):
            if ftsterms.parse_expr(db, term_match(Term(c + ending)) or "").tokens == (c,):
                return c + ending
    return None


def surfaces(db: Snapshot, fixed: dict[str, str], texts: list[str]) -> dict[str, str]:
    """word typed → the word of the hits' texts, stemmed to its correction, nearest to what was
    typed (lowercased): what the page says ("debounce" for "deboucing"), never the index's stem
    ("debounc"); of "debounce" and "debouncing" both in the hits, "debouncing"."""
    tok = ftsterms._tokenizer(db)
    stems = set(fixed.values())
    seen: dict[str, set[str]] = {}
    for text in texts:
        data = text.encode("utf-8")
        for start, end, token in tok(data, apsw.FTS5_TOKENIZE_DOCUMENT, None, include_colocated=False):
            if token in stems:
                seen.setdefault(token, set()).add(data[start:end].decode("utf-8", "replace").lower())
    out = {}
    for word, stem in fixed.items():
        forms = sorted(seen.get(stem) or {stem})
        out[word] = min(forms, key=lambda f: distance(word.lower(), f, len(f) + len(word)))
    return out


def corrected(query: str, fixed: dict[str, str]) -> str:
    """The query with each corrected word replaced, as a whole word."""
    for word, to in fixed.items():
        query = re.sub(rf"(?<!\w){re.escape(word)}(?!\w)", to, query)
    return query
