"""The PostgreSQL store (docs/dev/postgres.md): StoreInterface over psycopg connections.

Not built yet: opening one refuses with a clear error naming the target without its password.

Runs on: any thread.
"""

from __future__ import annotations

from typing import Any

from ...errors import Unsupported
from .uri import redact


class PgStore:
    def __init__(self, target: str, *, writer: bool = True, holder: dict[str, Any] | None = None):
        raise Unsupported(f"{redact(target)}: the PostgreSQL store is not built yet (issue 34)")
