"""Smoke runs of the benchmarks (bench/), so they don't rot: the quality
benchmark on 20 SciFact documents and 5 queries (lexical and semantic through
Service.search), the evaluator against a hand-computed example, and the speed
benchmark on a 200-chunk corpus. Figures are not asserted, only that they are
computed and sane. The full runs are `make bench`."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench import quality as E  # noqa: E402
from bench.common import DEFAULT_DATA  # noqa: E402

pytestmark = pytest.mark.slow  # tens of seconds: left out of make test-fast

SCIFACT = DEFAULT_DATA / "scifact"
needs_data = pytest.mark.skipif(not (SCIFACT / "corpus.jsonl").exists(), reason=f"no SciFact data at {SCIFACT}")


def _model_available() -> bool:
    try:
        from autodoc.embed.onnx import default_model_path, default_tokenizer_path

        default_model_path()
        default_tokenizer_path()
        return True
    except Exception:
        return False


needs_model = pytest.mark.skipif(not _model_available(), reason="the bundled embedding model is not installed")


def test_evaluator_agrees_with_hand_computation():
    got = E.hand_check()
    assert got["nDCG@10"] == pytest.approx(0.476626, abs=1e-6)
    assert got["R@10"] == pytest.approx(2 / 3)
    assert got["RR@10"] == pytest.approx(0.5)
    # a perfect run scores 1 everywhere; an empty one 0
    qrels = {"a": {"x": 1, "y": 1}, "b": {"z": 2}}
    perfect = E.evaluate({"a": ["x", "y"], "b": ["z"]}, qrels)
    assert all(v == pytest.approx(1.0) for v in perfect.values())
    assert all(v == 0.0 for v in E.evaluate({}, qrels).values())
    # the evaluator and the reference implementation agree on a messier run
    run = {"a": ["q", "y", "w", "x"], "b": ["r", "s", "t", "u", "v", "z"]}
    assert E.cross_check(run, qrels) < 1e-9


@needs_data
@needs_model
def test_quality_smoke(tmp_path):
    from bench.quality import build_store, findings, load_collection, render, run_benchmark

    col = load_collection(SCIFACT, limit_docs=20)
    keep = set(col.corpus)
    for split in list(col.qrels):
        col.qrels[split] = {
            q: {d: r for d, r in rel.items() if d in keep}
            for q, rel in col.qrels[split].items()
            if any(d in keep for d in rel)
        }
    assert len(col.corpus) == 20 and col.split_queries("test")
    built = build_store(col, cache=tmp_path, tag="smoke", quiet=True)
    assert built.report["documents"] == 20 and built.report["embedding_state"] == "ready"
    res = run_benchmark(
        col, built.store, limit=100, train=False, query_limit=5, configs=["lexical", "semantic"], determinism=True
    )
    rows = {r["name"]: r for r in res["configs"]}
    assert set(rows) == {"lexical", "semantic"}
    for r in rows.values():
        for m, v in r["metrics"].items():
            assert 0.0 <= v <= 1.0 and not math.isnan(v), (r["name"], m, v)
        assert r["evaluator_vs_reference"] < 1e-9
        assert r["deterministic"] is True
        assert r["errors"] == 0 and r["latency_ms"]["n"] == 5
    assert rows["lexical"]["performed"] == {"lexical": 5}
    assert rows["semantic"]["performed"] == {"semantic": 5}
    # 20 documents, most of them judged for these queries: retrieval must find something
    assert rows["lexical"]["metrics"]["R@100"] > 0 and rows["semantic"]["metrics"]["R@100"] > 0
    # a second build reuses the cached store and embeds nothing
    again = build_store(col, cache=tmp_path, tag="smoke", quiet=True)
    assert again.report["cached"] and again.report["embed"]["embedded"] == 0
    res["meta"] = {
        "command": "smoke",
        "commit": "x",
        "date": "now",
        "machine": {"nproc": 2, "cpu": "", "load": [0, 0, 0], "python": ""},
        "data": str(SCIFACT),
        "documents": 20,
        "test_queries": 5,
        "train_queries": 0,
        "workspace_dir": "",
        "store_path": "",
        "store": built.report,
        "key": built.key,
        "ir_measures": "",
        "backends": E.backends(),
        "max_evaluator_diff": 0.0,
        "ranker": "none",
    }
    res["findings"] = findings(res)
    text = render(res)
    assert "| lexical |" in text and "nDCG@10" in text


@needs_data
@needs_model
def test_speed_smoke(tmp_path):
    from bench import speed

    meta = speed.build_store(200, SCIFACT, tmp_path, sample=16, min_rows=10, quiet=True)
    assert meta["complete"] and meta["chunks"] >= 150 and meta["vectors"]["synthetic"] >= 150
    out = speed.measure_size(200, meta, SCIFACT, nq=10, daemon=False, fts_rounds=1)
    for qset in ("keywords", "claims"):
        lx = out["lexical"][qset]
        assert lx["timings"]["product"]["n"] == 10 and lx["timings"]["raw_fts5"]["p50"] > 0
        assert lx["ratio_product"]["p50"] > 0
    assert out["semantic"]["timings"]["raw_numpy"]["n"] == 10
    for kind in speed.prefilter_kinds():
        assert 0.0 <= out["prefilter_synthetic"][kind]["recall@50"] <= 1.0
    assert out["hybrid_inprocess"]["p50"] > 0
    res = {
        "sizes": {"200": out},
        "meta": {
            "command": "smoke",
            "commit": "x",
            "date": "now",
            "machine": {"nproc": 2, "cpu": "", "load": [0, 0, 0]},
            "load_end": [0, 0, 0],
            "queries": 10,
            "corpus_note": "",
            "vector_note": "",
        },
    }
    res["findings"] = speed.findings(res)
    text = speed.render(res)
    assert "raw FTS5" in text
    # issue 19's lexical bench on the same small store: MaxScore forced, its rows the raw query's
    from pathlib import Path as _P

    from autodoc.search.lexical import maxscore

    old = maxscore.MIN_MATCHES
    maxscore.MIN_MATCHES = 0
    try:
        lx = speed.measure_lexical(200, _P(meta["store"]), SCIFACT, 10)
    finally:
        maxscore.MIN_MATCHES = old
    assert lx["exact"]["same_rows_and_order"] == lx["exact"]["of"] == 10
    assert lx["timings"]["hybrid"]["n"] == lx["timings"]["hybrid_before"]["n"] == 10
    assert "MaxScore" in speed.render_lexical({"command": "smoke", "commit": "x", "machine": {}, "sizes": [lx]})


@needs_model
def test_entry_smoke(tmp_path):
    """bench/entry.py on tests/corpora/kb, one round: every entry point answers and is timed."""
    import json
    import os
    import subprocess

    out = tmp_path / "entry.md"
    env = {**os.environ, "AUTODOC_BENCH_CACHE": str(tmp_path / "cache")}
    kb = REPO / "tests" / "corpora" / "kb"
    p = subprocess.run(
        [sys.executable, "-m", "bench.entry", "--runs", "1", "--corpus", str(kb), "--out", str(out)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    res = json.loads(out.with_suffix(".json").read_text())
    for label in ("version", "search sentence (daemon)", "mcp tools/list (daemon)", "lsp initialize (daemon)"):
        assert res["with_daemon"][label]["p50_ms"] > 0, label
    assert res["with_daemon"]["tui first frame (daemon)"]["n"] == 1
    assert res["no_daemon"]["mcp initialize (no daemon)"]["p50_ms"] > 0
    assert res["index"]["rc"] == 0 and any("fills in the background" in line for line in res["index"]["stdout"])
    assert "| search keywords (daemon) |" in out.read_text()
