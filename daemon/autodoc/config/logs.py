"""The one logging set-up every entry point uses: to stderr (stdout may be
the RPC channel), at AUTODOC_LOG's level when it is set, else the entry
point's default.

Runs on: the main thread, once, before anything logs.
"""

from __future__ import annotations

import logging
import sys

from .settings import env_settings

FORMAT = "autodoc[%(process)d] %(relativeCreated)d %(levelname)s %(name)s: %(message)s"


def configure_logging(default: int = logging.INFO, *, verbose: bool = False) -> None:
    """`verbose` (-v) wins over AUTODOC_LOG, which wins over `default`. A process
    that configured logging already (a test runner, say) is left as it is."""
    root = logging.getLogger()
    if root.handlers:
        return
    named = logging.getLevelName((env_settings().log_level or "").upper())  # an int for a known name
    level = logging.DEBUG if verbose else named if isinstance(named, int) else default
    logging.basicConfig(stream=sys.stderr, level=level, format=FORMAT)
