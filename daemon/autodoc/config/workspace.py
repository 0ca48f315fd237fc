"""Per-workspace settings (workspace.configure), stored in the store and
changed atomically; validated once, when they are set. Per-request options
override them for one search only (search/options.py).

Runs on: any thread (frozen values; validation runs when a workspace is added or configured).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from ..embed.factory import validate_config as validate_embedding
from ..errors import InvalidParams
from ..rerank.factory import validate_config as validate_ranker
from .defaults import (
    MAX_FILE_BYTES, RERANK_WINDOW_MAX, RERANK_WINDOW_MIN, RRF_K, RRF_WEIGHTS, SECTION_TOKENS, SECTION_TOKENS_MAX,
    SECTION_TOKENS_MIN,
)


@dataclass(frozen=True)
class WorkspaceConfig:
    """Per-workspace options (workspace.configure). Unknown keys are refused."""

    section_tokens: int = SECTION_TOKENS
    abstract_chunk: bool = True
    demote_superseded: bool = True
    max_file_bytes: int = MAX_FILE_BYTES
    # embedding: {"provider": "onnx"|"http"|"none", ...provider options}
    embedding: dict[str, Any] = field(default_factory=lambda: {"provider": "onnx"})
    # ranker: {"provider": "none"|"onnx"|"http", "window": 40, ...}
    ranker: dict[str, Any] = field(default_factory=lambda: {"provider": "none"})
    # fusion: {"method": "rrf", "k": 20, "weights": {...}} or {"method": "convex" | "weighted", ...}
    fusion: dict[str, Any] = field(default_factory=lambda: {"method": "rrf", "k": RRF_K, "weights": dict(RRF_WEIGHTS)})

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> "WorkspaceConfig":
        """A stored configuration, as it was validated when it was written. Not
        checked again: a ranker folder that vanished since must fail that stage,
        not every call on the workspace."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in (data or {}).items() if k in known})

    def merged(self, options: dict[str, Any], prefix: str = "options") -> "WorkspaceConfig":
        known = {f.name for f in fields(self)}
        changes: dict[str, Any] = {}
        for key, value in options.items():
            if key not in known:
                raise InvalidParams(f"{prefix}.{key}", "unknown workspace option")
            changes[key] = _check_option(f"{prefix}.{key}", key, value)
        return replace(self, **changes)


def _check_option(field_name: str, key: str, value: Any) -> Any:
    if key == "section_tokens":
        if not isinstance(value, int) or isinstance(value, bool) or not (SECTION_TOKENS_MIN <= value <= SECTION_TOKENS_MAX):
            raise InvalidParams(field_name, f"must be an integer in {SECTION_TOKENS_MIN}..{SECTION_TOKENS_MAX}")
    elif key in ("abstract_chunk", "demote_superseded"):
        if not isinstance(value, bool):
            raise InvalidParams(field_name, "must be a boolean")
    elif key == "max_file_bytes":
        if not isinstance(value, int) or isinstance(value, bool) or value < 1024:
            raise InvalidParams(field_name, "must be an integer ≥ 1024")
    elif key in ("embedding", "ranker", "fusion"):
        if not isinstance(value, dict):
            raise InvalidParams(field_name, "must be an object")
        if key == "ranker" and "window" in value:
            check_window(f"{field_name}.window", value["window"])
        if key == "embedding":
            validate_embedding(value, field_name)
        if key == "ranker":
            validate_ranker(value, field_name)
    return value


def check_window(field_name: str, value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not (RERANK_WINDOW_MIN <= value <= RERANK_WINDOW_MAX):
        raise InvalidParams(field_name, f"must be an integer in {RERANK_WINDOW_MIN}..{RERANK_WINDOW_MAX}")
    return value
