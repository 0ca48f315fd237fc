"""Stage 3 local provider (autodoc.rerank.onnx) against a tiny cross-encoder
built at test time (tests/helpers/tiny_models.py): real onnxruntime, real
tokenizers, designed weights so the expected order is known."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from helpers.tiny_models import MAGIC, build_tiny_cross_encoder

from autodoc.rerank import Meter, RankerCancelled, RankerDown, make_ranker
from autodoc.rerank.onnx import OnnxRanker

QUERY = "how is the store lock recovered after a crash"
LONG = " ".join(["store lock writer"] * 300)  # 512 tokens after truncation
PASSAGES = [
    "bananas are rich in potassium",
    "the writer takes the lease after expiry",  # MAGIC
    "the store lock is recovered by a new writer",
    "a note about markdown headings and tags",
    f"when the holder crashed the {MAGIC} expired",  # MAGIC
    "how does the daemon search sections",
    "sunny weather and rain",
]
MAGIC_IDX = {1, 4}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_tiny_cross_encoder(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="module")
def tiny_no_types(tmp_path_factory):
    return build_tiny_cross_encoder(tmp_path_factory.mktemp("tiny_nt"), with_token_type_ids=False)


@pytest.fixture(scope="module")
def heavy(tmp_path_factory):
    # Same scores, but one 512-token batch takes ~1 s: room to interrupt it. The side branch's
    # depth is scaled to this machine's speed (100 layers took 1 s on one machine, 0.24 s on a
    # faster one, too quick to interrupt at 0.15 s); its layers share one weight, so depth is free.
    layers = 100
    while True:
        folder = build_tiny_cross_encoder(tmp_path_factory.mktemp("heavy"), heavy_layers=layers, heavy_dim=1024)
        r = _ranker(folder, batch=1)
        r.score(QUERY, ["warm"])  # the session's load is not the batch
        started = time.monotonic()
        r.score(QUERY, [LONG])
        took = time.monotonic() - started
        if took >= 0.8 or layers >= 3200:
            return folder
        layers = min(3200, int(layers * 1.2 / max(took, 0.05)) + 1)


def _ranker(folder, **cfg) -> OnnxRanker:
    r = make_ranker({"provider": "onnx", "path": str(folder), **cfg})
    assert isinstance(r, OnnxRanker)
    return r


def _spy(ranker: OnnxRanker, delay: float = 0.0, on_call=None) -> list[dict]:
    """Record every batch's feeds (and optionally slow each batch down)."""
    calls: list[dict] = []
    real = ranker._infer

    def infer(feeds, ro):
        calls.append({k: v.copy() for k, v in feeds.items()})
        if on_call is not None:
            on_call(len(calls))
        if delay:
            time.sleep(delay)
        return real(feeds, ro)

    ranker._infer = infer
    return calls


def test_scores_one_float_per_passage_in_order(tiny):
    r = _ranker(tiny)
    scores = r.score(QUERY, PASSAGES)
    assert len(scores) == len(PASSAGES)
    assert all(isinstance(s, float) and np.isfinite(s) for s in scores)
    # Order is input order: scoring a permutation permutes the scores.
    perm = [3, 0, 6, 1, 5, 2, 4]
    again = r.score(QUERY, [PASSAGES[i] for i in perm])
    assert again == pytest.approx([scores[i] for i in perm], abs=1e-5)
    d = r.describe()
    assert d["provider"] == "onnx" and d["model"] == tiny.name and d["type_ids"] == "pair"
    assert d["inputs"] == ["attention_mask", "input_ids", "token_type_ids"] and d["output"] == "logits"
    assert r.name == tiny.name


def test_designed_token_ranks_first(tiny):
    r = _ranker(tiny)
    scores = r.score(QUERY, PASSAGES)
    ranked = sorted(range(len(PASSAGES)), key=lambda i: -scores[i])
    assert set(ranked[:2]) == MAGIC_IDX
    # The margin is the designed feature, not noise.
    assert min(scores[i] for i in MAGIC_IDX) > max(s for i, s in enumerate(scores) if i not in MAGIC_IDX) + 1.0
    # Text other than the magic token moves scores too (the re-sort is not a no-op).
    others = [s for i, s in enumerate(scores) if i not in MAGIC_IDX]
    assert len({round(s, 4) for s in others}) == len(others)


