"""The lexical leg: FTS5 BM25 over chunks (store/lexical/matches.py).

Words are ANDed first; when that finds fewer chunks than the caller asked for
(a question, a pasted sentence), the leg relaxes to any of the words with
stopwords dropped; the chunks that had every word stay on top, in their BM25
order, and the relaxed matches follow. The caller learns which ran: "all"
(every hit holds every word), "any" (no chunk held every word: every hit
holds some), "mixed" (some chunks held every word and lead; the rest hold some),
"fuzzy" (a word no chunk held was searched as the stored word nearest it: fuzzy.py;
the corrections are reported).
The relaxed query's rows are FTS5's own ranking of the OR, computed from the
postings index (search/lexical/impact.py) when its words are single tokens, else by
search/lexical/maxscore.py over FTS5; both score only the rows that can reach the top.

Each hit carries a coverage weight: the IDF-weighted share of the query's
words it holds, a word found only in the title, breadcrumb or a heading line
counting TITLE_CREDIT of one found in the prose, taken relative to the best
hit of this query (so a long claim whose best chunk holds half its words
keeps its lexical leg as strong as a keyword query's). Fusion multiplies the
hit's share by it against the other legs' hits (a lexical-only search keeps
BM25's order: alone, the weight measured below a plain BM25 on SciFact's long
claims): a relaxed hit that matched one common word of twelve, or a
short section that matches on its title alone, weighs less than one that holds
the question. The knobs below are the measured alternatives
(bench/quality_study.py; docs/benchmarks/quality.md has the figures).

Runs on: the search's thread, on its snapshot.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field

from ...config import LEXICAL_TOP
from ...store.filters import Filter
from ...store.hits import chunk_texts
from ...store.interface import Snapshot
from ...store.lexical import ftsterms
from ...store.lexical.matches import EQUAL_WEIGHTS, content_cut, matching_rowids, ranked, ranked_matches, sole_workspace
from ..fusion import LegHit
from ..query import Term
from . import fuzzy, impact, maxscore
from .fts import CJK_RUN, _key, build_match, coverage_terms, term_match
from .tokens import stem_counts, stems, tokenize

COVERAGE_POWER = 2.0  # weight = floor + (1 - floor) · coverage ** power; power 0 turns the weight off
COVERAGE_FLOOR = 0.0
COVERAGE_RELATIVE = True  # coverage as a share of the best coverage among this query's hits
TITLE_CREDIT = 0.5  # a word held only by the title/breadcrumb columns counts this much
REORDER = False  # order the leg by BM25 × coverage weight instead of strict matches first
EQUAL_COLUMNS_ALONE = True  # without `weigh` (a lexical-only search) BM25 weighs every column alike
STRICT_FIRST = True  # when relaxed, the chunks with every word lead; False: the relaxed query's BM25 order
FUZZY = True  # a word no chunk holds is searched as the stored word nearest it (fuzzy.py)


@dataclass
class LexicalResult:
    hits: list[LegHit]
    match: str | None  # "all" | "any" | "mixed" | "fuzzy" | None (nothing searchable)
    strict: set[int] = field(default_factory=set)  # the chunks that held every word
    corrections: dict[str, str] = field(default_factory=dict)  # word typed → word searched (fuzzy.py)


def run_lexical(
    db: Snapshot,
    workspace_id: int,
    terms: list[Term],
    filt: Filter,
    *,
    want: int,
    top: int = LEXICAL_TOP,
    weigh: bool = True,
) -> LexicalResult:
    """Hits best first with positive scores, and (with `weigh`, i.e. when fused with another leg)
    their coverage weights; without, the columns weigh alike (store/lexical/matches.py)."""
    with impact.one_search():  # each word's postings read once for the AND, the OR and the coverage
        fixed, corrections = fuzzy.correct(db, terms) if FUZZY else (terms, {})
        res = _run_lexical(db, workspace_id, fixed, filt, want=want, top=top, weigh=weigh)
        if corrections and res.hits:  # words no chunk held, searched as the stored words nearest them
            texts = chunk_texts(db, [h.chunk_id for h in res.hits[:5]])
            res.match, res.corrections = "fuzzy", fuzzy.surfaces(db, corrections, list(texts.values()))
        return res


def _run_lexical(
    db: Snapshot, workspace_id: int, terms: list[Term], filt: Filter, *, want: int, top: int, weigh: bool
) -> LexicalResult:
    match = build_match(terms, "all")
    if match is None:
        return LexicalResult([], None)
    unfiltered = filt.empty and sole_workspace(db, workspace_id)
    columns = None if weigh else (EQUAL_WEIGHTS if EQUAL_COLUMNS_ALONE else None)
    every: list[str] = []  # the AND's terms, as build_match dedups them
    for e in (term_match(t) for t in terms):
        if e and all(_key(e) != _key(x) for x in every):
            every.append(e)
    strict_rank = impact.all_ranker(db, every, columns) if " AND ".join(every) == match else None
    if strict_rank is impact.EMPTY:
        rows = []  # the postings show no chunk holds every word: FTS5 need not walk their doclists to say so
    else:  # from the postings when every word is one token (search/lexical/impact.py), else FTS5's
        rows = ranked_matches(db, match, workspace_id, filt, top, unfiltered, columns, rank=strict_rank)
    strict = {cid for cid, _ in rows}
    used = "all"
    if len(rows) < want:
        relaxed = build_match(terms, "any")
        if relaxed and relaxed != match:
            more = ranked_matches(
                db, relaxed, workspace_id, filt, top, unfiltered, columns, rank=any_rank(db, terms, relaxed, columns)
            )
            if len(more) > len(rows):
                if STRICT_FIRST:  # a run of equal scores at this cut keeps its first members in content order
                    rest = [r for r in more if r[0] not in strict]
                    rows = rows + content_cut(db, lambda n: rest[:n], top - len(rows))
                else:
                    rows = more
                used = "mixed" if strict else "any"
    weights = coverage(db, terms, [cid for cid, _ in rows], strict) if weigh and COVERAGE_POWER else {}
    hits = [LegHit(cid, round(-s, 6), weights.get(cid, 1.0)) for cid, s in rows]
    if REORDER and weights:
        hits.sort(key=lambda h: (-h.score * h.weight, h.chunk_id))
    return LexicalResult(hits, used, strict)


def any_rank(db: Snapshot, terms: list[Term], relaxed: str, columns: tuple[float, ...] | None):
    """FTS5's ranking of the relaxed OR: from the postings index in numpy when every term is one
    token (search/lexical/impact.py), else by MaxScore over FTS5 (search/lexical/maxscore.py): same rows, fewer scored."""
    exprs = [e for e, _ in coverage_terms(terms)]
    if " OR ".join(exprs) != relaxed:
        return None  # not the OR of the coverage terms: the plain query
    fast = impact.ranker(db, exprs, columns)
    if fast is not None:
        return fast
    if len(exprs) < maxscore.MIN_TERMS or not maxscore.ENABLED:
        return None
    state = impact.snapshot(db)[1]
    docs = ftsterms.term_docs(db, exprs, state)
    bounds = [maxscore.upper_bound(state.rows, docs[e]) for e in exprs]
    return lambda match, limit: maxscore.top_any(
        lambda m, n: ranked(db, m, n, columns), exprs, bounds, [docs[e] for e in exprs], limit
    )


HOLDERS_SCAN = 6_000  # at most this many matches over the query's words: read them rather than tokenize the hits


def coverage(
    db: Snapshot, terms: list[Term], chunk_ids: list[int], strict: frozenset[int] | set[int] = frozenset()
) -> dict[int, float]:
    """chunk id -> its weight from the IDF-weighted share of the query's words it holds.
    `strict`: chunks the AND query matched, which hold every word (each coverage term is a token
    of an AND term), so only whether a word is in their prose is left to read."""
    pairs = coverage_terms(terms)
    if not pairs or not chunk_ids:
        return {}
    # Which hits hold a word is read from the hits themselves (FTS5's tokenizer over the text they
    # were indexed with) and how many chunks hold it from fts5vocab: a pass over every word's whole
    # doclist cost a third of the leg at 100k chunks (docs/benchmarks/lexical_speed.md).
    state = impact.snapshot(db)[1]
    n = max(1, state.rows)
    docs = ftsterms.term_docs(db, [e for e, _ in pairs], state)
    loose = [cid for cid in chunk_ids if cid not in strict]
    # the postings index says which hits hold each word, and how often in their body, without
    # tokenizing them (search/lexical/impact.py)
    posted = impact.held(db, [e for e, _ in pairs], chunk_ids)
    # else few matches: reading them is cheaper than tokenizing the hits (a small store, rare words)
    scan = posted is None and bool(loose) and sum(docs.values()) <= HOLDERS_SCAN
    rows = {} if scan or not loose or posted is not None else ftsterms.indexed_rows(db, loose)
    prose = _Prose(chunk_texts(db, chunk_ids)) if TITLE_CREDIT < 1 else None
    total = 0.0
    got = dict.fromkeys(chunk_ids, 0.0)
    for expr, term in pairs:
        df = docs[expr]
        idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
        total += idf
        words = [] if CJK_RUN.search(term.text) else [t[2] for t in tokenize(term.text)]
        counted = posted[expr] if posted is not None else None
        if not loose:
            held = set(got)
        elif counted is not None:
            held = {cid for cid in got if cid in strict or cid in counted[1]}
        elif scan:
            held = got.keys() & set(matching_rowids(db, expr))
        else:
            parsed = ftsterms.parse_expr(db, expr)
            held = {cid for cid in got if cid in strict or (cid in rows and ftsterms.holds(rows[cid], parsed))}
        for cid in held:
            body = prose is None or prose.holds(cid, words, term.prefix, counted)
            got[cid] += idf * (1.0 if body else TITLE_CREDIT)
    if total <= 0:
        return {}
    if COVERAGE_RELATIVE:
        total = max(got.values()) or total
    return {
        cid: round(COVERAGE_FLOOR + (1 - COVERAGE_FLOOR) * (g / total) ** COVERAGE_POWER, 6) for cid, g in got.items()
    }


_HEADING = re.compile(r"^ {0,3}#{1,6}(?:\s.*)?$", re.M)


class _Prose:
    """Whether a hit holds a word in its prose (its text without heading lines: its title and
    breadcrumb are indexed into every chunk and its first section repeats the title as a heading).

    A one-token word the postings counted: the body column is the chunk's text, and a heading
    line is whole lines, so no token straddles its edge and the body's count of the word is the
    prose's plus the heading lines'. It is in the prose when the body holds it more often than the
    heading lines do, which needs only the heading lines tokenized. A prefix, a phrase, a chunk
    with CJK (whose body is rewritten as bigrams: store/lexical/ftstext.py) or a hit the postings did not
    list: its prose's stems, as before the postings (2.4 of a 100k-chunk claim's 11 ms leg)."""

    def __init__(self, texts: dict[int, str]):
        self.texts = texts
        self._stems: dict[int, set[str]] = {}
        self._heads: dict[int, Counter[str] | None] = {}  # None: CJK in the text

    def holds(self, cid: int, words: list[str], prefix: bool, counted: tuple[str, dict[int, int]] | None) -> bool:
        text = self.texts.get(cid)
        if text is None:
            return True  # (its text is gone: no title credit to take)
        if counted is not None and len(words) == 1 and not prefix and counted[0] == words[0] and cid in counted[1]:
            if cid not in self._heads:
                cjk = not text.isascii() and CJK_RUN.search(text)  # (isascii: no scan of an ASCII text)
                self._heads[cid] = None if cjk else stem_counts(" ".join(_HEADING.findall(text)))
            heads = self._heads[cid]
            if heads is not None:
                return counted[1][cid] > heads[words[0]]
        if cid not in self._stems:
            self._stems[cid] = _prose_stems(text)
        return _holds(self._stems[cid], words, prefix)


def _prose_stems(text: str) -> set[str]:
    """The stems of a chunk's text without its heading lines: its title and breadcrumb are
    indexed into every chunk and its first section repeats the title as a heading."""
    return stems(_HEADING.sub(" ", text))


def _holds(prose: set[str], words: list[str], prefix: bool) -> bool:
    if not words:
        return True  # nothing the tokenizer keeps (CJK bigrams are matched by FTS5 alone)
    if prefix and len(words) == 1:
        return any(s.startswith(words[0]) for s in prose)
    return all(w in prose for w in words)
