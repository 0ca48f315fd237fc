"""Similar documents: the documents whose passages lie nearest a given document.

Input: one read snapshot, the workspace, the document, the vector cache and
options {limit, paths, tags}. Output: one entry per other document, best
first, each with its passage nearest the given document (chunk id,
breadcrumb, line and byte span) and that passage's cosine.

The given document is one vector: the mean of its chunks' vectors weighted
by their tokens, so its topic counts and not its boilerplate (every ADR has
a short "Status: accepted" section, which alone would make every ADR the
nearest of every other). That vector is scanned against the workspace's
chunk vectors (search/semantic/vector_cache.py: the semantic leg's own table) and the
best chunk of each document stands for it. Only stored vectors are read:
nothing is embedded, so the model need not be loaded.

Runs on: the caller's thread (a reader), on the snapshot it passes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import Unsupported
from ..store import hits as stored_hits
from ..store import vectors as stored
from ..store.filters import build_filter
from ..store.interface import Snapshot
from ..store.workspaces import Workspace
from .semantic.leg import NO_MODEL_REASON
from .semantic.vector_cache import VectorCache

OVERFETCH = 4  # chunks scanned per document asked for: several chunks of one document crowd the top


@dataclass(frozen=True)
class SimilarOptions:
    limit: int = 10
    paths: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()

    @classmethod
    def parse(cls, opts: dict[str, Any] | None) -> SimilarOptions:
        o = opts or {}  # the schema has checked every field; paths and tags may be one string or a list

        def strings(v: Any) -> tuple[str, ...]:
            return (v,) if isinstance(v, str) else tuple(v or ())

        return cls(
            limit=o.get("limit", 10),
            paths=tuple(p.strip("/") for p in strings(o.get("paths"))),
            tags=tuple(t.lower().lstrip("#") for t in strings(o.get("tags"))),
        )


def _unavailable(message: str, reason: str, state: str, **data: Any) -> Unsupported:
    return Unsupported(message, {"reason": reason, "state": state, **data})


def centroid(rows: list[tuple[int, int, bytes]]) -> np.ndarray:
    """The token-weighted mean of the rows' vectors, L2-normalised."""
    vecs: np.ndarray = np.stack([np.frombuffer(f32, dtype="<f4") for _, _, f32 in rows]).astype(np.float32)
    norms = np.linalg.norm(vecs, axis=1, keepdims=True)
    vecs = vecs / np.where(norms == 0, 1, norms)
    weights = np.array([max(1, tokens) for _, tokens, _ in rows], dtype=np.float32)
    q = (vecs * weights[:, None]).sum(axis=0)
    n = float(np.linalg.norm(q))
    return q / n if n else q


def similar(
    db: Snapshot,
    ws: Workspace,
    embedding: dict[str, Any],
    cache: VectorCache,
    doc_id: int,
    path: str,
    opts: SimilarOptions,
    pending: Callable[[str], int],
    since: int | None = None,
) -> dict[str, Any]:
    """{workspace, path, model, semantic, similar: [...]}; pending(fp): chunks still without a vector;
    since: the cache's marker() from before `db`'s snapshot (VectorCache.get)."""
    if embedding.get("provider", "onnx") == "none":
        raise _unavailable(
            "similar documents need an embedding model, and this workspace has none", NO_MODEL_REASON, "off"
        )
    active = stored.active_model(db, ws.id)
    if active is None:
        why = "no vectors yet: the embedding model is loading or its first vectors are being made"
        raise _unavailable(f"similar documents are unavailable until vectors exist ({why})", why, "partial")
    rows = stored.document_vectors(db, ws.id, active.fingerprint, doc_id)
    waiting = pending(active.fingerprint)
    if not rows:
        why = f"{path} has no vectors yet; {waiting} chunks of the workspace wait for theirs"
        raise _unavailable(
            f"similar documents are unavailable for {path} until it has vectors", why, "partial", pending=waiting
        )
    q = centroid(rows)
    vectors = cache.searchable(db, ws.id, active.fingerprint, q.shape[0], since)
    filt = build_filter(ws.id, facets=[], opt_facets={}, tags=opts.tags, paths=opts.paths, include_abstract=True)
    allowed = None if filt.empty else np.array(stored_hits.filtered_chunk_ids(db, ws.id, filt), dtype=np.int64)
    own = vectors.doc_chunks.get(doc_id)
    top = opts.limit * OVERFETCH + (0 if own is None else len(own)) + len(rows)
    while True:
        found = vectors.search(q, top, allowed)
        owners = stored_hits.chunk_documents(db, [cid for cid, _ in found])
        best: dict[int, tuple[int, float]] = {}  # document → its first (best) chunk
        for cid, score in found:
            d = owners.get(cid)
            if d is not None and d != doc_id and d not in best:
                best[d] = (cid, score)
        if len(best) >= opts.limit or len(found) < top:
            break
        top *= 4
    picked = sorted(best.values(), key=lambda h: (-h[1], h[0]))[: opts.limit]
    shown = stored_hits.hit_rows(db, [cid for cid, _ in picked])
    out = []
    for cid, score in picked:
        r = shown.get(cid)
        if r is not None:
            out.append(
                {
                    "path": r["path"],
                    "title": r["title"],
                    "score": round(float(score), 6),
                    "chunk_id": cid,
                    "breadcrumb": r["breadcrumb"],
                    "line_start": r["line_start"],
                    "line_end": r["line_end"],
                    "byte_start": r["byte_start"],
                    "byte_end": r["byte_end"],
                    "tags": r["tags"],
                }
            )
    return {
        "workspace": ws.name,
        "path": path,
        "model": active.name,
        "semantic": "partial" if waiting else "ready",
        "similar": out,
    }
