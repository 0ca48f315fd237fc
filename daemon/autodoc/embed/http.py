"""An OpenAI-compatible embeddings client (POST {url} with {"model", "input"}).

Works with OpenAI, HuggingFace TEI's /v1/embeddings, llama.cpp, Ollama's /v1,
vLLM, LocalAI... Synchronous httpx: it is called from worker threads.

Retries with exponential backoff on connection failures, 429 and 5xx
(honouring a short Retry-After). A read timeout is not retried: the server is
up but too slow for this batch, and retrying would multiply the wait. Other 4xx
(bad key, unknown model, input too long) fail at once. Every failure raises
ProviderDown with the reason; every failed attempt counts in the meter.

Runs on: the thread that embeds; one HTTP client per provider, safe across threads.
"""

from __future__ import annotations

import base64
import math
import os
import re
import threading
import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import numpy as np

from ..errors import InvalidParams
from .base import TEXT_TEMPLATE, BaseProvider, ProviderDown, make_fingerprint

BACKOFF_BASE = 0.25  # seconds; attempt k waits BACKOFF_BASE * 2**k (capped)
BACKOFF_CAP = 8.0
RETRY_AFTER_CAP = 30.0
PROBE_TEXT = "dimension probe"
PROBE_RETRY_S = 10.0  # a failed dimension probe is not repeated for this long

_WORD = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def normalise_url(url: str, field: str = "embedding.url") -> str:
    """Accept the endpoint or a base URL: ".../v1/embeddings" stays; ".../v1"
    and "http://host:port" get the missing part appended."""
    try:
        parts = urlsplit(url.strip())
    except ValueError as e:
        raise InvalidParams(field, f"not a URL: {e}") from e
    if parts.scheme not in ("http", "https"):
        raise InvalidParams(field, "must be an http:// or https:// URL")
    if not parts.hostname:
        raise InvalidParams(field, "has no host")
    try:
        parts.port
    except ValueError as e:
        raise InvalidParams(field, f"bad port: {e}") from e
    path = parts.path.rstrip("/")
    if not path.endswith("/embeddings"):
        path = path + ("/embeddings" if path.endswith("/v1") else "/v1/embeddings")
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def remote_model_tokens(text: str) -> int:
    """A model-agnostic estimate of what the embedding server counts (its tokenizer is unknown): the larger
    of words+punctuation and characters/4, plus 2 special tokens."""
    return max(len(_WORD.findall(text)), math.ceil(len(text) / 4)) + 2


