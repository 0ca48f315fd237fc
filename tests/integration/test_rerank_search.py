"""Stage 3 wired into search: a real (tiny, random-weight) ONNX cross-encoder
built at test time; the search must re-sort its window, say so, and fall back
honestly when the ranker fails."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers.tiny_models import MAGIC, build_tiny_cross_encoder

from autodoc.config import Settings
from autodoc.connect import invoke
from autodoc.errors import InvalidParams
from autodoc.service import Service

CORPUS = Path(__file__).parents[1] / "corpora" / "kb"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_tiny_cross_encoder(tmp_path_factory.mktemp("ce"))


@pytest.fixture(scope="module")
def slow(tmp_path_factory):
    return build_tiny_cross_encoder(tmp_path_factory.mktemp("slow"), heavy_layers=6, heavy_dim=512)


@pytest.fixture()
def svc(service_factory, tmp_path, tiny):
    kb = tmp_path / "kb"
    shutil.copytree(CORPUS, kb, symlinks=True)
    config = {"embedding": {"provider": "none"}, "ranker": {"provider": "onnx", "path": str(tiny), "model": "tiny-ce"}}
    return service_factory(kb, config, store=tmp_path / "a.db")


def test_window_is_resorted_by_rank_score_and_says_so(svc):
    ans = svc.search("kb", "writer sqlite", {"limit": 40, "ranker": {"window": 10}})
    assert ans["stages"]["performed"] == ["lexical", "rerank"]
    assert ans["rank"] == {"state": "ready", "model": "tiny-ce", "error": ""}
    top, rest = ans["hits"][:10], ans["hits"][10:]
    scores = [h["rank_score"] for h in top]
    assert all(s is not None for s in scores) and scores == sorted(scores, reverse=True)
    assert all("rank" in h["via"] for h in top)
    assert all(h["rank_score"] is None and "rank" not in h["via"] for h in rest)
    # below the window, the fused order stands
    plain = svc.search("kb", "writer sqlite", {"limit": 40, "stages": ["lexical"]})
    window_ids = {h["chunk_id"] for h in plain["hits"][:10]}
    assert {h["chunk_id"] for h in top} == window_ids
    assert [h["chunk_id"] for h in rest] == [h["chunk_id"] for h in plain["hits"][10:]]
    # the tiny model favours passages containing its magic word
    assert MAGIC in (top[0]["breadcrumb"] + top[0]["snippet"]).lower()


def test_leaving_rerank_out_is_never_ranked(svc):
    ans = svc.search("kb", "writer sqlite", {"stages": ["lexical"]})
    assert ans["rank"]["state"] == "skipped" and "rerank" not in ans["stages"]["performed"]
    assert all(h["rank_score"] is None for h in ans["hits"])


def test_a_ranker_past_its_deadline_leaves_the_found_order(tmp_path, slow):
    kb = tmp_path / "kb"
    shutil.copytree(CORPUS, kb, symlinks=True)
    s = Service(Settings.from_env(store=tmp_path / "b.db"))
    s.workspace_add(
        "kb",
        str(kb),
        {"embedding": {"provider": "none"}, "ranker": {"provider": "onnx", "path": str(slow), "timeout": 0.05}},
    )
    s.index("kb")
    plain = s.search("kb", "lease writer", {"stages": ["lexical"], "limit": 20})
    ans = s.search("kb", "lease writer", {"limit": 20})
    s.close()
    assert [h["chunk_id"] for h in ans["hits"]] == [h["chunk_id"] for h in plain["hits"]]
    assert ans["rank"]["state"] == "failed" and "deadline" in ans["rank"]["error"]
    assert ans["stages"]["skipped"]["rerank"] == ans["rank"]["error"]
    assert "rerank" not in ans["stages"]["performed"]


def test_cancel_stops_ranking(svc, tmp_path, slow):
    import threading

    svc.workspace_configure("kb", {"ranker": {"provider": "onnx", "path": str(slow)}})
    ev = threading.Event()
    ev.set()  # a newer keystroke already superseded this search
    ans = svc.search("kb", "lease writer", {"limit": 20}, cancel=ev)
    assert ans["rank"]["state"] == "failed" and "cancel" in ans["rank"]["error"]


def test_bad_ranker_config_names_the_field(svc):
    with pytest.raises(InvalidParams) as e:
        svc.workspace_configure("kb", {"ranker": {"provider": "onnx", "path": "/nonexistent/model"}})
    assert e.value.field == "options.ranker.path"
    with pytest.raises(InvalidParams) as e:
        invoke(svc, "workspace.configure", ["kb", {"ranker": {"provider": "onnx", "path": "/x", "window": 500}}])
    assert e.value.field == "options.ranker.window"


def test_info_reports_the_ranker(svc):
    svc.search("kb", "lease")
    info = svc.info()
    assert info["stages"]["rerank"] is True
    assert any(r.get("model") == "tiny-ce" for r in info["models"]["ranker"])
    json.dumps(info)
    # a ranker no workspace uses any more is not reported (it stayed loaded, and was, before)
    svc.workspace_configure("kb", {"ranker": {"provider": "none"}})
    info = svc.info()
    assert info["stages"]["rerank"] is False and info["models"]["ranker"] == []


def test_status_reports_the_ranker_state(svc, tmp_path, tiny):
    assert svc.workspace_status("kb")["ranker"] == {"state": "ready", "model": "tiny-ce", "reason": None}
    svc.workspace_configure("kb", {"ranker": {"provider": "none"}})
    assert svc.workspace_status("kb")["ranker"]["state"] == "off"
    # a model folder that disappears after it was configured
    gone = tmp_path / "gone"
    import shutil as sh

    sh.copytree(tiny, gone)
    svc.workspace_configure("kb", {"ranker": {"provider": "onnx", "path": str(gone)}})
    sh.rmtree(gone)
    st = svc.workspace_status("kb")["ranker"]
    assert st["state"] == "failed" and "no such folder" in st["reason"]
    ans = svc.search("kb", "lease")
    assert ans["rank"]["state"] == "failed" and ans["stages"]["skipped"]["rerank"]
