"""The loaded embedding providers, one per distinct configuration.

Workspaces configured alike share one provider (one model in memory). A
configuration that cannot load is remembered with its reason.

Runs on: any thread (one lock around the table; a model loads under it once).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

from .base import Provider, ProviderDown
from .factory import make_provider, validate_config
from .memory import release_free_heap

ESTIMATE = "estimate-v1"  # ingest.tokens.wordpiece_tokens; change the name when it changes


def config_key(cfg: dict[str, Any]) -> str:
    return json.dumps(cfg, sort_keys=True)


class Providers:
    def __init__(self) -> None:
        self._loaded: dict[str, Provider] = {}
        self._by_config: dict[str, Provider | None] = {}  # a config as written → its provider
        self._lock = threading.RLock()
        self._state_lock = threading.Lock()
        self._loading: set[str] = set()  # configs whose model is loading now
        self._failed: dict[str, str] = {}  # config → why its model could not load (until it loads)

    def get(self, cfg: dict[str, Any]) -> Provider | None:
        """The provider for a config, None for "none"; raises ProviderDown when it cannot
        load (asked again next time: a model can become available). A config is
        normalised once, not on every search."""
        raw = config_key(cfg)
        with self._lock:
            if raw in self._by_config:
                return self._by_config[raw]
            norm = validate_config(cfg)
            p = None
            if norm["provider"] != "none":
                key = config_key(norm)
                p = self._loaded.get(key)
                if p is None:
                    with self._state_lock:
                        self._loading.add(raw)
                    try:
                        made = make_provider(norm)
                        assert made is not None  # only {"provider": "none"} builds none, and it stops above
                        p = self._loaded[key] = made
                    except ProviderDown as e:
                        with self._state_lock:
                            self._failed[raw] = str(e)
                        raise
                    finally:
                        with self._state_lock:
                            self._loading.discard(raw)
                    release_free_heap()  # the model load's freed buffers (once per provider)
            with self._state_lock:
                self._failed.pop(raw, None)
            self._by_config[raw] = p
            return p

    def state(self, cfg: dict[str, Any]) -> tuple[str, str | None]:
        """(model state, why it failed) for a config, without loading or waiting for a load:
        none | unloaded (not asked for yet in this process) | loading | ready | failed."""
        if cfg.get("provider", "onnx") == "none":
            return "none", None
        raw = config_key(cfg)
        with self._state_lock:  # not self._lock: a load holds that for seconds
            if raw in self._loading:
                return "loading", None
            if raw in self._failed:
                return "failed", self._failed[raw]
        if self._by_config.get(raw) is not None:
            return "ready", None
        return "unloaded", None

    def target(self, cfg: dict[str, Any]) -> tuple[Provider | None, str | None]:
        """(provider, reason) for a workspace's `embedding` config; provider is
        None when none is configured (reason None) or it cannot load (reason)."""
        try:
            return self.get(cfg), None
        except ProviderDown as e:
            return None, f"the embedding provider is unavailable: {e}"

    def config_of(self, provider: Provider) -> dict[str, Any]:
        with self._lock:
            for key, p in self._loaded.items():
                if p is provider:
                    return json.loads(key)
        return {}

    def tokenizer_id(self, cfg: dict[str, Any]) -> str:
        """What token_counter counts with: "estimate" (ingest.tokens) or the provider's tokenizer."""
        if self.token_counter(cfg) is None:
            return ESTIMATE
        p, _ = self.target(cfg)
        return p.tokenizer_id if p is not None else ESTIMATE

    def token_counter(self, cfg: dict[str, Any]) -> Callable[[str], int] | None:
        """The configured model's own token count, which chunking budgets with (None: estimate)."""
        p, _ = self.target(cfg)
        if p is None:
            return None
        try:
            p.count_tokens(["probe"])
        except Exception:
            return None
        portable = getattr(p, "portable_counter", None)  # one that index/prepare.py's workers can take
        return portable() if portable is not None else (lambda s: p.count_tokens([s])[0])

    def describe_loaded(self, configs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The loaded providers these configs name (loading none, and not waiting for a load:
        self._lock is held for a whole model load, and server.info must answer meanwhile)."""
        used = {id(p): p for c in configs if (p := self._by_config.get(config_key(c)))}  # one dict read each
        return [p.describe() for p in used.values()]
