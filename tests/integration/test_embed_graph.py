"""The fused graph (embed/graph.py) the local provider runs: built from the shipped model's
weights into a cache dir, checked, fingerprinted apart from the shipped graph, and the shipped
graph whenever it cannot be built."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from autodoc.embed import graph
from autodoc.embed import onnx as onnx_mod
from autodoc.embed.onnx import OnnxProvider

SCIFACT = Path(__file__).resolve().parents[3] / "shared" / "data" / "scifact" / "corpus.jsonl"
# the shipped graph's fingerprint since the tokenizer was bundled (test_embed_onnx.py): unchanged
TOKENIZER = onnx_mod.default_tokenizer_path()
SHIPPED_FINGERPRINT = "547c9f4fb4a420e5beab528c07169e071e0400256931a130a975e640eded7aaf"


def abstracts(n: int) -> list[str]:
    if not SCIFACT.is_file():
        pytest.skip("../shared/data/scifact is not here")
    out = []
    with open(SCIFACT, encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            out.append(d["title"] + "\n" + d["text"])
            if len(out) == n:
                return out
    return out


@pytest.fixture(scope="module")
def fused() -> OnnxProvider:
    return OnnxProvider()


@pytest.fixture(scope="module")
def shipped() -> OnnxProvider:
    return OnnxProvider(graph="shipped")


def test_the_fused_graph_runs_by_default_under_its_own_fingerprint(fused, shipped):
    assert fused.graph == graph.RECIPE and shipped.graph == "shipped"
    assert fused.graph_path != shipped.graph_path == onnx_mod.default_model_path()
    assert shipped.fingerprint == SHIPPED_FINGERPRINT  # stores embedded before keep their vectors valid
    assert fused.fingerprint != shipped.fingerprint  # and never mix with the fused graph's
    assert OnnxProvider(batch_size=8, threads=1).fingerprint == fused.fingerprint
    assert fused.describe()["graph"] == graph.RECIPE


def test_fused_vectors_match_the_shipped_graph_on_real_texts(fused, shipped):
    texts = abstracts(48) + ["reset my password", "# Lease recovery\nthe namenode recovers the lease"]
    a, b = fused.embed(texts), shipped.embed(texts)
    c = (a * b).sum(axis=1)
    assert c.min() > 0.98 and c.mean() > 0.99, (c.min(), c.mean())
    # what search uses: each text's nearest neighbour among the others is mostly the same under both
    # graphs (46 of 50 measured: between unrelated abstracts the margins are small)
    sa, sb = a @ a.T, b @ b.T
    np.fill_diagonal(sa, -1)
    np.fill_diagonal(sb, -1)
    assert (sa.argmax(axis=1) == sb.argmax(axis=1)).mean() >= 0.9


def test_a_texts_vector_does_not_depend_on_its_batch(fused):
    # the fused graph quantizes activations with one scale a tensor: batched, a text's vector moved
    # with its batch-mates (cosine 0.987 to its vector alone); it now runs each window alone
    texts = abstracts(12) + ["word " * 3, "a short query"]
    together = fused.embed(texts)
    alone = np.stack([fused.embed([t])[0] for t in texts])
    assert np.array_equal(together, alone)
    assert np.array_equal(fused.embed_query("a short query"), alone[-1])


def test_identical_texts_run_once(fused):
    m0 = fused.meter.snapshot()["tokens"]
    v = fused.embed(["the same note", "another note", "the same note"])
    assert np.array_equal(v[0], v[2]) and not np.array_equal(v[0], v[1])
    assert fused.meter.snapshot()["tokens"] - m0 == 5 + 4  # "the same note" counted once


def test_the_build_is_cached_atomic_and_deterministic(tmp_path):
    model = onnx_mod.default_model_path()
    first = graph.fused_graph(model, onnx_mod.MODEL_SHA256, tmp_path / "a", TOKENIZER)
    assert first is not None and first.parent == tmp_path / "a"
    assert [p.name for p in first.parent.iterdir()] == [first.name]  # nothing half-written is left
    stamp = first.stat().st_mtime_ns
    assert graph.fused_graph(model, onnx_mod.MODEL_SHA256, tmp_path / "a", TOKENIZER) == first
    assert first.stat().st_mtime_ns == stamp  # found, not built again
    again = graph.fused_graph(model, onnx_mod.MODEL_SHA256, tmp_path / "b", TOKENIZER)
    assert again is not None
    digest = [hashlib.sha256(p.read_bytes()).hexdigest() for p in (first, again)]
    assert digest[0] == digest[1]  # the same weights and recipe: the same file, so the same fingerprint
    onnx = pytest.importorskip("onnx")
    onnx.checker.check_model(onnx.load(str(first)))
    ops = {n.op_type for n in onnx.load(str(first)).graph.node}
    assert {"EmbedLayerNormalization", "MultiHeadAttention", "SkipLayerNormalization", "BiasGelu"} <= ops
    kinds = [n.op_type for n in onnx.load(str(first)).graph.node]
    assert kinds.count("DynamicQuantizeMatMul") == 3 * graph.LAYERS  # qkv, attention output, up
    assert kinds.count("MatMul") == graph.LAYERS  # the down-projections stay float32


def test_a_graph_that_disagrees_with_the_shipped_one_is_refused(tmp_path, monkeypatch):
    real = graph.model_bytes

    def swapped(p):  # queries and keys exchanged: runs, and computes other vectors
        p = dict(p)
        for i in range(graph.LAYERS):
            a = f"encoder.layer.{i}.attention.self."
            p[a + "query.weight"], p[a + "value.weight"] = p[a + "value.weight"], p[a + "query.weight"]
        return real(p)

    monkeypatch.setattr(graph, "model_bytes", swapped)
    assert graph.fused_graph(onnx_mod.default_model_path(), onnx_mod.MODEL_SHA256, tmp_path, TOKENIZER) is None
    assert list(tmp_path.iterdir()) == []


def test_the_shipped_graph_serves_when_no_graph_can_be_built(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    monkeypatch.setenv("AUTODOC_MODEL_CACHE", str(blocker / "models"))  # cannot be made
    p = OnnxProvider(threads=1)
    assert p.graph == "shipped" and p.fingerprint == SHIPPED_FINGERPRINT
    monkeypatch.setenv("AUTODOC_MODEL_CACHE", "off")
    assert OnnxProvider(threads=1).fingerprint == SHIPPED_FINGERPRINT
    with pytest.raises(ValueError):
        OnnxProvider(graph="fast")


def test_a_lowered_thread_embeds_on_a_session_of_its_own(fused):
    import threading

    from autodoc.embed.queue import lower_priority

    texts = ["a note about leases", "another about the write-ahead log"]
    want = fused.embed(texts)
    seen: dict[str, object] = {}

    def background() -> None:
        seen["lowered"] = lower_priority(5)
        seen["nice"] = onnx_mod.thread_nice()
        seen["vectors"] = fused.embed(texts)
        seen["session"] = fused._session_here()

    t = threading.Thread(target=background)
    t.start()
    t.join()
    if not seen["lowered"]:
        pytest.skip("this platform keeps no priority a thread")
    assert seen["nice"] == onnx_mod.thread_nice() + 5  # that thread only: this one is as it was
    assert seen["session"] is not fused._session  # its pool threads were made at its priority
    assert np.array_equal(seen["vectors"], want)
