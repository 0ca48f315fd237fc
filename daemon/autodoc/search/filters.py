"""Candidate pre-filter (pure SQL builder): facets, tags and paths → a WHERE
fragment over `c` (chunks) and its parameters. Filters apply before ranking
limits, so a facet never empties a top-50 that had matches further down.

Values of one field are ORed (status:accepted status:proposed), different
fields are ANDed, negations exclude.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .query import Facet


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
    facets: list[Facet],
    opt_facets: dict[str, tuple[str, ...]],
    tags: tuple[str, ...],
    paths: tuple[str, ...],
    include_abstract: bool,
) -> Filter:
    clauses: list[str] = []
    params: list = []
    positive: dict[str, list[str]] = {}
    for f in facets:
        if not f.negate:
            positive.setdefault(f.field, []).append(f.value.lower())
    for name, values in opt_facets.items():
        positive.setdefault(name, []).extend(v.lower() for v in values)
    if tags:
        positive.setdefault("tag", []).extend(tags)
    for name, values in sorted(positive.items()):
        values = list(dict.fromkeys(values))
        marks = ",".join("?" * len(values))
        clauses.append(
            f"c.document_id IN (SELECT document_id FROM facets WHERE workspace_id=? AND field=? AND value IN ({marks}))"
        )
        params += [workspace_id, name, *values]
    for f in facets:
        if f.negate:
            clauses.append(
                "c.document_id NOT IN (SELECT document_id FROM facets WHERE workspace_id=? AND field=? AND value=?)"
            )
            params += [workspace_id, f.field, f.value.lower()]
    if paths:
        ors: list[str] = []
        path_params: list = [workspace_id]
        for p in paths:
            if p:
                ors.append("(d.path = ? OR substr(d.path, 1, ?) = ?)")
                path_params += [p, len(p) + 1, p + "/"]
        if ors:
            clauses.append(
                "c.document_id IN (SELECT d.id FROM documents d WHERE d.workspace_id=? AND (" + " OR ".join(ors) + "))"
            )
            params += path_params
    if not include_abstract:
        clauses.append("c.kind != 'abstract'")
    return Filter(" AND ".join(clauses), params)
