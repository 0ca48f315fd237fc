"""Issue 35: the passage that answers is chosen from *all* of the leading document's passages
(search/passages.py), not only those the legs brought back.

In a large workspace the legs' depth (50 passages each) is filled by other documents' passages
and by the long page's own overview, so the section that answers can be neither leg's among its
first fifty while its document leads. Here the workspace is small, so that condition is made by
taking the answering passage out of both legs' lists after they ran (a wrapper around
engine.run_legs: the one stand-in, for a crowd this test cannot afford to index); everything
else is real: the store, FTS5, the bundled ONNX model and its stored vectors.
"""

from __future__ import annotations

import pytest

from autodoc.config import Settings
from autodoc.rpc import schemas
from autodoc.search import engine
from autodoc.service import Service

SECTIONS = [
    (
        "Overview",
        "This runbook covers the payments database cluster: failover, replicas, backups, "
        "restores and the maintenance windows they need. Read it before you page the database team.",
    ),
    (
        "Contents",
        "- [Failover](#failover)\n- [Replicas](#replicas)\n- [Backups](#backups)\n"
        "- [Restoring a snapshot](#restoring-a-snapshot)\n- [Maintenance windows](#maintenance-windows)",
    ),
    (
        "Failover",
        "When the primary stops answering, promote the healthiest replica with the cluster tool "
        "and move the service address to it.",
    ),
    (
        "Replicas",
        "Two replicas follow the primary in other zones; check their lag on the dashboard before any planned change.",
    ),
    (
        "Backups",
        "Snapshots of the payments database are taken every night and kept for thirty days in the backup account.",
    ),
    (
        "Restoring a snapshot",
        "A point-in-time restore of the 500 GB volume takes about forty minutes. "
        "Announce a maintenance window first, then start the restore from the console.",
    ),
    (
        "Maintenance windows",
        "Windows are booked on the team calendar at least a day ahead and announced in the payments channel.",
    ),
]
OTHER = {
    "notes/cooking.md": "# Pasta\n\nBoil salted water and cook the spaghetti for nine minutes.\n",
    "notes/laptops.md": "# Laptop setup\n\nInstall the VPN client and ask for a hardware key on day one.\n",
}
ANSWER_LINE = 0  # set by the fixture: the line that answers
QUERY = "how long does it take to bring the payments database back from a snapshot"


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    base = tmp_path_factory.mktemp("whole")
    root = base / "kb"
    (root / "ops").mkdir(parents=True)
    (root / "notes").mkdir()
    body = "# Payments database runbook\n\n" + "\n\n".join(f"## {h}\n\n{t}" for h, t in SECTIONS) + "\n"
    (root / "ops" / "runbook.md").write_text(body)
    global ANSWER_LINE
    ANSWER_LINE = next(i for i, line in enumerate(body.splitlines(), 1) if "point-in-time restore" in line)
    for rel, text in OTHER.items():
        (root / rel).write_text(text)
    svc = Service(Settings.from_env(store=str(base / "store.db")))
    svc.workspace_add("kb", str(root))  # the bundled model
    svc.index("kb")
    svc.embed_pending("kb")
    yield svc
    svc.close()


def _holds(hit: dict) -> bool:
    return hit["path"] == "ops/runbook.md" and hit["line_start"] <= ANSWER_LINE <= hit["line_end"]


@pytest.fixture
def crowded(kb, monkeypatch):
    """The legs as a big workspace leaves them: the answering passage in neither list."""
    real = engine.run_legs
    dropped: list[int] = []

    def run_legs(ctx, plan):
        legs = real(ctx, plan)
        rows = {cid: c for cid, c in legs.cands.items() if c.path == "ops/runbook.md"}
        texts = engine.stored_hits.chunk_texts(ctx.db, list(rows))
        answer = [cid for cid, t in texts.items() if "point-in-time restore" in t]
        dropped.extend(answer)
        for name in list(legs.hits):
            legs.hits[name] = [h for h in legs.hits[name] if h.chunk_id not in answer]
        return legs

    monkeypatch.setattr(engine, "run_legs", run_legs)
    return dropped


def test_the_answer_no_leg_returned_leads_its_document(kb, crowded):
    ans = kb.search("kb", QUERY, {"limit": 5})
    assert crowded, "the legs had found the answering passage: nothing was taken out"
    assert ans["stages"]["performed"][:2] == ["lexical", "semantic"]
    assert schemas.result_errors("search.query", ans) == []  # `via: ["document"]` is in the contract
    first = ans["hits"][0]
    assert _holds(first)
    # found by no leg, and said so: its legs' scores and ranks null, `via` the document's scoring
    assert first["via"] == ["document"] and first["ranks"] == {"lexical": None, "semantic": None}
    assert first["scores"] == {"lexical": None, "semantic": None}
    assert ans["hits"][0]["confidence"] == max(h["confidence"] for h in ans["hits"])  # still monotone


def test_one_passage_a_document_shows_it_with_its_document(kb, crowded):
    ans = kb.search("kb", QUERY, {"limit": 5, "answer": "compact", "per_document": True, "budget_tokens": 800})
    runbook = [h for h in ans["hits"] if h["path"] == "ops/runbook.md"]
    assert runbook and _holds(runbook[0])
    assert ans["hits"][0]["path"] == "ops/runbook.md"
    # the table of contents, which names every section, is never shown ahead of a section
    assert not any("[Failover]" in h["text"] for h in runbook[:2])


def test_a_cursor_page_and_one_leg_keep_the_legs_order(kb, crowded):
    lexical = kb.search("kb", QUERY, {"limit": 5, "stages": ["lexical"]})
    assert not any(_holds(h) for h in lexical["hits"])  # a leg alone: its own list


def test_a_document_past_the_cap_keeps_fusions_choice(kb, crowded, monkeypatch):
    """More passages than MAX_PASSAGES (a long session's events): the document is not read whole,
    so the answer no leg returned is not reached; fusion's first stays first."""
    from autodoc.search import passages

    monkeypatch.setattr(passages, "MAX_PASSAGES", len(SECTIONS) - 1)
    ans = kb.search("kb", QUERY, {"limit": 5})
    assert ans["hits"][0]["path"] == "ops/runbook.md" and not _holds(ans["hits"][0])
    assert all("document" not in h["via"] for h in ans["hits"])
