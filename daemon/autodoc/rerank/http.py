"""The rerank stage's remote provider: a rerank server over HTTP.

Input: a query and the window's passages. Output: one float per passage, in
input order. Two wire shapes:

* ``api: "tei"`` — Hugging Face Text Embeddings Inference, ``POST /rerank``
  ``{"query", "texts", "truncate": true}`` -> ``[{"index", "score"}, ...]``
  (sorted by score; mapped back to input order here).
* ``api: "cohere"`` — Cohere-compatible ``POST /v1/rerank``
  ``{"model", "query", "documents", "top_n"}`` ->
  ``{"results": [{"index", "relevance_score"}, ...]}`` (Cohere, Jina, vLLM,
  Infinity, LocalAI… speak this).

``url`` may be the server's base (the endpoint path is appended), a base
ending in an API version (``…/v1``, ``…/v2``: ``/rerank`` is appended, never a
second ``/v1``) or a full URL ending in ``/rerank`` (used as is). The key, if any,
is read from the environment variable ``api_key_env`` at each call and sent as
``Authorization: Bearer``; it never appears in describe() or in errors.

Runs on: the search's thread; one HTTP client per ranker, safe across threads.
"""

from __future__ import annotations

import math
import os
import re
import threading
import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

import httpx

from .base import Deadline, Meter, RankerCancelled, RankerDown, metered

__all__ = ["HttpRanker"]

_PATHS = {"tei": "/rerank", "cohere": "/v1/rerank"}


_VERSION = re.compile(r"/v\d+$")


def endpoint_for(url: str, api: str) -> str:
    """The URL posted to: as given when it ends in /rerank; a base that already
    names an API version (…/v1, …/v2) gets /rerank; any other base gets the API's path."""
    base = url.rstrip("/")
    path = urlsplit(base).path
    if path.endswith("/rerank"):
        return base
    if _VERSION.search(path):
        return base + "/rerank"
    return base + _PATHS[api]


