"""The instant tier: a static per-token embedding table distilled from the
bundled transformer, so a fresh knowledge base answers by meaning within
seconds while the transformer fills in (issue 19).

Distillation (``distil_table``, the one function that runs the model): every
vocabulary token goes through the transformer alone as ``[CLS] tok [SEP]``,
and its row is the mean of the three output vectors — the model's own mean
pooling over that tiny input. Stored as float16 (30,522 × 384 = 22 MB; the
rounding is far under the tier's gap to the full model); embedding uses a
float32 copy (see embed_ids).

Embedding (numpy only): a text is tokenised by the model's own tokenizer
(special tokens dropped), and its vector is the (optionally weighted) mean of
its tokens' rows, L2-normalised. IDF and SIF weights (``idf_weights``,
``sif_weights``) need corpus statistics; ``zipf_weights`` reads an IDF off the
vocabulary's own frequency order. bench/instant_tier.py compares them with the
plain mean on SciFact's train queries (docs/benchmarks/instant_tier.md), and
embed/instant.py uses the one chosen.

A vector from this tier lives in a different space from the transformer's:
its fingerprint is derived from the model's and names the tier, so stored
vectors and queries of the two tiers never mix.

Runs on: the thread that embeds (the embed queue's worker, or a search thread
for one query); distil_table runs once per model fingerprint on the thread
that first needs the table.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Sequence
from itertools import chain
from typing import Any

import numpy as np

TIER_FULL = "full"
TIER_INSTANT = "instant"
# Batch of token inputs per onnxruntime call during distillation: inputs are
# 3 tokens long, so a big batch costs little memory and amortises call overhead.
DISTIL_BATCH = 512
DEFAULT_ALPHA = 1e-3


def tier_fingerprint(model_fp: str, weighting: str) -> str:
    """The instant tier's vector key: derived from the model it was distilled
    from, so a new model makes both tiers' vectors stale together."""
    return hashlib.sha256(f"instant-v1|{weighting}|{model_fp}".encode()).hexdigest()