def test_real_type_ids_are_fed(tiny):
    r = _ranker(tiny)
    calls = _spy(r)
    r.score(QUERY, PASSAGES[:3])
    feeds = calls[0]
    assert set(feeds) == {"input_ids", "attention_mask", "token_type_ids"}
    assert all(a.dtype == np.int64 for a in feeds.values())
    tok = r._tok
    for row, passage in enumerate(PASSAGES[:3]):
        enc = tok.encode(QUERY, passage)
        n = sum(enc.attention_mask)
        assert feeds["input_ids"][row, :n].tolist() == enc.ids[:n]
        types = feeds["token_type_ids"][row]
        q_len = len(tok.encode(QUERY).ids)  # [CLS] query [SEP]
        assert types[:q_len].tolist() == [0] * q_len
        assert types[q_len:n].tolist() == [1] * (n - q_len)  # passage and its [SEP]
        assert types[n:].tolist() == [0] * (len(types) - n)  # padding
    # And the model depends on them: with all-zero type ids the designed boost
    # disappears, so the order test above would fail if they were not fed.
    zeroed = dict(feeds, token_type_ids=np.zeros_like(feeds["token_type_ids"]))
    real = r._session.run(["logits"], feeds)[0][:, 0]
    flat = r._session.run(["logits"], zeroed)[0][:, 0]
    assert real[1] - flat[1] > 1.0  # passage 1 holds the magic token
    assert real[0] == pytest.approx(flat[0], abs=1e-5)  # passage 0 does not


def test_magic_in_query_earns_nothing(tiny):
    r = _ranker(tiny)
    plain = [p for i, p in enumerate(PASSAGES) if i not in MAGIC_IDX]
    scores = r.score(f"{MAGIC} {MAGIC} {MAGIC}", plain)
    assert max(scores) < 1.0


def test_model_without_token_type_ids_input(tiny_no_types):
    r = _ranker(tiny_no_types)
    calls = _spy(r)
    scores = r.score(QUERY, PASSAGES)
    assert set(calls[0]) == {"input_ids", "attention_mask"}
    assert r.describe()["type_ids"] == "unused"
    ranked = sorted(range(len(PASSAGES)), key=lambda i: -scores[i])
    assert set(ranked[:2]) == MAGIC_IDX