class HttpProvider(BaseProvider):
    kind = "http"

    def __init__(
        self,
        url: str,
        model: str,
        *,
        timeout: float = 30.0,
        retries: int = 2,
        api_key_env: str | None = None,
        dim: int | None = None,
        max_tokens: int = 512,
        batch_size: int = 32,
        backoff: float = BACKOFF_BASE,
        transport: httpx.BaseTransport | None = None,
    ):
        super().__init__()
        self.url = normalise_url(url)
        self.name = model
        self.model = model
        self.timeout = float(timeout)
        self.retries = int(retries)
        self.api_key_env = api_key_env
        self.max_tokens = int(max_tokens)
        self.batch_size = int(batch_size)
        self.backoff = float(backoff)
        self._dim: int | None = int(dim) if dim else None
        self._dim_lock = threading.Lock()
        self._probe_failed: tuple[float, ProviderDown] | None = None
        self._client = httpx.Client(
            timeout=httpx.Timeout(self.timeout, connect=min(self.timeout, 10.0)),
            headers={"User-Agent": "autodoc", "Accept": "application/json"},
            transport=transport,
        )

    # -- identity ---------------------------------------------------------------

    @property
    def dim(self) -> int:
        """The configured dimension, else learnt from the first answer (one
        probe request if nothing was embedded yet; raises ProviderDown)."""
        if self._dim is None:
            with self._dim_lock:
                if self._dim is None:
                    failed = self._probe_failed
                    if failed and time.monotonic() - failed[0] < PROBE_RETRY_S:
                        raise failed[1]  # status calls must not each wait out a timeout
                    try:
                        self._embed([PROBE_TEXT])
                    except ProviderDown as e:
                        self._probe_failed = (time.monotonic(), e)
                        raise
        assert self._dim is not None
        return self._dim

    def _known_dim(self) -> int | None:
        return self._dim

    @property
    def fingerprint(self) -> str:
        return make_fingerprint(
            {
                "provider": "http",
                "url": self.url,
                "model": self.model,
                "dim": self.dim,
                "template": TEXT_TEMPLATE,
            }
        )

    tokenizer_id = "http-estimate-v1"  # remote_model_tokens above; change the name when it changes

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Estimates only: the server's tokenizer is not known here."""
        if isinstance(texts, str):
            raise TypeError("count_tokens() takes a sequence of strings")
        return [remote_model_tokens(t) for t in texts]

    def portable_counter(self):
        return remote_model_tokens  # a module's function: it pickles by name

    def _describe_extra(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "model": self.model,
            "timeout": self.timeout,
            "retries": self.retries,
            "batch_size": self.batch_size,
            "api_key_env": self.api_key_env,
            "token_counts": "estimated",
        }

    def close(self) -> None:
        super().close()
        self._client.close()

    # -- embedding --------------------------------------------------------------

    def _embed(self, texts: list[str]) -> tuple[np.ndarray, int]:
        parts, tokens = [], 0
        for s in range(0, len(texts), self.batch_size):
            vecs, used = self._request(texts[s : s + self.batch_size])
            parts.append(vecs)
            tokens += used
        out = parts[0] if len(parts) == 1 else np.concatenate(parts)
        return out, tokens

    def _headers(self) -> dict[str, str]:
        if not self.api_key_env:
            return {}
        key = os.environ.get(self.api_key_env)
        if not key:
            raise self._down(f"API key environment variable {self.api_key_env} is not set", retryable=False)
        return {"Authorization": f"Bearer {key}"}

    def _down(self, reason: str, *, retryable: bool = True, counted: bool = False) -> ProviderDown:
        e = ProviderDown(f"embedding server {self.url}: {reason}", provider="http", retryable=retryable)
        e.counted = counted  # type: ignore[attr-defined]
        return e

    def _request(self, batch: list[str]) -> tuple[np.ndarray, int]:
        headers = self._headers()
        payload = {"model": self.model, "input": batch}
        attempt = 0
        while True:
            wait: float | None = None
            try:
                r = self._client.post(self.url, json=payload, headers=headers)
            except httpx.ConnectTimeout:
                reason, retryable = f"connection timed out after {self.timeout:g}s", True
            except httpx.TimeoutException:
                reason, retryable = f"no answer within {self.timeout:g}s (timeout)", False
            except httpx.ConnectError as e:
                reason, retryable = f"cannot connect ({_short(e)})", True
            except httpx.TransportError as e:  # reset, protocol error mid-answer
                reason, retryable = f"connection failed ({type(e).__name__}: {_short(e)})", True
            else:
                if r.status_code == 200:
                    return self._parse(r, len(batch))
                reason = f"HTTP {r.status_code}{_server_message(r)}"
                retryable = r.status_code == 429 or r.status_code >= 500
                if retryable:
                    wait = _retry_after(r)
                elif r.status_code in (401, 403):
                    reason += " (check the API key" + (
                        f" in ${self.api_key_env})" if self.api_key_env else ": api_key_env is not set)"
                    )
                elif r.status_code == 404:
                    reason += " (wrong URL or unknown model?)"
            self.meter.error(reason)
            if not retryable or attempt >= self.retries:
                tries = f" after {attempt + 1} attempts" if attempt else ""
                raise self._down(reason + tries, retryable=retryable, counted=True)
            if wait is None:
                wait = min(self.backoff * (2**attempt), BACKOFF_CAP)
            time.sleep(wait)
            attempt += 1

    def _parse(self, r: httpx.Response, n: int) -> tuple[np.ndarray, int]:
        try:
            body = r.json()
            data = body["data"]
            if not isinstance(data, list):
                raise TypeError("data is not a list")
            if len(data) != n:
                raise ValueError(f"{len(data)} embeddings for {n} inputs")
            rows: list[Any] = [None] * n
            for pos, item in enumerate(data):
                idx = item.get("index", pos)
                if not isinstance(idx, int) or not (0 <= idx < n) or rows[idx] is not None:
                    raise ValueError(f"bad or repeated index {idx!r}")
                emb = item["embedding"]
                if isinstance(emb, str):  # encoding_format=base64
                    emb = np.frombuffer(base64.b64decode(emb), dtype="<f4")
                rows[idx] = emb
            mat = np.asarray(rows, dtype=np.float32)
        except Exception as e:
            self.meter.error(f"bad answer: {e}")
            raise self._down(f"unexpected answer ({type(e).__name__}: {_short(e)})", counted=True) from e
        if mat.ndim != 2 or mat.shape[1] == 0:
            self.meter.error("bad answer: ragged or empty embeddings")
            raise self._down("ragged or empty embeddings", counted=True)
        if not np.isfinite(mat).all():
            self.meter.error("bad answer: non-finite values")
            raise self._down("embeddings contain NaN or infinity", counted=True)
        d = int(mat.shape[1])
        if self._dim is None:
            self._dim = d
        elif d != self._dim:
            msg = f"returned {d}-d embeddings, expected {self._dim} (embedding.dim or an earlier answer)"
            self.meter.error(msg)
            raise self._down(msg, retryable=False, counted=True)
        norms = np.linalg.norm(mat, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        mat /= norms
        usage = body.get("usage") if isinstance(body, dict) else None
        tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
        if not isinstance(tokens, int):
            tokens = 0
        return mat, tokens


def _short(e: BaseException, limit: int = 200) -> str:
    s = str(e) or type(e).__name__
    return s if len(s) <= limit else s[:limit] + "…"


def _server_message(r: httpx.Response) -> str:
    """The error message the server sent, if any, shortened."""
    try:
        body = r.json()
    except Exception:
        text = r.text.strip()
        return f": {text[:200]}" if text else ""
    msg: Any = body
    if isinstance(body, dict):
        msg = body.get("error", body.get("message", body.get("detail", body)))
        if isinstance(msg, dict):
            msg = msg.get("message", msg)
    s = str(msg).strip()
    return f": {s[:200]}" if s else ""


def _retry_after(r: httpx.Response) -> float | None:
    v = r.headers.get("retry-after")
    if not v:
        return None
    try:
        return max(0.0, min(float(v), RETRY_AFTER_CAP))
    except ValueError:
        return None
