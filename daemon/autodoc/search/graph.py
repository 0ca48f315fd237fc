"""The graph leg (opt-in stage "graph"): documents one hop
from the lexical and semantic seeds, ranked by how many seed documents they
are linked with (either direction, any link kind: wiki, markdown,
supersedes, superseded_by), fused as a third RRF list.

Input: the seed documents in leg order (best first), the best chunk each
leg found per document, the candidate filter. Output: LegHits, best first,
score = the number of distinct seed documents linked. A document stands in
the list by its best chunk from the other legs, or else by its first chunk
that passes the filter (so facets, paths and abstract_chunk hold here too).
Ties go to the neighbour of the better-ranked seed, then the document path
(not its id, which follows the store's history: search/ties.py).

Runs on: the search's thread, on its snapshot.
"""

from __future__ import annotations

from collections import Counter

from ..store.filters import Filter
from ..store.hits import document_paths, first_chunks, link_edges
from ..store.interface import Snapshot
from .fusion import LegHit

GRAPH_TOP = 50


def run_graph(
    db: Snapshot,
    workspace_id: int,
    seeds: list[int],
    best_chunk: dict[int, int],
    filt: Filter,
    *,
    top: int = GRAPH_TOP,
) -> list[LegHit]:
    if not seeds:
        return []
    position = {d: i for i, d in enumerate(dict.fromkeys(seeds))}
    edges = link_edges(db, workspace_id, list(position))
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
    rank = {d: (-len(linked[d]), min(position[s] for s in linked[d])) for d in linked}
    alike = Counter(rank.values())
    tied = [d for d in linked if alike[rank[d]] > 1]
    paths = document_paths(db, tied) if tied else {}
    order = sorted(linked, key=lambda d: (*rank[d], paths.get(d, ""), d))
    need = [d for d in order if d not in best_chunk]
    first = first_chunks(db, workspace_id, need, filt) if need else {}
    out: list[LegHit] = []
    for d in order:
        cid = best_chunk.get(d, first.get(d))
        if cid is not None:  # a neighbour the filter excludes has no chunk here
            out.append(LegHit(cid, float(len(linked[d]))))
        if len(out) >= top:
            break
    return out
