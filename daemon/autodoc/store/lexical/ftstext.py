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


# A file's name and folders are words of its FTS row's meta column (with its aliases and tags, which
# weighs below the title: store/lexical/matches.py), so `ADR-45-entities-v4.md` is found by
# "entities v4". Extensions say nothing about a page ("md", "html" of `x.html.md.erb`); pure
# numbers are dates and ids ("2023-07-19-…", SciFact's `12345.md`) that would match every query
# holding a year or a count. A camelCase name is kept whole and in its parts.
_EXTENSIONS = frozenset("md markdown mdown mkd mkdn mdx erb html htm txt rst adoc".split())
_PATH_PART = re.compile(r"[^\W_]+", re.UNICODE)
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
SESSION_PREFIX = ".session/"  # store/sessions.py: a session's path is its id, not a name


def path_words(path: str) -> str:
    """The words of a document's path, as its FTS row's meta column holds them (space-separated)."""
    if path.startswith(SESSION_PREFIX):
        return ""
    folders, _, name = path.rpartition("/")
    parts = name.split(".")
    while len(parts) > 1 and parts[-1].lower() in _EXTENSIONS:
        parts.pop()
    out: list[str] = []
    seen: set[str] = set()
    for piece in _PATH_PART.findall(folders + " " + " ".join(parts)):
        camel = piece != piece.lower() and piece != piece.upper()
        for w in [piece, *_CAMEL.findall(piece)] if camel else [piece]:
            if w.isdigit() or w.lower() in seen:
                continue
            seen.add(w.lower())
            out.append(w)
    return " ".join(out)


def meta_text(aliases: list[str], tags: list[str], path: str) -> str:
    """The meta column of a document's FTS rows: its aliases, tags and path words. Written by
    store/documents.py and rebuilt by postings.build_slice and ftsterms.indexed_rows: one rule."""
    return fts_text(" ".join([*aliases, *tags, path_words(path)]).strip())
