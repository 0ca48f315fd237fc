"""The graph leg (I/O, opt-in stage "graph", seed 001): documents one hop
from the lexical and semantic seeds, ranked by how many seed documents they
are linked with (either direction, any link kind: wiki, markdown,
supersedes, superseded_by), fused as a third RRF list.

Input: the seed documents in leg order (best first), the best chunk each
leg found per document, the candidate filter. Output: LegHits, best first,
score = the number of distinct seed documents linked. A document stands in
the list by its best chunk from the other legs, or else by its first chunk
that passes the filter (so facets, paths and abstract_chunk hold here too).
Ties go to the neighbour of the better-ranked seed, then the lower document id.
"""

from __future__ import annotations

import json

import apsw

from .filters import Filter
from .fusion import LegHit

GRAPH_TOP = 50


def run_graph(db: apsw.Connection, workspace_id: int, seeds: list[int], best_chunk: dict[int, int],
              filt: Filter, *, top: int = GRAPH_TOP) -> list[LegHit]:
    if not seeds:
        return []
    position = {d: i for i, d in enumerate(dict.fromkeys(seeds))}
    ids = json.dumps(list(position))
    edges = db.execute(
        """SELECT l.source_id, t.id FROM links l
           JOIN documents t ON t.workspace_id = l.workspace_id AND t.path = l.target_path
           WHERE l.workspace_id = ? AND l.target_path IS NOT NULL
             AND (l.source_id IN (SELECT value FROM json_each(?)) OR t.id IN (SELECT value FROM json_each(?)))""",
        (workspace_id, ids, ids),
    ).fetchall()
    linked: dict[int, set[int]] = {}
    for a, b in edges:
        if a == b:
            continue
        if a in position:
            linked.setdefault(b, set()).add(a)
        if b in position:
            linked.setdefault(a, set()).add(b)
    if not linked:
        return []
    order = sorted(linked, key=lambda d: (-len(linked[d]), min(position[s] for s in linked[d]), d))
    need = [d for d in order if d not in best_chunk]
    first: dict[int, int] = {}
    if need:
        where = f" AND {filt.sql}" if filt.sql else ""
        for cid, doc in db.execute(
            f"""SELECT c.id, c.document_id FROM chunks c
                WHERE c.workspace_id = ? AND c.document_id IN (SELECT value FROM json_each(?)){where}
                ORDER BY c.document_id, c.ordinal""",
            (workspace_id, json.dumps(need), *filt.params),
        ):
            first.setdefault(doc, cid)
    out: list[LegHit] = []
    for d in order:
        cid = best_chunk.get(d, first.get(d))
        if cid is not None:  # a neighbour the filter excludes has no chunk here
            out.append(LegHit(cid, float(len(linked[d]))))
        if len(out) >= top:
            break
    return out
