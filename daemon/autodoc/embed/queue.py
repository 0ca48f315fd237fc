"""The embed queue's worker (anyio): keeps every workspace's vectors filled.

The queue itself is the store (a chunk without a vector for the configured
model is pending), so the worker holds no state that a crash could lose: a
killed daemon resumes where it stopped. Each step runs in a worker thread off
the event loop and never inside a write transaction (SemanticRuntime.embed_step).
A provider that is down is retried with backoff; it never stops lexical work.
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, Any, Callable

import anyio
import anyio.to_thread

if TYPE_CHECKING:
    from ..service import Service

log = logging.getLogger("autodoc.embed.queue")

# notify(workspace, {"embedded", "pending", "state", "reason"}) — progress for clients
Notify = Callable[[str, dict[str, Any]], None]

IDLE_POLL_S = 2.0
BACKOFF_MIN_S, BACKOFF_MAX_S = 2.0, 60.0


async def run_embed_queue(svc: "Service", notify: Notify | None = None,
                          limiter: anyio.CapacityLimiter | None = None) -> None:
    """Run until cancelled."""
    limiter = limiter or anyio.CapacityLimiter(1)
    backoff: dict[str, tuple[float, float]] = {}  # workspace → (retry at, current delay)
    wake = svc.semantic.wake
    while True:
        wake.clear()  # before the steps, so a write during them is not missed
        names = await anyio.to_thread.run_sync(svc.workspaces, limiter=limiter)
        did = 0
        now = anyio.current_time()
        for name in names:
            retry_at, delay = backoff.get(name, (0.0, 0.0))
            if now < retry_at:
                continue
            try:
                step = await anyio.to_thread.run_sync(svc.embed_step, name, limiter=limiter)
            except Exception as e:  # a removed workspace, a store hiccup: log, keep serving
                log.warning("embed step for %s failed: %s", name, e)
                continue
            if step["state"] == "failed":
                delay = min(BACKOFF_MAX_S, max(BACKOFF_MIN_S, delay * 2))
                backoff[name] = (anyio.current_time() + delay, delay)
                if notify:
                    notify(name, {"embedded": 0, "pending": None, "state": "failed", "reason": step["reason"]})
                continue
            backoff.pop(name, None)
            if step["embedded"]:
                did += step["embedded"]
                if notify:
                    status = await anyio.to_thread.run_sync(svc.embedding_status_by_name, name, limiter=limiter)
                    notify(name, {"embedded": status["embedded"], "pending": status["pending"],
                                  "state": status["state"], "reason": status["reason"]})
        if not did:
            # nothing to do: sleep until an index write wakes us, or poll
            with anyio.move_on_after(IDLE_POLL_S):
                await anyio.to_thread.run_sync(wake.wait, IDLE_POLL_S, abandon_on_cancel=True)
