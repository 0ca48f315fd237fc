"""A document's facets and schema problems (pure): frontmatter + tags + the
workspace schema → typed facet rows and violations.

Used when a document is written and, for every document, when the schema
changes — from the frontmatter already stored, so nothing is re-chunked or
re-embedded. Lines are looked up only for documents that have a violation
(`lines`, a callable, parses the frontmatter's key lines on demand).

Without a schema every frontmatter field is a facet compared as text (numbers
and ISO dates also fill num/date, so ranges work). With one, only declared
fields (and tag) are facets, each value coerced to its declared type; a value
that does not coerce is a violation and stays findable as text.

Runs on: any thread (pure: no I/O, no shared state).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .model import Schema
from .values import CoerceError, Typed, coerce, untyped

FieldLines = tuple[dict[str, int], dict[str, list[int]]]  # key line, list item lines (lowercased keys)


@dataclass(frozen=True)
class Violation:
    field: str
    message: str
    code: str  # schema.required | schema.type | schema.enum | schema.unknown
    item: int | None = None  # index of the offending item of a list value

    def to_problem(self, lines: FieldLines | None) -> dict[str, Any]:
        line = 1
        if lines is not None:
            keys, items = lines
            line = keys.get(self.field, 1)
            if self.item is not None and self.item < len(items.get(self.field, [])):
                line = items[self.field][self.item]
        return {"line": line, "message": self.message, "code": self.code}


def _lower_keys(fm: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in fm.items():
        out.setdefault(str(k).lower(), v)
    return out


def doc_type(schema: Schema, fm: dict[str, Any]) -> str | None:
    v = _lower_keys(fm).get(schema.type_field)
    if isinstance(v, (str, int, float)) and not isinstance(v, bool):
        return str(v).strip().lower() or None
    return None


def derive(
    schema: Schema | None, frontmatter: dict[str, Any], tags: list[str]
) -> tuple[list[tuple[str, Typed]], list[Violation]]:
    """(facet rows as (field, Typed), violations). Rows are deduplicated, in a stable order."""
    fm = _lower_keys(frontmatter if isinstance(frontmatter, dict) else {})
    rows: list[tuple[str, Typed]] = []
    violations: list[Violation] = []
    if schema is None:
        for name, v in fm.items():
            rows.extend((name, t) for t in untyped(v))
    else:
        dtype = doc_type(schema, fm)
        own = schema.fields_for(dtype)
        for name in sorted(schema.kinds):
            spec = own.get(name) or schema.spec_anywhere(name)
            v = fm.get(name)
            missing = v is None or (isinstance(v, str) and not v.strip()) or (isinstance(v, list) and not v)
            if missing:
                if name in own and own[name].required:
                    where = f" for type {dtype}" if dtype and name in schema.types.get(dtype, {}) else ""
                    what = "is empty" if name in fm else "is missing"
                    violations.append(Violation(name, f"{name}: required{where} but {what}", "schema.required"))
                continue
            assert spec is not None  # every field in kinds is declared for some type
            try:
                rows.extend((name, t) for t in coerce(spec.type, v, spec.values))
            except CoerceError as e:
                if name in own:
                    violations.append(Violation(name, f"{name}: {e}", e.code, e.item))
                rows.extend((name, t) for t in untyped(v))
        if schema.strict:
            for name in fm:
                if name not in schema.kinds and name != schema.type_field:
                    violations.append(Violation(name, f"{name}: not declared in the schema", "schema.unknown"))
    rows.extend(("tag", Typed(t.lower())) for t in tags)
    return list(dict.fromkeys(rows)), violations


def problems(violations: list[Violation], lines: Callable[[], FieldLines | None]) -> list[dict[str, Any]]:
    """Violations → [{line, message, code}], reading the key lines only when needed."""
    if not violations:
        return []
    got = lines()
    return [v.to_problem(got) for v in violations]
