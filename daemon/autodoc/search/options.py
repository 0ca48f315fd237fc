"""search.query options → a validated SearchOptions (pure).

Per-request options override the workspace's configuration for one search.
Every problem raises InvalidParams naming the field, e.g. `opts.limit`.

Runs on: any thread (pure: no I/O, no shared state).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..config import RERANK_WINDOW, RRF_K, RRF_WEIGHTS, WorkspaceConfig, check_window
from ..errors import InvalidParams

FUSION_METHODS = ("rrf", "convex", "weighted")
STAGES = ("lexical", "semantic", "rerank")  # the default: graph is opt-in
ALL_STAGES = ("lexical", "semantic", "graph", "rerank")  # every stage, in the order they run
MAX_LIMIT = 200
MAX_FACET_COUNTS = 20


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


def _str_list(name: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidParams(name, "must be a list of strings")
    return tuple(value)


def _bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise InvalidParams(name, "must be a boolean")
    return value


def check_fusion(name: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InvalidParams(name, "must be an object")
    method = value.get("method", "rrf")
    if method not in FUSION_METHODS:
        raise InvalidParams(f"{name}.method", 'must be "rrf", "convex" or "weighted"')
    out: dict[str, Any] = {"method": method}
    if method == "rrf":
        k = value.get("k", RRF_K)
        if not isinstance(k, int) or isinstance(k, bool) or not (1 <= k <= 1000):
            raise InvalidParams(f"{name}.k", "must be an integer in 1..1000")
        out["k"] = k
    weights = value.get("weights")
    if weights is not None:
        if not isinstance(weights, dict) or not all(
            k in ("lexical", "semantic") and isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 10
            for k, v in weights.items()
        ):
            raise InvalidParams(f"{name}.weights", "must map lexical/semantic to numbers in 0..10")
        out["weights"] = {k: float(v) for k, v in weights.items()}
    if method == "weighted":
        t = value.get("threshold", 0.2)
        if not isinstance(t, (int, float)) or isinstance(t, bool) or not (0 <= t <= 1):
            raise InvalidParams(f"{name}.threshold", "must be a number in 0..1")
        out["threshold"] = float(t)
    unknown = set(value) - {"method", "k", "weights", "threshold"}
    if unknown:
        raise InvalidParams(f"{name}.{sorted(unknown)[0]}", "unknown fusion option")
    return out


def parse_options(opts: Any, ws: WorkspaceConfig) -> SearchOptions:
    if opts is None:
        opts = {}
    if not isinstance(opts, dict):
        raise InvalidParams("opts", "must be an object")
    known = {"limit", "paths", "tags", "facets", "stages", "mode", "retrieval", "ranker", "fusion", "facet_counts"}
    for k in opts:
        if k not in known:
            raise InvalidParams(f"opts.{k}", "unknown search option")
    limit = opts.get("limit", 10)
    if not isinstance(limit, int) or isinstance(limit, bool) or not (1 <= limit <= MAX_LIMIT):
        raise InvalidParams("opts.limit", f"must be an integer in 1..{MAX_LIMIT}")
    paths = tuple(p.strip("/") for p in _str_list("opts.paths", opts.get("paths", [])))
    tags = tuple(t.lower().lstrip("#") for t in _str_list("opts.tags", opts.get("tags", [])))
    facets_raw = opts.get("facets", {})
    if not isinstance(facets_raw, dict):
        raise InvalidParams("opts.facets", "must be an object mapping fields to values")
    facets: dict[str, tuple[str, ...]] = {}
    for fname, values in facets_raw.items():
        if isinstance(values, (int, float, bool)):
            values = [str(values).lower() if isinstance(values, bool) else str(values)]
        facets[fname.lower()] = _str_list(f"opts.facets.{fname}", values)

    stages: tuple[str, ...]
    if "stages" in opts:
        raw = _str_list("opts.stages", opts["stages"])
        for s in raw:
            if s not in ALL_STAGES:
                raise InvalidParams("opts.stages", f"unknown stage {s!r}: stages are lexical, semantic, graph, rerank")
        stages = tuple(s for s in ALL_STAGES if s in raw) or STAGES
        if "lexical" not in stages and "semantic" not in stages:
            raise InvalidParams("opts.stages", "needs at least one of lexical and semantic")
    elif "mode" in opts:
        mode = opts["mode"]
        table = {"lexical": ("lexical",), "semantic": ("semantic",), "hybrid": STAGES}
        if mode not in table:
            raise InvalidParams("opts.mode", 'must be "lexical", "semantic" or "hybrid"')
        stages = table[mode]
    else:
        stages = STAGES

    retrieval = opts.get("retrieval", {})
    if not isinstance(retrieval, dict):
        raise InvalidParams("opts.retrieval", "must be an object")
    for k in retrieval:
        if k not in ("abstract_chunk", "demote_superseded"):
            raise InvalidParams(f"opts.retrieval.{k}", "unknown retrieval option")
    abstract = _bool("opts.retrieval.abstract_chunk", retrieval.get("abstract_chunk", ws.abstract_chunk))
    demote = _bool("opts.retrieval.demote_superseded", retrieval.get("demote_superseded", ws.demote_superseded))

    ranker = opts.get("ranker", {})
    if not isinstance(ranker, dict):
        raise InvalidParams("opts.ranker", "must be an object")
    for k in ranker:
        if k != "window":
            raise InvalidParams(f"opts.ranker.{k}", "unknown ranker option")
    window = check_window("opts.ranker.window", ranker.get("window", ws.ranker.get("window", RERANK_WINDOW)))
    fusion = check_fusion("opts.fusion", opts.get("fusion", ws.fusion))
    counts = tuple(dict.fromkeys(f.lower() for f in _str_list("opts.facet_counts", opts.get("facet_counts", []))))
    if len(counts) > MAX_FACET_COUNTS:
        raise InvalidParams("opts.facet_counts", f"at most {MAX_FACET_COUNTS} fields")
    return SearchOptions(limit, paths, tags, facets, stages, abstract, demote, window, fusion, counts)
