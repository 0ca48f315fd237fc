"""Building a ranker from a workspace's `ranker` config (the factory, apart
from base.py so the providers import the contract without it importing them).

Runs on: any thread; loading a local model takes a moment, so not the event loop.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from ..errors import InvalidParams
from .base import (
    DEFAULT_COHERE_BATCH,
    DEFAULT_HTTP_TIMEOUT,
    DEFAULT_MAX_LENGTH,
    DEFAULT_ONNX_BATCH,
    DEFAULT_TEI_BATCH,
    Ranker,
    find_model_files,
)

_COMMON_KEYS = {"provider", "window"}
_ONNX_KEYS = _COMMON_KEYS | {"path", "max_length", "batch", "threads", "model", "timeout"}
_HTTP_KEYS = _COMMON_KEYS | {"url", "api", "model", "api_key_env", "timeout", "batch"}
_PROVIDERS = ("none", "onnx", "http")
_APIS = ("tei", "cohere")


def _int(field: str, value: Any, lo: int, hi: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not (lo <= value <= hi):
        raise InvalidParams(field, f"must be an integer in {lo}..{hi}")
    return value


def _seconds(field: str, value: Any) -> float:
    if (
        not isinstance(value, (int, float))
        or isinstance(value, bool)
        or not math.isfinite(value)
        or not (0 < value <= 600)
    ):
        raise InvalidParams(field, "must be a number of seconds in (0, 600]")
    return float(value)


def _text(field: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidParams(field, "must be a non-empty string")
    return value.strip()


def validate_config(config: Any, field: str = "ranker") -> dict[str, Any]:
    """Check a ranker config without loading anything; returns a normalised copy
    (defaults filled in). Raises InvalidParams naming the offending field,
    e.g. ``ranker.path``. Unknown keys are refused so a typo is not silently ignored."""
    if not isinstance(config, dict):
        raise InvalidParams(field, "must be an object")
    provider = config.get("provider", "none")
    if provider not in _PROVIDERS:
        raise InvalidParams(f"{field}.provider", f"must be one of {', '.join(_PROVIDERS)}")
    allowed = {"none": _COMMON_KEYS, "onnx": _ONNX_KEYS, "http": _HTTP_KEYS}[provider]
    for key in config:
        if key not in allowed:
            raise InvalidParams(f"{field}.{key}", f"unknown option for provider {provider}")
    out: dict[str, Any] = {"provider": provider}
    if "window" in config:
        out["window"] = config["window"]  # its range is the workspaceOptions schema's to check
    if provider == "none":
        return out

    if provider == "onnx":
        if "path" not in config:
            raise InvalidParams(f"{field}.path", "required: a folder holding model.onnx and tokenizer.json")
        raw = _text(f"{field}.path", config["path"])
        path = Path(raw).expanduser()
        if not path.is_absolute():
            # The daemon's working directory is not the client's: a relative
            # path would silently point somewhere else.
            raise InvalidParams(f"{field}.path", f"must be an absolute path, got {raw!r}")
        found = find_model_files(path)
        if isinstance(found, str):
            raise InvalidParams(f"{field}.path", found)
        out["path"] = str(path)
        out["max_length"] = _int(f"{field}.max_length", config.get("max_length", DEFAULT_MAX_LENGTH), 16, 8192)
        out["batch"] = _int(f"{field}.batch", config.get("batch", DEFAULT_ONNX_BATCH), 1, 256)
        out["threads"] = _int(f"{field}.threads", config.get("threads", 0), 0, 64)
        # The name answers show: the folder's name unless the config names the model.
        out["model"] = _text(f"{field}.model", config["model"]) if "model" in config else found[1].parent.name
        if "timeout" in config:
            out["timeout"] = _seconds(f"{field}.timeout", config["timeout"])
        return out

    # http
    if "url" not in config:
        raise InvalidParams(f"{field}.url", "required: the ranker server's base URL or its rerank endpoint")
    url = _text(f"{field}.url", config["url"])
    if not (url.startswith("http://") or url.startswith("https://")) or len(url.split("://", 1)[1]) == 0:
        raise InvalidParams(f"{field}.url", f"must be an http:// or https:// URL, got {url!r}")
    api = config.get("api", "tei")
    if api not in _APIS:
        raise InvalidParams(f"{field}.api", f"must be one of {', '.join(_APIS)}")
    out["url"] = url
    out["api"] = api
    if "model" in config:
        out["model"] = _text(f"{field}.model", config["model"])
    elif api == "cohere":
        # The Cohere request shape carries the model name; servers refuse a request without it.
        raise InvalidParams(f"{field}.model", "required when api is cohere")
    if "api_key_env" in config:
        env = _text(f"{field}.api_key_env", config["api_key_env"])
        if not os.environ.get(env):
            raise InvalidParams(
                f"{field}.api_key_env", f"environment variable {env} is not set in the daemon's environment"
            )
        out["api_key_env"] = env
    out["timeout"] = _seconds(f"{field}.timeout", config.get("timeout", DEFAULT_HTTP_TIMEOUT))
    default_batch = DEFAULT_TEI_BATCH if api == "tei" else DEFAULT_COHERE_BATCH
    out["batch"] = _int(f"{field}.batch", config.get("batch", default_batch), 1, 1000)
    return out


def make_ranker(config: Any, field: str = "ranker") -> Ranker | None:
    """Build the ranker a config names (None for provider "none").

    Raises InvalidParams (naming ``field``.key) for a bad config, a missing
    folder or model file, an unset API-key variable, or a model that does not
    load. Loading a local model takes a moment: call it off the event loop.
    """
    cfg = validate_config(config, field)
    provider = cfg["provider"]
    if provider == "none":
        return None
    if provider == "onnx":
        from .onnx import OnnxRanker  # deferred: importing onnxruntime costs ~0.3 s

        return OnnxRanker.from_config(cfg, field=field)
    from .http import HttpRanker  # deferred: importing httpx costs ~0.1 s a process

    return HttpRanker.from_config(cfg, field=field)
