"""Telling a PostgreSQL connection string from a store path, and showing it without its password:
config/pguri.py, where it lives so that Settings (which the store layer sits on) can tell the two
apart when it reads --store and AUTODOC_STORE. Re-exported here for the store's own modules.

Runs on: any thread.
"""

from __future__ import annotations

from ...config.pguri import KEYWORDS, MASK, SCHEMES, is_postgres, redact

__all__ = ["KEYWORDS", "MASK", "SCHEMES", "is_postgres", "redact"]
