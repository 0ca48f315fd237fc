"""Facets and the workspace schema in the store (I/O, in the caller's transaction).

Input: a document's stored frontmatter and tags, and the workspace's
`_schema/frontmatter.yaml`. Output: rows in `facets` (text value, num, ISO
date), `documents.schema_problems`, and the `schemas` row that records which
schema the facets were derived from (its file hash, the parsed schema, the
problems with the file itself).

`sync_schema` is called at the start of every index run: when the schema
file's bytes differ from the recorded hash, every document's facets and
problems are derived again from what is stored — nothing is re-read from
disk, re-chunked or re-embedded.

Runs on: the caller's thread, on the connection it passes (writes inside the caller's transaction).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from pathlib import Path
from typing import Any

from ..fmschema import SCHEMA_RELPATH, Schema, derive, load_schema, problems
from ..fmschema.derive import FieldLines
from ..ingest.readfile import Refused, read_regular, too_large
from .interface import Snapshot
from .sessions import NOT_SESSION
from .sql import all_rows

# Bump when derivation changes, so stores derive their facets again.
DERIVE_VERSION = "1"
MAX_SCHEMA_BYTES = 1024 * 1024

_cache: dict[str, Schema] = {}
_cache_lock = threading.Lock()


def _parsed(text: str) -> Schema:
    with _cache_lock:
        s = _cache.get(text)
        if s is None:
            if len(_cache) > 64:
                _cache.clear()
            s = _cache[text] = Schema.from_json(json.loads(text))
        return s


def schema_row(db: Snapshot, workspace_id: int) -> tuple[str, Schema | None, list[dict]] | None:
    """(hash, schema or None, problems with the file) as last applied, or None if never recorded."""
    row = db.execute("SELECT hash, schema, problems FROM schemas WHERE workspace_id=?", (workspace_id,)).fetchone()
    if row is None:
        return None
    return row[0], (_parsed(row[1]) if row[1] else None), json.loads(row[2])


def active_schema(db: Snapshot, workspace_id: int) -> Schema | None:
    got = schema_row(db, workspace_id)
    return got[1] if got else None


def field_lines_of(content: bytes) -> FieldLines | None:
    """Lowercased frontmatter keys → their file lines (and list items' lines)."""
    from ..ingest.frontmatter import read_frontmatter
    from ..ingest.lines import split_lines

    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError:
        return None
    fm = read_frontmatter(text, split_lines(text))
    keys: dict[str, int] = {}
    items: dict[str, list[int]] = {}
    for k, line in fm.field_lines.items():
        keys.setdefault(k.lower(), line)
    for k, lines in fm.item_lines.items():
        items.setdefault(k.lower(), lines)
    return keys, items


def write_facets(
    db: Snapshot,
    workspace_id: int,
    doc_id: int,
    frontmatter: dict[str, Any],
    tags: list[str],
    content: bytes | None,
    schema: Schema | None,
) -> list[dict]:
    """Replace one document's facet rows and schema problems; return the problems."""
    rows, violations = derive(schema, frontmatter, tags)
    probs = problems(violations, lambda: field_lines_of(content if content is not None else _content(db, doc_id)))
    db.execute("DELETE FROM facets WHERE document_id=?", (doc_id,))
    db.executemany(
        "INSERT INTO facets(document_id, workspace_id, field, value, num, date) VALUES (?,?,?,?,?,?)",
        [(doc_id, workspace_id, f, t.value, t.num, t.date) for f, t in rows],
    )
    db.execute(
        "UPDATE documents SET schema_problems=? WHERE id=? AND schema_problems != ?",
        (json.dumps(probs), doc_id, json.dumps(probs)),
    )
    return probs


def _content(db: Snapshot, doc_id: int) -> bytes:
    row = db.execute("SELECT content FROM documents WHERE id=?", (doc_id,)).fetchone()
    return row[0] if row else b""


def read_schema_file(root: Path) -> bytes | None:
    """The schema file's bytes, or None when there is none (or it leaves the root)."""
    path = Path(root) / SCHEMA_RELPATH
    try:
        if not path.is_file() or not path.resolve().is_relative_to(Path(root).resolve()):
            return None
        # the one reader (ingest/readfile.py): a FIFO or device put there after the check is refused
        # by the opened descriptor, never waited on; one byte over the bound says "too large" below
        return read_regular(path, max_bytes=MAX_SCHEMA_BYTES + 1).data
    except Refused as e:
        if e.reason == too_large(MAX_SCHEMA_BYTES + 1):
            return b"\0" * (MAX_SCHEMA_BYTES + 1)
        return None
    except OSError:
        return None


def schema_hash(data: bytes | None) -> str:
    return hashlib.sha256(DERIVE_VERSION.encode() + b"\0" + (data if data is not None else b"\0none")).hexdigest()


def sync_schema(db: Snapshot, workspace_id: int, root: Path) -> bool:
    """Apply the schema file if it changed since it was last applied; True if facets were derived again."""
    data = read_schema_file(root)
    h = schema_hash(data)
    current = schema_row(db, workspace_id)
    if current is not None and current[0] == h:
        return False
    schema: Schema | None = None
    file_problems: list[dict] = []
    if data is not None:
        if len(data) > MAX_SCHEMA_BYTES:
            file_problems = [
                {
                    "line": 1,
                    "message": f"the schema is larger than {MAX_SCHEMA_BYTES} bytes; ignored",
                    "code": "schema.invalid",
                }
            ]
        else:
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError as e:
                text = None
                file_problems = [
                    {
                        "line": data.count(b"\n", 0, e.start) + 1,
                        "message": f"the schema is not valid UTF-8 at byte {e.start}; ignored",
                        "code": "schema.invalid",
                    }
                ]
            if text is not None:
                try:
                    schema, probs = load_schema(text)
                    file_problems = [p.to_json() for p in probs]
                except Exception as e:  # whatever else a schema can hold: its own problem, never the index run's
                    schema = None
                    file_problems = [
                        {
                            "line": 1,
                            "message": f"the schema could not be read ({type(e).__name__}: {str(e)[:200]}); ignored",
                            "code": "schema.invalid",
                        }
                    ]
    db.execute(
        "INSERT INTO schemas(workspace_id, hash, schema, problems, loaded) VALUES (?,?,?,?,?) "
        "ON CONFLICT(workspace_id) DO UPDATE SET hash=excluded.hash, schema=excluded.schema, "
        "problems=excluded.problems, loaded=excluded.loaded",
        (workspace_id, h, json.dumps(schema.to_json()) if schema else None, json.dumps(file_problems), time.time()),
    )
    rederive_all(db, workspace_id, schema)
    return True


def rederive_all(db: Snapshot, workspace_id: int, schema: Schema | None) -> int:
    """Derive every document's facets and problems again from the stored frontmatter and tags."""
    docs = all_rows(
        db, f"SELECT id, frontmatter, tags FROM documents WHERE workspace_id=? AND {NOT_SESSION}", (workspace_id,)
    )  # a session is no file: the schema does not apply
    for doc_id, fm, tags in docs:
        write_facets(db, workspace_id, doc_id, json.loads(fm), json.loads(tags), None, schema)
    return len(docs)
