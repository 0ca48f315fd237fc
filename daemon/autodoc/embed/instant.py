"""The instant tier as a provider: the bundled model's distilled token table
(embed/static.py) behind the same interface as the model, so the embed queue
writes its vectors and the semantic leg searches them like any model's, under
their own fingerprint (the two spaces never mix: a query is embedded by the
tier whose vectors it is compared with).

Where the table lives: one file per model fingerprint in the user cache dir
(``$XDG_CACHE_HOME/autodoc/instant/<fp>.npy``, Settings.instant_dir), not in the store. It is a
function of the model alone — the same 22 MB for every store on the machine —
and can always be rebuilt, so it is a cache of the model, not knowledge-base
data: the one-store-file rule keeps every workspace's own data (the instant
vectors included) in the store. Written atomically (temp file + rename).

When it serves: only for the bundled ONNX model, and only while a big share
of a workspace is pending (``worth_it``): the tier must embed every chunk of
the workspace to answer at all, which at ~1,000/s against the model's ~25/s
pays off only when the backlog is more than a few per cent of the chunks.

Runs on: the embed queue's thread (building the table, embedding chunks); a
search thread (one query). Building is once per process under a lock.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .base import BaseProvider, ProviderDown
from .static import (
    DISTIL_BATCH,
    TIER_INSTANT,
    StaticEmbedder,
    distil_table,
    has_ranked_vocab,
    tier_fingerprint,
    zipf_weights,
)

log = logging.getLogger("autodoc.embed")

WEIGHTING = "zipf"  # chosen on SciFact train queries: docs/benchmarks/instant_tier.md (static.zipf_weights)
# The instant leg's weight in an RRF hybrid. On SciFact's train queries every weight from 0.6
# down to 0.05 (of lexical's 1.0) left the hybrid under lexical alone (docs/benchmarks/
# instant_tier.md). So the leg weighs too little to reorder the lexical leg's first GUARD_TOP
# hits or to put a hit of its own among them: when the lexical leg finds GUARD_TOP hits, the
# hybrid's first GUARD_TOP are exactly its own when their coverage weights are equal. Unequal
# weights (search/lexical/leg.py) bring two neighbours' shares closer than the bound assumes, so
# there the guarantee is "nearly": a swap of near-equal neighbours is possible. Below them, and
# for a query whose words match little, the tier adds what the lexical leg missed.
GUARD_TOP = 10
# Other fusion methods have no such bound: their instant weight is this share of the configured one.
OTHER_FUSION_SCALE = 0.125
MIN_BACKLOG = 256  # below this the model catches up in seconds
MIN_SHARE = 0.05  # backlog / chunks above which embedding every chunk again pays off


def weighting(model: Any) -> str:
    """WEIGHTING where the model's vocabulary allows it (the bundled one does), else the plain mean."""
    tok = getattr(model, "_count_tok", None)
    return WEIGHTING if WEIGHTING != "zipf" or (tok is not None and has_ranked_vocab(tok)) else "mean"


def rrf_weight(k: float, lexical: float) -> float:
    """The largest instant weight (with a 10% margin) that keeps the guarantee above: RRF adds
    w/(k+r) per leg, the instant leg adds at most w/(k+1), and two lexical neighbours within
    the first GUARD_TOP ranks differ by at least lexical/((k+GUARD_TOP)(k+GUARD_TOP+1)), while
    a hit of the tier's own (at most w/(k+1)) stays under the lexical hit at GUARD_TOP
    (lexical/(k+GUARD_TOP)). A lexical hit's coverage weight below 1 can bring two neighbours
    closer than that: then the guarantee holds only nearly."""
    return round(0.9 * lexical * (k + 1) / ((k + GUARD_TOP) * (k + GUARD_TOP + 1)), 6)


def worth_it(pending: int, total: int) -> bool:
    return pending >= MIN_BACKLOG and pending >= MIN_SHARE * total


