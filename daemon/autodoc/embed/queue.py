"""The embed queue: keeps every workspace's vectors filled.

The queue itself is the store (a chunk without a vector for the configured
model is pending), so nothing a crash could lose is held here: a killed
process resumes where it stopped. `step` embeds one batch outside any
transaction and writes it in one. When the configured model differs from
the one whose vectors serve searches (a switch), the old vectors keep
serving until the new model has every vector; then the switch is one
transaction and the old vectors are deleted.

One loop drives it, `work`: the daemon runs it until shutdown, `autodoc
index` until nothing is pending, the language server after each save.

Runs on: the thread that calls `work` or `step` (one step at a time per
queue; steps take the store's write lock only to write a batch).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import numpy as np

from ..errors import WorkspaceNotFound
from ..store import vectors as stored
from ..store.interface import StoreInterface
from ..store.pg.notify import notify_vectors
from ..store.sql import POSTGRES
from ..store.workspaces import Workspace, get_workspace, workspace_names
from .base import ProviderDown
from .codes import sign_codes
from .instant import InstantTiers, worth_it
from .memory import release_free_heap
from .providers import Providers

log = logging.getLogger("autodoc.embed")

EMBED_BATCH = 16  # small batches keep a search's wait for the CPU short
IDLE_POLL_S = 2.0
BACKOFF_MIN_S, BACKOFF_MAX_S = 2.0, 60.0
SEARCH_YIELD_S = 0.5  # how long a step waits for searches in flight before taking the CPU
RATE_WEIGHT = 0.3  # a new batch's share of the running rate: recent batches count most
# Pending texts read at once and sorted by length in tokens, then embedded a batch at a
# time: a batch of similar lengths pads little. Steps of 16 in chunk order ran at 0.82x
# the rate of steps of 256 on the same texts (24.8 against 30.3 chunks/s, bench.speed's
# SciFact notes); the window gives small steps the sorted batches of large ones.
LINE_TEXTS = 256
# How much the daemon's embedding thread lowers its priority (nice) for its whole life: a search
# or the user's own work then takes the cores first, and on a quiet machine the fill runs as fast.
# Its model runs on a session made on that thread (embed/onnx.py get_session), so onnxruntime's
# pool threads are lowered too. Only the endless loop (the daemon's); `autodoc index` waits for its
# own fill and runs at full priority.
BACKGROUND_NICE = 10
INSTANT_BATCH = 4096  # instant-tier texts per step: a few seconds at its slowest measured speed

# notify(workspace, {"embedded", "pending", "state", "reason", "instant"}): progress for clients
Notify = Callable[[str, dict[str, Any]], None]
EmbeddingConfig = Callable[[Workspace], dict[str, Any]]


def _by_length(rows: list[tuple[str, str]], count_tokens: Callable[[list[str]], list[int]]) -> list[tuple[str, str]]:
    """Rows shortest first, in the model's tokens: sorted by characters instead, batches of 16
    still mixed lengths (43.7 against 51.1 texts/s on the same 300 SciFact notes, where a
    raw onnxruntime loop sorting by tokens ran 51.5)."""
    try:
        counts = count_tokens([text for _, text in rows])
    except Exception:  # a provider that cannot count: characters are the next best guess
        counts = [len(text) for _, text in rows]
    return [row for _, row in sorted(zip(counts, rows), key=lambda pair: pair[0])]


def _embed_claims(store: StoreInterface) -> Any:
    """A shared PostgreSQL store's embed claims (store/pg/indexlock.py: one daemon fills a workspace at a
    time), else None. Imported only for a database: a SQLite daemon loads no psycopg."""
    if store.dialect != POSTGRES:
        return None
    from ..store.pg.indexlock import embed_claims

    return embed_claims(store)


class EmbedQueue:
    def __init__(
        self,
        store: StoreInterface,
        providers: Providers,
        embedding_config: EmbeddingConfig,
        *,
        on_vectors: Callable[[int, list[int] | None], None],
        busy: Callable[[], bool] = lambda: False,
        instant: InstantTiers | None = None,
        on_dropped: Callable[[int, str], None] = lambda ws_id, fp: None,
    ):
        self.store = store
        self.providers = providers
        self._config = embedding_config
        self._on_vectors = on_vectors  # (workspace id, documents whose vectors changed)
        self._on_dropped = on_dropped  # (workspace id, fingerprint): a model's vectors are gone from the store
        self._busy = busy  # searches in flight: a step yields to them briefly
        self.wake = threading.Event()  # set when there may be new work
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._stepping = threading.Lock()  # held for a whole step: close() waits for it
        self._version: dict[int, int] = {}  # bumped on every change to a workspace's chunks or vectors
        self._settled: dict[tuple[int, str], int] = {}  # (workspace, fingerprint) → version with nothing pending
        self._pending: dict[tuple[int, str], tuple[int, int]] = {}  # (workspace, fp) → (version, count)
        self._embedded_since_release = False
        self._failed: dict[int, str] = {}  # workspace → why its last step could not embed
        self._seconds_per_vector: dict[str, float] = {}  # model fingerprint → measured cost, for ETAs
        self.instant = instant  # the instant tier (None: off)
        # workspace → the instant tier's part in the current fill ("active", or "done": finished or
        # not worth it); looked at once per fill, since counting the backlog is a scan of every chunk
        self._instant_fill: dict[int, str] = {}
        self._dropped: set[int] = set()  # workspaces whose leftover instant vectors were deleted
        self._instant_wrote: set[int] = set()  # workspaces with instant vectors from this fill
        # (workspace, fingerprint) → the window's texts not yet embedded, shortest first
        self._line: dict[tuple[int, str], deque[tuple[str, str]]] = {}
        self._claims = _embed_claims(store)  # None but on a PostgreSQL store several daemons share

    # -- what changed --------------------------------------------------------------

    def changed(self, ws_id: int) -> None:
        """A workspace's chunks or vectors changed: what was settled must be looked at again."""
        with self._lock:
            self._version[ws_id] = self._version.get(ws_id, 0) + 1
        self.wake.set()

    def forget(self, ws_id: int) -> None:
        """A removed workspace: its windows of texts go too (ids are never reused)."""
        for key in [k for k in list(self._line) if k[0] == ws_id]:
            self._line.pop(key, None)
        self.changed(ws_id)

    def pending(self, db, ws_id: int, fp: str) -> int:
        """Chunks still without a vector, cached until the workspace next changes."""
        with self._lock:
            version = self._version.get(ws_id, 0)
            hit = self._pending.get((ws_id, fp))
        if hit and hit[0] == version:
            return hit[1]
        n = stored.coverage(db, ws_id, fp)[1]
        with self._lock:
            self._pending[(ws_id, fp)] = (version, n)
        return n

    # -- one batch -------------------------------------------------------------------

    def step(self, ws: Workspace, batch: int = EMBED_BATCH, *, instant: bool = True) -> dict[str, Any]:
        """Embed one batch for the workspace's configured model: {embedded, remaining, state, reason}.
        Never holds a transaction while the model runs."""
        with self._stepping:
            out = self._step(ws, batch, instant)
        with self._lock:
            if out["state"] == "failed":
                self._failed[ws.id] = out["reason"] or "the embedding provider failed"
            else:
                self._failed.pop(ws.id, None)
        return out

    def _observe(self, fp: str, n: int, seconds: float) -> None:
        """One batch's rate, folded into the model's running estimate (called under _lock)."""
        per = seconds / max(1, n)
        old = self._seconds_per_vector.get(fp)
        self._seconds_per_vector[fp] = per if old is None else (1 - RATE_WEIGHT) * old + RATE_WEIGHT * per

    def rate(self, fp: str) -> float | None:
        """Vectors per second this process has measured for the model (None: none embedded yet)."""
        with self._lock:
            per = self._seconds_per_vector.get(fp)
        return None if not per else 1.0 / per

    def instant_fill(self, ws_id: int) -> tuple[str | None, bool]:
        """(the instant tier's part in the workspace's current fill: "active", "done" or None when
        not looked at yet; whether this process wrote instant vectors for it) — embed/status.py."""
        return self._instant_fill.get(ws_id), ws_id in self._instant_wrote

    def failure(self, ws_id: int) -> str | None:
        """Why the workspace's last step could not embed (None: it could, or none ran yet)."""
        with self._lock:
            return self._failed.get(ws_id)

    def _step(self, ws: Workspace, batch: int, instant: bool) -> dict[str, Any]:
        provider, reason = self.providers.target(self._config(ws))
        if provider is None:
            return {"embedded": 0, "remaining": 0, "state": "failed" if reason else "off", "reason": reason}
        try:
            fp = provider.fingerprint
        except ProviderDown as e:
            return {"embedded": 0, "remaining": 0, "state": "failed", "reason": str(e)}
        with self._lock:
            version = self._version.get(ws.id, 0)
            settled = self._settled.get((ws.id, fp)) == version
        if settled:
            # Nothing changed since a step found nothing to embed: finding that out again is a
            # scan of every chunk, which an idle daemon ran every IDLE_POLL_S (seconds at 1M chunks).
            return {"embedded": 0, "remaining": 0, "state": "ready", "reason": None}
        if self._claims is not None and not self._claims.claim(ws.id):
            # another daemon sharing the store fills this workspace now: its vectors are the store's, and
            # the claim passes to this daemon when that one settles or dies (docs/dev/postgres.md section 5)
            return {"embedded": 0, "remaining": None, "state": "filling", "reason": None}
        if self.instant is not None and instant:
            # first, and alone in its step: the tier answers once it has every chunk, and at ~200×
            # the model's speed it holds the model back by under one per cent of the fill
            n = self._instant_step(self.instant, ws, provider, fp)
            if n:
                return {"embedded": 0, "instant": n, "remaining": None, "state": "filling", "reason": None}
        rows = self._next_batch(ws.id, fp, batch, provider.count_tokens)
        if not rows:
            self._maybe_switch(ws, provider, fp)
            self._instant_fill.pop(ws.id, None)  # the next fill looks again
            if ws.id in self._instant_wrote or ws.id not in self._dropped:
                self._drop_instant(ws, provider)
            with self._lock:
                self._settled[(ws.id, fp)] = version
                drained, self._embedded_since_release = self._embedded_since_release, False
            if self._claims is not None:
                self._claims.release(ws.id)  # nothing pending: another daemon may fill what comes next
            if drained and hasattr(provider, "release_memory"):
                try:
                    provider.release_memory()  # the queue drained: hand the batches' arena back
                except Exception as e:  # memory stays held; the vectors are written, nothing is lost
                    log.warning("the embedding model could not release its memory: %s", e)
                release_free_heap()
            return {"embedded": 0, "remaining": 0, "state": "ready", "reason": None}
        deadline = time.monotonic() + SEARCH_YIELD_S
        while self._busy() and time.monotonic() < deadline:
            time.sleep(0.005)
        started = time.monotonic()
        try:
            vecs = provider.embed([text for _, text in rows])
        except ProviderDown as e:
            self._line.pop((ws.id, fp), None)  # these texts are still pending: the next window has them
            return {"embedded": 0, "remaining": len(rows), "state": "failed", "reason": str(e)}
        except BaseException:
            self._line.pop((ws.id, fp), None)
            raise
        finally:
            release_free_heap()  # a batch's freed buffers; ~3 ms against ~2 s of embedding
        vecs = np.ascontiguousarray(vecs, dtype="<f4")
        codes = sign_codes(vecs)
        with self.store.write() as w:
            if not stored.workspace_exists(w, ws.id):
                self._line.pop((ws.id, fp), None)
                return {"embedded": 0, "remaining": 0, "state": "off", "reason": "the workspace was removed"}
            stored.write_vectors(
                w, ws.id, fp, [(h, vecs[i].tobytes(), codes[i].tobytes()) for i, (h, _) in enumerate(rows)]
            )
            if stored.active_model(w, ws.id) is None:
                # the first model a workspace ever has needs no switch
                stored.activate(w, ws.id, fp, self.providers.config_of(provider), provider.name)
            docs = stored.documents_with_texts(w, ws.id, [h for h, _ in rows])
            if self._claims is not None:  # the other daemons' vectors in memory, if any (store/pg/notify.py)
                notify_vectors(w, ws.id, docs)
        with self._lock:
            self._embedded_since_release = True
            self._observe(fp, len(rows), time.monotonic() - started)
        self._on_vectors(ws.id, docs)
        return {"embedded": len(rows), "remaining": None, "state": "filling", "reason": None}

    def _next_batch(
        self, ws_id: int, fp: str, batch: int, count_tokens: Callable[[list[str]], list[int]]
    ) -> list[tuple[str, str]]:
        """The next ``batch`` pending texts from the sorted window, reading a new window
        when it is used up. A text the window holds but the store no longer needs (its
        chunk was edited away, or it has its vector) is skipped; texts written since the
        window was read wait for the next one, as they waited behind the backlog before."""
        key = (ws_id, fp)
        line = self._line.get(key)
        out: list[tuple[str, str]] = []
        with self.store.read() as db:
            while len(out) < batch:
                if not line:
                    if out:
                        break  # a new window next step: this batch is the old window's last
                    rows = stored.pending_texts(db, ws_id, fp, max(batch, LINE_TEXTS))
                    if not rows:
                        self._line.pop(key, None)
                        return []
                    line = self._line[key] = deque(_by_length(rows, count_tokens))
                take = [line.popleft() for _ in range(min(batch - len(out), len(line)))]
                live = stored.still_pending(db, ws_id, fp, [h for h, _ in take])
                out += [r for r in take if r[0] in live]
        return out

    def _instant_step(self, instant: InstantTiers, ws: Workspace, provider, fp: str) -> int:
        """Embed a batch with the instant tier while the model's backlog is large
        (embed/instant.py says when); its vectors have their own key."""
        phase = self._instant_fill.get(ws.id)
        if phase == "done":
            return 0
        if phase is None:
            with self.store.read() as db:
                done, pending = stored.coverage(db, ws.id, fp)
                active = stored.active_model(db, ws.id)
            # a model switch keeps serving the old model's vectors (semantic.py reads the tier only
            # while a first model fills), so instant vectors would be made for nothing
            switching = active is not None and active.fingerprint != fp
            if switching or not worth_it(pending, done + pending):
                self._instant_fill[ws.id] = "done"
                return 0
        tier = instant.get(provider)  # the first time ever: distils the table (minutes)
        rows = []
        if tier is not None:
            with self.store.read() as db:
                rows = stored.pending_texts(db, ws.id, tier.fingerprint, INSTANT_BATCH)
        self._instant_fill[ws.id] = "active" if rows else "done"
        if tier is None or not rows:  # no tier, no rows
            return 0
        rows.sort()  # key order: the vectors B-tree takes a batch as appends (1.5-2x faster to write, measured)
        started = time.monotonic()
        try:
            vecs = tier.embed([text for _, text in rows])
        except ProviderDown as e:
            log.warning("instant tier failed: %s", e)
            self._instant_fill[ws.id] = "done"
            return 0
        vecs = np.ascontiguousarray(vecs, dtype="<f4")
        codes = sign_codes(vecs)
        with self.store.write() as w:
            if not stored.workspace_exists(w, ws.id):
                return 0
            stored.write_vectors(
                w,
                ws.id,
                tier.fingerprint,
                [(h, vecs[i].tobytes(), codes[i].tobytes()) for i, (h, _) in enumerate(rows)],
            )
            docs = stored.documents_with_texts(w, ws.id, [h for h, _ in rows])
            if self._claims is not None:  # the other daemons' vectors in memory, if any (store/pg/notify.py)
                notify_vectors(w, ws.id, docs)
        self._instant_wrote.add(ws.id)
        with self._lock:
            self._observe(tier.fingerprint, len(rows), time.monotonic() - started)
        self._on_vectors(ws.id, docs)
        return len(rows)

    def _drop_instant(self, ws: Workspace, provider) -> None:
        """The model has every vector: the instant tier's are no longer read (once per
        process for a workspace the tier did not fill, for vectors a stopped run left)."""
        self._dropped.add(ws.id)
        self._instant_wrote.discard(ws.id)
        instant = self.instant
        fp = instant.fingerprint_for(provider) if instant is not None else None
        if instant is not None and fp is not None:
            instant.forget_words(provider)
            with self.store.write() as w:
                stored.drop_model(w, ws.id, fp)
            self._on_dropped(ws.id, fp)  # the in-memory copy too: nothing reads it again

    def _maybe_switch(self, ws: Workspace, provider, fp: str) -> None:
        with self.store.write() as w:
            active = stored.active_model(w, ws.id)
            if active is not None and active.fingerprint == fp:
                return
            stored.activate(w, ws.id, fp, self.providers.config_of(provider), provider.name)
            stored.drop_other_models(w, ws.id, fp)
        log.info("workspace %s switched to embedding model %s", ws.name, provider.name)
        self._on_vectors(ws.id, None)

    # -- the loop --------------------------------------------------------------------

    def work(
        self,
        names: Iterable[str] | None = None,
        *,
        until_idle: bool,
        batch: int = EMBED_BATCH,
        guard: Callable[[], AbstractContextManager[Any]] = nullcontext,
        notify: Notify | None = None,
        status: Callable[[str], dict[str, Any]] | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> int:
        """Embed the named workspaces (default: all) batch by batch; returns the vectors written.

        until_idle: stop once a round embeds nothing (or the provider fails);
        otherwise wait for `wake` and go on until `stopping` is set. Each step
        runs inside `guard()` (the language server's lock). A provider that is
        down is retried with backoff; it never stops lexical work."""
        if not until_idle:
            lower_priority(BACKGROUND_NICE)
        backoff: dict[str, tuple[float, float]] = {}  # workspace → (retry at, current delay)
        names = list(names) if names is not None else None
        total = 0
        while not self.stopping.is_set():
            self.wake.clear()  # before the steps, so a write during them is not missed
            did, failed, instant = 0, 0, 0
            try:
                listed = list(names) if names is not None else self._names()
            except Exception as e:  # the store unreachable (a database restarting): the daemon serves on
                if until_idle:
                    raise
                log.warning("the embed queue cannot list the workspaces: %s; it tries again", e)
                self.wake.wait(IDLE_POLL_S)
                continue
            for name in listed:
                if self.stopping.is_set():
                    break
                retry_at, delay = backoff.get(name, (0.0, 0.0))
                if time.monotonic() < retry_at:
                    continue
                try:
                    with guard():
                        if self.stopping.is_set():
                            break
                        with self.store.read() as db:
                            ws = get_workspace(db, name)
                        # a run that waits for every vector (the CLI's index, the LSP's save) has no
                        # searches to answer meanwhile: the tier would only cost it the table and a fill
                        step = self.step(ws, batch, instant=not until_idle)
                except WorkspaceNotFound:  # removed since the names were read: nothing is left to embed
                    log.debug("workspace %s is gone; no more embedding for it", name)
                    if names is not None:
                        names = [n for n in names if n != name]
                    continue
                except Exception as e:  # a store hiccup: log, keep serving
                    log.warning("embed step for %s failed: %s", name, e)
                    failed += 1
                    continue
                if step["state"] == "failed":
                    failed += 1
                    delay = min(BACKOFF_MAX_S, max(BACKOFF_MIN_S, delay * 2))
                    backoff[name] = (time.monotonic() + delay, delay)
                    if notify:
                        notify(
                            name,
                            {
                                "embedded": 0,
                                "pending": None,
                                "state": "failed",
                                "reason": step["reason"],
                                "instant": None,
                            },
                        )
                    continue
                backoff.pop(name, None)
                instant += step.get("instant", 0)
                if step.get("instant") and notify and status:  # the instant tier's progress: it answers first
                    st = status(name)
                    notify(name, {k: st[k] for k in ("embedded", "pending", "state", "reason", "instant")})
                if step["embedded"]:
                    did += step["embedded"]
                    if progress:
                        progress(step["embedded"])
                    if notify and status:
                        st = status(name)
                        notify(
                            name,
                            {
                                "embedded": st["embedded"],
                                "pending": st["pending"],
                                "state": st["state"],
                                "reason": st["reason"],
                                "instant": st.get("instant"),
                            },
                        )
            total += did
            if not did and not instant:
                if until_idle:
                    break
                self.wake.wait(IDLE_POLL_S)
        return total

    def _names(self) -> list[str]:
        with self.store.read() as db:
            return workspace_names(db)

    def request_stop(self) -> None:
        """Tell `work` loops to end after their current step (does not wait)."""
        self.stopping.set()
        self.wake.set()

    def stop(self) -> None:
        """End `work` loops and wait for a step in progress (at most one batch)."""
        self.request_stop()
        with self._stepping:
            if self._claims is not None:
                self._claims.close()


def lower_priority(by: int) -> bool:
    """Lower the calling thread's priority (Linux keeps a nice value a thread); whether it did."""
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + by))
    except (AttributeError, OSError) as e:  # not a Unix, or not allowed: the fill runs at full priority
        log.debug("could not lower the embedding thread's priority: %s", e)
        return False
    return True
