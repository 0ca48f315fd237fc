"""What a workspace's semantic coverage is, and what is coming.

Input: a read snapshot, the workspace, its embedding config, the loaded
providers and the embed queue. Output: the `embedding` object of
workspace.status — coverage (embedded, pending, total), the state searches
report, why it is not ready — plus what an agent needs so as not to poll
blindly: the model's state (none | unloaded | loading | ready | failed,
embed/providers.py), the queue's measured rate and an ETA in seconds.

A model that is loading is never waited for: the coverage comes from the
vectors of the model that last served (the store's active model); with none
pending the state is ready (a search waits for the load, then answers in full)
and `reason` says the model is loading. With
`load` false (server.info) a model not yet asked for in this process is not
loaded either, nor is one that failed to load tried again.

While the model's backlog is large the instant tier (embed/instant.py) first
gives every chunk a vector of its own, and searches answer from it until the
model is done: `instant` says how far that fill is (filling) or that it
serves (serving), or is null when the tier plays no part.

The ETA is pending ÷ the rate the embed queue measured in this process (a
running average over its recent batches, embedding and writing): null until a
batch has been measured (while the model loads, or before the first batch),
0 when nothing is pending. It assumes the queue works on this workspace
alone; other workspaces filling at the same time share it (server.info's
ETA covers them all).

Runs on: the caller's thread, on the snapshot it passes.
"""

from __future__ import annotations

import math
from typing import Any

from ..store import vectors as stored
from ..store.interface import Snapshot
from ..store.workspaces import Workspace, chunk_count
from .instant import MIN_BACKLOG
from .providers import Providers
from .queue import EmbedQueue

NO_MODEL_REASON = "no embedding model is configured for this workspace"


def _eta(pending: int, rate: float | None) -> float | None:
    if not pending:
        return 0.0
    # rounded up to the tenth: 16 chunks at 400 a second are not "0.0 s away"
    return None if not rate else math.ceil(round(pending / rate * 10, 6)) / 10  # 3 / 0.3 is 10.0, not 10.1


def _waiting(pending: int) -> str:
    return "1 chunk waits for its vector" if pending == 1 else f"{pending} chunks wait for vectors"


def instant_status(
    db: Snapshot, ws: Workspace, provider: Any, model_pending: int, queue: EmbedQueue
) -> dict[str, Any] | None:
    """The instant tier's part in the workspace's fill: {state: filling | serving, embedded,
    pending, rate, eta_seconds} (its own vectors), or None when it plays none — no tier, the
    model has (nearly) every vector, the backlog was too small for the tier, or this process
    did not run the fill (a reader's status knows only what the store says)."""
    tiers = queue.instant
    phase, wrote = queue.instant_fill(ws.id)
    if tiers is None or model_pending < MIN_BACKLOG or (phase != "active" and not wrote):
        return None
    fp = tiers.fingerprint_for(provider)
    if fp is None:
        return None
    pending = queue.pending(db, ws.id, fp)  # cached until the workspace's vectors next change
    if pending and phase != "active":
        return None  # chunks came after the tier's fill: search.query answers from the model (semantic.py)
    rate = queue.rate(fp)
    return {
        "state": "filling" if pending else "serving",
        "embedded": chunk_count(db, ws.id) - pending,
        "pending": pending,
        "rate": rate,
        "eta_seconds": _eta(pending, rate),
    }


def embedding_status(
    db: Snapshot,
    ws: Workspace,
    cfg: dict[str, Any],
    providers: Providers,
    queue: EmbedQueue,
    *,
    load: bool = True,
    embeds: bool = True,
) -> dict[str, Any]:
    """{available, state, model, embedded, pending, skipped, total, reason, model_state, rate, eta_seconds,
    instant, search}. `embeds` false: this process never embeds (a team database's reader role)."""
    out = _status(db, ws, cfg, providers, queue, load)
    if out.get("pending") and not embeds:  # what waits, waits for the indexer
        out["reason"] = (
            f"{out['reason'] or 'chunks wait for vectors'}; on a shared store only the indexer embeds, not "
            "this process (its daemon, or autodoc index --wait as the indexer role)"
        )
    out.setdefault("instant", None)
    out["search"] = vector_search(db, ws.id)
    return out


def vector_search(db: Snapshot, ws_id: int) -> str | None:
    """Who searches the serving model's vectors: "pgvector" (a PostgreSQL store, by its HNSW index:
    the daemon holds none of them), "memory" (the daemon, from a copy it loads); None before a model
    has vectors."""
    active = stored.active_model(db, ws_id)
    if active is None:
        return None
    return "pgvector" if stored.store_search(db, ws_id, active.fingerprint) is not None else "memory"


