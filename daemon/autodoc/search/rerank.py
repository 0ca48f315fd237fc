"""The rerank step's binding to a workspace's ranker: a function from the
query and the window's passages to scores, or the reason there are none.

Runs on: the search's thread (the model call included; a cancelled search
stops it between batches through `cancel`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidParams
from ..rerank.base import RankerCancelled, RankerDown, default_timeout
from ..rerank.rankers import Rankers, shown_model

NO_RANKER_REASON = "no ranker is configured for this workspace"


@dataclass
class RankOutcome:
    scores: list[float] | None
    state: str  # ready | failed | off
    model: str | None
    error: str = ""


RankFn = Callable[[str, list[str]], RankOutcome]


def rank_step(
    rankers: Rankers, cfg: dict[str, Any], cancel: threading.Event | None
) -> tuple[RankFn | None, str | None]:
    """(rank function, model name); (None, None) when no ranker is configured."""
    try:
        ranker = rankers.get(cfg)
    except InvalidParams as e:  # a model folder that vanished since it was configured
        why, model = e.message, shown_model(cfg)

        def broken(query: str, passages: list[str]) -> RankOutcome:
            return RankOutcome(None, "failed", model, why)

        return broken, model
    if ranker is None:
        return None, None

    def rank(query: str, passages: list[str]) -> RankOutcome:
        timeout = cfg.get("timeout") or default_timeout(len(passages))
        try:
            scores = ranker.score(query, passages, timeout=timeout, cancel=cancel)
        except RankerCancelled as e:
            return RankOutcome(None, "failed", ranker.name, f"cancelled: {e}")
        except RankerDown as e:
            return RankOutcome(None, "failed", ranker.name, str(e))
        return RankOutcome(list(scores), "ready", ranker.name)

    return rank, ranker.name
