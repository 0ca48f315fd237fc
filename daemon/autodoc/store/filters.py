"""Candidate pre-filter (pure SQL builder): facets, tags and paths → a WHERE
fragment over `c` (chunks) and its parameters. Filters apply before ranking
limits, so a facet never empties a top-50 that had matches further down.

Values of one field are ORed (status:accepted status:proposed), ranges of
one field are ANDed (adr:>=5 adr:<=9), different fields are ANDed, negations
exclude. Values are compared as the workspace schema types the field
(fmschema/values.py: `adr:0042` is the number 42, `date:>=2025-01-01` a date).

Runs on: any thread (pure: no I/O, no shared state).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ..fmschema.values import condition, is_range
from .sessions import SESSION_RANGE


class FacetTerm(Protocol):
    """One facet of a query, `field:value` or `-field:value` (search/query.py's Facet): the store
    names the shape it reads, so it imports nothing of search/."""

    @property
    def field(self) -> str: ...

    @property
    def value(self) -> str: ...

    @property
    def negate(self) -> bool: ...


# A Filter's SQL is written over a chunk row `c` (c.document_id, c.kind). A listing of documents
# (a query of facets only) must also see the documents that have no chunk at all (all frontmatter,
# no body): this gives each of them one row of the same shape, of kind 'document', id NULL.
# One parameter: the workspace id.
CHUNKLESS_ROWS = (
    "SELECT NULL AS id, d0.id AS document_id, d0.workspace_id AS workspace_id, 'document' AS kind "
    "FROM documents d0 WHERE d0.workspace_id = ? AND NOT EXISTS (SELECT 1 FROM chunks x WHERE x.document_id = d0.id)"
)


@dataclass
class Filter:
    sql: str = ""
    params: list = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.sql


def build_filter(
    workspace_id: int,
    *,
    facets: Sequence[FacetTerm],
    opt_facets: dict[str, tuple[str, ...]],
    tags: tuple[str, ...],
    paths: tuple[str, ...],
    include_abstract: bool,
    kinds: dict[str, str] | None = None,
    scope: str = "all",
    after: str | None = None,
) -> Filter:
    """kinds: each declared field's comparison kind (string | number | date |
    boolean) from the workspace schema, or None when there is no schema.
    scope: files, sessions (store/sessions.py) or all. after: only documents whose path sorts
    after this one (a browse's next page)."""
    clauses: list[str] = []
    params: list = []
    positive: dict[str, list[str]] = {}
    for f in facets:
        if not f.negate:
            positive.setdefault(f.field, []).append(f.value)
    for name, values in opt_facets.items():
        positive.setdefault(name, []).extend(values)
    if tags:
        positive.setdefault("tag", []).extend(tags)

    def kind(name: str) -> str | None:
        if name == "tag":
            return "string"
        return None if kinds is None else kinds.get(name, "string")

    sub = "c.document_id {} (SELECT document_id FROM facets WHERE workspace_id=? AND field=? AND {})"
    for name, wanted in sorted(positive.items()):
        literal: list[str] = []
        typed: list[tuple[str, list]] = []
        for v in dict.fromkeys(wanted):
            sql, ps = condition(kind(name), v)
            if is_range(v) and sql != "value = ?":
                # ranges of one field are ANDed (adr:>=5 adr:<=9), each its own clause
                clauses.append(sub.format("IN", sql))
                params += [workspace_id, name, *ps]
            elif sql == "value = ?":
                literal.append(ps[0])
            else:
                typed.append((sql, ps))
        ors = [f"value IN ({','.join('?' * len(literal))})"] if literal else []
        ors += [sql for sql, _ in typed]
        if ors:
            clauses.append(sub.format("IN", ors[0] if len(ors) == 1 else "(" + " OR ".join(ors) + ")"))
            params += [workspace_id, name, *literal, *(p for _, ps in typed for p in ps)]
    for f in facets:
        if f.negate:
            sql, ps = condition(kind(f.field), f.value)
            clauses.append(sub.format("NOT IN", sql))
            params += [workspace_id, f.field, *ps]
    if paths:
        path_ors: list[str] = []
        path_params: list = [workspace_id]
        for p in paths:
            if p:
                path_ors.append("(d.path = ? OR substr(d.path, 1, ?) = ?)")
                path_params += [p, len(p) + 1, p + "/"]
        if path_ors:
            clauses.append(
                "c.document_id IN (SELECT d.id FROM documents d WHERE d.workspace_id=? AND ("
                + " OR ".join(path_ors)
                + "))"
            )
            params += path_params
    if scope in ("files", "sessions"):
        op = "NOT IN" if scope == "files" else "IN"
        clauses.append(
            f"c.document_id {op} (SELECT d.id FROM documents d WHERE d.workspace_id=? AND d.{SESSION_RANGE})"
        )
        params.append(workspace_id)
    if after is not None:
        clauses.append("c.document_id IN (SELECT d.id FROM documents d WHERE d.workspace_id=? AND d.path > ?)")
        params += [workspace_id, after]
    if not include_abstract:
        clauses.append("c.kind != 'abstract'")
    return Filter(" AND ".join(clauses), params)
