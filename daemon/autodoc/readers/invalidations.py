"""What a reader process is told of the daemon's cache changes: the
invalidation items the daemon's Service makes (readers/pool.py queues them per
reader, to ride with its next call), compacted when a reader falls far
behind, and the vector bases shared so far (readers/shared_vectors.py), for a
reader that starts later.

Items: ("vectors", workspace, documents or None), ("forget", workspace),
("model", workspace, fingerprint), ("base", workspace, fingerprint, Shared,
documents already stale or None).

Pure: no I/O but one existence check of a shared file (``SharedBases.seed``).
Runs on: any thread, under the pool's lock.
"""

from __future__ import annotations

import os
from typing import Any


def compact_invalidations(items: list[tuple]) -> list[tuple]:
    """The same effect on a reader's caches in a list bounded by workspaces × models: per
    workspace a forget (which makes earlier document marks moot), one vectors item over the
    union of the documents marked since (None if any said "any may have"), each dropped model
    once, and each base still shared with the documents marked after it folded into it.
    Collapsing all into "anything changed" reloaded every vector of a workspace after a large
    save, and lost which model's vectors to drop.

    In that order: forgets, drops, marks, bases. A mark reaches the caches and offers there
    before (a superset of what each needed: some documents refreshed needlessly, none missed),
    and an offer a base makes afterwards starts from exactly its own stale documents, so a
    "changed everything" from before a base cannot spoil it."""
    forgotten: set[int] = set()
    docs: dict[int, set[int] | None] = {}
    models: dict[tuple[int, str], None] = {}
    bases: dict[tuple[int, str], list] = {}  # key → [item kind, ws, fp, shared, stale documents or None]
    for kind, ws_id, *rest in items:
        if kind == "forget":
            forgotten.add(ws_id)
            docs.pop(ws_id, None)
            for key in [k for k in bases if k[0] == ws_id]:
                del bases[key]
        elif kind == "model":
            models[(ws_id, rest[0])] = None
            bases.pop((ws_id, rest[0]), None)
        elif kind == "base":
            bases[(ws_id, rest[0])] = ["base", ws_id, rest[0], rest[1], None if rest[2] is None else set(rest[2])]
        elif kind == "vectors":
            marked = rest[0]
            if marked is None or docs.get(ws_id, set()) is None:
                docs[ws_id] = None
            else:
                docs.setdefault(ws_id, set()).update(marked)  # type: ignore[union-attr]
            for (w, _), b in bases.items():
                if w == ws_id and b[4] is not None:
                    b[4] = None if marked is None else b[4] | set(marked)
    return (
        [("forget", w) for w in sorted(forgotten)]
        + [("model", w, fp) for w, fp in models]
        + [("vectors", w, None if d is None else sorted(d)) for w, d in docs.items()]
        + [(k, w, fp, shared, None if d is None else sorted(d)) for k, w, fp, shared, d in bases.values()]
    )


class SharedBases:
    """Each (workspace, fingerprint)'s last base shared, and the documents invalidated since
    (None: any may have)."""

    def __init__(self) -> None:
        self._by_key: dict[tuple[int, str], tuple[Any, set[int] | None]] = {}

    def track(self, item: tuple) -> None:
        kind, ws_id, *rest = item
        if kind == "base":
            self._by_key[(ws_id, rest[0])] = (rest[1], None if rest[2] is None else set(rest[2]))
        elif kind in ("forget", "model"):
            for key in [k for k in self._by_key if k[0] == ws_id and (kind == "forget" or k[1] == rest[0])]:
                del self._by_key[key]
        elif kind == "vectors":
            for key, (shared, since) in list(self._by_key.items()):
                if key[0] != ws_id or since is None:
                    continue
                if rest[0] is None:
                    self._by_key[key] = (shared, None)
                else:
                    since.update(rest[0])

    def seed(self) -> list[tuple]:
        """A new reader's first invalidations: each base still shared, with what changed since it."""
        return [
            ("base", ws_id, fp, shared, None if since is None else sorted(since))
            for (ws_id, fp), (shared, since) in self._by_key.items()
            if os.path.exists(shared.path)
        ]
