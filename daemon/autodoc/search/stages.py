"""The state the search stages (engine.py) carry from one to the next: the search's `Context`
(its snapshot and collaborators), stage 1's `Plan`, stage 2's `Legs`, stages 3 and 4's `Ranked`.

Input: none (types). Output: the dataclasses engine.py and shape.py pass along.

Runs on: the caller's thread (data only).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..store import hits as stored_hits
from ..store.filters import Filter
from ..store.interface import Snapshot
from ..store.workspaces import Workspace
from . import fusion as F
from . import ties
from .lexical.legproc import LexicalHelper
from .options import SearchOptions
from .query import ParsedQuery
from .rerank import RankFn
from .semantic.leg import Prepared, SemanticOutcome

# the semantic leg bound to this search's snapshot and workspace: prepare(filter)
PrepareSemantic = Callable[[Filter], Prepared | SemanticOutcome]


@dataclass
class Context:
    db: Snapshot  # the search's one read snapshot
    ws: Workspace
    known_fields: set[str]
    semantic: PrepareSemantic | None = None
    rank: RankFn | None = None
    rank_model: str | None = None
    pool: Any = None  # an executor for the semantic leg's model and scan; None runs them inline
    lexical_helper: LexicalHelper | None = None  # the lexical leg in a process (search/lexical/legproc.py); None: here
    facet_kinds: dict[str, str] | None = None  # declared field -> comparison kind; None: no schema
    successors: Callable[[], tuple[dict[int, int], dict[int, str]]] | None = None  # cached per generation


@dataclass
class Plan:
    """Stage 1's answer: what the search asks for, decided before any leg runs."""

    query: str
    parsed: ParsedQuery
    opts: SearchOptions
    requested: list[str]  # opts.stages, in the caller's order
    filt: Filter
    count_filt: Filter  # the filter without `after`: the facet counts describe the whole set on every page
    shown: int  # the hits read after fusion: the page, or the ranker's window when larger
    lex_top: int  # each leg's depth
    sem_top: int


@dataclass
class Legs:
    """Stage 2's answer: each leg's hits (equal scores in content order) and what was done or skipped."""

    hits: dict[str, list[F.LegHit]] = field(default_factory=dict)
    performed: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    strict: set[int] = field(default_factory=set)  # the lexical hits that held every word
    lexical_match: str | None = None
    corrections: dict[str, str] = field(default_factory=dict)  # the lexical leg's fuzzy corrections
    semantic_state: str = "off"
    semantic_tier: str | None = None
    cands: dict[int, stored_hits.Candidate] = field(default_factory=dict)  # every hit's facts, by chunk id
    keys: ties.TieKeys | None = None  # content-order keys of the candidates, read as needed
    query_vector: Any = None  # the semantic leg's query vector (full tier), for search/passages.py
    model_fp: str | None = None


@dataclass
class Ranked:
    """Stages 3 and 4's answer: the final order, and what the ranker did."""

    fused: list[F.Fused]
    doc_of: dict[int, int]  # chunk id → document id, for every candidate
    rank: dict[str, Any]  # the answer's "rank": state, model, error
    rank_scores: dict[int, float] = field(default_factory=dict)