def distil_table(
    session: Any,
    output: str,
    vocab_size: int,
    cls_id: int,
    sep_id: int,
    *,
    feed_types: bool = True,
    batch: int = DISTIL_BATCH,
    start: int = 0,
    stop: int | None = None,
    ids: Sequence[int] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> np.ndarray:
    """Rows [start, stop) of the table (or the rows of `ids`, in that order):
    token t's row is the mean-pooled output of ``[CLS] t [SEP]``, float16
    [n, dim]. Deterministic: the same session and ids give the same bytes."""
    stop = vocab_size if stop is None else min(stop, vocab_size)
    order = np.arange(start, stop, dtype=np.int64) if ids is None else np.asarray(ids, dtype=np.int64)
    rows: list[np.ndarray] = []
    for s in range(0, len(order), batch):
        tok = order[s : s + batch]
        n = len(tok)
        input_ids = np.empty((n, 3), dtype=np.int64)
        input_ids[:, 0] = cls_id
        input_ids[:, 1] = tok
        input_ids[:, 2] = sep_id
        feed = {"input_ids": input_ids, "attention_mask": np.ones_like(input_ids)}
        if feed_types:
            feed["token_type_ids"] = np.zeros_like(input_ids)
        hidden = session.run([output], feed)[0]
        rows.append(hidden.astype(np.float32).mean(axis=1).astype(np.float16))
        if progress:
            progress(s + n, len(order))
    dim = rows[0].shape[1] if rows else 0
    return np.concatenate(rows) if rows else np.zeros((0, dim), dtype=np.float16)


def idf_weights(doc_token_ids: Sequence[np.ndarray], vocab_size: int) -> np.ndarray:
    """Smoothed IDF per token over a set of texts (each an id array)."""
    df = np.zeros(vocab_size, dtype=np.float64)
    for ids in doc_token_ids:
        df[np.unique(ids)] += 1
    n = max(len(doc_token_ids), 1)
    return np.log((n + 1) / (df + 0.5)).astype(np.float32)


# The bundled model's WordPiece vocabulary (bert-base-uncased's) lists whole words and word
# pieces from id FIRST_WORD ("the") in the order its training corpus ranked them by frequency,
# then the "##x" single-character pieces from FIRST_SUFFIX_CHAR; before them, from FIRST_CHAR,
# single characters (punctuation first). zipf_weights reads that order as a frequency rank.
FIRST_CHAR, FIRST_WORD, FIRST_SUFFIX_CHAR = 999, 1996, 29612
ZIPF_SCALE = 10.0  # chosen on SciFact train with the ranks below (docs/benchmarks/instant_tier.md)
CHAR_RANK = 5000.0  # a "##x" piece weighs as a mid-frequency word
PUNCT_RANK = 1.0  # a lone character (mostly punctuation) weighs as the commonest word


def has_ranked_vocab(tokenizer: Any) -> bool:
    """The tokenizer's vocabulary has the layout zipf_weights assumes."""
    return (
        tokenizer.id_to_token(FIRST_WORD) == "the"
        and tokenizer.id_to_token(FIRST_WORD + 1) == "of"
        and str(tokenizer.id_to_token(FIRST_SUFFIX_CHAR)).startswith("##")
        and not str(tokenizer.id_to_token(FIRST_SUFFIX_CHAR - 1)).startswith("##")
    )


def zipf_weights(vocab_size: int) -> np.ndarray:
    """An IDF with no corpus: by Zipf's law a token of frequency rank r has probability ∝ 1/r, so
    its IDF is log r plus a constant; log(1 + r / ZIPF_SCALE) keeps the commonest words near 0.
    The same for every workspace and query, so nothing is kept or recomputed per corpus."""
    ranks = np.full(vocab_size, CHAR_RANK)
    words = np.arange(FIRST_WORD, min(FIRST_SUFFIX_CHAR, vocab_size))
    ranks[words] = words - FIRST_WORD + 1
    ranks[FIRST_CHAR:FIRST_WORD] = PUNCT_RANK
    return np.log1p(ranks / ZIPF_SCALE).astype(np.float32)


def sif_weights(doc_token_ids: Sequence[np.ndarray], vocab_size: int, alpha: float = DEFAULT_ALPHA) -> np.ndarray:
    """SIF weights a / (a + p(t)) from token frequencies over a set of texts."""
    tf = np.zeros(vocab_size, dtype=np.float64)
    for ids in doc_token_ids:
        np.add.at(tf, ids, 1)
    p = tf / max(tf.sum(), 1.0)
    return (alpha / (alpha + p)).astype(np.float32)


def embed_ids(table: np.ndarray, doc_token_ids: Sequence[np.ndarray], weights: np.ndarray | None = None) -> np.ndarray:
    """Weighted mean of each text's token rows, L2-normalised, float32 [n, dim].
    One gather-and-sum per text: its rows stay in cache. Measured on 1,000
    SciFact chunks (load 10 on 2 cores): 0.5 s with a float32 table, 2.4 s
    with float16 (converting each row costs more than the sum), 15 s for one
    gather of every text's rows followed by np.add.reduceat (a 400 MB
    intermediate). Callers should pass a float32 table."""
    n = len(doc_token_ids)
    out = np.zeros((n, table.shape[1]), dtype=np.float32)
    for i, ids in enumerate(doc_token_ids):
        if len(ids) == 0:
            continue
        rows = table[ids]
        if weights is not None:
            out[i] = weights[ids] @ rows
        else:
            out[i] = rows.sum(axis=0, dtype=np.float32)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    out /= norms
    return out


def embed_flat(
    table: np.ndarray, flat: np.ndarray, ends: Sequence[int], weights: np.ndarray | None = None
) -> np.ndarray:
    """embed_ids over one flat id array: text i's ids are flat[ends[i-1]:ends[i]]
    (views, so no per-text array is built)."""
    out = np.zeros((len(ends), table.shape[1]), dtype=np.float32)
    start = 0
    for i, end in enumerate(ends):
        if end > start:
            ids = flat[start:end]
            out[i] = weights[ids] @ table[ids] if weights is not None else table[ids].sum(axis=0, dtype=np.float32)
        start = end
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    out /= norms
    return out


class StaticEmbedder:
    """Texts → instant vectors with a distilled table and the model's tokenizer
    (any object with ``encode_batch`` giving ``.ids`` and ``.offsets``).
    ``special`` ids are dropped (their rows are zero in the float32 copy):
    [CLS]/[SEP] rows carry no meaning and would pull every vector toward one
    direction.

    Why a word cache: the tokenizer is the tier's cost (1.2 of 1.4 s per
    1,000 SciFact chunks), and it tokenises every occurrence of a word again.
    The BERT tokenizer never joins across whitespace and normalises each
    character alone, so a text's ids are the concatenation of its
    whitespace-separated words' ids: each distinct word is tokenised once
    (the new words of a batch joined into a few strings, split back by
    offsets) and remembered, up to WORD_CACHE words (≈ 300 bytes each), then
    forgotten all at once (and by ``forget_words`` when a fill is done). Texts
    go SUB_BATCH at a time: their split words are the transient memory (≈ 70 MB
    for 7,422 SciFact chunks at once). The ids are those of tokenising the whole text except where
    Python's and the tokenizer's ideas of whitespace differ (control
    characters \\x1c–\\x1f), which chunks and queries share alike."""

    WORD_CACHE = 100_000
    SUB_BATCH = 1024
    JOIN = 64  # strings the new words of a batch are joined into: the tokenizer's batch parallelism

    def __init__(self, table: np.ndarray, tokenizer: Any, special: Sequence[int], weights: np.ndarray | None = None):
        table = np.array(table, dtype=np.float32)  # float16 on disk; see embed_ids
        table[np.asarray(sorted({int(s) for s in special}), dtype=np.int64)] = 0.0
        self.table = table
        self.tokenizer = tokenizer
        self.weights = weights
        self._words: dict[str, list[int]] = {}
        self._lock = threading.Lock()  # the embed queue and a search thread may embed at once

    @property
    def dim(self) -> int:
        return int(self.table.shape[1])

    def _learn(self, words: list[str]) -> dict[str, list[int]]:
        """The ids of each of `words` (distinct, no whitespace)."""
        out: dict[str, list[int]] = {}
        groups = [words[i :: self.JOIN] for i in range(min(self.JOIN, len(words)))]
        encs = self.tokenizer.encode_batch([" ".join(g) for g in groups], add_special_tokens=False)
        for group, enc in zip(groups, encs):
            starts = np.cumsum([0] + [len(w) + 1 for w in group[:-1]])
            ids = enc.ids
            at = np.fromiter((o[0] for o in enc.offsets), dtype=np.int64, count=len(ids))
            bounds = np.searchsorted(np.searchsorted(starts, at, side="right") - 1, np.arange(len(group) + 1)).tolist()
            for k, w in enumerate(group):
                out[w] = ids[bounds[k] : bounds[k + 1]]
        return out

    def forget_words(self) -> None:
        with self._lock:
            self._words = {}

    def token_ids(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Each text's token ids (special tokens included when the text spells them)."""
        out: list[np.ndarray] = []
        for s in range(0, len(texts), self.SUB_BATCH):
            flat, ends = self._flat_ids(texts[s : s + self.SUB_BATCH])
            out += np.split(flat, ends[:-1]) if len(ends) else []
        return out

    def _flat_ids(self, texts: Sequence[str]) -> tuple[np.ndarray, list[int]]:
        split = [t.split() for t in texts]
        with self._lock:
            words = {w for ws in split for w in ws}
            cache = self._words
            new = [w for w in words if w not in cache]
            if len(cache) + len(new) > self.WORD_CACHE:
                cache = self._words = {}
                new = list(words)
        if new:  # tokenised outside the lock: a query's few words need not wait for a fill's batch
            learned = self._learn(new)
            with self._lock:
                cache.update(learned)
        get = cache.__getitem__  # a later clear replaces self._words; this batch keeps its dict
        flat: list[int] = []
        ends: list[int] = []
        for ws in split:
            flat.extend(chain.from_iterable(map(get, ws)))
            ends.append(len(flat))
        return np.fromiter(flat, dtype=np.intp, count=len(flat)), ends

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed_counted(texts)[0]

    def embed_counted(self, texts: Sequence[str]) -> tuple[np.ndarray, int]:
        """(the vectors, how many tokens they were made of)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        tokens = 0
        for s in range(0, len(texts), self.SUB_BATCH):
            flat, ends = self._flat_ids(texts[s : s + self.SUB_BATCH])
            out[s : s + len(ends)] = embed_flat(self.table, flat, ends, self.weights)
            tokens += len(flat)
        return out, tokens
