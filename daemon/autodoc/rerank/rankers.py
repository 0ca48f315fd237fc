"""The loaded rankers, one per distinct configuration (shared by workspaces configured alike).

Runs on: any thread (one lock around the table; a model loads under it once).
"""

from __future__ import annotations

import json
import threading
from typing import Any

from ..errors import InvalidParams
from .base import Ranker
from .factory import make_ranker, validate_config


def shown_model(cfg: dict[str, Any]) -> str | None:
    """What an answer calls a configured ranker before it has loaded."""
    return cfg.get("model") or cfg.get("path") or cfg.get("url")


class Rankers:
    def __init__(self) -> None:
        self._loaded: dict[str, Ranker] = {}
        self._by_config: dict[str, Ranker | None] = {}  # a stored config as written → its ranker
        self._lock = threading.Lock()

    def get(self, cfg: dict[str, Any]) -> Ranker | None:
        """The ranker a workspace's `ranker` config names, or None; raises
        InvalidParams when it cannot load (a model folder that vanished, say).
        A config is checked when it is first used, not on every search (the
        check stats the model folder)."""
        raw = json.dumps(cfg, sort_keys=True)
        with self._lock:
            if raw in self._by_config:
                return self._by_config[raw]
        norm = validate_config(cfg)
        norm.pop("window", None)
        if norm["provider"] == "none":
            ranker = None
        else:
            key = json.dumps(norm, sort_keys=True)
            with self._lock:
                ranker = self._loaded.get(key)
                if ranker is None:
                    made = make_ranker(norm)
                    assert made is not None  # only {"provider": "none"} makes none, and it is handled above
                    ranker = self._loaded[key] = made
        with self._lock:
            self._by_config[raw] = ranker
        return ranker

    def status(self, cfg: dict[str, Any]) -> dict[str, Any]:
        """{state, model, reason}: off (none configured), ready (loaded), failed (cannot load,
        or its last call failed: reason says why)."""
        try:
            ranker = self.get(cfg)
        except InvalidParams as e:
            return {"state": "failed", "model": shown_model(cfg), "reason": e.message}
        if ranker is None:
            return {"state": "off", "model": None, "reason": "no ranker is configured for this workspace"}
        # loaded is ready; a failure of its last call is worth showing, not hiding
        last_error = ranker.describe().get("meter", {}).get("last_error") or None
        return {"state": "ready", "model": ranker.name, "reason": last_error and f"last call failed: {last_error}"}

    def describe_loaded(self, configs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The loaded rankers these configs name (loading none: a model loads on its first search)."""
        with self._lock:
            used = {id(r): r for c in configs if (r := self._by_config.get(json.dumps(c, sort_keys=True)))}
        return [r.describe() for r in used.values()]

    def close(self) -> None:
        with self._lock:
            for r in self._loaded.values():
                try:
                    r.close()
                except Exception:
                    pass
