"""search/semantic/halfcast.py: the float16 → float32 conversion the float16 vector index
rescores with gives exactly numpy's values, so every cosine is unchanged."""

from __future__ import annotations

import numpy as np
import onnx

from autodoc.search.semantic import halfcast
from autodoc.search.semantic.vectors import HALF_ROWS, VectorIndex, matvec


def _every_finite_half() -> np.ndarray:
    a = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    return a[np.isfinite(a)]


def test_every_finite_float16_converts_as_numpy_does():
    a = _every_finite_half()  # normals, subnormals, both zeros
    got = halfcast.to_float32(a)
    assert got.dtype == np.float32 and got.shape == a.shape
    assert np.array_equal(got.view(np.uint32), a.astype(np.float32).view(np.uint32))
    block = a[: 384 * 150].reshape(150, 384)[::-1, ::2]  # not contiguous: still the same values, same shape
    assert np.array_equal(halfcast.to_float32(block).view(np.uint32), block.astype(np.float32).view(np.uint32))


def test_the_session_runs_rather_than_numpys_fallback():
    """The point is the speed: a block of the shortlist's size goes through ONNX Runtime."""
    assert halfcast.to_float32(np.zeros((64, 384), np.float16)).dtype == np.float32
    assert halfcast._get_session() is not None


def test_the_hand_written_model_is_valid_onnx():
    model = onnx.load_from_string(halfcast.cast_model())
    onnx.checker.check_model(model, full_check=True)
    (node,) = model.graph.node
    assert node.op_type == "Cast" and node.attribute[0].i == onnx.TensorProto.FLOAT
    assert model.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT16


def test_a_float16_index_scores_its_rows_as_numpys_cast_did():
    """The reference is the computation before halfcast: astype, then the same matvec, in one
    block (the conversion goes a block of HALF_ROWS at a time: each row's dot product is its own)."""
    rng = np.random.default_rng(3)
    n = 9000
    vecs = rng.standard_normal((n, 384)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    index = VectorIndex(np.arange(n) + 7, vecs, half_above=0, exact_below=0, shortlist_min=500, coarse_min=1500)
    assert index.vecs.dtype == np.float16 and n > 2 * HALF_ROWS
    for q in rng.standard_normal((5, 384)).astype(np.float32):
        q /= np.linalg.norm(q)
        rows = np.sort(rng.choice(n, 5000, replace=False))
        assert np.array_equal(index._dot(rows, q), matvec(index.vecs[rows].astype(np.float32), q))
        assert np.array_equal(index._dot(None, q), matvec(index.vecs.astype(np.float32), q))
        qs = q / float(np.linalg.norm(q))  # as search() normalises its query
        rows = index._shortlist(qs, None, n, max(index.shortlist_min, index.shortlist_factor * 20))
        ref, ids = matvec(index.vecs[rows].astype(np.float32), qs), index.ids[rows]
        order = np.lexsort((ids, -ref))[:20]
        assert index.search(q, top=20) == [(int(ids[i]), float(ref[i])) for i in order]
