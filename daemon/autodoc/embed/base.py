"""Embedding providers: the shared protocol, the meter, the error and the factory.

A provider turns strings into L2-normalised float32 rows. The caller builds the
text (``breadcrumb + "\\n" + text``, see TEXT_TEMPLATE); the provider only
embeds strings. ``fingerprint`` identifies everything that changes the vectors
(model bytes, pooling, max length, text template, dimension): stored vectors
whose fingerprint differs from the active provider's must be re-embedded.

Providers are called from worker threads: ``embed`` is thread-safe.

Runs on: the thread that embeds (the embed queue's, or a search's leg thread for a query); the meter and the query cache take their own locks.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from ..errors import EmbedFailed, InvalidParams

# How the caller joins a chunk's breadcrumb and text before embedding. It is
# part of every fingerprint: changing it must invalidate stored vectors.
TEXT_TEMPLATE = "{breadcrumb}\n{text}"

QUERY_CACHE_SIZE = 256


class ProviderDown(EmbedFailed):
    """The provider cannot embed right now: unreachable, timed out, model files
    missing, or the server answered with an error. The message says why.

    Subclasses EmbedFailed (-32067) so that, if it ever reaches the RPC layer
    uncaught, the client sees a meaningful code rather than -32603; callers
    catch ProviderDown itself."""

    def __init__(self, message: str, *, provider: str = "", retryable: bool = True):
        super().__init__(message, {"provider": provider} if provider else None)
        self.provider = provider
        # False when retrying cannot help without a change (missing model,
        # bad API key, unknown model name): the queue may then stop trying.
        self.retryable = retryable


class Meter:
    """Thread-safe usage counters for one provider."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls = 0
        self.texts = 0
        self.tokens = 0
        self.seconds = 0.0
        self.errors = 0
        self.last_error = ""
        self.last_error_at: float | None = None

    def record(self, texts: int, tokens: int, seconds: float) -> None:
        with self._lock:
            self.calls += 1
            self.texts += texts
            self.tokens += tokens
            self.seconds += seconds

    def error(self, message: str) -> None:
        with self._lock:
            self.errors += 1
            self.last_error = message
            self.last_error_at = time.time()

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {
                "calls": self.calls,
                "texts": self.texts,
                "tokens": self.tokens,
                "seconds": round(self.seconds, 6),
                "errors": self.errors,
                "last_error": self.last_error,
                "last_error_at": self.last_error_at,
                "texts_per_second": round(self.texts / self.seconds, 3) if self.seconds > 0 else None,
            }


@runtime_checkable
class Provider(Protocol):
    kind: str  # "onnx" | "http"
    name: str  # model name, e.g. "all-MiniLM-L6-v2"
    max_tokens: int
    meter: Meter

    @property
    def dim(self) -> int: ...

    @property
    def fingerprint(self) -> str: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...

    def embed_query(self, text: str) -> np.ndarray: ...

    def count_tokens(self, texts: Sequence[str]) -> list[int]: ...

    @property
    def tokenizer_id(self) -> str: ...  # what count_tokens counts with: chunk boundaries depend on it

    def describe(self) -> dict[str, Any]: ...

    def close(self) -> None: ...


