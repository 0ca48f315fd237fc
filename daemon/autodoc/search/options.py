"""search.query options → SearchOptions (pure).

Per-request options override the workspace's configuration for one search.

Runs on: any thread (pure: no I/O, no shared state).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..config import RERANK_WINDOW, RRF_K, RRF_WEIGHTS, WorkspaceConfig, normalise_fusion
from .answerable import FLOOR

STAGES = ("lexical", "semantic", "rerank")  # the default: graph is opt-in
ALL_STAGES = ("lexical", "semantic", "graph", "rerank")  # every stage, in the order they run


@dataclass(frozen=True)
class SearchOptions:
    limit: int = 10
    paths: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    facets: dict[str, tuple[str, ...]] = field(default_factory=dict)
    stages: tuple[str, ...] = STAGES
    abstract_chunk: bool = True
    demote_superseded: bool = True
    window: int = RERANK_WINDOW
    fusion: dict[str, Any] = field(default_factory=lambda: {"method": "rrf", "k": RRF_K, "weights": dict(RRF_WEIGHTS)})
    facet_counts: tuple[str, ...] = ()  # fields whose per-value counts over the matching set are wanted
    scope: str = "all"  # files, sessions (session.append) or all
    after: str | None = None  # only documents whose path sorts after this one (paging a browse)
    min_confidence: float = FLOOR  # hits under it are held back (answerable.py: the floor)
    # one passage a document will be shown (search/compact.py): the leading document's other
    # passages to show follow its first (search/passages.py)
    per_document: bool = False


def _strings(value: Any) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value)


def stages_of(opts: dict[str, Any]) -> tuple[str, ...]:
    """The stages a search's (checked) options ask for, in the order they run."""
    if "stages" in opts:
        return tuple(s for s in ALL_STAGES if s in opts["stages"]) or STAGES
    if "mode" in opts:
        return {"lexical": ("lexical",), "semantic": ("semantic",), "hybrid": STAGES}[opts["mode"]]
    return STAGES


def parse_options(opts: dict[str, Any] | None, ws: WorkspaceConfig) -> SearchOptions:
    """The options of one search over the workspace's configuration. Their types and
    ranges were checked by search.query's JSON Schema; this fills defaults and
    normalises (lowercased tags and fields, stages in the order they run)."""
    opts = opts or {}
    paths = tuple(p.strip("/") for p in _strings(opts.get("paths", [])))
    tags = tuple(t.lower().lstrip("#") for t in _strings(opts.get("tags", [])))
    facets: dict[str, tuple[str, ...]] = {}
    for fname, values in opts.get("facets", {}).items():
        if isinstance(values, (int, float, bool)):
            values = [str(values).lower() if isinstance(values, bool) else str(values)]
        facets[fname.lower()] = _strings(values)
    stages = stages_of(opts)
    retrieval = opts.get("retrieval", {})
    window = opts.get("ranker", {}).get("window", ws.ranker.get("window", RERANK_WINDOW))
    counts = tuple(dict.fromkeys(f.lower() for f in _strings(opts.get("facet_counts", []))))
    return SearchOptions(
        limit=opts.get("limit", 10),
        paths=paths,
        tags=tags,
        facets=facets,
        stages=stages,
        abstract_chunk=retrieval.get("abstract_chunk", ws.abstract_chunk),
        demote_superseded=retrieval.get("demote_superseded", ws.demote_superseded),
        window=window,
        fusion=normalise_fusion(opts.get("fusion", ws.fusion)),
        facet_counts=counts,
        scope=opts.get("scope", "all"),
        after=opts.get("after"),
        min_confidence=opts.get("min_confidence", FLOOR),
        per_document=opts.get("per_document", False),
    )