class InstantProvider(BaseProvider):
    kind = "instant"

    def __init__(self, model: Any, table: np.ndarray):
        super().__init__()
        self.model = model
        self.name = f"{model.name} (instant tier)"
        self.max_tokens = model.max_tokens
        self._fp = tier_fingerprint(model.fingerprint, weighting(model))
        special = [*model._open, *model._close, 0]  # [CLS], [SEP], [PAD]
        weights = zipf_weights(table.shape[0]) if weighting(model) == "zipf" else None
        self._static = StaticEmbedder(table, model._count_tok, special, weights)

    @property
    def dim(self) -> int:
        return self._static.dim

    @property
    def fingerprint(self) -> str:
        return self._fp

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return self.model.count_tokens(texts)

    def portable_counter(self):
        return self.model.portable_counter()

    def _embed(self, texts: list[str]) -> tuple[np.ndarray, int]:
        return self._static.embed_counted(texts)

    def forget_words(self) -> None:
        """The fill is done: the word cache would only serve queries (embed/static.py)."""
        self._static.forget_words()

    def _describe_extra(self) -> dict[str, Any]:
        return {"tier": TIER_INSTANT, "model_fingerprint": self.model.fingerprint}


def table_path(model: Any, cache_dir: Path) -> Path:
    return cache_dir / f"{model.fingerprint}.npy"


def build_table(model: Any, cache_dir: Path) -> Path:
    """Distil the model's table and write it to the cache (atomically)."""
    path = table_path(model, cache_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    table = distil_table(
        model._session,
        model._output,
        model._count_tok.get_vocab_size(),
        model._open[0],
        model._close[0],
        feed_types=model._feed_types,
        # a graph that runs one text at a time (embed/graph.py) distils one token at a time: batched,
        # a token's row would depend on the tokens beside it
        batch=DISTIL_BATCH if getattr(model, "run_batch", 2) > 1 else 1,
    )
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        np.save(f, table)
    os.replace(tmp, path)
    return path


class InstantTiers:
    """The instant provider of each model that has one, built or loaded once."""

    def __init__(self, cache_dir: Path):
        self.cache_dir = cache_dir
        self._lock = threading.Lock()
        self._tiers: dict[str, InstantProvider | None] = {}
        self._building = threading.Lock()

    def fingerprint_for(self, model: Any) -> str | None:
        """The tier's vector key for a model that has one (no table needed)."""
        if getattr(model, "kind", None) != "onnx":
            return None
        return tier_fingerprint(model.fingerprint, weighting(model))

    def get(self, model: Any, build: bool = True) -> InstantProvider | None:
        """The model's tier, loading its table from the cache or (build) distilling
        it; None for a model without one (only the bundled ONNX model has one).
        A search (build False) never waits for a build: that holds its own lock."""
        if getattr(model, "kind", None) != "onnx" or not hasattr(model, "_session"):
            return None
        fp = model.fingerprint
        with self._lock:
            if fp in self._tiers:
                return self._tiers[fp]
        table = self._load(model)
        if table is None:
            if not build:
                return None
            with self._building:
                with self._lock:
                    if fp in self._tiers:
                        return self._tiers[fp]
                try:
                    log.info("building the instant tier's table for %s (once per model)", model.name)
                    table = np.load(build_table(model, self.cache_dir), allow_pickle=False)
                except (OSError, ProviderDown, RuntimeError) as e:
                    log.warning("no instant tier: %s", e)
                    with self._lock:
                        self._tiers[fp] = None
                    return None
        with self._lock:
            return self._tiers.setdefault(fp, InstantProvider(model, table))

    def forget_words(self, model: Any) -> None:
        """A fill is done: drop the tier's word cache, if its table is loaded (never loads it)."""
        with self._lock:
            tier = self._tiers.get(model.fingerprint)
        if tier is not None:
            tier.forget_words()

    def _load(self, model: Any) -> np.ndarray | None:
        path = table_path(model, self.cache_dir)
        try:
            if not path.is_file():
                return None
            table = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as e:
            log.warning("instant table %s unreadable (%s); building it again", path, e)
            return None
        if table.ndim != 2 or table.shape[0] != model._count_tok.get_vocab_size():
            return None
        return table
