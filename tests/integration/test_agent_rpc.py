"""The daemon-side pieces agents need (issue 15): document.outline, search.similar,
did_you_mean on not-found errors, honest start-up status. Real store, real
service (the in-process binding runs the same table and schemas as the
daemon); every answer is checked against schemas/. The bridge mode of
`autodoc serve` is in test_serve_bridge.py (it needs real processes)."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path
from typing import Any

import pytest

from autodoc.api import TABLE
from autodoc.config import Settings
from autodoc.connect import invoke
from autodoc.errors import AutodocError, DocumentNotFound, Unsupported, WorkspaceNotFound
from autodoc.rpc import schemas
from autodoc.service import Service

CORPORA = Path(__file__).parents[1] / "corpora"
NO_MODEL = {"embedding": {"provider": "none"}}

ODD = """---
title: Odd shapes
---
Lead paragraph before any heading.

# Top

text

### Deep, skipping a level

```
# not a heading (in a fence)
```

## Second

#### Under second

Setext two
----------

body

# Another top
last line
"""


def checked(method: str, result: Any) -> Any:
    assert schemas.result_errors(method, result) == [], method
    return result


# A small corpus with pairs on one topic, for search.similar with the real bundled model.
TOPICS = {
    "food/pasta.md": "---\ntags: [food]\n---\n# Pasta\n\nBoil salted water, add the spaghetti and cook it for "
    "nine minutes, then drain and toss with the sauce.\n",
    "food/risotto.md": "---\ntags: [food]\n---\n# Risotto\n\nToast the rice in butter, add warm stock a ladle at "
    "a time and stir until it is creamy; finish with parmesan.\n",
    "ops/backups.md": "---\ntags: [ops]\n---\n# Backups\n\nCopy the database file every night to the backup "
    "server and check that the copy restores.\n",
    "ops/restore.md": "---\ntags: [ops]\n---\n# Restoring a backup\n\nStop the server, copy last night's "
    "database backup into place and start it again.\n",
    "misc/passwords.md": "# Account help\n\nTo reset a forgotten password, open settings and follow the emailed "
    "link.\n",
}


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return tmp_path_factory.mktemp("agentrpc")


@pytest.fixture(scope="module")
def kb(base):
    root = base / "kb"
    shutil.copytree(CORPORA / "kb", root, symlinks=True)
    (root / "notes" / "odd.md").write_text(ODD)
    topics = base / "topics"
    for rel, text in TOPICS.items():
        (topics / rel).parent.mkdir(parents=True, exist_ok=True)
        (topics / rel).write_text(text)
    service = Service(Settings.from_env(store=str(base / "store.db")))
    invoke(service, "workspace.add", ["kb", str(root), NO_MODEL])
    invoke(service, "workspace.index", ["kb"])
    invoke(service, "workspace.add", ["topics", str(topics)])  # the bundled model
    invoke(service, "workspace.index", ["topics"])
    service.embed_pending("topics")
    invoke(service, "workspace.add", ["unfilled", str(topics)])  # a model, but no vector made yet
    invoke(service, "workspace.index", ["unfilled"])
    try:
        yield service
    finally:
        service.close()


def call(service: Service, method: str, params: Any) -> Any:
    return checked(method, invoke(service, method, params))


# -- document.outline ---------------------------------------------------------------------------


def _walk(nodes):
    for n in nodes:
        yield n
        yield from _walk(n["children"])


def test_outline_nests_headings_and_spans_reproduce_each_section(kb):
    out = call(kb, "document.outline", ["kb", "notes/odd.md"])
    tree = [
        (n["level"], n["title"], [(c["level"], c["title"], [g["title"] for g in c["children"]]) for c in n["children"]])
        for n in out["headings"]
    ]
    assert tree == [
        (1, "Top", [(3, "Deep, skipping a level", []), (2, "Second", ["Under second"]), (2, "Setext two", [])]),
        (1, "Another top", []),
    ]
    data = ODD.encode()
    assert out["total_lines"] == ODD.count("\n") and out["total_bytes"] == len(data)
    for n in _walk(out["headings"]):
        read = call(
            kb, "document.read", ["kb", "notes/odd.md", {"line_start": n["line_start"], "line_end": n["line_end"]}]
        )
        assert read["text"].encode() == data[n["byte_start"] : n["byte_end"]], n["title"]
        assert n["tokens"] > 0
    top, another = out["headings"]
    assert top["line_start"] == ODD.splitlines().index("# Top") + 1
    assert top["line_end"] == another["line_start"] - 1 and another["line_end"] == out["total_lines"]
    # a parent's section holds its children's, and its tokens are at least theirs
    assert top["tokens"] >= sum(c["tokens"] for c in top["children"])
    assert all(top["byte_start"] <= c["byte_start"] < c["byte_end"] <= top["byte_end"] for c in top["children"])


def test_outline_of_a_real_adr_covers_the_file_to_its_last_line(kb):
    out = call(kb, "document.outline", ["kb", "adrs/0012-lease-recovery.md"])
    assert out["title"].startswith("ADR 0012")
    (h1,) = out["headings"]
    assert h1["line_end"] == out["total_lines"] and h1["byte_end"] == out["total_bytes"]
    titles = [c["title"] for c in h1["children"]]
    assert "Decision" in titles and "Consequences" in titles
    assert out["tokens"] >= h1["tokens"] > sum(c["tokens"] for c in h1["children"]) * 0.9


def test_outline_of_a_missing_document_is_not_found(kb):
    with pytest.raises(DocumentNotFound):
        invoke(kb, "document.outline", ["kb", "adrs/nope.md"])


# -- search.similar -------------------------------------------------------------------------------


def test_similar_finds_the_document_on_the_same_topic_first_and_never_itself(kb):
    for path, partner in [("food/pasta.md", "food/risotto.md"), ("ops/backups.md", "ops/restore.md")]:
        out = call(kb, "search.similar", ["topics", path, {"limit": 10}])
        paths = [h["path"] for h in out["similar"]]
        assert out["semantic"] == "ready" and out["model"]
        assert paths[0] == partner, paths
        assert path not in paths and len(paths) == len(set(paths)) == len(TOPICS) - 1
        scores = [h["score"] for h in out["similar"]]
        assert scores == sorted(scores, reverse=True)


def test_similar_passages_point_at_their_lines_and_options_filter(kb):
    out = call(kb, "search.similar", ["topics", "food/pasta.md", {"limit": 1}])
    (hit,) = out["similar"]
    read = call(
        kb, "document.read", ["topics", hit["path"], {"line_start": hit["line_start"], "line_end": hit["line_end"]}]
    )
    assert "Risotto" in read["text"]
    only_ops = call(kb, "search.similar", ["topics", "food/pasta.md", {"paths": ["ops"]}])
    assert {h["path"] for h in only_ops["similar"]} == {"ops/backups.md", "ops/restore.md"}
    tagged = call(kb, "search.similar", ["topics", "ops/restore.md", {"tags": "food"}])
    assert {h["path"] for h in tagged["similar"]} == {"food/pasta.md", "food/risotto.md"}


def test_similar_without_vectors_says_semantic_is_unavailable_and_why(kb):
    with pytest.raises(Unsupported) as info:
        invoke(kb, "search.similar", ["kb", "adrs/0012-lease-recovery.md"])
    assert info.value.code == -32065 and info.value.data["state"] == "off"
    assert "embedding model" in info.value.data["reason"]
    with pytest.raises(Unsupported) as info:
        invoke(kb, "search.similar", ["unfilled", "food/pasta.md"])
    assert info.value.data["state"] == "partial" and "no vectors yet" in info.value.data["reason"]
    with pytest.raises(DocumentNotFound):
        invoke(kb, "search.similar", ["topics", "food/pizza.md"])


# -- did_you_mean ---------------------------------------------------------------------------------

SAMPLE = {
    "workspace": "kb",
    "name": "kb",
    "path": "adrs/0012-lease-recovery.md",
    "query": "lease",
    "cursor": 0,
    "options": {"demote_superseded": True},
    "tokens": 350,
    "session_id": "s-1",
    "events": [{"id": "1", "kind": "message", "text": "hello"}],
}


def params_for(method: str, **override: Any) -> dict[str, Any]:
    required = schemas.load_schema(method, "params").get("required", [])
    return {k: override.get(k, SAMPLE[k]) for k in [*required, *(k for k in override if k not in required)]}


def error_of(service: Service, method: str, params: dict) -> AutodocError:
    with pytest.raises(AutodocError) as info:
        invoke(service, method, params)
    wire = info.value.to_rpc()
    assert schemas.error_errors(wire) == [], wire
    return info.value


NAMED_WORKSPACE = [
    m.name
    for m in TABLE
    if m.call and {"workspace", "name"} & set(schemas.param_names(m.name)) and m.name != "workspace.add"
]
NAMED_PATH = [m.name for m in TABLE if m.call and "path" in schemas.param_names(m.name)]


@pytest.mark.parametrize("method", NAMED_WORKSPACE)
def test_every_method_suggests_the_workspace_meant(kb, method):
    key = "name" if "name" in schemas.param_names(method) else "workspace"
    e = error_of(kb, method, params_for(method, **{key: "KB2"}))
    assert isinstance(e, WorkspaceNotFound) and e.code == -32001
    assert e.data["workspace"] == "KB2" and e.data["did_you_mean"][0] == "kb"
    e = error_of(kb, method, params_for(method, **{key: "zzzzzz"}))
    assert e.data["did_you_mean"] == []


@pytest.mark.parametrize("method", NAMED_PATH)
def test_every_method_suggests_the_document_meant(kb, method):
    for guess, meant in [
        ("ADR-12", "adrs/0012-lease-recovery.md"),
        ("adrs/12.md", "adrs/0012-lease-recovery.md"),
        ("runbooks/lease-recovry.md", "runbooks/lease-recovery.md"),
    ]:
        e = error_of(kb, method, params_for(method, path=guess))
        assert isinstance(e, DocumentNotFound) and e.code == -32003, (method, e)
        assert e.data["path"] == guess and e.data["did_you_mean"][0] == meant, (guess, e.data)


def test_a_large_workspace_narrows_candidates_first_and_still_finds_them(kb, monkeypatch):
    import autodoc.documents as documents

    monkeypatch.setattr(documents, "SCAN_ALL", 0)  # as if the workspace had more documents than are compared
    for guess, meant in [
        ("ADR-12", "adrs/0012-lease-recovery.md"),
        ("lease recovry", "runbooks/lease-recovery.md"),
        ("adrs/porter_stemming.md", "adrs/0009-porter-stemming.md"),
    ]:
        e = error_of(kb, "document.outline", {"workspace": "kb", "path": guess})
        assert meant in e.data["did_you_mean"][:2], (guess, e.data)


def test_only_close_matches_are_suggested(kb):
    """Issue 38: a mistyped path got the right file plus 4 unrelated ones."""
    e = error_of(kb, "document.read", {"workspace": "kb", "path": "runbooks/lease-recovry.md"})
    assert e.data["did_you_mean"] == ["runbooks/lease-recovery.md"], e.data
    # two documents as near as each other are both said
    e = error_of(kb, "document.read", {"workspace": "kb", "path": "lease-recovery.md"})
    assert set(e.data["did_you_mean"]) == {"runbooks/lease-recovery.md", "adrs/0012-lease-recovery.md"}, e.data


def test_a_number_is_not_suggested_for_another_number(kb):
    e = error_of(kb, "document.read", {"workspace": "kb", "path": "ADR-13"})
    assert not any("0012" in p for p in e.data["did_you_mean"]), e.data


# -- start-up honesty -----------------------------------------------------------------------------


def test_status_says_the_model_is_loading_instead_of_waiting_for_it(kb, base, monkeypatch):
    """A second service (a reader on the same store, as a fresh daemon would be) whose model load
    is held at a gate: a real load takes about a second, too short to be seen reliably, so the
    gate (the one stand-in here) makes it last until the test has looked. The model is real."""
    import autodoc.embed.providers as providers_module

    gate, entered = threading.Event(), threading.Event()
    real = providers_module.make_provider

    def slow_load(cfg):
        entered.set()
        assert gate.wait(30)
        return real(cfg)

    monkeypatch.setattr(providers_module, "make_provider", slow_load)
    fresh = Service(Settings.from_env(store=str(base / "store.db")), writer=False)
    try:
        cfg = next(
            w["config"]["embedding"] for w in invoke(fresh, "workspace.list", [])["workspaces"] if w["name"] == "topics"
        )
        info = invoke(fresh, "server.info", [])
        assert info["semantic"]["model_state"] == "unloaded" and info["models"]["embedding"] == []
        loader = threading.Thread(target=fresh.providers.get, args=(cfg,))  # what the embed queue does first
        loader.start()
        assert entered.wait(30)
        filled = call(fresh, "workspace.status", ["topics"])["embedding"]  # answers although the load holds its lock
        # every vector is there and a search waits for the load: ready, not partial (issue 16)
        assert filled["model_state"] == "loading" and filled["state"] == "ready" and filled["available"]
        assert filled["pending"] == 0 and filled["embedded"] == filled["total"] > 0 and filled["eta_seconds"] == 0
        assert "loading" in filled["reason"]
        empty = call(fresh, "workspace.status", ["unfilled"])["embedding"]
        assert empty["model_state"] == "loading" and empty["embedded"] == 0 and empty["pending"] == empty["total"] > 0
        assert empty["state"] == "partial" and "loading" in empty["reason"]
        assert empty["eta_seconds"] is None  # no batch measured yet: no ETA rather than a guess
        semantic = invoke(fresh, "server.info", [])["semantic"]
        assert loader.is_alive(), "server.info waited for the model load to end"  # it is still held at the gate
        assert semantic["state"] == "loading" and semantic["pending"] == empty["total"]
        assert (
            schemas.validator("server.info", "result")
            .evolve(schema=schemas.load_schema("server.info", "result")["properties"]["semantic"])
            .is_valid(semantic)
        )
        gate.set()
        loader.join(30)
        after = call(fresh, "workspace.status", ["topics"])["embedding"]
        assert after["model_state"] == "ready" and after["state"] == "ready" and after["reason"] is None
    finally:
        gate.set()
        fresh.close()


def test_a_model_that_cannot_load_is_reported_failed_and_info_does_not_retry_it(kb, base, monkeypatch):
    """A fresh reader service whose model load fails. The bundled model cannot be made missing
    without breaking the installation, so the load is replaced by one that raises what a missing
    model file raises (the one stand-in here)."""
    import autodoc.embed.providers as providers_module
    from autodoc.embed.base import ProviderDown

    loads = []

    def missing(cfg):
        loads.append(cfg)
        raise ProviderDown("embedding model file missing: /nowhere/model.onnx", provider="onnx", retryable=False)

    monkeypatch.setattr(providers_module, "make_provider", missing)
    fresh = Service(Settings.from_env(store=str(base / "store.db")), writer=False)
    try:
        status = call(fresh, "workspace.status", ["topics"])["embedding"]  # status may try the load
        assert status["model_state"] == "failed" and status["state"] == "failed" and "missing" in status["reason"]
        tried = len(loads)
        semantic = invoke(fresh, "server.info", [])["semantic"]
        assert semantic["state"] == "failed" and semantic["model_state"] == "failed"
        assert "missing" in semantic["reason"] and semantic["eta_seconds"] is None
        assert len(loads) == tried  # server.info reports; it never loads
    finally:
        fresh.close()


def test_the_eta_comes_from_the_measured_rate(kb):
    status = call(kb, "workspace.status", ["topics"])["embedding"]
    assert status["model_state"] == "ready" and status["pending"] == 0 and status["eta_seconds"] == 0
    assert status["rate"] > 0  # measured while the fixture embedded the workspace
    waiting = call(kb, "workspace.status", ["unfilled"])["embedding"]  # same model, nothing embedded yet
    assert waiting["state"] == "partial" and waiting["pending"] == waiting["total"] > 0
    assert waiting["eta_seconds"] == pytest.approx(waiting["pending"] / waiting["rate"], abs=0.1)
    semantic = invoke(kb, "server.info", [])["semantic"]
    # the same estimate (rounded: 5 chunks at a quiet machine's rate come to ≈ 0.0 s, so not "> 0")
    assert semantic["state"] == "filling" and semantic["pending"] == waiting["pending"]
    assert semantic["eta_seconds"] is not None
    assert semantic["eta_seconds"] == pytest.approx(waiting["eta_seconds"], abs=0.1)
    none = call(kb, "workspace.status", ["kb"])["embedding"]
    assert none["model_state"] == "none" and none["rate"] is None and none["eta_seconds"] is None


def test_a_browse_pages_past_its_200_with_after(tmp_path):
    """A query of facets only lists at most 200 files: `after` (the last path of a page) reaches
    the rest, every file once and in order; it filters a ranked query alike."""
    root = tmp_path / "many"
    for i in range(230):
        (root / f"d{i // 100}").mkdir(parents=True, exist_ok=True)
        (root / f"d{i // 100}" / f"n{i:03d}.md").write_text(
            f"---\ntags: [{'even' if i % 2 == 0 else 'odd'}]\n---\n# Note {i}\n\nwombat number {i}\n"
        )
    svc = Service(Settings.from_env(store=str(tmp_path / "s.db")))
    try:
        call(svc, "workspace.add", ["many", str(root), NO_MODEL])
        call(svc, "workspace.index", ["many"])
        listed, after, counts = [], None, []
        while True:
            page = call(
                svc,
                "search.query",
                ["many", "", {"limit": 200, "facet_counts": ["tags"], **({"after": after} if after else {})}],
            )
            listed += [h["path"] for h in page["hits"]]
            counts.append(page["facet_counts"])
            if len(page["hits"]) < 200:
                break
            after = page["hits"][-1]["path"]
        assert len(listed) == 230 and listed == sorted(listed) and len(set(listed)) == 230
        assert counts[0] == counts[-1] == {"tags": {"even": 115, "odd": 115}}  # the whole set on every page
        ranked = call(
            svc, "search.query", ["many", "wombat", {"limit": 50, "after": "d1/n199.md", "stages": ["lexical"]}]
        )["hits"]
        assert ranked and all(h["path"] > "d1/n199.md" for h in ranked)
        assert {h["path"] for h in ranked} == {p for p in listed if p > "d1/n199.md"}
    finally:
        svc.close()
