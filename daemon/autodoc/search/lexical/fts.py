"""FTS5 text preparation and MATCH building (pure).

unicode61 does not segment Chinese, Japanese or Korean: a run of CJK
characters would be one giant token, findable only whole. Both the indexed
text and the query therefore rewrite each CJK run as overlapping bigrams
("数据库迁移" → "数据 据库 库迁 迁移"); a query substring of two or more
characters becomes the phrase of its bigrams, which must then be adjacent.
A single CJK character is matched as a bigram prefix.

Every query term is emitted as an FTS5 string literal, so no user input can
reach FTS5's operator grammar: AND, NEAR, column:filters, parentheses and
`-32069` are all just words here.

Runs on: any thread (pure: no I/O, no shared state).
"""

from __future__ import annotations

from ...store.lexical.ftstext import CJK_RUN, STOPWORDS, TOKEN, WORDISH, fts_text
from ..query import Term


def _quote(s: str) -> str:
    # FTS5 reads its query as a C string: a NUL would end it mid-literal
    return '"' + s.replace("\x00", " ").replace('"', '""') + '"'


def term_match(term: Term) -> str | None:
    """One term → an FTS5 expression, or None when it has nothing searchable."""
    text = term.text
    if not WORDISH.search(text):
        return None
    runs = CJK_RUN.findall(text)
    if runs and len(text.strip()) == 1 and len(runs[0]) == 1:
        return _quote(text.strip()) + "*"
    body = _quote(fts_text(text).strip())
    return body + "*" if term.prefix and not runs else body


# Words that phrase a question or a request rather than name its subject
# ("how do we…", "I'm looking for…"): out of the relaxed (OR) query, where a
# match on them alone is noise. Measured in docs/benchmarks/quality.md.
QUESTION_WORDS = frozenset(
    "how why what which who whom whose where when do does did done we our us i im me my you your "
    "can could should would shall may might must need needs want wants looking look find know tell "
    "explain".split()
)
# The tail of a contraction ("I'm", "don't", "we've"): dropped only right after an apostrophe,
# since alone these letters name things ("vitamin D", "T-cell", "type s").
CONTRACTION_TAILS = frozenset("s t m ve ll d re".split())
_APOSTROPHES = "'\u2019"
DROP_QUESTION_WORDS = True
CASE_DEDUP = True  # "Gastric … gastric" is one FTS5 token: ORed twice, BM25 counted it twice


def _question_word(text: str, start: int, low: str) -> bool:
    if low in CONTRACTION_TAILS:
        return start > 0 and text[start - 1] in _APOSTROPHES
    return low in QUESTION_WORDS


def _any_terms(terms: list[Term]) -> list[Term]:
    """For OR: each unquoted term becomes its tokens ("UCP1-dependent" → UCP1,
    dependent, not a phrase), stopwords (and question words) dropped; quoted
    phrases stay phrases. A query of question words only keeps them."""
    out: list[tuple[Term, bool]] = []  # (term, a question word)
    for t in terms:
        if t.phrase:
            out.append((t, False))
            continue
        toks = list(TOKEN.finditer(t.text))
        for i, m in enumerate(toks):
            tok = m.group(0)
            low = tok.lower()
            if low in STOPWORDS:
                continue
            out.append(
                (
                    Term(tok, prefix=t.prefix and i == len(toks) - 1),
                    DROP_QUESTION_WORDS and _question_word(t.text, m.start(), low),
                )
            )
    if all(q for _, q in out):
        return [t for t, _ in out]
    return [t for t, q in out if not q]


def coverage_terms(terms: list[Term]) -> list[tuple[str, Term]]:
    """The distinct (FTS5 expression, term) a hit's coverage is counted over: the relaxed query's words."""
    seen: dict[str, Term] = {}
    for t in _any_terms(terms):
        expr = term_match(t)
        if expr and _key(expr) not in {_key(e) for e in seen}:
            seen[expr] = t
    return list(seen.items())


def _key(expr: str) -> str:
    # unicode61 folds case as lower() does; casefold() goes further ("Straße" → "strasse", "ﬁ" → "fi")
    # and would merge words the index keeps apart (diacritics are left alone here: the index decides)
    return expr.lower() if CASE_DEDUP else expr


def build_match(terms: list[Term], mode: str = "all") -> str | None:
    """AND (mode "all") of the terms, or OR (mode "any") of their tokens without stopwords."""
    parts: list[str] = []
    seen: set[str] = set()
    for t in _any_terms(terms) if mode == "any" else terms:
        expr = term_match(t)
        if expr and _key(expr) not in seen:
            seen.add(_key(expr))
            parts.append(expr)
    if not parts:
        return None
    return (" AND " if mode == "all" else " OR ").join(parts)
