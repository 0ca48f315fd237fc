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
    for handler in root.handlers:
        handler.addFilter(sqlite_notices)


def sqlite_notices(record: logging.LogRecord) -> bool:
    """apsw passes SQLite's own log to the root logger as warnings; its notices (a WAL recovered
    after a crash, by design) are information: a command run after a killed daemon printed one
    as a warning. Kept at INFO, so shown wherever INFO is (a daemon's log)."""
    if record.levelno == logging.WARNING and record.name == "root":
        msg = record.getMessage()
        if msg.startswith("SQLITE_LOG") and "SQLITE_NOTICE" in msg:
            record.levelno, record.levelname = logging.INFO, "INFO"
            return logging.getLogger().getEffectiveLevel() <= logging.INFO
    return True
