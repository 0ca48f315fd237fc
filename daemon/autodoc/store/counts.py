"""Facet counts (I/O): for the whole matching set of a search, how many
documents carry each value of the requested fields — what a picker needs to
offer refinements ("accepted 4, proposed 1").

The matching set is every document (within the facet, tag and path filter)
that has a chunk matching the query's words — the way the lexical leg
matched them, all words or, when it relaxed, any — plus every document
another performed leg (semantic, graph) returned. For a wordless query it is
every document the filter admits. Not just the page of hits: `limit` does
not change the counts. Each document counts once per value; a list field
counts each of its values. Values are the stored canonical text (lowercase;
integers as digits, dates as YYYY-MM-DD); order is count descending, then value.

Runs on: the search's thread, on its snapshot.
"""

from __future__ import annotations

from .filters import CHUNKLESS_ROWS, Filter
from .interface import Snapshot
from .lexical.matches import matching_chunks
from .sql import all_rows, id_rows


def facet_counts(
    db: Snapshot,
    workspace_id: int,
    fields: tuple[str, ...],
    filt: Filter,
    *,
    match: str | None,
    extra_docs: set[int],
    wordless: bool = False,
) -> dict[str, dict[str, int]]:
    if not fields:
        return {}
    where = f" AND {filt.sql}" if filt.sql else ""
    parts: list[str] = []
    params: list = []
    if wordless:
        parts.append(f"SELECT c.document_id FROM chunks c WHERE c.workspace_id = ?{where}")
        params += [workspace_id, *filt.params]
        # the listing lists documents without a chunk too (store/hits.py matching_documents)
        parts.append(f"SELECT c.document_id FROM ({CHUNKLESS_ROWS}) c WHERE c.workspace_id = ?{where}")
        params += [workspace_id, workspace_id, *filt.params]
    elif match is not None:
        matched, arg = matching_chunks(db, match)  # FTS5's MATCH, or the postings' (store/lexical/matches.py)
        parts.append(f"{matched} AND c.workspace_id = ?{where}")
        params += [arg, workspace_id, *filt.params]
    if extra_docs:
        table, arg = id_rows(db, sorted(extra_docs))
        parts.append(table)
        params.append(arg)
    out: dict[str, dict[str, int]] = {f: {} for f in fields}
    if not parts:
        return out
    marks = ",".join("?" * len(fields))
    rows = all_rows(
        db,
        f"""WITH m(id) AS ({" UNION ".join(parts)})
            SELECT field, value, COUNT(DISTINCT document_id) FROM facets
            WHERE workspace_id = ? AND field IN ({marks}) AND document_id IN (SELECT id FROM m)
            GROUP BY field, value""",
        (*params, workspace_id, *fields),
    )
    for field, value, n in sorted(rows, key=lambda r: (r[0], -r[2], r[1])):
        out[field][value] = n
    return out
