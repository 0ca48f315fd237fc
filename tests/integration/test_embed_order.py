"""Issue 37: vectors are made in the order people search: every document's first passage (title
and abstract) before the rest, the most recently changed document first; a just-saved session
counts as changed now."""

from __future__ import annotations

import os
import time

from autodoc.store import vectors
from autodoc.store.workspaces import get_workspace

DAY_NS = 86_400 * 10**9


def _doc(name: str, sections: int) -> str:
    body = "".join(f"## {name} part {i}\n\n{name} words for part {i}.\n\n" for i in range(sections))
    return f"# {name}\n\n{name} opening paragraph.\n\n{body}"


def test_first_passages_first_and_the_newest_document_first(service_factory, short_tmp):
    kb = short_tmp / "kb"
    kb.mkdir()
    now = time.time_ns()
    for name, age_days in (("old", 300), ("new", 1), ("mid", 30)):
        p = kb / f"{name}.md"
        p.write_text(_doc(name, 3))
        os.utime(p, ns=(now - age_days * DAY_NS, now - age_days * DAY_NS))
    svc = service_factory(kb, {"section_tokens": 40})
    svc.session_append("kb", "s1", [{"id": "e1", "kind": "message", "role": "user", "text": "session about leases"}])
    with svc.store.read() as db:
        ws = get_workspace(db, "kb")
        order = [text.split("\n", 1)[0] for _, text in vectors.pending_texts(db, ws.id, "no-such-model", 1000)]
    assert order == [
        "session about leases › User",  # written just now
        "new",
        "mid",
        "old",
        *[f"{name} › {name} part {i}" for name in ("new", "mid", "old") for i in range(3)],
    ]
