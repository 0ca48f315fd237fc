"""Building an embedding provider from a workspace's `embedding` config.

The factory, apart from base.py so that the concrete providers import the
contract without the contract importing them. Runs on: any thread.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import InvalidParams
from .base import Provider, check_int, check_number, check_str, refuse_unknown

ONNX_KEYS = {"provider", "max_tokens", "batch_size", "threads"}
HTTP_KEYS = {"provider", "url", "model", "timeout", "retries", "api_key_env", "dim", "max_tokens", "batch_size"}


def validate_config(config: Mapping[str, Any] | None, field: str = "embedding") -> dict[str, Any]:
    """Check an embedding config and return it normalised with defaults filled.
    Raises InvalidParams naming the field. {"provider": "none"} stays as is."""
    if config is None:
        config = {}
    if not isinstance(config, Mapping):
        raise InvalidParams(field, "must be an object")
    kind = config.get("provider", "onnx")
    if kind is None:
        kind = "onnx"
    if not isinstance(kind, str) or kind not in ("onnx", "http", "none"):
        raise InvalidParams(f"{field}.provider", 'must be one of "onnx", "http", "none"')
    if kind == "none":
        refuse_unknown(config, {"provider"}, field)
        return {"provider": "none"}
    if kind == "onnx":
        refuse_unknown(config, ONNX_KEYS, field)
        return {
            "provider": "onnx",
            "max_tokens": check_int(config, "max_tokens", field, 8, 512, 256),
            "batch_size": check_int(config, "batch_size", field, 1, 1024, 32),
            "threads": check_int(config, "threads", field, 1, 256, None),
        }
    refuse_unknown(config, HTTP_KEYS, field)
    from .http import normalise_url  # deferred, as below: importing httpx costs ~0.1 s a process

    url = check_str(config, "url", field, None, required=True)
    assert url is not None
    url = normalise_url(url, f"{field}.url")
    model = check_str(config, "model", field, None, required=True)
    env = check_str(config, "api_key_env", field, None)
    if env is not None and not env.replace("_", "a").isalnum():
        raise InvalidParams(f"{field}.api_key_env", "must be an environment variable name")
    return {
        "provider": "http",
        "url": url,
        "model": model,
        "timeout": check_number(config, "timeout", field, 0.0, 3600.0, 30.0),
        "retries": check_int(config, "retries", field, 0, 10, 2),
        "api_key_env": env,
        "dim": check_int(config, "dim", field, 1, 65536, None),
        "max_tokens": check_int(config, "max_tokens", field, 8, 1_000_000, 512),
        "batch_size": check_int(config, "batch_size", field, 1, 4096, 32),
    }


def make_provider(config: Mapping[str, Any] | None, field: str = "embedding") -> Provider | None:
    """Build a provider from a workspace's `embedding` config.

    {"provider": "onnx"} (default; options max_tokens, batch_size, threads)
    {"provider": "http", "url": ..., "model": ..., "timeout": s, "retries": n,
     "api_key_env": "ENV", "dim": n, "max_tokens": n, "batch_size": n}
    {"provider": "none"} -> None.

    Bad config -> InvalidParams naming the field. A missing model (onnx) ->
    ProviderDown, raised here because nothing could work without it. Nothing
    is fetched over the network here: the http provider connects on first use.
    """
    cfg = validate_config(config, field)
    if cfg["provider"] == "none":
        return None
    if cfg["provider"] == "onnx":
        from .onnx import OnnxProvider  # deferred: importing onnxruntime costs ~0.3 s

        return OnnxProvider(max_tokens=cfg["max_tokens"], batch_size=cfg["batch_size"], threads=cfg["threads"])
    from .http import HttpProvider

    return HttpProvider(
        url=cfg["url"],
        model=cfg["model"],
        timeout=cfg["timeout"],
        retries=cfg["retries"],
        api_key_env=cfg["api_key_env"],
        dim=cfg["dim"],
        max_tokens=cfg["max_tokens"],
        batch_size=cfg["batch_size"],
    )