def test_batch_size_does_not_change_scores(tiny):
    passages = PASSAGES + [" ".join(["store", "lock"] * k) for k in range(1, 9)]
    base = _ranker(tiny, batch=1).score(QUERY, passages)
    for batch in (2, 3, 16, 64):
        r = _ranker(tiny, batch=batch)
        calls = _spy(r)
        assert r.score(QUERY, passages) == pytest.approx(base, abs=1e-5)
        assert len(calls) == -(-len(passages) // batch)
        assert all(len(c["input_ids"]) <= batch for c in calls)


def test_pads_to_longest_not_to_shipped_128(tiny):
    # The tiny tokenizer.json ships padding/truncation fixed at 128, like real folders.
    r = _ranker(tiny)
    calls = _spy(r)
    r.score("lock", ["a", "the store lock"])
    assert calls[0]["input_ids"].shape == (2, len(r._tok.encode("lock", "the store lock").ids))
    assert calls[0]["input_ids"].shape[1] < 128


def test_long_passage_truncated_on_passage_side(tiny):
    r = _ranker(tiny, max_length=64)
    calls = _spy(r)
    head = "the store lock is recovered"
    long_plain = head + " " + " ".join(["writer"] * 5000)
    long_magic = long_plain + f" {MAGIC}"  # the magic token falls past the cut
    early_magic = f"{head} {MAGIC} " + " ".join(["writer"] * 5000)  # ...or inside the kept head
    scores = r.score(QUERY, [long_plain, long_magic, early_magic])
    ids = calls[0]["input_ids"]
    assert ids.shape[1] == 64
    # The query survives whole at the front of every pair.
    q_ids = r._tok.encode(QUERY).ids[:-1]  # [CLS] + query tokens (tokenizer's own truncation is 64)
    assert ids[0, : len(q_ids)].tolist() == q_ids
    assert scores[0] == pytest.approx(scores[1], abs=1e-5)  # the tail was cut off
    assert scores[2] > scores[0] + 0.5  # one magic token in 64: +40/64 by design


def test_overlong_query_is_cut_not_refused(tiny):
    r = _ranker(tiny, max_length=32)
    calls = _spy(r)
    scores = r.score(" ".join(["search"] * 500), ["the store lock", f"the {MAGIC}"])
    assert len(scores) == 2 and calls[0]["input_ids"].shape[1] <= 32
    # Some of the passage still fits after the cut query.
    assert scores[1] > scores[0]


def test_empty_window_and_empty_passage(tiny):
    r = _ranker(tiny)
    calls = _spy(r)
    assert r.score(QUERY, []) == []
    assert calls == []
    assert len(r.score(QUERY, ["", "lock"])) == 2


def test_meter_counts_calls_pairs_tokens_errors(tiny):
    r = _ranker(tiny, batch=2)
    assert isinstance(r.meter, Meter)
    calls = _spy(r)
    r.score(QUERY, PASSAGES)
    r.score(QUERY, PASSAGES[:2])
    snap = r.meter.snapshot()
    # texts = (query, passage) pairs scored; tokens = real (unpadded) tokens fed.
    assert snap["calls"] == 2 and snap["texts"] == len(PASSAGES) + 2 and snap["errors"] == 0
    assert snap["tokens"] == sum(int(c["attention_mask"].sum()) for c in calls)
    assert snap["seconds"] > 0 and snap["last_error"] == ""
    assert r.describe()["meter"] == r.meter.snapshot()


def test_deadline_between_batches(tiny):
    r = _ranker(tiny, batch=1)
    calls = _spy(r, delay=0.05)
    started = time.monotonic()
    with pytest.raises(RankerDown) as info:
        r.score(QUERY, PASSAGES * 4, timeout=0.2)
    elapsed = time.monotonic() - started
    assert info.value.reason == "ranker passed its deadline of 0.2 s"
    assert not isinstance(info.value, RankerCancelled)
    assert elapsed < 0.6 and 2 <= len(calls) < len(PASSAGES * 4)
    snap = r.meter.snapshot()
    assert snap["errors"] == 1 and snap["last_error"] == "ranker passed its deadline of 0.2 s"
    assert snap["texts"] == 0 and snap["calls"] == 0  # calls counts successes (as for embedders)


def test_zero_timeout_runs_nothing(tiny):
    r = _ranker(tiny)
    calls = _spy(r)
    with pytest.raises(RankerDown, match="deadline of 0 s"):
        r.score(QUERY, PASSAGES, timeout=0)
    assert calls == []


def test_config_timeout_is_the_default(tiny):
    r = _ranker(tiny, batch=1, timeout=0.1)
    _spy(r, delay=0.05)
    with pytest.raises(RankerDown, match="deadline of 0.1 s"):
        r.score(QUERY, PASSAGES)
    assert len(r.score(QUERY, PASSAGES[:2], timeout=5)) == 2  # the caller's timeout wins


def test_cancel_between_batches(tiny):
    r = _ranker(tiny, batch=1)
    cancel = threading.Event()
    calls = _spy(r, on_call=lambda n: cancel.set() if n == 3 else None)
    with pytest.raises(RankerCancelled, match="cancelled"):
        r.score(QUERY, PASSAGES, cancel=cancel)
    assert len(calls) == 3  # the batch in flight finished (tiny model), no new one started
    snap = r.meter.snapshot()
    assert snap["errors"] == 0 and snap["calls"] == 0  # cancelling is not a ranker failure


def test_cancel_already_set_runs_nothing(tiny):
    r = _ranker(tiny)
    calls = _spy(r)
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(RankerCancelled):
        r.score(QUERY, PASSAGES, cancel=cancel)
    assert calls == []


def test_deadline_and_cancel_interrupt_the_batch_in_flight(heavy, tiny):
    r = _ranker(heavy, batch=1)
    long = LONG
    started = time.monotonic()
    full = r.score(QUERY, [long])
    full_s = time.monotonic() - started
    assert full_s > 0.3, f"heavy model too fast on this machine ({full_s:.2f} s) to test interruption"

    started = time.monotonic()
    with pytest.raises(RankerDown, match="deadline of 0.15 s"):
        r.score(QUERY, [long], timeout=0.15)
    # interrupted mid-batch: well before the batch would have finished (relative,
    # since this 2-core machine is shared and absolute times drift)
    assert time.monotonic() - started < full_s * 0.8

    cancel = threading.Event()
    threading.Timer(0.15, cancel.set).start()
    started = time.monotonic()
    with pytest.raises(RankerCancelled):
        r.score(QUERY, [long], cancel=cancel)
    assert time.monotonic() - started < full_s * 0.8

    # The session is still healthy afterwards, and the heavy side branch leaves
    # the scores of the tiny model (same seed) alone.
    assert r.score(QUERY, PASSAGES) == pytest.approx(_ranker(tiny).score(QUERY, PASSAGES), abs=1e-5)
    assert len(full) == 1


def test_thread_safe_under_concurrent_callers(tiny):
    r = _ranker(tiny, batch=2)
    expected = r.score(QUERY, PASSAGES)
    results: list[list[float]] = []
    errors: list[BaseException] = []

    def work():
        try:
            for _ in range(10):
                results.append(r.score(QUERY, PASSAGES))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(results) == 40 and all(res == pytest.approx(expected, abs=1e-5) for res in results)
    assert r.meter.snapshot()["calls"] == 41


def test_model_in_onnx_subfolder_and_path_to_file(tmp_path):
    folder = build_tiny_cross_encoder(tmp_path / "hf-export", onnx_subdir=True)
    r = _ranker(folder, model="tiny-hf")
    assert r.name == "tiny-hf" and r.describe()["model_file"].endswith("onnx/model.onnx")
    flat = build_tiny_cross_encoder(tmp_path / "flat")
    r2 = make_ranker({"provider": "onnx", "path": str(flat / "model.onnx")})
    assert r2.describe()["path"] == str(flat) and r2.name == "flat"
    assert r.score(QUERY, PASSAGES) == pytest.approx(r2.score(QUERY, PASSAGES), abs=1e-5)
    # A differently named graph (e.g. a quantised export) is used when named.
    (flat / "model.onnx").rename(flat / "model_quint8.onnx")
    r3 = make_ranker({"provider": "onnx", "path": str(flat / "model_quint8.onnx")})
    assert r3.describe()["model_file"] == str(flat / "model_quint8.onnx")
    assert r3.score(QUERY, PASSAGES) == pytest.approx(r2.score(QUERY, PASSAGES), abs=1e-5)


def test_model_failure_is_ranker_down(tiny):
    r = _ranker(tiny)

    def boom(feeds, ro):
        raise RuntimeError("[ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : out of memory")

    r._infer = boom
    with pytest.raises(RankerDown, match=f"ranker {tiny.name} failed: .*out of memory"):
        r.score(QUERY, PASSAGES)
    assert r.meter.snapshot()["errors"] == 1


def test_real_bert_tokenizer_is_configured_for_pairs():
    """The ms-marco MiniLM cross-encoders use the BERT uncased tokenizer; the
    copy bundled with the embedding model (the same file) ships padding and
    truncation fixed at 128. The ranker's loader must give real segment ids,
    pad to the longest pair and cut only the passage at max_length."""
    from autodoc.embed.onnx import default_tokenizer_path

    path = default_tokenizer_path()
    tok = OnnxRanker._load_tokenizer(path, 512)
    query = "how is the lease recovered"
    encs = tok.encode_batch(
        [(query, "The store takes an exclusive lease beside autodoc.db."), (query, "short"), (query, "word " * 2000)]
    )
    lengths = {len(e.ids) for e in encs}
    assert lengths == {512}  # padded to the longest pair, which was cut to 512
    first = encs[0]
    n = sum(first.attention_mask)
    q_len = first.tokens.index("[SEP]") + 1
    assert first.tokens[:q_len] == ["[CLS]", "how", "is", "the", "lease", "recovered", "[SEP]"]
    assert first.type_ids[:q_len] == [0] * q_len and first.type_ids[q_len:n] == [1] * (n - q_len)
    assert encs[2].tokens[:q_len] == first.tokens[:q_len] and encs[2].tokens[511] == "[SEP]"
    short = tok.encode_batch([(query, "short")])[0]
    assert len(short.ids) == q_len + 2  # no fixed 128 padding
