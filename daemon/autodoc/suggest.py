"""Did you mean: the names and documents nearest a name that matched nothing.

Input: what a client sent (a workspace name, or a path a model guessed such
as `ADR-10`, `adr/10.md` or `lease recovery`) and what exists. Output: up to
five existing names, nearest first, for the `did_you_mean` of a not-found
error (protocol/PROTOCOL.md, Errors).

In a workspace of more than SCAN_ALL documents only the CANDIDATES that
share the most short pieces of the guess (`pieces`) are compared, so an error
costs milliseconds, not seconds, at 100,000 documents.

Nearness is difflib's ratio over lowercased strings: the guess's file name
against each document's file stem, title and aliases, and a guess with a
folder against the whole path too (extensions dropped). A number in the guess also matches a document whose stem or title
carries the same number, zero-padded or not (`ADR-10` → `adrs/0010-….md`,
`ADR 0010: …`), since that is how people and models name decisions.

Runs on: any thread (pure: no I/O, no shared state).
"""

from __future__ import annotations

import difflib
import posixpath
import re
from collections.abc import Iterable

from .errors import WorkspaceNotFound

LIMIT = 5
CUTOFF = 0.6
NEAR_BEST = 0.1  # a path is suggested when it scores within this of the best one
SCAN_ALL = 300  # up to this many documents, every one is compared; beyond, the CANDIDATES sharing most pieces
CANDIDATES = 100
PIECES = 16
_NUMBER = re.compile(r"\d+")
_LETTERS = re.compile(r"[a-z]+")
_EXT = re.compile(r"\.(md|markdown)$", re.I)


def _ratio(matcher: difflib.SequenceMatcher, key: str) -> float:
    matcher.set_seq1(key)
    if matcher.real_quick_ratio() < CUTOFF or matcher.quick_ratio() < CUTOFF:
        return 0.0
    return matcher.ratio()


def close_names(
    guess: str, names: Iterable[str], limit: int = LIMIT, *, cutoff: float = CUTOFF, fold_case: bool = True
) -> list[str]:
    """Existing names like `guess` (case-insensitive), nearest first. The MCP server's forgiving
    matches (a tool, an argument, a workspace, a heading a model guessed) pass their own `cutoff`
    and compare the names as written (`fold_case=False`), every name kept, repeats too."""
    if not fold_case:
        return difflib.get_close_matches(guess, list(names), n=limit, cutoff=cutoff)
    by_lower: dict[str, str] = {}
    for n in names:
        by_lower.setdefault(n.lower(), n)
    hits = difflib.get_close_matches(guess.lower(), list(by_lower), n=limit, cutoff=cutoff)
    return [by_lower[h] for h in hits]


def workspace_not_found(name: str, names: Iterable[str]) -> WorkspaceNotFound:
    """The error for an unknown workspace name, with the names it might have meant."""
    return WorkspaceNotFound(
        f"no workspace named {name!r}", {"workspace": name, "did_you_mean": close_names(name, names)}
    )


def _numbers(s: str) -> set[int]:
    return {int(m) for m in _NUMBER.findall(s) if len(m) <= 9}


def pieces(guess: str) -> list[str]:
    """Short pieces of a guess that a document it means would likely contain somewhere in its path,
    title or aliases: the 4-letter runs of its words (a typo spoils only a few) and its numbers
    as written and zero-padded to 4. A large workspace narrows its candidates by them first."""
    stem = _EXT.sub("", posixpath.basename(guess.strip().lower().rstrip("/")))
    out: dict[str, None] = {}
    for n in _numbers(stem):
        out[str(n)] = None
        out[f"{n:04d}"] = None
    for word in _LETTERS.findall(stem):
        for i in range(max(1, len(word) - 3)):
            out[word[i : i + 4]] = None
    return list(out)[:PIECES]


def close_documents(guess: str, documents: Iterable[tuple[str, str, list[str]]], limit: int = LIMIT) -> list[str]:
    """Paths of the documents (path, title, aliases) nearest `guess`, nearest first."""
    g = guess.strip().lower()
    g_stem = _EXT.sub("", posixpath.basename(g.rstrip("/")))
    g_full = _EXT.sub("", g)
    folder = "/" in g.rstrip("/")  # a guess with a folder is compared with whole paths too
    numbers = _numbers(g_stem)
    words = set(_LETTERS.findall(g_stem))
    whole, stem_m = difflib.SequenceMatcher(), difflib.SequenceMatcher()
    whole.set_seq2(g_full)
    stem_m.set_seq2(g_stem)
    scored: list[tuple[float, str]] = []
    for path, title, aliases in documents:
        p = path.lower()
        stem = _EXT.sub("", posixpath.basename(p))
        score = max(
            _ratio(whole, _EXT.sub("", p)) if folder else 0.0,
            _ratio(stem_m, stem),
            *(_ratio(stem_m, t.lower()) for t in [title, *aliases] if t),
        )
        named = _numbers(stem) | _numbers(title.lower()) if numbers else set()
        if numbers & named:
            # the same number: a strong match, stronger when the guess's words appear too (ADR-10 → adrs/…)
            text = f"{p} {title.lower()}"
            score = max(score, 0.8 + (0.1 if words and all(w in text for w in words) else 0.0))
        elif named:
            score *= 0.8  # it names another number: ADR 100 is not ADR 10, however alike the strings
        if folder and posixpath.dirname(p) != posixpath.dirname(g):
            score *= 0.9  # the guess names a folder this document is not in: less likely what was meant
        if score >= CUTOFF:
            scored.append((score, path))
    scored.sort(key=lambda x: (-x[0], x[1]))
    # only the close ones: a guess one letter off its file gets that file, not four that pass CUTOFF
    best = scored[0][0] if scored else 0.0
    return [p for s, p in scored[:limit] if s >= best - NEAR_BEST]
