"""The rerank stage: the ranker contract and its meter (the factory is factory.py).

A ranker is a cross-encoder provider. Input: one query and the passages of the
top fused window (breadcrumb + body text, already assembled by the caller).
Output: one float per passage, in input order, higher = more relevant. The
search layer re-sorts the window by these scores; a ranker that fails raises
RankerDown with a reason the answer's ``rank.error`` can show as is.

Providers (``ranker`` in the workspace config):

    {"provider": "none"}                                   -> no ranker
    {"provider": "onnx", "path": "/abs/folder",            -> local cross-encoder
     "max_length": 512, "batch": 16, "threads": 0,
     "model": "name shown in answers", "timeout": s}
    {"provider": "http", "url": "http://host:8080",        -> TEI or Cohere-style server
     "api": "tei" | "cohere", "model": "...",
     "api_key_env": "ENV_VAR", "timeout": s, "batch": n}

``window`` (the search option) may sit in the same dict and is ignored here.

Runs on: the search's thread (a ranker scores one window at a time; the meter takes its own lock).
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

# One meter class for every provider (spec §5: ranker calls are metered like a
# provider's), so status output has one shape. For a ranker, ``texts`` counts
# the (query, passage) pairs scored and ``tokens`` the tokens fed to a local
# model (0 for HTTP: the server does not say). ``record`` is called on success,
# ``error`` on a failure; a cancelled call records neither.
from ..embed.base import Meter

__all__ = [
    "DEFAULT_COHERE_BATCH",
    "DEFAULT_HTTP_TIMEOUT",
    "DEFAULT_MAX_LENGTH",
    "DEFAULT_ONNX_BATCH",
    "DEFAULT_TEI_BATCH",
    "Meter",
    "Ranker",
    "RankerCancelled",
    "RankerDown",
    "default_timeout",
    "find_model_files",
]

DEFAULT_MAX_LENGTH = 512  # MODELS.md recipe: truncate pairs at 512, only the passage side
DEFAULT_ONNX_BATCH = 16  # ~1 s of MiniLM-L6 work at 256 tokens here: the cancel/timeout granularity
DEFAULT_HTTP_TIMEOUT = 30.0  # only when neither the caller nor the config gives one
DEFAULT_TEI_BATCH = 32  # TEI's default --max-client-batch-size; a window of 40 would get a 422
DEFAULT_COHERE_BATCH = 100  # the window's maximum: one request per search

# Throughput used by default_timeout(): pairs per second of a MiniLM-L6
# cross-encoder on this 2-core machine for ~350-token sections (MODELS.md:
# 15-24/s at 256 tokens, 8-9/s at 512; sections are 350 tokens by default).
_PAIRS_PER_SECOND = 12.0
_HEADROOM = 1.5  # indexing/embedding may share the two cores with a search
_OVERHEAD_S = 1.0  # tokenisation, first-run allocation, thread wake-ups


def default_timeout(
    window: int,
    *,
    pairs_per_second: float = _PAIRS_PER_SECOND,
    headroom: float = _HEADROOM,
    overhead: float = _OVERHEAD_S,
) -> float:
    """Seconds to give a ranker for a window of ``window`` passages.

    timeout = overhead + headroom * window / pairs_per_second
            = 1.0 + 1.5 * window / 12  = 1 + window / 8    (defaults)

    window 10 -> 2.25 s, 20 -> 3.5 s, 40 -> 6.0 s, 100 -> 13.5 s. The expected
    time of a window of 40 with MiniLM-L6 here is 2-3 s (256-token pairs) to
    ~4.7 s (512-token pairs), so the default fits a healthy ranker even while
    indexing competes for the CPU, and cuts off a stuck one. A faster ranker
    (a GPU TEI server, TinyBERT) simply finishes early.
    """
    if not isinstance(window, int) or isinstance(window, bool) or window < 1:
        raise ValueError("window must be a positive integer")
    return overhead + headroom * window / pairs_per_second


class RankerDown(Exception):
    """The ranker could not score this window; ``reason`` is shown to the user.

    The search leaves the hits in fused order and reports ``rank.state =
    "failed"`` with this reason (spec §5: a ranker that does not answer leaves
    the hits in the order they were found, and the answer says why).
    """

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class RankerCancelled(RankerDown):
    """The caller's cancel event fired; not a ranker failure (not metered as an error)."""


T = TypeVar("T")


def metered(meter: Meter, failure: Callable[[Exception], str], score: Callable[[], T]) -> T:
    """score(), with a failure metered and raised as RankerDown(reason): a transport quirk or
    a tokenizer bug must never escape as a 500. A cancel is the caller's, not the ranker's."""
    try:
        return score()
    except RankerCancelled:
        raise
    except RankerDown as exc:
        meter.error(exc.reason)
        raise
    except Exception as exc:
        reason = failure(exc)
        meter.error(reason)
        raise RankerDown(reason) from exc


@runtime_checkable
class Ranker(Protocol):
    """What the search layer holds. Implementations must be thread-safe."""

    name: str  # the model name the answer's ``rank.model`` shows
    meter: Meter

    def describe(self) -> dict[str, Any]:
        """Static facts for status output (never secrets)."""
        ...

    def score(
        self,
        query: str,
        passages: Sequence[str],
        *,
        timeout: float | None = None,
        cancel: threading.Event | None = None,
    ) -> list[float]:
        """One float per passage, in input order; raises RankerDown (or
        RankerCancelled) instead of returning partial scores."""
        ...

    def close(self) -> None: ...


_MODEL_NAMES = ("model.onnx", os.path.join("onnx", "model.onnx"))


def find_model_files(path: Path) -> tuple[Path, Path] | str:
    """(model file, tokenizer.json) for a ranker ``path``, or why there are none.

    ``path`` is a folder holding model.onnx (or onnx/model.onnx, where Hugging
    Face ONNX exports put it) beside tokenizer.json, or an .onnx file itself
    (e.g. model_quint8_avx2.onnx) whose folder holds tokenizer.json.
    """
    model: Path | None
    if path.is_file():
        if path.suffix != ".onnx":
            return f"{path} is a file but not an .onnx model"
        model, folder = path, path.parent
    elif path.is_dir():
        folder = path
        model = next((folder / n for n in _MODEL_NAMES if (folder / n).is_file()), None)
    else:
        return f"no such folder: {path}"
    tok = folder / "tokenizer.json"
    missing = [
        n for n, present in (("model.onnx", model is not None), ("tokenizer.json", tok.is_file())) if not present
    ]
    if missing:
        return (
            f"{folder} lacks {' and '.join(missing)} "
            "(a ranker folder holds model.onnx, or onnx/model.onnx, beside tokenizer.json)"
        )
    assert model is not None
    return model, tok


class Deadline:
    """A monotonic deadline (or none); shared helper for the providers."""

    __slots__ = ("at", "seconds")

    def __init__(self, seconds: float | None):
        if seconds is not None and (not math.isfinite(seconds) or seconds < 0):
            raise ValueError("timeout must be a finite number ≥ 0")
        self.seconds = seconds
        self.at = None if seconds is None else time.monotonic() + seconds

    def remaining(self) -> float | None:
        return None if self.at is None else self.at - time.monotonic()

    def passed(self) -> bool:
        return self.at is not None and time.monotonic() >= self.at

    def down(self) -> RankerDown:
        return RankerDown(f"ranker passed its deadline of {self.seconds:g} s")
