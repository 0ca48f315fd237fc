"""The rerank stage's providers: cross-encoder rankers.

``make_ranker(config)`` builds one from a workspace's ``ranker`` config;
``Ranker.score(query, passages)`` returns one float per passage (higher = more
relevant) or raises ``RankerDown`` with a reason for the answer's rank.error.
Providers live in ``rerank.onnx`` (local model folder) and ``rerank.http`` (TEI or
Cohere-compatible server); rerank/factory.py builds them.
"""

from .base import (
    Meter,
    Ranker,
    RankerCancelled,
    RankerDown,
    default_timeout,
)
from .factory import make_ranker, validate_config

__all__ = [
    "Meter",
    "Ranker",
    "RankerCancelled",
    "RankerDown",
    "default_timeout",
    "make_ranker",
    "validate_config",
]
