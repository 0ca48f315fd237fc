"""The semantic stage with the real bundled model (all-MiniLM-L6-v2 via
onnxruntime) and a real local HTTP embeddings server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.embed_server import EmbedServer

from autodoc.config import Settings
from autodoc.errors import EmbedFailed, Switching, Unsupported
from autodoc.service import Service
from autodoc.store import vectors as stored_vectors

DOCS = {
    "storage.md": "# Storage choice\n\nWe chose an embedded relational store that lives in one file beside the "
    "application, because it needs no server process.\n\n## Backups\n\nCopy the file while holding "
    "the lease.\n",
    "passwords.md": "# Account help\n\nTo reset a forgotten password, open settings and follow the emailed link.\n",
    "cooking.md": "# Pasta\n\nBoil salted water, add the spaghetti and cook for nine minutes.\n",
    "oncall.md": "# On-call\n\nPage the secondary when the primary does not acknowledge within ten minutes.\n",
}


def write_corpus(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, text in DOCS.items():
        (root / name).write_text(text)
    return root


@pytest.fixture()
def svc(service_factory, tmp_path):
    # the bundled model (the workspace's default config), not indexed: each test indexes
    return service_factory(write_corpus(tmp_path / "kb"), None, store=tmp_path / "s.db", index=False)


def _meter(s: Service) -> dict:
    return s.info()["models"]["embedding"][0]["meter"]


def test_every_chunk_embedded_once_and_an_edit_reembeds_one(svc, tmp_path):
    rep = svc.index("kb", embed=True)
    n = rep["chunks"]
    assert rep["embedding"] == {"available": True, "embedded": n, "skipped": 0, "reason": None}
    texts0 = _meter(svc)["texts"]
    assert texts0 == n
    again = svc.index("kb", embed=True)
    assert again["embedding"]["embedded"] == 0 and _meter(svc)["texts"] == texts0
    # one section edited → one new vector
    p = tmp_path / "kb" / "storage.md"
    p.write_text(p.read_text().replace("holding the lease", "holding the writer lease"))
    rep = svc.index("kb", embed=True)
    assert rep["modified"] == 1 and rep["embedding"]["embedded"] == 1
    assert _meter(svc)["texts"] == texts0 + 1
    # identical text in another file shares the vector
    (tmp_path / "kb" / "copy.md").write_text(DOCS["passwords.md"])
    rep = svc.index("kb", embed=True)
    assert rep["added"] == 1 and rep["embedding"]["embedded"] == 0


def test_paraphrase_found_by_meaning_not_words(svc):
    svc.index("kb", embed=True)
    q = "how do I recover my login credentials"
    lex = svc.search("kb", q, {"stages": ["lexical"]})
    assert "passwords.md" not in [h["path"] for h in lex["hits"]]
    sem = svc.search("kb", q, {"stages": ["semantic"], "limit": 1})
    assert sem["mode_used"] == "semantic" and sem["semantic"] == "ready"
    assert sem["hits"][0]["path"] == "passwords.md"
    h = sem["hits"][0]
    assert h["via"] == ["semantic"] and h["scores"]["lexical"] is None and h["ranks"]["lexical"] is None
    assert 0 < h["scores"]["semantic"] <= 1
    hy = svc.search("kb", "embedded store in one file")
    assert hy["mode_used"] == "hybrid" and hy["stages"]["performed"] == ["lexical", "semantic"]
    assert hy["hits"][0]["path"] == "storage.md" and set(hy["hits"][0]["via"]) == {"lexical", "semantic"}
    assert hy["hits"][0]["compatibility"] > 0.6


def test_partial_until_a_document_is_embedded(svc):
    svc.index("kb")  # no embedding yet
    ans = svc.search("kb", "reset forgotten password")
    assert ans["semantic"] == "partial" and ans["mode_used"] == "hybrid"
    assert all("semantic" not in h["via"] for h in ans["hits"])  # nothing is ready to answer by meaning
    assert svc.workspace_status("kb")["embedding"]["state"] == "partial"
    while svc.embed_step("kb", 1)["embedded"]:
        pass
    ans = svc.search("kb", "reset forgotten password")
    assert ans["semantic"] == "ready" and "semantic" in ans["hits"][0]["via"]


def test_no_model_is_unsupported(tmp_path):
    s = Service(Settings.from_env(store=tmp_path / "n.db"))
    s.workspace_add("kb", str(write_corpus(tmp_path / "kb")), {"embedding": {"provider": "none"}})
    s.index("kb")
    with pytest.raises(Unsupported) as e:
        s.search("kb", "password", {"stages": ["semantic"]})
    assert e.value.code == -32065
    ans = s.search("kb", "password")
    assert ans["semantic"] == "off" and "semantic" in ans["stages"]["skipped"]
    s.close()


def test_provider_down_degrades_to_lexical_and_says_why(tmp_path):
    s = Service(Settings.from_env(store=tmp_path / "d.db"))
    s.workspace_add(
        "kb",
        str(write_corpus(tmp_path / "kb")),
        {
            "embedding": {
                "provider": "http",
                "url": "http://127.0.0.1:9/v1/embeddings",
                "model": "m",
                "timeout": 0.5,
                "retries": 0,
            }
        },
    )
    rep = s.index("kb", embed=True)
    assert rep["embedding"]["available"] is False and rep["embedding"]["reason"]
    assert rep["embedding"]["skipped"] == rep["chunks"]
    with pytest.raises(EmbedFailed) as e:
        s.search("kb", "password", {"mode": "semantic"})
    assert e.value.code == -32067
    ans = s.search("kb", "password")
    assert ans["mode_used"] == "lexical" and ans["semantic"] == "failed"
    assert "unavailable" in ans["stages"]["skipped"]["semantic"] and ans["hits"]
    s.close()


def test_model_switch_keeps_old_vectors_then_swaps_atomically(tmp_path):
    a, b = EmbedServer(), EmbedServer()
    try:
        s = Service(Settings.from_env(store=tmp_path / "w.db"))
        s.workspace_add(
            "kb",
            str(write_corpus(tmp_path / "kb")),
            {"embedding": {"provider": "http", "url": a.url, "model": "model-a"}},
        )
        s.index("kb", embed=True)
        assert s.search("kb", "reset password", {"mode": "semantic"})["semantic"] == "ready"
        s.workspace_configure("kb", {"embedding": {"provider": "http", "url": b.url, "model": "model-b"}})
        # old vectors keep serving while model-b fills
        ans = s.search("kb", "reset password", {"mode": "semantic"})
        assert ans["semantic"] == "switching" and ans["hits"][0]["path"] == "passwords.md"
        assert s.workspace_status("kb")["embedding"]["state"] == "switching"
        # the old model is gone: semantic-only is refused, hybrid says why
        a.stop()
        with pytest.raises(Switching) as e:
            s.search("kb", "reset my account password", {"mode": "semantic"})
        assert e.value.code == -32069
        hy = s.search("kb", "reset my account password")
        assert hy["stages"]["skipped"]["semantic"] == "a new embedding model is filling"
        assert hy["mode_used"] == "lexical" and hy["semantic"] == "switching"
        # fill completes → switch, old vectors removed
        s.embed_pending("kb")
        st = s.workspace_status("kb")["embedding"]
        assert st["state"] == "ready" and st["model"] == "model-b"
        db = s.store.reader()
        assert db.execute("SELECT COUNT(DISTINCT model_fp) FROM vectors").fetchone()[0] == 1
        assert s.search("kb", "reset password", {"mode": "semantic"})["hits"][0]["path"] == "passwords.md"
        s.close()
    finally:
        b.stop()


def test_repeat_hybrid_searches_are_byte_identical(svc):
    svc.index("kb", embed=True)
    a = json.dumps(svc.search("kb", "file store lease backup", {"limit": 10}))
    for _ in range(3):
        assert json.dumps(svc.search("kb", "file store lease backup", {"limit": 10})) == a


def test_weighted_fusion_selectable_per_request(svc):
    svc.index("kb", embed=True)
    ans = svc.search("kb", "embedded relational store", {"fusion": {"method": "weighted"}})
    h = ans["hits"][0]
    assert h["path"] == "storage.md"
    # BM25 is scaled to the query's best lexical hit and held to seed 000's 0.3
    rrf = svc.search("kb", "embedded relational store", {"limit": 50})["hits"]
    best = next(x["scores"]["lexical"] for x in rrf if x["ranks"]["lexical"] == 0)
    expected = 0.6 * h["scores"]["semantic"] + 0.4 * 0.3 * h["scores"]["lexical"] / best
    assert abs(h["score"] - expected) < 1e-6  # storage.md has no tags or inbound links: no boost
    assert all(x["score"] >= 0.2 for x in ans["hits"])


def test_convex_fusion_selectable_per_request(svc):
    svc.index("kb", embed=True)
    ans = svc.search("kb", "embedded relational store", {"fusion": {"method": "convex"}})
    top = ans["hits"][0]
    assert top["path"] == "storage.md" and set(top["via"]) == {"lexical", "semantic"}
    assert 0 < top["relevance"] <= 1 and top["score"] <= 1.0


def test_an_idle_queue_does_not_rescan_the_store(svc, tmp_path, monkeypatch):
    # the daemon's queue steps every workspace every couple of seconds when idle; finding
    # "nothing pending" is a scan of every chunk, so it must happen once per change, not per step
    svc.index("kb", embed=True)
    scans = []
    real = stored_vectors.pending_texts
    monkeypatch.setattr(stored_vectors, "pending_texts", lambda *a, **k: scans.append(1) or real(*a, **k))
    for _ in range(5):
        assert svc.embed_step("kb")["embedded"] == 0
    assert len(scans) <= 1
    (tmp_path / "kb" / "new.md").write_text("# New\n\nA note about garden snails and their shells.\n")
    svc.index("kb")
    before = len(scans)
    step = svc.embed_step("kb")
    assert step["embedded"] == 1 and len(scans) == before + 1


def test_the_model_hands_its_batch_memory_back_once_the_queue_drains(svc):
    # onnxruntime keeps its largest batch's arena for the session's life (1.2 GB after a fill
    # at 100k chunks); the queue gives it back when it runs dry, once, not after every batch
    released = []
    provider = svc.providers.get({"provider": "onnx"})
    real = provider.release_memory
    provider.release_memory = lambda: released.append(1) or real()
    svc.index("kb")
    while svc.embed_step("kb")["embedded"]:
        assert released == []  # batches do not pay for it
    assert released == [1]
    svc.embed_step("kb")
    assert released == [1]
    ans = svc.search("kb", "lease", {"stages": ["semantic"]})  # the model still answers afterwards
    assert ans["stages"]["performed"] == ["semantic"] and ans["hits"]


def test_a_store_from_before_the_vector_key_index_is_migrated(tmp_path):
    # coverage counts and the queue's scan name the index (INDEXED BY): an older store gets it on open
    import apsw

    from autodoc.store.migrations import MIGRATIONS, schema_version

    store = tmp_path / "old.db"
    db = apsw.Connection(str(store))
    with db:
        MIGRATIONS[0](db)
        MIGRATIONS[1](db)
        db.execute("PRAGMA user_version = 2")
    db.close()
    s = Service(Settings.from_env(store=store))
    try:
        w = s.store.writer()
        assert schema_version(w) == len(MIGRATIONS) >= 3
        assert w.execute("SELECT 1 FROM sqlite_master WHERE type='index' AND name='vectors_keys'").fetchone()
        s.workspace_add("kb", str(write_corpus(tmp_path / "kb")))
        rep = s.index("kb", embed=True)
        st = s.workspace_status("kb")["embedding"]
        assert st["state"] == "ready" and st["embedded"] == rep["chunks"] and st["pending"] == 0
    finally:
        s.close()


def test_a_provider_that_cannot_answer_says_failed_not_waiting(tmp_path):
    # a workspace on an embedding server that is down: its chunks wait, and status must say why
    from autodoc.config import Settings
    from autodoc.service import Service

    kb = write_corpus(tmp_path / "kb")
    s = Service(Settings.from_env(store=tmp_path / "s" / "a.db"))
    try:
        dead = {"provider": "http", "url": "http://127.0.0.1:9/v1/embeddings", "model": "m", "dim": 8, "retries": 0}
        s.workspace_add("kb", str(kb), {"embedding": dead})
        s.index("kb")
        assert s.workspace_status("kb")["embedding"]["state"] == "partial"  # nothing tried yet
        assert s.embed_step("kb")["state"] == "failed"
        st = s.workspace_status("kb")["embedding"]
        assert st["state"] == "failed" and "provider failed" in st["reason"] and st["pending"] > 0
    finally:
        s.close()


def test_a_semantic_leg_that_fails_at_run_time_answers_as_lexical_alone(svc, monkeypatch):
    """The provider loads and then raises on the query (a model server that went away between the
    leg's preparation and its run). That fault cannot be caused with the bundled model, so its
    embed_query is replaced by one that raises (the one test double here); the vectors are real."""
    from autodoc.embed.base import ProviderDown

    svc.index("kb", embed=True)
    provider = svc.providers.get(svc.workspace_list()["workspaces"][0]["config"]["embedding"])

    def down(text):
        raise ProviderDown("the embeddings server went away")

    q = "storage file lease backups"
    lexical = svc.search("kb", q, {"stages": ["lexical"]})
    monkeypatch.setattr(provider, "embed_query", down)
    hybrid = svc.search("kb", q)
    assert hybrid["stages"]["performed"] == ["lexical"] and "went away" in hybrid["stages"]["skipped"]["semantic"]
    assert hybrid["mode_used"] == "lexical" and hybrid["semantic"] == "failed"

    def shown(r):
        return [(h["path"], h["chunk_id"], h["score"], h["scores"], h["ranks"], h["via"]) for h in r["hits"]]

    assert shown(hybrid) == shown(lexical) and shown(lexical)
    assert hybrid["lexical_match"] == lexical["lexical_match"]
