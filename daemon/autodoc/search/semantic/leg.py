"""The semantic leg: the query's embedding against the workspace's vectors.

Which model serves: the configured one, or while a new model fills its
vectors (a switch), the previous one, as long as it can still embed the
query; when none can, the leg says why instead of answering.

Runs on: `prepare` on the search's thread, reading the search's one
snapshot (which model is active, the vectors, the filter's chunks); `run`
on a leg thread, beside the lexical leg: the query's embedding and an
in-memory scan touch no connection; on a PostgreSQL store with pgvector the
scan is the store's, a query on the search's own snapshot (store_side.py).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ...config import RRF_K
from ...embed.base import ProviderDown
from ...embed.instant import MIN_BACKLOG, OTHER_FUSION_SCALE, InstantTiers, rrf_weight
from ...embed.providers import Providers
from ...embed.static import TIER_FULL, TIER_INSTANT
from ...errors import AutodocError, EmbedFailed, Switching, Unsupported
from ...store import hits as stored_hits
from ...store import vectors as stored
from ...store.filters import Filter
from ...store.interface import Snapshot
from ...store.workspaces import Workspace
from ..fusion import CONVEX_WEIGHTS, LegHit
from .vector_cache import Searchable, VectorCache

NO_MODEL_REASON = "no embedding model is configured for this workspace"
SWITCHING_REASON = "a new embedding model is filling"
PARTIAL_NOTE = "some documents are still being embedded and answer lexically until they are done"
INSTANT_NOTE = (
    "the embedding model is still filling: the instant tier (a distilled token table) answers until it is done"
)


def instant_fusion(fusion: dict[str, Any]) -> dict[str, Any]:
    """The fusion options with the semantic leg weighed for the instant tier (embed/instant.py
    says how; an absent weight or k is the method's default: engine.py and fusion.py)."""
    weights = dict(fusion.get("weights") or {})
    method = fusion.get("method", "rrf")
    default = {"weighted": 0.6, "convex": CONVEX_WEIGHTS["semantic"]}.get(method, 1.0)
    if method == "rrf":
        bound = rrf_weight(fusion.get("k", RRF_K), weights.get("lexical", 1.0))
        weights["semantic"] = min(weights.get("semantic", default), bound)
    else:
        weights["semantic"] = round(weights.get("semantic", default) * OTHER_FUSION_SCALE, 6)
    return {**fusion, "weights": weights}


@dataclass
class SemanticOutcome:
    """What the semantic leg did. hits is None when it could not run."""

    hits: list[LegHit] | None
    state: str  # ready | partial | switching | off | failed
    reason: str | None = None  # why it was skipped (or why coverage is partial)
    error: AutodocError | None = None  # raised instead when semantic was the only leg asked for
    model: str | None = None
    tier: str | None = None  # full | instant: which vectors answered (None: none did)
    # the query's vector and the model whose stored vectors it compares with (the full tier only:
    # an instant tier's table is not stored per chunk): search/passages.py scores a whole document
    query_vector: np.ndarray | None = None
    model_fp: str | None = None


def _switching(detail: str = "") -> SemanticOutcome:
    return SemanticOutcome(
        None,
        "switching",
        SWITCHING_REASON,
        Switching(
            "semantic search is unavailable while a new embedding model is filling" + (f" ({detail})" if detail else "")
        ),
    )


class QueryModel(Protocol):
    """What the leg needs of the model that serves (a provider, or the instant tier that stands in for one)."""

    name: str

    @property
    def dim(self) -> int: ...

    @property
    def fingerprint(self) -> str: ...

    def embed_query(self, text: str) -> np.ndarray: ...


@dataclass
class Prepared:
    """Everything the leg read from the snapshot; `run` needs no connection."""

    leg: SemanticLeg
    provider: QueryModel
    vectors: Searchable  # in memory, or the store's own search (vector_cache.py: searchable)
    allowed: np.ndarray | None
    state: str  # ready | partial | switching
    tier: str = TIER_FULL
    fp: str | None = None  # the serving model's fingerprint

    def run(self, text: str, top: int) -> SemanticOutcome:
        with self.leg._count:
            self.leg._searching += 1
        try:
            try:
                qvec = self.provider.embed_query(text)
            except ProviderDown as e:
                if self.state == "switching":  # the old model is gone and the new one is not filled
                    return _switching(str(e))
                why = f"the query could not be embedded: {e}"
                return SemanticOutcome(None, "failed", why, EmbedFailed(why))
            hits = self.vectors.search(qvec, top, self.allowed)
        finally:
            with self.leg._count:
                self.leg._searching -= 1
        note = PARTIAL_NOTE if self.state == "partial" else None
        if self.tier == TIER_INSTANT:
            note = INSTANT_NOTE
        return SemanticOutcome(
            [LegHit(int(i), round(float(s), 6)) for i, s in hits],
            self.state,
            note,
            None,
            model=self.provider.name,
            tier=self.tier,
            query_vector=qvec if self.tier == TIER_FULL else None,
            model_fp=self.fp if self.tier == TIER_FULL else None,
        )


class SemanticLeg:
    def __init__(
        self,
        providers: Providers,
        cache: VectorCache,
        pending: Callable[[Snapshot, int, str], int],
        instant: InstantTiers | None = None,
    ):
        self.providers = providers
        self.instant = instant
        self.cache = cache
        self._pending = pending  # chunks still without a vector (the embed queue's cached count)
        self._searching = 0
        self._count = threading.Lock()

    @property
    def busy(self) -> bool:
        """A query is being embedded or scanned now (the embed queue yields to it)."""
        return self._searching > 0

    def prepare(
        self, db: Snapshot, ws: Workspace, embedding: dict[str, Any], filt: Filter, since: int | None = None
    ) -> Prepared | SemanticOutcome:
        """Decide which model serves and read what it needs, or say why the leg cannot run.
        since: the vector cache's marker() from before `db`'s snapshot (VectorCache.get)."""
        target, reason = self.providers.target(embedding)
        if target is None and reason is None:
            return SemanticOutcome(
                None,
                "off",
                NO_MODEL_REASON,
                Unsupported("semantic search needs an embedding model, and this workspace has none"),
            )
        active = stored.active_model(db, ws.id)
        target_fp = None
        if target is not None:
            try:
                target_fp = target.fingerprint
            except ProviderDown as e:
                reason = f"the embedding provider is unavailable: {e}"
                target = None
        if target is None:
            # the configured model cannot run; nothing else may stand in for it
            return SemanticOutcome(None, "failed", reason, EmbedFailed(reason or "embedding failed"))
        waiting = 0
        provider: QueryModel
        if active is not None and active.fingerprint != target_fp:
            # old vectors keep serving when their model can still embed the query
            try:
                serving = self.providers.get(active.config or {})
            except ProviderDown:
                serving = None
            if serving is None or serving.fingerprint != active.fingerprint:
                return _switching()
            fp, provider, state = active.fingerprint, serving, "switching"
        else:
            assert target_fp is not None  # read with target
            fp, provider = target_fp, target
            waiting = self._pending(db, ws.id, fp)
            state = "partial" if waiting else "ready"
        tier = TIER_FULL
        fast_fp = self.instant.fingerprint_for(provider) if self.instant is not None and state == "partial" else None
        # every chunk has an instant vector and the model's are still filling: the tier answers (the
        # count is looked at only for a backlog the tier fills, and the table loaded only then)
        if fast_fp and self.instant is not None and waiting >= MIN_BACKLOG and not self._pending(db, ws.id, fast_fp):
            fast = self.instant.get(provider, build=False)
            if fast is not None:
                fp, provider, tier = fast.fingerprint, fast, TIER_INSTANT
        vectors = self.cache.searchable(db, ws.id, fp, provider.dim, since)
        allowed = None
        if not filt.empty:
            allowed = np.array(stored_hits.filtered_chunk_ids(db, ws.id, filt), dtype=np.int64)
        return Prepared(self, provider, vectors, allowed, state, tier, fp)

    def search(
        self, db: Snapshot, ws: Workspace, embedding: dict[str, Any], text: str, filt: Filter, top: int
    ) -> SemanticOutcome:
        """prepare and run on this thread (a leg alone, or a study)."""
        planned = self.prepare(db, ws, embedding, filt)
        return planned.run(text, top) if isinstance(planned, Prepared) else planned
