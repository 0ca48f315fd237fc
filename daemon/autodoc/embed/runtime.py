"""The semantic runtime (I/O): per-workspace providers, the embed queue's
steps, and the in-memory vector indexes the semantic leg searches.

State lives in the store, so a killed daemon resumes where it stopped: a
chunk is pending exactly when no vector exists for (workspace, fingerprint of
the configured model, chunk text hash). `embed_step` embeds one batch of
pending texts outside any transaction and writes the batch in one. When the
configured model differs from the one whose vectors serve searches (a
switch), the old vectors keep serving until the new model has every vector;
then the switch is one transaction and the old vectors are deleted.

A document answers semantically only once every one of its chunks has a
vector; until then the leg reports `partial`.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import logging
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from ..errors import EmbedFailed, Switching, Unsupported
from ..search.engine import SemanticOutcome
from ..search.filters import Filter
from ..search.fusion import LegHit
from ..search.vectors import VectorIndex, sign_codes
from .base import ProviderDown, make_provider, validate_config

if TYPE_CHECKING:
    from ..service import Service
    from ..store.documents import Workspace

log = logging.getLogger("autodoc.embed")

EMBED_BATCH = 16  # small batches keep a search's wait for the CPU short
SWITCHING_REASON = "a new embedding model is filling"


def _config_key(cfg: dict[str, Any]) -> str:
    return json.dumps(cfg, sort_keys=True)


_malloc_trim: Callable[[int], int] | None | bool = False  # False: not looked up yet


def release_free_heap() -> bool:
    """Give the C heap's free pages back to the OS (glibc malloc_trim; a no-op
    elsewhere). Loading the ONNX model frees ~60 MB of parse and
    constant-folding buffers (the int8 weights, before they are folded to
    float32) that glibc keeps resident in its arenas: measured, RSS 212 -> 151
    MB after the session loads, the same vectors after; a daemon at 100k
    chunks, 450 -> 393 MB after the hybrid warm-up. After an embed batch it
    returns the batch's freed buffers (~60 MB once 30 batches ran, with
    onnxruntime's arena shrinking at the end of each batch). Costs 1-7 ms.
    Returns whether it ran."""
    global _malloc_trim
    if _malloc_trim is False:
        _malloc_trim = None
        if sys.platform.startswith("linux"):
            try:
                fn = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
                fn.argtypes, fn.restype = [ctypes.c_size_t], ctypes.c_int
                _malloc_trim = fn
            except (OSError, AttributeError):  # not glibc (musl has no malloc_trim)
                pass
    if _malloc_trim is None:
        return False
    _malloc_trim(0)
    return True


@dataclass
class _Index:
    """One workspace's searchable vectors: a large base plus a small delta.

    Edits land in the delta and retire base rows by marking them dead, so a
    saved file costs a copy of the delta, not of every vector (1.5 GB at 1M
    chunks); the two are merged when the delta grows past a twentieth of the
    base. Searches read both and merge by (cosine desc, id).
    """

    fp: str
    base: VectorIndex
    delta: VectorIndex
    doc_chunks: dict[int, np.ndarray] = field(default_factory=dict)  # document → its chunk ids in the index
    dirty: set[int] = field(default_factory=set)  # documents to refresh before the next search
    all_dirty: bool = False
    dead: set[int] = field(default_factory=set)  # base ids retired since the last merge
    alive: np.ndarray | None = None  # bool mask over base rows; None while nothing is dead

    def __len__(self) -> int:
        return len(self.base) - len(self.dead) + len(self.delta)

    def retire(self, ids: np.ndarray) -> None:
        in_delta = self.delta.mask_for(ids)
        if in_delta.any():
            self.delta = self.delta.without(self.delta.ids[in_delta])
        for i in ids.tolist():
            pos = self.base.position(i)
            if pos is not None and i not in self.dead:
                if self.alive is None:
                    self.alive = np.ones(len(self.base), dtype=bool)
                self.alive[pos] = False
                self.dead.add(i)

    def add(self, ids: list[int], vecs: np.ndarray, codes: np.ndarray) -> None:
        self.delta = self.delta.with_added(ids, vecs, codes)
        if len(self.delta) > max(2000, len(self.base) // 20) or len(self.dead) > max(2000, len(self.base) // 10):
            self.merge()

    def merge(self) -> None:
        base = self.base.without(np.fromiter(self.dead, dtype=np.int64)) if self.dead else self.base
        self.base = base.with_added(self.delta.ids, self.delta.vecs, self.delta.codes) if len(self.delta) else base
        self.delta = VectorIndex.empty(self.base.dim)
        self.dead.clear()
        self.alive = None

    def search(self, q: np.ndarray, top: int, allowed_ids: np.ndarray | None) -> list[tuple[int, float]]:
        mask = self.alive
        if allowed_ids is not None:
            m = self.base.mask_for(allowed_ids)
            mask = m if mask is None else (m & mask)
        hits = self.base.search(q, top=top, allowed=mask)
        if len(self.delta):
            dm = None if allowed_ids is None else self.delta.mask_for(allowed_ids)
            hits = sorted(hits + self.delta.search(q, top=top, allowed=dm), key=lambda h: (-h[1], h[0]))[:top]
        return hits


class SemanticRuntime:
    def __init__(self, service: "Service"):
        self.svc = service
        self._providers: dict[str, Any] = {}
        self._provider_errors: dict[str, str] = {}
        self._lock = threading.RLock()
        self._indexes: dict[int, _Index] = {}
        self._searching = 0
        self._search_lock = threading.Lock()
        self.wake = threading.Event()  # set when there may be new work for the queue
        self._version: dict[int, int] = {}  # bumped on every change to a workspace's chunks or vectors
        self._settled: dict[tuple[int, str], int] = {}  # (workspace, fingerprint) → version with nothing pending
        self._embedded_since_release = False  # batches ran since the provider last gave its memory back
        self._pending_cache: dict[tuple[int, str], tuple[int, int]] = {}

    # -- providers ---------------------------------------------------------------

    def provider(self, cfg: dict[str, Any]):
        """The provider for a config (shared between workspaces with the same
        one), None for "none"; raises ProviderDown when it cannot be loaded."""
        cfg = validate_config(cfg)
        if cfg["provider"] == "none":
            return None
        key = _config_key(cfg)
        with self._lock:
            p = self._providers.get(key)
            if p is None:
                try:
                    p = make_provider(cfg)
                except ProviderDown as e:
                    self._provider_errors[key] = str(e)
                    raise
                self._providers[key] = p
                release_free_heap()  # the model load's freed buffers (once per provider)
            return p

    def target(self, ws: "Workspace") -> tuple[Any, str | None]:
        """(provider, reason) for the workspace's configured model; provider is
        None when none is configured (reason None) or it cannot load (reason)."""
        from ..config import WorkspaceConfig

        cfg = WorkspaceConfig.from_json(ws.config).embedding
        try:
            return self.provider(cfg), None
        except ProviderDown as e:
            return None, f"the embedding provider is unavailable: {e}"

    def token_counter(self, ws: "Workspace") -> Callable[[str], int] | None:
        p, _ = self.target(ws)
        if p is None:
            return None
        try:
            p.count_tokens(["probe"])
        except Exception:
            return None
        return lambda s: p.count_tokens([s])[0]

    def describe(self) -> list[dict[str, Any]]:
        with self._lock:
            return [p.describe() for p in self._providers.values()]

    # -- state in the store --------------------------------------------------------

    def _state(self, db, ws_id: int) -> tuple[str | None, dict | None, str | None]:
        row = db.execute("SELECT active_fp, active_config, active_name FROM embed_state WHERE workspace_id=?",
                         (ws_id,)).fetchone()
        if not row:
            return None, None, None
        return row[0], (json.loads(row[1]) if row[1] else None), row[2]

    def counts(self, db, ws_id: int, fp: str) -> tuple[int, int]:
        """(chunks with a vector for fp, chunks without)."""
        total = db.execute("SELECT COUNT(*) FROM chunks WHERE workspace_id=?", (ws_id,)).fetchone()[0]
        done = db.execute(
            "SELECT COUNT(*) FROM chunks c WHERE c.workspace_id=? AND EXISTS (SELECT 1 FROM vectors v INDEXED BY vectors_keys "
            "WHERE v.workspace_id=c.workspace_id AND v.model_fp=? AND v.text_hash=c.text_hash)",
            (ws_id, fp),
        ).fetchone()[0]
        return done, total - done

    # -- the queue's step ----------------------------------------------------------

    def pending_batch(self, db, ws_id: int, fp: str, limit: int) -> list[tuple[str, str]]:
        return db.execute(
            """SELECT c.text_hash, MIN(c.breadcrumb || char(10) || c.text) FROM chunks c
               WHERE c.workspace_id=? AND NOT EXISTS (SELECT 1 FROM vectors v INDEXED BY vectors_keys WHERE v.workspace_id=c.workspace_id
                 AND v.model_fp=? AND v.text_hash=c.text_hash)
               GROUP BY c.text_hash ORDER BY MIN(c.id) LIMIT ?""",
            (ws_id, fp, limit),
        ).fetchall()

    def embed_step(self, ws: "Workspace", batch: int = EMBED_BATCH) -> dict[str, Any]:
        """Embed one batch for the workspace's configured model.

        Returns {embedded, remaining, state, reason}. Never holds a transaction
        while the model runs. Yields briefly to searches in flight.
        """
        provider, reason = self.target(ws)
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
        db = self.svc._reader()
        with db:
            rows = self.pending_batch(db, ws.id, fp, batch)
        if not rows:
            self._maybe_switch(ws, provider, fp)
            with self._lock:
                self._settled[(ws.id, fp)] = version
                drained, self._embedded_since_release = self._embedded_since_release, False
            if drained and hasattr(provider, "release_memory"):
                try:
                    provider.release_memory()  # the queue drained: hand the batches' arena back
                except Exception as e:  # memory stays held; the vectors are written, nothing is lost
                    log.warning("the embedding model could not release its memory: %s", e)
                release_free_heap()
            return {"embedded": 0, "remaining": 0, "state": "ready", "reason": None}
        deadline = time.monotonic() + 0.5
        while self._searching and time.monotonic() < deadline:
            time.sleep(0.005)
        try:
            vecs = provider.embed([r[1] for r in rows])
        except ProviderDown as e:
            return {"embedded": 0, "remaining": len(rows), "state": "failed", "reason": str(e)}
        finally:
            release_free_heap()  # a batch's freed buffers; ~3 ms against ~2 s of embedding
        vecs = np.ascontiguousarray(vecs, dtype="<f4")
        codes = sign_codes(vecs)
        w = self.svc._writer()
        with self.svc._write_lock, w:
            if not w.execute("SELECT 1 FROM workspaces WHERE id=?", (ws.id,)).fetchone():
                return {"embedded": 0, "remaining": 0, "state": "off", "reason": "the workspace was removed"}
            w.executemany(
                "INSERT OR REPLACE INTO vectors(workspace_id, model_fp, text_hash, f32, bits) VALUES (?,?,?,?,?)",
                [(ws.id, fp, h, vecs[i].tobytes(), codes[i].tobytes()) for i, (h, _) in enumerate(rows)],
            )
            if self._state(w, ws.id)[0] is None:
                # the first model a workspace ever has needs no switch
                self._activate(w, ws.id, fp, provider)
            docs = [r[0] for r in w.execute(
                f"SELECT DISTINCT document_id FROM chunks WHERE workspace_id=? AND text_hash IN ({','.join('?' * len(rows))})",
                (ws.id, *[h for h, _ in rows]),
            )]
        with self._lock:
            self._embedded_since_release = True
        self.mark_dirty(ws.id, docs)
        return {"embedded": len(rows), "remaining": None, "state": "filling", "reason": None}

    def _activate(self, db, ws_id: int, fp: str, provider) -> None:
        db.execute(
            "INSERT INTO embed_state(workspace_id, active_fp, active_config, active_name) VALUES (?,?,?,?) "
            "ON CONFLICT(workspace_id) DO UPDATE SET active_fp=excluded.active_fp, "
            "active_config=excluded.active_config, active_name=excluded.active_name",
            (ws_id, fp, json.dumps(self._provider_config(provider)), provider.name),
        )

    def _provider_config(self, provider) -> dict:
        with self._lock:
            for key, p in self._providers.items():
                if p is provider:
                    return json.loads(key)
        return {}

    def _maybe_switch(self, ws: "Workspace", provider, fp: str) -> None:
        w = self.svc._writer()
        with self.svc._write_lock, w:
            active = self._state(w, ws.id)[0]
            if active == fp:
                return
            self._activate(w, ws.id, fp, provider)
            w.execute("DELETE FROM vectors WHERE workspace_id=? AND model_fp != ?", (ws.id, fp))
        log.info("workspace %s switched to embedding model %s", ws.name, provider.name)
        with self._lock:
            self._indexes.pop(ws.id, None)

    # -- the in-memory index ------------------------------------------------------

    def pending(self, db, ws_id: int, fp: str) -> int:
        """Chunks still without a vector, cached until the workspace next changes."""
        with self._lock:
            version = self._version.get(ws_id, 0)
            hit = self._pending_cache.get((ws_id, fp))
        if hit and hit[0] == version:
            return hit[1]
        n = self.counts(db, ws_id, fp)[1]
        with self._lock:
            self._pending_cache[(ws_id, fp)] = (version, n)
        return n

    def mark_dirty(self, ws_id: int, doc_ids: list[int] | None = None) -> None:
        with self._lock:
            self._version[ws_id] = self._version.get(ws_id, 0) + 1
            idx = self._indexes.get(ws_id)
            if idx is not None:
                if doc_ids is None:
                    idx.all_dirty = True
                else:
                    idx.dirty.update(doc_ids)
        self.wake.set()

    def forget(self, ws_id: int) -> None:
        with self._lock:
            self._indexes.pop(ws_id, None)
            self._version[ws_id] = self._version.get(ws_id, 0) + 1  # nothing settled survives a removal

    def _eligible(self, db, ws_id: int, fp: str, doc_ids: list[int] | None):
        """(chunk id, document id, f32, bits) of documents whose every chunk has a vector."""
        return self._eligible_cursor(db, ws_id, fp, doc_ids).fetchall()

    def _eligible_cursor(self, db, ws_id: int, fp: str, doc_ids: list[int] | None):
        scope = ""
        params: list[Any] = [fp, ws_id]
        if doc_ids is not None:
            scope = f" AND c.document_id IN ({','.join('?' * len(doc_ids))})"
            params += doc_ids
        params += [ws_id, fp]
        return db.execute(
            f"""SELECT c.id, c.document_id, v.f32, v.bits FROM chunks c
                JOIN vectors v ON v.workspace_id=c.workspace_id AND v.model_fp=? AND v.text_hash=c.text_hash
                WHERE c.workspace_id=?{scope} AND c.document_id NOT IN (
                  SELECT c2.document_id FROM chunks c2 WHERE c2.workspace_id=? AND NOT EXISTS (
                    SELECT 1 FROM vectors v2 INDEXED BY vectors_keys WHERE v2.workspace_id=c2.workspace_id AND v2.model_fp=?
                    AND v2.text_hash=c2.text_hash))
                ORDER BY c.id""",
            params,
        )

    def _build(self, db, ws_id: int, fp: str, dim: int) -> _Index:
        # Rows stream into arrays sized once: holding every row's blobs first
        # doubled the load's peak memory (280 MB for 156 MB of arrays at 100k).
        bound = db.execute("SELECT COUNT(*) FROM chunks WHERE workspace_id=?", (ws_id,)).fetchone()[0]
        nbytes = (dim + 7) // 8
        ids = np.empty(bound, dtype=np.int64)
        vecs = np.empty((bound, dim), dtype=np.float32)
        codes = np.empty((bound, nbytes), dtype=np.uint8)
        per: dict[int, list[int]] = {}
        n = 0
        for cid, did, f32, bits in self._eligible_cursor(db, ws_id, fp, None):
            if n == bound:  # a chunk written since the count: grow (rare)
                bound = max(16, bound * 2)
                ids, vecs, codes = np.resize(ids, bound), np.resize(vecs, (bound, dim)), np.resize(codes, (bound, nbytes))
            ids[n] = cid
            vecs[n] = np.frombuffer(f32, dtype="<f4")
            codes[n] = np.frombuffer(bits, dtype=np.uint8)
            per.setdefault(did, []).append(cid)
            n += 1
        base = VectorIndex(ids[:n], vecs[:n], codes[:n]) if n else VectorIndex.empty(dim)
        idx = _Index(fp, base, VectorIndex.empty(dim))
        idx.doc_chunks = {d: np.array(c, dtype=np.int64) for d, c in per.items()}
        return idx

    def _refresh(self, db, idx: _Index, ws_id: int, dim: int) -> None:
        docs = sorted(idx.dirty)
        idx.dirty.clear()
        drop = [idx.doc_chunks.pop(d) for d in docs if d in idx.doc_chunks]
        if drop:
            idx.retire(np.concatenate(drop))
        rows = []
        for i in range(0, len(docs), 500):
            rows += self._eligible(db, ws_id, idx.fp, docs[i : i + 500])
        if rows:
            vecs = np.frombuffer(b"".join(r[2] for r in rows), dtype="<f4").reshape(-1, dim)
            codes = np.frombuffer(b"".join(r[3] for r in rows), dtype=np.uint8).reshape(len(rows), -1)
            idx.add([r[0] for r in rows], vecs, codes)
            per: dict[int, list[int]] = {}
            for cid, did, _, _ in rows:
                per.setdefault(did, []).append(cid)
            for d, c in per.items():
                idx.doc_chunks[d] = np.array(c, dtype=np.int64)

    def index_for(self, db, ws_id: int, fp: str, dim: int) -> VectorIndex:
        """The workspace's vectors as one VectorIndex (merging any delta first)."""
        with self._lock:
            idx = self._workspace_index(db, ws_id, fp, dim)
            if len(idx.delta) or idx.dead:
                idx.merge()
            return idx.base

    def _workspace_index(self, db, ws_id: int, fp: str, dim: int) -> _Index:
        with self._lock:
            idx = self._indexes.get(ws_id)
            if idx is None or idx.fp != fp or idx.all_dirty:
                idx = self._indexes[ws_id] = self._build(db, ws_id, fp, dim)
                release_free_heap()  # the load's row buffers, freed but kept by the C heap
            elif idx.dirty:
                self._refresh(db, idx, ws_id, dim)
            return idx

    # -- the leg -------------------------------------------------------------------

    def leg(self, ws: "Workspace", text: str, filt: Filter, top: int) -> SemanticOutcome:
        with self._search_lock:
            self._searching += 1
        try:
            return self._leg(ws, text, filt, top)
        finally:
            with self._search_lock:
                self._searching -= 1

    def _leg(self, ws: "Workspace", text: str, filt: Filter, top: int) -> SemanticOutcome:
        target, reason = self.target(ws)
        if target is None and reason is None:
            return SemanticOutcome(None, "off", "no embedding model is configured for this workspace",
                                   Unsupported("semantic search needs an embedding model, and this workspace has none"))
        db = self.svc._reader()
        with db:
            active_fp, active_cfg, active_name = self._state(db, ws.id)
            target_fp = None
            if target is not None:
                try:
                    target_fp = target.fingerprint
                except ProviderDown as e:
                    reason = f"the embedding provider is unavailable: {e}"
                    target = None
            switching = target_fp is not None and active_fp is not None and active_fp != target_fp
            if target is None:
                # the configured model cannot run; nothing else may stand in for it
                return SemanticOutcome(None, "failed", reason, EmbedFailed(reason or "embedding failed"))
            if switching:
                # old vectors keep serving when their model can still embed the query
                try:
                    serving = self.provider(active_cfg or {})
                except ProviderDown:
                    serving = None
                if serving is None or serving.fingerprint != active_fp:
                    return SemanticOutcome(None, "switching", SWITCHING_REASON, Switching(
                        "semantic search is unavailable while a new embedding model is filling"))
                fp, provider, state = active_fp, serving, "switching"
            else:
                fp, provider = target_fp, target
                state = "partial" if self.pending(db, ws.id, fp) else "ready"
            try:
                qvec = provider.embed_query(text)
            except ProviderDown as e:
                if switching:  # the old model is gone and the new one is not filled: the switch is the reason
                    return SemanticOutcome(None, "switching", SWITCHING_REASON, Switching(
                        f"semantic search is unavailable while a new embedding model is filling ({e})"))
                return SemanticOutcome(None, "failed", f"the query could not be embedded: {e}",
                                       EmbedFailed(f"the query could not be embedded: {e}"))
            index = self._workspace_index(db, ws.id, fp, provider.dim)
            allowed = None
            if not filt.empty:
                allowed = np.fromiter((r[0] for r in db.execute(
                    f"SELECT c.id FROM chunks c WHERE c.workspace_id=? AND {filt.sql}", (ws.id, *filt.params))),
                    dtype=np.int64)
            hits = index.search(qvec, top, allowed)
        note = None
        if state == "partial":
            note = "some documents are still being embedded and answer lexically until they are done"
        return SemanticOutcome([LegHit(int(i), round(float(s), 6)) for i, s in hits], state, note, None,
                               model=provider.name)
