"""Query parsing (pure): the user's text → words, phrases, a trailing prefix,
and facet candidates.

Everything the user types is words and phrases, never FTS5 syntax: operators
(AND, OR, NOT, NEAR), column filters, parentheses and stray quotes become
ordinary words. `field:value`, `-field:value` and `tag:x` are facet
*candidates*: whether a field is a facet is the workspace's business (a field
no document declares is searched as words), decided by `resolve_facets`.

Runs on: any thread (pure: no I/O, no shared state).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_FACET_RE = re.compile(r"^(-?)([A-Za-z_][A-Za-z0-9_.-]*):(.+)$")


@dataclass(frozen=True)
class Term:
    text: str
    phrase: bool = False
    prefix: bool = False


@dataclass(frozen=True)
class Facet:
    field: str  # lowercased; "tag" for tag:x
    value: str
    negate: bool = False
    raw: str = ""  # the token as typed, to fall back to words


@dataclass
class ParsedQuery:
    terms: list[Term] = field(default_factory=list)
    facets: list[Facet] = field(default_factory=list)

    @property
    def text(self) -> str:
        """The words without facets: what the semantic leg embeds."""
        return " ".join(f'"{t.text}"' if t.phrase else t.text for t in self.terms)

    @property
    def wordless(self) -> bool:
        return not self.terms


def _split(query: str) -> list[tuple[str, bool]]:
    """Split into (token, quoted) pairs; an unmatched quote quotes to the end."""
    out: list[tuple[str, bool]] = []
    i, n = 0, len(query)
    while i < n:
        c = query[i]
        if c.isspace():
            i += 1
            continue
        if c == '"':
            j = query.find('"', i + 1)
            j = n if j < 0 else j
            inner = query[i + 1 : j].strip()
            if inner:
                out.append((inner, True))
            i = j + 1
            continue
        j = i
        while j < n and not query[j].isspace() and query[j] != '"':
            j += 1
        # a quote glued to a word (field:"two words") quotes the value
        if j < n and query[j] == '"' and query[i:j].endswith(":"):
            k = query.find('"', j + 1)
            k = n if k < 0 else k
            out.append((query[i:j] + query[j + 1 : k], False))
            i = k + 1
            continue
        out.append((query[i:j], False))
        i = j
    return out


def parse_query(query: str) -> ParsedQuery:
    parsed = ParsedQuery()
    tokens = _split(query)
    for idx, (tok, quoted) in enumerate(tokens):
        if quoted:
            parsed.terms.append(Term(tok, phrase=True))
            continue
        m = _FACET_RE.match(tok)
        if m and m.group(3) not in ("", "-"):
            negate, name, value = m.group(1) == "-", m.group(2).lower(), m.group(3)
            parsed.facets.append(Facet(name, value, negate, raw=tok))
            continue
        prefix = False
        if tok.endswith("*") and idx == len(tokens) - 1:
            stripped = tok.rstrip("*")
            if stripped:
                tok, prefix = stripped, True
        parsed.terms.append(Term(tok, prefix=prefix))
    return parsed


def resolve_facets(parsed: ParsedQuery, known_fields: set[str]) -> ParsedQuery:
    """Keep facets on known fields (and tag:); turn the rest back into words."""
    terms = list(parsed.terms)
    facets: list[Facet] = []
    for f in parsed.facets:
        if f.field == "tag" or f.field in known_fields:
            facets.append(f)
        else:
            # kept whole: "foo:bar" is searched as those words, adjacent
            terms.append(Term(f.raw.lstrip("-") if f.negate else f.raw, phrase=True))
    return ParsedQuery(terms=terms, facets=facets)
