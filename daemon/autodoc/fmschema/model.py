"""The frontmatter schema (pure): `_schema/frontmatter.yaml` text → Schema.

Format (protocol/SCHEMA.md, JSON Schema in schemas/frontmatter-schema.json):

    version: 1            # optional; 1 is the only version
    type_field: type      # optional; the field that picks types.<name>
    strict: false         # optional; true reports fields nothing declares
    common:               # fields of every document
      owner: string                          # shorthand: just the type
      date: {type: date}
    types:
      adr:                                   # documents whose `type` is adr
        adr: {type: integer, required: true, link: true}
        status: {type: enum, values: [proposed, accepted, superseded], required: true}

A field spec is a type name or a mapping with `type` (string, integer, number,
boolean, date, list, enum), `required` (default false), `values` (enum only),
`link` (integer only: links written `<field> N` resolve to the document whose
field is N) and `description`. A field declared in both `common` and a type
takes the type's spec for documents of that type.

Loading never raises: a file that is not YAML, or not a mapping, gives no
schema and a problem; a bad field spec is left out with a problem; the rest
of the schema applies. Problems carry the schema file's line.

Runs on: any thread (pure: no I/O, no shared state).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import yaml

from .values import KIND_OF, TYPES

SCHEMA_DIR = "_schema"
SCHEMA_FILE = "frontmatter.yaml"
SCHEMA_RELPATH = f"{SCHEMA_DIR}/{SCHEMA_FILE}"
VERSION = 1
RESERVED = frozenset({"tag"})  # tag:x is the tag shorthand, never a field

_SPEC_KEYS = {"type", "required", "values", "link", "description"}
_TOP_KEYS = {"version", "type_field", "strict", "common", "types", "description"}


@dataclass(frozen=True)
class SchemaProblem:
    line: int
    message: str
    code: str = "schema.invalid"

    def to_json(self) -> dict[str, Any]:
        return {"line": self.line, "message": self.message, "code": self.code}


@dataclass(frozen=True)
class FieldSpec:
    name: str
    type: str
    required: bool = False
    values: tuple[str, ...] = ()  # enum values, lowercased
    link: bool = False
    description: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type, "required": self.required}
        if self.values:
            out["values"] = list(self.values)
        if self.link:
            out["link"] = True
        if self.description:
            out["description"] = self.description
        return out


@dataclass(frozen=True)
class Schema:
    common: dict[str, FieldSpec] = field(default_factory=dict)
    types: dict[str, dict[str, FieldSpec]] = field(default_factory=dict)
    type_field: str = "type"
    strict: bool = False
    # field -> how its facet compares ("string" | "number" | "date" | "boolean")
    kinds: dict[str, str] = field(default_factory=dict)

    @property
    def declared(self) -> set[str]:
        return set(self.kinds)

    def fields_for(self, doc_type: str | None) -> dict[str, FieldSpec]:
        """The fields a document of this type has to satisfy: common, overridden by its type's."""
        out = dict(self.common)
        if doc_type is not None:
            out.update(self.types.get(doc_type, {}))
        return out

    def spec_anywhere(self, name: str) -> FieldSpec | None:
        """The spec used for a declared field a document's own type does not declare."""
        if name in self.common:
            return self.common[name]
        for t in sorted(self.types):
            if name in self.types[t]:
                return self.types[t][name]
        return None

    def link_fields(self) -> list[str]:
        names = {n for n, s in self.common.items() if s.link}
        for fields in self.types.values():
            names |= {n for n, s in fields.items() if s.link}
        return sorted(names)

    def to_json(self) -> dict[str, Any]:
        return {
            "version": VERSION,
            "type_field": self.type_field,
            "strict": self.strict,
            "common": {n: s.to_json() for n, s in sorted(self.common.items())},
            "types": {t: {n: s.to_json() for n, s in sorted(f.items())} for t, f in sorted(self.types.items())},
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Schema:
        """Rebuild a Schema stored by to_json (already checked when it was loaded)."""

        def specs(d: dict) -> dict[str, FieldSpec]:
            return {
                n: FieldSpec(
                    n,
                    s["type"],
                    s.get("required", False),
                    tuple(s.get("values", ())),
                    s.get("link", False),
                    s.get("description", ""),
                )
                for n, s in d.items()
            }

        common = specs(data.get("common", {}))
        types = {t: specs(f) for t, f in data.get("types", {}).items()}
        kinds, _ = _kinds(common, types)
        return cls(common, types, data.get("type_field", "type"), data.get("strict", False), kinds)

    def fingerprint(self) -> str:
        return hashlib.sha256(json.dumps(self.to_json(), sort_keys=True).encode()).hexdigest()


# -- loading ------------------------------------------------------------------


def _line_of(node: yaml.Node | None) -> int:
    return node.start_mark.line + 1 if node is not None else 1


def _map_items(node: yaml.Node | None) -> list[tuple[yaml.Node, yaml.Node]]:
    return list(node.value) if isinstance(node, yaml.MappingNode) else []


class _Unbuildable:
    """A value YAML parsed but cannot build (a 5,000-digit int is past int()'s 4,300, a bad
    !!binary): it fails every check below, so the key it is under gets that key's problem."""

    def __repr__(self) -> str:
        return "a value YAML cannot build"


def _construct(node: yaml.Node) -> Any:
    loader = yaml.SafeLoader("")
    try:
        return loader.construct_object(node, deep=True)
    except (yaml.YAMLError, ValueError, OverflowError, RecursionError):
        return _Unbuildable()
    finally:
        loader.dispose()


def load_schema(text: str) -> tuple[Schema | None, list[SchemaProblem]]:
    """Parse and check a schema file. (None, problems) when there is nothing usable."""
    problems: list[SchemaProblem] = []
    loader = yaml.SafeLoader(text)
    try:
        root = loader.get_single_node()
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        line = mark.line + 1 if mark is not None else 1
        msg = ", ".join(p for p in (getattr(e, "context", None), getattr(e, "problem", None)) if p) or str(e)
        return None, [SchemaProblem(line, f"the schema is not valid YAML: {msg}")]
    finally:
        loader.dispose()
    if root is None:
        return Schema(), []  # an empty file: a schema that declares nothing
    if not isinstance(root, yaml.MappingNode):
        return None, [SchemaProblem(_line_of(root), "the schema must be a mapping (version, common, types)")]

    type_field, strict = "type", False
    common: dict[str, FieldSpec] = {}
    types: dict[str, dict[str, FieldSpec]] = {}
    for knode, vnode in _map_items(root):
        key = str(knode.value)
        line = _line_of(knode)
        if key == "version":
            if _construct(vnode) != VERSION:
                problems.append(SchemaProblem(line, f"version must be {VERSION}"))
        elif key == "type_field":
            v = _construct(vnode)
            if isinstance(v, str) and v.strip():
                type_field = v.strip().lower()
            else:
                problems.append(SchemaProblem(line, "type_field must be a field name"))
        elif key == "strict":
            v = _construct(vnode)
            if isinstance(v, bool):
                strict = v
            else:
                problems.append(SchemaProblem(line, "strict must be true or false"))
        elif key == "description":
            pass
        elif key == "common":
            if vnode.tag.endswith(":null"):
                continue
            if not isinstance(vnode, yaml.MappingNode):
                problems.append(SchemaProblem(line, "common must map field names to specs"))
                continue
            common = _fields(vnode, "common", problems)
        elif key == "types":
            if vnode.tag.endswith(":null"):
                continue
            if not isinstance(vnode, yaml.MappingNode):
                problems.append(SchemaProblem(line, "types must map type names to their fields"))
                continue
            for tnode, fnode in _map_items(vnode):
                tname = str(tnode.value).strip().lower()
                if fnode.tag.endswith(":null"):
                    types[tname] = {}
                elif not isinstance(fnode, yaml.MappingNode):
                    problems.append(SchemaProblem(_line_of(tnode), f"types.{tname} must map field names to specs"))
                else:
                    types[tname] = _fields(fnode, f"types.{tname}", problems)
        else:
            problems.append(SchemaProblem(line, f"unknown key {key!r} (known: {', '.join(sorted(_TOP_KEYS))})"))
    kinds, conflicts = _kinds(common, types)
    for name, where in conflicts:
        problems.append(
            SchemaProblem(1, f"field {name!r} is declared with different types ({where}); its facet compares as text")
        )
    return Schema(common, types, type_field, strict, kinds), problems


def _fields(node: yaml.MappingNode, where: str, problems: list[SchemaProblem]) -> dict[str, FieldSpec]:
    out: dict[str, FieldSpec] = {}
    for knode, vnode in _map_items(node):
        name = str(knode.value).strip().lower()
        line = _line_of(knode)
        if not name:
            problems.append(SchemaProblem(line, f"{where}: a field needs a name"))
            continue
        if name in RESERVED:
            problems.append(
                SchemaProblem(
                    line, f"{where}.{name}: 'tag' is reserved for the tag:name shorthand; declare tags instead"
                )
            )
            continue
        spec = _spec(name, vnode, f"{where}.{name}", line, problems)
        if spec is not None:
            out[name] = spec
    return out


def _spec(name: str, node: yaml.Node, where: str, line: int, problems: list[SchemaProblem]) -> FieldSpec | None:
    raw = _construct(node)
    if isinstance(raw, str):
        raw = {"type": raw}
    if not isinstance(raw, dict):
        problems.append(SchemaProblem(line, f"{where}: a field spec is a type name or a mapping with a type"))
        return None
    sub_lines = {str(k.value): _line_of(k) for k, _ in _map_items(node)}
    for k in raw:
        if k not in _SPEC_KEYS:
            problems.append(
                SchemaProblem(
                    sub_lines.get(str(k), line), f"{where}: unknown key {k!r} (known: {', '.join(sorted(_SPEC_KEYS))})"
                )
            )
    type_ = raw.get("type")
    if not isinstance(type_, str) or type_.strip().lower() not in TYPES:
        problems.append(
            SchemaProblem(
                sub_lines.get("type", line), f"{where}: type must be one of {', '.join(TYPES)}, not {type_!r}"
            )
        )
        return None
    type_ = type_.strip().lower()
    required = raw.get("required", False)
    if not isinstance(required, bool):
        problems.append(SchemaProblem(sub_lines.get("required", line), f"{where}: required must be true or false"))
        required = False
    values: tuple[str, ...] = ()
    if type_ == "enum":
        vs = raw.get("values")
        if not isinstance(vs, list) or not vs or not all(isinstance(v, (str, int, float, bool)) for v in vs):
            problems.append(
                SchemaProblem(sub_lines.get("values", line), f"{where}: an enum needs values, a list of allowed values")
            )
            return None
        values = tuple(
            dict.fromkeys(("true" if v else "false") if isinstance(v, bool) else str(v).strip().lower() for v in vs)
        )
    elif "values" in raw:
        problems.append(SchemaProblem(sub_lines.get("values", line), f"{where}: values apply to enum fields only"))
    link = raw.get("link", False)
    if link is not False and (type_ != "integer" or link is not True):
        problems.append(
            SchemaProblem(sub_lines.get("link", line), f"{where}: link is true or false, and only for integer fields")
        )
        link = False
    desc = raw.get("description", "")
    return FieldSpec(name, type_, required, values, bool(link), desc if isinstance(desc, str) else "")


def _kinds(common: dict[str, FieldSpec], types: dict[str, dict[str, FieldSpec]]):
    """Each declared field's comparison kind; conflicting declarations compare as text."""
    seen: dict[str, dict[str, str]] = {}
    for n, s in common.items():
        seen.setdefault(n, {})["common"] = KIND_OF[s.type]
    for t in sorted(types):
        for n, s in types[t].items():
            seen.setdefault(n, {})[f"types.{t}"] = KIND_OF[s.type]
    kinds: dict[str, str] = {}
    conflicts = []
    for n, by in sorted(seen.items()):
        distinct = set(by.values())
        if len(distinct) == 1:
            kinds[n] = distinct.pop()
        else:
            kinds[n] = "string"
            conflicts.append((n, ", ".join(f"{k}: {v}" for k, v in by.items())))
    return kinds, conflicts