def _excerpt(resp: httpx.Response, limit: int = 200) -> str:
    """The server's own words for an error, kept short (TEI/Cohere put them in
    "error"/"message"/"detail")."""
    try:
        data = resp.json()
        if isinstance(data, dict):
            for key in ("error", "message", "detail"):
                if data.get(key):
                    text = str(data[key])
                    break
            else:
                text = resp.text
        else:
            text = resp.text
    except Exception:
        text = resp.text
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class HttpRanker:
    """A rerank server reached with httpx (one pooled, thread-safe client)."""

    def __init__(
        self,
        url: str,
        api: str = "tei",
        *,
        model: str | None = None,
        api_key_env: str | None = None,
        timeout: float = 30.0,
        batch: int = 32,
        transport: httpx.BaseTransport | None = None,
    ):
        if api not in _PATHS:
            raise ValueError(f"api must be one of {', '.join(_PATHS)}")
        self.url = url
        self.api = api
        self.endpoint = endpoint_for(url, api)
        self.model = model
        # TEI serves one model and the request does not name it: show where it lives.
        self.name = model or f"{api}@{urlsplit(self.endpoint).netloc}"
        self.api_key_env = api_key_env
        self.timeout = timeout
        self.batch = batch
        self.meter = Meter()
        # trust_env stays on so HTTPS_PROXY/NO_PROXY and custom CA bundles apply
        # to a hosted API; redirects are refused (a rerank POST never moves).
        self._client = httpx.Client(
            transport=transport, follow_redirects=False, headers={"User-Agent": "autodoc-ranker"}
        )

    @classmethod
    def from_config(cls, cfg: dict[str, Any], field: str = "ranker") -> HttpRanker:
        """Build from a validated config (base.validate_config)."""
        return cls(
            cfg["url"],
            cfg["api"],
            model=cfg.get("model"),
            api_key_env=cfg.get("api_key_env"),
            timeout=cfg["timeout"],
            batch=cfg["batch"],
        )

    def describe(self) -> dict[str, Any]:
        return {
            "provider": "http",
            "api": self.api,
            "model": self.name,
            "url": self.url,
            "endpoint": self.endpoint,
            "batch": self.batch,
            "timeout": self.timeout,
            "api_key_env": self.api_key_env,  # the variable's name, never its value
            "meter": self.meter.snapshot(),
        }

    def close(self) -> None:
        self._client.close()

    def score(
        self,
        query: str,
        passages: Sequence[str],
        *,
        timeout: float | None = None,
        cancel: threading.Event | None = None,
    ) -> list[float]:
        """Scores in input order; ``timeout`` (default: the config's) bounds the
        whole call across batches. Raises RankerDown with the reason instead of
        returning partial scores; RankerCancelled between batches if ``cancel``
        is set (an HTTP request in flight is not interrupted)."""
        started = time.monotonic()
        deadline = Deadline(self.timeout if timeout is None else timeout)  # ValueError for a negative one
        scores = metered(
            self.meter,
            lambda exc: f"ranker at {self.endpoint} failed: {type(exc).__name__}: {exc}",
            lambda: self._score(query, list(passages), deadline, cancel),
        )
        self.meter.record(len(scores), 0, time.monotonic() - started)  # tokens: the server does not say
        return scores

    def _headers(self) -> dict[str, str]:
        if not self.api_key_env:
            return {}
        key = os.environ.get(self.api_key_env)
        if not key:
            raise RankerDown(f"environment variable {self.api_key_env} (the ranker's API key) is not set")
        return {"Authorization": f"Bearer {key}"}

    def _score(
        self, query: str, passages: list[str], deadline: Deadline, cancel: threading.Event | None
    ) -> list[float]:
        if not isinstance(query, str) or not all(isinstance(p, str) for p in passages):
            raise RankerDown("query and passages must be strings")
        if not passages:
            return []
        headers = self._headers()
        scores: list[float | None] = [None] * len(passages)
        for start in range(0, len(passages), self.batch):
            if cancel is not None and cancel.is_set():
                raise RankerCancelled("ranking was cancelled")
            remaining = deadline.remaining()
            if remaining is not None and remaining <= 0:
                raise deadline.down()
            chunk = passages[start : start + self.batch]
            data = self._post(self._body(query, chunk), headers, remaining, deadline)
            for index, value in self._parse(data, len(chunk)):
                scores[start + index] = value
        return [float(s) for s in scores]  # type: ignore[arg-type]  # _parse guarantees every slot is filled

    def _body(self, query: str, chunk: list[str]) -> dict[str, Any]:
        if self.api == "tei":
            # truncate: without it TEI answers 413 for a passage over the model's length.
            return {"query": query, "texts": chunk, "truncate": True}
        return {"model": self.model, "query": query, "documents": chunk, "top_n": len(chunk)}

    def _post(self, body: dict[str, Any], headers: dict[str, str], remaining: float | None, deadline: Deadline) -> Any:
        # httpx applies the timeout per phase (connect, write, each read); with
        # each set to what is left of the deadline a stuck server is cut off
        # near it, a trickling one at most one phase later.
        t = httpx.Timeout(remaining) if remaining is not None else httpx.Timeout(None)
        try:
            resp = self._client.post(self.endpoint, json=body, headers=headers, timeout=t)
        except httpx.TimeoutException as exc:
            if deadline.seconds is not None:
                raise RankerDown(
                    f"ranker at {self.endpoint} did not answer within its deadline of {deadline.seconds:g} s"
                ) from exc
            raise RankerDown(f"ranker at {self.endpoint} timed out") from exc
        except httpx.HTTPError as exc:
            detail = " ".join(str(exc).split()) or type(exc).__name__
            raise RankerDown(f"cannot reach ranker at {self.endpoint}: {detail}") from exc
        if resp.status_code != 200:
            raise RankerDown(f"ranker at {self.endpoint} answered HTTP {resp.status_code}: {_excerpt(resp)}")
        try:
            return resp.json()
        except ValueError as exc:
            raise RankerDown(
                f"ranker at {self.endpoint} answered with invalid JSON: {' '.join(resp.text[:120].split())!r}"
            ) from exc

    def _parse(self, data: Any, n: int) -> list[tuple[int, float]]:
        """(index, score) pairs covering 0..n-1 exactly once, or RankerDown."""
        if self.api == "tei":
            items, score_key = data, "score"
            shape = 'a list of {"index", "score"}'
        else:
            items = data.get("results") if isinstance(data, dict) else None
            score_key = "relevance_score"
            shape = '{"results": [{"index", "relevance_score"}]}'
        if not isinstance(items, list):
            raise RankerDown(f"ranker at {self.endpoint} answered an unexpected shape (expected {shape})")
        seen: set[int] = set()
        out: list[tuple[int, float]] = []
        for item in items:
            if not isinstance(item, dict):
                raise RankerDown(f"ranker at {self.endpoint} answered an unexpected shape (expected {shape})")
            index, value = item.get("index"), item.get(score_key)
            if not isinstance(index, int) or isinstance(index, bool) or not (0 <= index < n) or index in seen:
                raise RankerDown(f"ranker at {self.endpoint} answered a bad index {index!r} for {n} passages")
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
                raise RankerDown(f"ranker at {self.endpoint} answered a bad score {value!r} for passage {index}")
            seen.add(index)
            out.append((index, float(value)))
        if len(seen) != n:
            missing = sorted(set(range(n)) - seen)
            raise RankerDown(
                f"ranker at {self.endpoint} scored {len(seen)} of {n} passages "
                f"(missing {missing[:5]}{'…' if len(missing) > 5 else ''})"
            )
        return out