def _status(
    db: Snapshot, ws: Workspace, cfg: dict[str, Any], providers: Providers, queue: EmbedQueue, load: bool
) -> dict[str, Any]:
    total = chunk_count(db, ws.id)
    model_state, failed = providers.state(cfg)
    if model_state == "failed" and not load:  # asking the provider again would retry the load
        return {
            "available": False,
            "state": "failed",
            "model": None,
            "embedded": 0,
            "pending": 0,
            "skipped": total,
            "total": total,
            "reason": f"the embedding provider is unavailable: {failed}",
            "model_state": "failed",
            "rate": None,
            "eta_seconds": None,
        }
    if model_state == "loading" or (model_state == "unloaded" and not load):
        active = stored.active_model(db, ws.id)
        pending = stored.coverage(db, ws.id, active.fingerprint)[1] if active else total
        rate = queue.rate(active.fingerprint) if active else None
        what = "the embedding model is loading" if model_state == "loading" else "the embedding model is not loaded yet"
        # every vector there is coverage complete: a search waits for the load and answers in full
        return {
            "available": True,
            "state": "partial" if pending else "ready",
            "model": active.name if active else None,
            "embedded": total - pending,
            "pending": pending,
            "skipped": 0,
            "total": total,
            "reason": what + (f"; {_waiting(pending)}" if pending else "; the vectors are all there"),
            "model_state": model_state,
            "rate": rate,
            "eta_seconds": _eta(pending, rate),
        }
    provider, reason = providers.target(cfg)
    if provider is None:
        state = "failed" if reason else "off"
        return {
            "available": False,
            "state": state,
            "model": None,
            "embedded": 0,
            "pending": 0,
            "skipped": total,
            "total": total,
            "reason": reason or NO_MODEL_REASON,
            "model_state": "failed" if reason else "none",
            "rate": None,
            "eta_seconds": None,
        }
    try:
        fp = provider.fingerprint
    except Exception as e:
        return {
            "available": False,
            "state": "failed",
            "model": provider.name,
            "embedded": 0,
            "pending": 0,
            "skipped": total,
            "total": total,
            "reason": str(e),
            "model_state": "failed",
            "rate": None,
            "eta_seconds": None,
        }
    # counted, not the queue's cached count: in a reader process another process writes, unseen by that cache
    done, pending = stored.coverage(db, ws.id, fp)
    active = stored.active_model(db, ws.id)
    state = "switching" if active is not None and active.fingerprint != fp else ("partial" if pending else "ready")
    rate = queue.rate(fp)
    coming = {"model_state": "ready", "rate": rate, "eta_seconds": _eta(pending, rate)}
    failure = queue.failure(ws.id) if pending else None
    if failure:  # what waits will not come until the provider answers again
        return {
            "available": True,
            "state": "failed",
            "model": provider.name,
            "fingerprint": fp,
            "embedded": done,
            "pending": pending,
            "skipped": 0,
            "total": total,
            "reason": f"{_waiting(pending)}, and the embedding provider failed: {failure}",
            **coming,
            "eta_seconds": None,
        }
    return {
        "available": True,
        "state": state,
        "model": provider.name,
        "fingerprint": fp,
        "embedded": done,
        "pending": pending,
        "skipped": 0,
        "total": total,
        "reason": None
        if state == "ready"
        else ("a new embedding model is filling" if state == "switching" else _waiting(pending)),
        **coming,
        "instant": instant_status(db, ws, provider, pending, queue) if state == "partial" else None,
    }


ORDER = ("failed", "loading", "unloaded", "ready")


def summary(statuses: list[dict[str, Any]], rates: list[float]) -> dict[str, Any]:
    """server.info's `semantic`: the workspaces' embedding statuses (those with a model) in one."""
    if not statuses:
        return {
            "state": "none",
            "model_state": "none",
            "pending": 0,
            "eta_seconds": None,
            "reason": NO_MODEL_REASON.replace("this workspace", "any workspace"),
            "instant": None,
        }
    model_state = next((s for s in ORDER if any(st["model_state"] == s for st in statuses)), "ready")
    pending = sum(st["pending"] for st in statuses)
    failed = [st["reason"] for st in statuses if st["state"] == "failed"]
    if failed:
        state, reason = "failed", failed[0]
    elif model_state in ("loading", "unloaded"):
        state = model_state
        reason = next(st["reason"] for st in statuses if st["model_state"] == model_state)
    else:
        state = "filling" if pending else "ready"
        reason = _waiting(pending) if pending else None
    rate = min(rates) if rates else None  # one queue embeds every workspace in turn: the slowest model bounds it
    return {
        "state": state,
        "model_state": model_state,
        "pending": pending,
        "eta_seconds": None if state == "failed" else _eta(pending, rate),
        "reason": reason,
        "instant": _instant_summary([st["instant"] for st in statuses if st.get("instant")]),
    }


def _instant_summary(tiers: list[dict[str, Any]]) -> dict[str, Any] | None:
    """server.info's `semantic.instant`: filling while any workspace's tier fills, else serving."""
    if not tiers:
        return None
    filling = [t for t in tiers if t["state"] == "filling"]
    pending = sum(t["pending"] for t in filling)
    rates = [t["rate"] for t in filling if t["rate"]]
    return {
        "state": "filling" if filling else "serving",
        "pending": pending,
        "eta_seconds": _eta(pending, min(rates) if rates else None),
    }


def index_embedding(status: dict[str, Any], embedded: int) -> dict[str, Any]:
    """An index report's `embedding` (workspace.index): from the workspace's embedding status
    after the run, and how many chunks this run embedded."""
    return {
        "available": status["available"],
        "embedded": embedded,
        "skipped": status["pending"] if status["available"] else status["total"],
        "reason": status["reason"] if status["state"] != "ready" else None,
    }