def make_fingerprint(parts: Mapping[str, Any]) -> str:
    """sha256 over a canonical JSON rendering of `parts` (hex)."""
    blob = json.dumps(dict(parts), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(blob.encode("ascii")).hexdigest()


def l2_normalise(mat: np.ndarray) -> np.ndarray:
    """Row-normalise in place (float32); all-zero rows stay zero."""
    mat = np.ascontiguousarray(mat, dtype=np.float32)
    norms = np.sqrt(np.einsum("ij,ij->i", mat, mat))
    norms[norms == 0] = 1.0
    mat /= norms[:, None]
    return mat


class _LRU:
    """A tiny thread-safe LRU map (text -> read-only vector)."""

    def __init__(self, size: int):
        self.size = size
        self._data: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> np.ndarray | None:
        with self._lock:
            v = self._data.get(key)
            if v is None:
                self.misses += 1
                return None
            self._data.move_to_end(key)
            self.hits += 1
            return v

    def put(self, key: str, value: np.ndarray) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.size:
                self._data.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()


class BaseProvider:
    """Shared behaviour: the query cache, describe(), the meter wrapper."""

    kind = "base"
    name = ""
    max_tokens = 0

    def __init__(self) -> None:
        self.meter = Meter()
        self._query_cache = _LRU(QUERY_CACHE_SIZE)

    # subclasses implement: dim, fingerprint, _embed(texts) -> (matrix, tokens), count_tokens
    if TYPE_CHECKING:  # declared for the type checker only: each subclass's own properties

        @property
        def dim(self) -> int: ...

        @property
        def fingerprint(self) -> str: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """float32 [len(texts), dim], L2-normalised rows, in input order.
        Raises ProviderDown."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of strings, not a string")
        texts = list(texts)
        for t in texts:
            if not isinstance(t, str):
                raise TypeError(f"embed() takes strings, got {type(t).__name__}")
        if not texts:  # no work, and never a network probe for an unknown dimension
            return np.zeros((0, self._known_dim() or 0), dtype=np.float32)
        with self._metered(len(texts)) as m:
            out, tokens = self._embed(texts)
            m["tokens"] = tokens
        return out

    def embed_query(self, text: str) -> np.ndarray:
        """One query vector [dim] (read-only), from a 256-entry LRU cache:
        live-typed queries repeat."""
        v = self._query_cache.get(text)
        if v is None:
            v = self.embed([text])[0].copy()
            v.setflags(write=False)
            self._query_cache.put(text, v)
        return v

    def _embed(self, texts: list[str]) -> tuple[np.ndarray, int]:  # pragma: no cover
        raise NotImplementedError

    def _known_dim(self) -> int | None:
        """The dimension if known without any I/O."""
        return self.dim

    @contextmanager
    def _metered(self, n: int) -> Iterator[dict[str, int]]:
        box = {"tokens": 0}
        t0 = time.perf_counter()
        try:
            yield box
        except ProviderDown as e:
            if not getattr(e, "counted", False):  # the http client counts each failed attempt itself
                self.meter.error(str(e))
            raise
        except Exception as e:  # an unexpected failure still counts
            self.meter.error(f"{type(e).__name__}: {e}")
            raise
        self.meter.record(n, box["tokens"], time.perf_counter() - t0)

    def describe(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "provider": self.kind,
            "name": self.name,
            "max_tokens": self.max_tokens,
        }
        # never blocks on the network: an http provider that has not answered
        # yet shows dim and fingerprint as null
        dim = self._known_dim()
        d["dim"] = dim
        d["fingerprint"] = self.fingerprint if dim else None
        d["meter"] = self.meter.snapshot()
        d["query_cache"] = {
            "size": self._query_cache.size,
            "hits": self._query_cache.hits,
            "misses": self._query_cache.misses,
        }
        d.update(self._describe_extra())
        return d

    def _describe_extra(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        self._query_cache.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# -- config --------------------------------------------------------------------


def check_int(cfg: Mapping[str, Any], key: str, field: str, lo: int, hi: int, default: int | None) -> int | None:
    if key not in cfg or cfg[key] is None:
        return default
    v = cfg[key]
    if not isinstance(v, int) or isinstance(v, bool) or not (lo <= v <= hi):
        raise InvalidParams(f"{field}.{key}", f"must be an integer in {lo}..{hi}")
    return v


def check_number(cfg: Mapping[str, Any], key: str, field: str, lo: float, hi: float, default: float) -> float:
    if key not in cfg or cfg[key] is None:
        return default
    v = cfg[key]
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not (lo < v <= hi):
        raise InvalidParams(f"{field}.{key}", f"must be a number in ({lo}, {hi}]")
    return float(v)


def check_str(cfg: Mapping[str, Any], key: str, field: str, default: str | None, required: bool = False) -> str | None:
    if key not in cfg or cfg[key] is None:
        if required:
            raise InvalidParams(f"{field}.{key}", "is required")
        return default
    v = cfg[key]
    if not isinstance(v, str) or not v.strip():
        raise InvalidParams(f"{field}.{key}", "must be a non-empty string")
    return v.strip()


def refuse_unknown(cfg: Mapping[str, Any], known: set[str], field: str) -> None:
    for key in cfg:
        if key not in known:
            raise InvalidParams(f"{field}.{key}", f"unknown option (known: {', '.join(sorted(known))})")
