"""Issue 19, the hybrid path's own steps made cheaper (docs/benchmarks/semantic_path.md):
- a snippet's window is the densest run of matches however many the text holds
  (the count per start is a bisect now, it was a scan of every later match);
- RRF builds each fused record once, its legs in name order (the same records as the
  loop it replaced, kept here as the reference);
- a query embedded alone goes through the tokenizer's encode (encode_batch of one
  before): the same tokens, hence the same vector as when it is embedded in a batch.
The vector index's own changes are tested in tests/unit/test_vectors.py.
"""

from __future__ import annotations

import random

import numpy as np

from autodoc.embed.onnx import OnnxProvider
from autodoc.search.fusion import Fused, LegHit, fuse_rrf
from autodoc.search.lexical.tokens import tokenize
from autodoc.search.query import parse_query
from autodoc.search.snippet import MARK_OPEN, snippet_maker


def test_snippet_window_is_the_densest_run_of_many_matches():
    sparse = " ".join(f"cell filler{i} " + " ".join(f"word{i}x{j}" for j in range(60)) for i in range(40))
    dense = " ".join(["cell growth"] * 30)
    text = sparse + " " + dense + " " + sparse
    snip = snippet_maker(parse_query("cell growth").terms, tokenize)(text)
    assert snip.count(MARK_OPEN) >= 30  # the dense run, not one of the 80 lone "cell"s
    assert "filler" not in snip


def test_one_query_embeds_as_in_a_batch():
    p = OnnxProvider()
    texts = ["Vitamin D deficiency raises the risk of fractures in the elderly.", "0-dimensional biomaterials"]
    batch, _ = p._embed(texts)
    for i, t in enumerate(texts):
        one, _ = p._embed([t])
        assert np.allclose(one[0], batch[i], atol=1e-5)
        assert p._count_tok.encode(t).ids == p._count_tok.encode_batch([t])[0].ids


def _rrf_reference(legs, k, weights):
    names = sorted(legs)
    fused = {}
    for name in names:
        w = 1.0 if weights is None else float(weights.get(name, 1.0))
        for rank, hit in enumerate(legs[name]):
            f = fused.get(hit.chunk_id)
            if f is None:
                f = fused[hit.chunk_id] = Fused(hit.chunk_id, 0.0, dict.fromkeys(names), dict.fromkeys(names))
            if f.ranks[name] is not None:
                continue
            f.ranks[name] = rank
            f.scores[name] = hit.score
            f.score += w * hit.weight / (k + rank + 1)
    out = list(fused.values())
    for f in out:
        f.via = [n for n in names if f.ranks[n] is not None]
    out.sort(key=lambda f: (-f.score, f.chunk_id))
    return out


def test_rrf_equals_the_reference():
    rng = random.Random(3)
    for _ in range(200):
        legs = {
            name: [
                LegHit(rng.randrange(60), rng.random(), rng.choice([1.0, rng.random()]))
                for _ in range(rng.randrange(0, 40))
            ]  # duplicates within a leg included
            for name in rng.sample(["semantic", "lexical", "graph"], rng.randrange(1, 4))
        }
        weights = rng.choice([None, {}, {"lexical": 0.5, "graph": 0.3}])
        k = rng.choice([10, 60])
        assert fuse_rrf(legs, k=k, weights=weights) == _rrf_reference(legs, k, weights)
