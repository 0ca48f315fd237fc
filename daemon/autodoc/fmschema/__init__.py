"""Frontmatter schemas (pure): the `_schema/frontmatter.yaml` format, loading
and checking it, coercing values to declared types, deriving a document's
typed facets and its violations, and parsing facet values (ranges) for search.

See protocol/SCHEMA.md for the file format.
"""

from .derive import Violation, derive, doc_type, problems
from .model import SCHEMA_DIR, SCHEMA_FILE, SCHEMA_RELPATH, FieldSpec, Schema, SchemaProblem, load_schema
from .values import TYPES, CoerceError, Typed, coerce, condition, untyped

__all__ = [
    "SCHEMA_DIR",
    "SCHEMA_FILE",
    "SCHEMA_RELPATH",
    "TYPES",
    "CoerceError",
    "FieldSpec",
    "Schema",
    "SchemaProblem",
    "Typed",
    "Violation",
    "coerce",
    "condition",
    "derive",
    "doc_type",
    "load_schema",
    "problems",
    "untyped",
]
