"""Issue 19, the hybrid path's own steps made cheaper (docs/benchmarks/semantic_path.md):
- a snippet's window is the densest run of matches however many the text holds
  (the count per start is a bisect now, it was a scan of every later match);
- a query embedded alone goes through the tokenizer's encode (encode_batch of one
  before): the same tokens, hence the same vector as when it is embedded in a batch.
The vector index's own changes are tested in tests/test_vectors.py.
"""

from __future__ import annotations

import numpy as np

from autodoc.embed.onnx import OnnxProvider
from autodoc.search.query import parse_query
from autodoc.search.snippet import MARK_OPEN, snippet_maker
from autodoc.search.tokens import tokenize


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
