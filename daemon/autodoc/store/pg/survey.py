"""What `autodoc doctor` reads of a PostgreSQL store, as facts: whether it connects (and if not,
why), the server's version, the role, pgvector, the schema's version and whether it exists, what
the role may do, and the workspaces. Read-only: it never creates the schema nor the extension.

The SQL lives here (store/ runs every statement); doctor.py turns the facts into its checks.

Runs on: the main thread of a one-shot command.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .reach import cause_of
from .roles import can_write
from .schema import MIGRATIONS, schema_version
from .store import schema_of

CONNECT_TIMEOUT = 5  # a doctor that hangs on a dead host helps nobody (unless the string sets its own)


@dataclass
class Survey:
    cause: str = ""  # why it did not connect ("" when it did)
    version: str = "?"
    role: str = "?"
    vector: str | None = None  # the extension's version in this database
    vector_offered: bool = False  # the server has it, this database has not created it
    schema: str = "autodoc"
    have: int = 0  # the schema's version (0: no tables)
    want: int = len(MIGRATIONS)
    schema_exists: bool = False
    writes: bool = False
    workspaces: list[tuple[str, str]] = field(default_factory=list)


def survey(target: str) -> Survey:
    """Connect once and read; a failure to connect is the cause, never an exception."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    out = Survey()
    try:
        given = conninfo_to_dict(target)
        conninfo = make_conninfo(target, **({} if "connect_timeout" in given else {"connect_timeout": CONNECT_TIMEOUT}))
        conn = psycopg.connect(conninfo, autocommit=True, application_name="autodoc doctor")
    except Exception as e:  # the driver's every failure to connect: its cause, scrubbed
        out.cause = cause_of(target, e)
        return out
    with conn:
        version = conn.execute("SHOW server_version").fetchone()
        role = conn.execute("SELECT current_user").fetchone()
        out.version = version[0] if version else "?"
        out.role = role[0] if role else "?"
        ext = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
        out.vector = ext[0] if ext else None
        out.vector_offered = bool(
            conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone()
        )
        out.schema = schema_of(conn.info.get_parameters().get("options", ""))  # autodoc, or the string's search_path
        out.have = schema_version(conn, out.schema)
        if out.have == 0:
            out.schema_exists = bool(
                conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (out.schema,)).fetchone()
            )
            return out
        out.schema_exists = True
        if out.have > out.want:
            return out
        out.writes = can_write(conn, out.schema)
        out.workspaces = [
            (name, root)
            for name, root in conn.execute(f'SELECT name, root FROM "{out.schema}".workspaces ORDER BY name').fetchall()
        ]
    return out
