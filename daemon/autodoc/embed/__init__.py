"""Embedding providers (local ONNX, OpenAI-compatible HTTP) behind one protocol.

from autodoc.embed import make_provider, ProviderDown
p = make_provider(ws_config.embedding)      # None when provider is "none"
vecs = p.embed(["breadcrumb\\ntext", ...])  # float32 [n, dim], L2-normalised
"""

from .base import (
    QUERY_CACHE_SIZE,
    TEXT_TEMPLATE,
    BaseProvider,
    Meter,
    Provider,
    ProviderDown,
    make_fingerprint,
)
from .factory import make_provider, validate_config

__all__ = [
    "QUERY_CACHE_SIZE",
    "TEXT_TEMPLATE",
    "BaseProvider",
    "Meter",
    "Provider",
    "ProviderDown",
    "make_fingerprint",
    "make_provider",
    "validate_config",
]
