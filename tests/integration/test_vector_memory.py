"""The vector index's memory (issue 19): float16 vectors above HALF_ABOVE rows
rescored in float32 answer as the float32 index does on real embeddings, and
the vector cache keeps one index per (workspace, model) so two models' vectors
(the instant tier and the model filling behind it) do not evict each other."""

from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import CORPORA

from autodoc.config import Settings
from autodoc.search.semantic.vectors import VectorIndex
from autodoc.service import Service
from autodoc.store import vectors as stored


@pytest.fixture(scope="module")
def real():
    """Real embeddings (the bundled model) of the test corpus's sentences, and of queries."""
    from autodoc.embed.onnx import OnnxProvider

    text = " ".join(p.read_text(errors="replace") for p in sorted((CORPORA / "kb").rglob("*.md")) if p.is_file())
    sentences = sorted({s.strip() for s in re.split(r"[.\n#]+", text) if len(s.split()) >= 4})[:400]
    prov = OnnxProvider()
    vecs = prov.embed(sentences)
    queries = np.stack([prov.embed_query(" ".join(s.split()[:4])) for s in sentences[::16]])
    return vecs, queries


def test_float16_vectors_answer_as_float32_on_real_embeddings(real):
    vecs, queries = real
    ids = np.arange(len(vecs), dtype=np.int64) + 1000
    full = VectorIndex(ids, vecs, half_above=10**9)
    half = VectorIndex(ids, vecs, half_above=0)
    assert full.vecs.dtype == np.float32 and half.vecs.dtype == np.float16
    assert half.nbytes < 0.6 * full.nbytes
    found = 0
    for q in queries:
        a, b = full.search(q, top=10), half.search(q, top=10)
        true = dict(a)
        found += len(set(true) & {i for i, _ in b})
        for i, s in b:
            if i in true:
                assert abs(true[i] - s) < 2e-3
    assert found / (10 * len(queries)) >= 0.97, found
    # the prefiltered path (forced) reads the float16 rows as well
    forced = VectorIndex(ids, vecs, half_above=0, exact_below=0, shortlist_min=50, coarse_min=100)
    for q in queries[:5]:
        assert {i for i, _ in forced.search(q, top=5)} <= set(ids.tolist())


def test_float16_rescoring_is_the_same_whatever_the_block(real, monkeypatch):
    """The shortlist is rescored HALF_ROWS rows at a time (sized for the cache, not the answer): each
    row's cosine is its float32 dot product, whatever block it fell in, subset or every row."""
    from autodoc.search.semantic import vectors as vector_math

    vecs, queries = real
    ids = np.arange(len(vecs), dtype=np.int64)
    half = VectorIndex(ids, vecs, half_above=0)
    rows = np.arange(0, len(vecs), 3)
    for q in queries[:6]:
        q = (q / np.linalg.norm(q)).astype(np.float32)
        want_rows = half.vecs[rows].astype(np.float32) @ q
        want_all = half.vecs.astype(np.float32) @ q
        for block in (1, 7, 64, 1 << 12):
            monkeypatch.setattr(vector_math, "HALF_ROWS", block)
            np.testing.assert_allclose(half._dot(rows, q), want_rows, rtol=0, atol=2e-6)
            got = half._dot(None, q)
            np.testing.assert_allclose(got, want_all, rtol=0, atol=2e-6)
            if block == 1:
                first = got
            assert np.array_equal(got, first)  # bit for bit across block sizes


def test_float16_index_grows_and_shrinks_in_float16(real):
    vecs, _ = real
    ids = np.arange(len(vecs), dtype=np.int64)
    base = VectorIndex(ids[:300], vecs[:300], half_above=250)
    grown = base.with_added(ids[300:], vecs[300:])
    assert base.vecs.dtype == grown.vecs.dtype == np.float16
    assert np.array_equal(grown.codes, np.packbits(vecs > 0, axis=1))
    small = grown.without(ids[100:])
    assert small.vecs.dtype == np.float32 and len(small) == 100  # below half_above again
    assert small.search(vecs[7], top=1)[0][0] == 7


def _store_with_vectors(path, kb, fps: tuple[str, ...], seed: int) -> tuple[Service, int]:
    """A lexical index of kb and random unit vectors (16-d) for its chunks under each fingerprint."""
    svc = Service(Settings.from_env(store=path))
    svc.workspace_add("kb", str(kb), {"embedding": {"provider": "none"}})
    svc.index("kb")
    rng = np.random.default_rng(seed)
    with svc.store.write() as db:
        ws_id = db.execute("SELECT id FROM workspaces WHERE name='kb'").fetchone()[0]
        hashes = [h for (h,) in db.execute("SELECT DISTINCT text_hash FROM chunks WHERE workspace_id=?", (ws_id,))]
        for fp in fps:
            v = rng.standard_normal((len(hashes), 16)).astype(np.float32)
            v /= np.linalg.norm(v, axis=1, keepdims=True)
            stored.write_vectors(
                db, ws_id, fp, [(h, x.tobytes(), np.packbits(x > 0).tobytes()) for h, x in zip(hashes, v)]
            )
    return svc, ws_id


def test_the_cache_keeps_each_models_vectors(short_tmp, kb_copy):
    svc, ws_id = _store_with_vectors(short_tmp / "s.db", kb_copy, ("model-a", "model-b"), seed=0)
    try:
        with svc.store.read() as db:
            a = svc.vectors.get(db, ws_id, "model-a", 16)
            b = svc.vectors.get(db, ws_id, "model-b", 16)
            assert a is not b and len(a) == len(b) > 0
            assert svc.vectors.get(db, ws_id, "model-a", 16) is a  # not reloaded
            assert svc.vectors.get(db, ws_id, "model-b", 16) is b
            c = svc.vectors.get(db, ws_id, "model-c", 16)  # a third model: the least recent goes
            assert len(c) == 0
            assert svc.vectors.get(db, ws_id, "model-b", 16) is b
            assert svc.vectors.get(db, ws_id, "model-a", 16) is not a
    finally:
        svc.close()


def test_a_vectors_cosine_does_not_depend_on_which_index_holds_it(short_tmp, kb_copy, monkeypatch):
    """Above HALF_ABOVE rows the base holds float16 and an edit lands in a float32 delta: the
    same vector must score the same in either (ties are ordered at the score's 6th place)."""
    import autodoc.search.semantic.vectors as vector_math

    monkeypatch.setattr(vector_math, "HALF_ABOVE", 10)  # this small corpus takes the float16 path
    svc, ws_id = _store_with_vectors(short_tmp / "s.db", kb_copy, ("m",), seed=1)
    rng = np.random.default_rng(2)
    try:
        with svc.store.read() as db:
            doc = db.execute(
                "SELECT document_id, id FROM chunks WHERE workspace_id=? ORDER BY id LIMIT 1", (ws_id,)
            ).fetchone()
        q = rng.standard_normal(16).astype(np.float32)
        with svc.store.read() as db:
            wv = svc.vectors.get(db, ws_id, "m", 16)
            assert wv.base.vecs.dtype == np.float16
            before = dict(wv.search(q, 1000, None))
        svc.vectors.mark_dirty(ws_id, [doc[0]])  # its chunks move from the base to the delta
        with svc.store.read() as db:
            wv = svc.vectors.get(db, ws_id, "m", 16)
            assert doc[1] in wv.delta.ids.tolist()
            after = dict(wv.search(q, 1000, None))
        assert round(after[doc[1]], 6) == round(before[doc[1]], 6)
        assert abs(after[doc[1]] - before[doc[1]]) < 1e-6
    finally:
        svc.close()
