"""What a compact answer reads besides the search: the indexed text and the
stat of each document it cites, and how many chunks hold each query word
(for the `answerable` signal's word weights).

Runs on: the caller's thread, on the search's one read snapshot.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .interface import Snapshot
from .lexical import ftsterms
from .sql import in_ids


@dataclass(frozen=True)
class Indexed:
    data: bytes  # the indexed generation's bytes: hits' spans point into them
    size: int  # the file's size and mtime when it was indexed, to tell whether it changed since
    mtime_ns: int


def documents(db: Snapshot, ws_id: int, paths: list[str]) -> dict[str, Indexed]:
    if not paths:
        return {}
    cond, arg = in_ids(db, "path", sorted(set(paths)))
    return {
        p: Indexed(data=d, size=s, mtime_ns=m)
        for p, d, s, m in db.execute(
            f"SELECT path, content, size, mtime_ns FROM documents WHERE workspace_id=? AND {cond}",
            (ws_id, arg),
        )
    }


def word_weights(db: Snapshot, stems: list[str]) -> dict[str, float]:
    """stem → inverse chunk frequency, log(1 + N/(1 + n)), over the whole FTS index
    (every workspace: the weights only need to tell rare words from common ones)."""
    if not stems:
        return {}
    # fts5vocab's counts (the postings' on a store without FTS5), cached per index state
    state = ftsterms.index_state(db)
    docs = ftsterms.token_docs(db, list(dict.fromkeys(stems)), state)
    return {s: math.log(1 + state.rows / (1 + docs[s])) for s in dict.fromkeys(stems)}
