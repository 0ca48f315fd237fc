"""The frontmatter schema, pure: loading and checking the file, coercing every
type, deriving a document's facets and violations, parsing facet values."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft202012Validator

from autodoc.fmschema import Schema, coerce, condition, derive, load_schema, problems
from autodoc.fmschema.values import CoerceError, date_span

ROOT = Path(__file__).resolve().parents[2]
CORPUS_SCHEMA = ROOT / "tests" / "corpora" / "kb-schema" / "_schema" / "frontmatter.yaml"

EXAMPLE = """\
version: 1
common:
  owner: string
  date: {type: date}
  tags: list
types:
  adr:
    adr: {type: integer, required: true, link: true}
    status: {type: enum, values: [Proposed, accepted], required: true}
    weight: number
    final: boolean
"""


def test_loads_the_corpus_schema_and_it_satisfies_the_json_schema():
    text = CORPUS_SCHEMA.read_text()
    schema, probs = load_schema(text)
    assert probs == [] and schema is not None
    assert schema.kinds == {
        "adr": "number",
        "date": "date",
        "effort": "number",
        "owner": "string",
        "reviewed": "boolean",
        "reviewers": "string",
        "rfc": "number",
        "status": "string",
        "tags": "string",
        "type": "string",
    }
    assert schema.fields_for("adr")["date"].required and not schema.fields_for("design").get("date").required
    assert schema.link_fields() == ["adr", "rfc"]
    assert Schema.from_json(json.loads(json.dumps(schema.to_json()))) == schema
    meta = json.loads((ROOT / "schemas" / "frontmatter-schema.json").read_text())
    Draft202012Validator.check_schema(meta)
    v = Draft202012Validator(meta)
    assert list(v.iter_errors(yaml.safe_load(text))) == []
    assert list(v.iter_errors(yaml.safe_load(EXAMPLE))) == []
    assert list(v.iter_errors({"common": {"x": {"type": "enum"}}}))  # an enum needs values
    assert list(v.iter_errors({"common": {"x": {"type": "string", "link": True}}}))
    assert list(v.iter_errors({"bogus": 1}))


def test_shorthand_and_enum_values_are_normalised():
    schema, probs = load_schema(EXAMPLE)
    assert probs == []
    assert schema.common["owner"].type == "string"
    assert schema.types["adr"]["status"].values == ("proposed", "accepted")
    assert schema.types["adr"]["adr"].link


def test_schema_problems_carry_the_line_and_the_rest_applies():
    text = """\
version: 2
common:
  tag: string
  a: {type: text}
  b: {type: enum}
  c: {type: string, values: [x], link: true, colour: red}
  ok: integer
bogus: 1
types:
  adr: [not, a, mapping]
"""
    schema, probs = load_schema(text)
    got = {(p.line, p.message.split(":")[0]) for p in probs}
    assert (1, "version must be 1") in got
    assert (3, "common.tag") in got
    assert (4, "common.a") in got
    assert (5, "common.b") in got
    assert any(p.line == 6 and "colour" in p.message for p in probs)
    assert any(p.line == 6 and "link" in p.message for p in probs)
    assert (8, "unknown key 'bogus' (known") in got
    assert (10, "types.adr must map field names to specs") in got
    assert set(schema.kinds) == {"c", "ok"} and not schema.common["c"].link


def test_unusable_files_give_no_schema_and_a_problem():
    schema, probs = load_schema("common:\n  a: [unclosed\n")
    assert schema is None and probs[0].code == "schema.invalid" and probs[0].line >= 2
    schema, probs = load_schema("- a list\n")
    assert schema is None and probs
    schema, probs = load_schema("")
    assert schema is not None and schema.declared == set() and probs == []


def test_conflicting_declarations_compare_as_text():
    schema, probs = load_schema("types:\n  a:\n    v: integer\n  b:\n    v: string\n")
    assert schema.kinds["v"] == "string" and "different types" in probs[0].message


@pytest.mark.parametrize(
    "type_, value, stored",
    [
        ("string", "Mira", [("mira", None, None)]),
        ("string", 42, [("42", None, None)]),
        ("integer", 42, [("42", 42.0, None)]),
        ("integer", "0042", [("42", 42.0, None)]),
        ("integer", 42.0, [("42", 42.0, None)]),
        ("number", "2.5", [("2.5", 2.5, None)]),
        ("number", 3, [("3", 3.0, None)]),
        ("boolean", True, [("true", None, None)]),
        ("boolean", "yes", [("true", None, None)]),
        ("boolean", "off", [("false", None, None)]),
        ("date", "2024-01-18", [("2024-01-18", None, "2024-01-18")]),
        ("date", "2024-01-18T10:30:00+02:00", [("2024-01-18", None, "2024-01-18")]),
        ("list", ["A", 3, True], [("a", None, None), ("3", None, None), ("true", None, None)]),
        ("list", "solo", [("solo", None, None)]),
        ("enum", "Accepted", [("accepted", None, None)]),
    ],
)
def test_coerce_every_type(type_, value, stored):
    got = coerce(type_, value, ("proposed", "accepted") if type_ == "enum" else ())
    assert [(t.value, t.num, t.date) for t in got] == stored


@pytest.mark.parametrize(
    "type_, value, code, words",
    [
        ("integer", "twenty", "schema.type", "expected an integer"),
        ("integer", 4.5, "schema.type", "expected an integer"),
        ("integer", True, "schema.type", "expected an integer"),
        ("number", "lots", "schema.type", "expected a number"),
        ("boolean", "maybe", "schema.type", "expected a boolean"),
        ("date", "soon", "schema.type", "expected a date"),
        ("date", "2024-02-30", "schema.type", "expected a date"),
        ("string", ["a", "b"], "schema.type", "got a list"),
        ("string", {"a": 1}, "schema.type", "got a mapping"),
        ("list", ["a", {"b": 1}], "schema.type", "item"),
        ("enum", "approved", "schema.enum", "is not one of proposed, accepted"),
    ],
)
def test_coerce_refuses_wrong_types(type_, value, code, words):
    with pytest.raises(CoerceError) as e:
        coerce(type_, value, ("proposed", "accepted") if type_ == "enum" else ())
    assert e.value.code == code and words in str(e.value)


def test_derive_reports_violations_with_lines_and_keeps_bad_values_as_text():
    schema, _ = load_schema(EXAMPLE)
    fm = {
        "type": "adr",
        "adr": "twenty",
        "status": "Approved",
        "tags": ["ok", ["nested"]],
        "weight": None,
        "undeclared": "x",
    }
    rows, violations = derive(schema, fm, ["sqlite"])
    fields = {(f, t.value) for f, t in rows}
    assert ("adr", "twenty") in fields and ("status", "approved") in fields  # findable as text
    assert ("tag", "sqlite") in fields and not any(f == "undeclared" for f, _ in rows)
    assert {v.code for v in violations} == {"schema.type", "schema.enum"}
    assert all(v.field != "undeclared" for v in violations)
    rows, violations = derive(schema, {"type": "adr", "adr": 3}, [])
    assert [v.message for v in violations] == ["status: required for type adr but is missing"]
    lines = ({"type": 2, "adr": 3, "tags": 5}, {"tags": [6, 7]})
    _, violations = derive(schema, {"type": "adr", "adr": 1, "status": "accepted", "tags": ["a", {"b": 1}]}, [])
    assert problems(violations, lambda: lines) == [
        {"line": 7, "message": "tags: expected a list of strings, got an item that is a mapping", "code": "schema.type"}
    ]
    asked = []
    assert problems([], lambda: asked.append(1)) == [] and not asked  # lines are parsed only when needed


def test_strict_reports_undeclared_fields():
    schema, _ = load_schema("strict: true\ncommon:\n  owner: string\n")
    _, violations = derive(schema, {"owner": "x", "colour": "red"}, [])
    assert [(v.field, v.code) for v in violations] == [("colour", "schema.unknown")]


def test_without_a_schema_every_field_is_text_with_num_and_date():
    rows, violations = derive(None, {"adr": 42, "Date": "2024-01-18", "tags": ["a"], "nested": {"x": 1}}, ["t"])
    got = {(f, t.value, t.num, t.date) for f, t in rows}
    assert got == {
        ("adr", "42", 42.0, None),
        ("date", "2024-01-18", None, "2024-01-18"),
        ("tags", "a", None, None),
        ("tag", "t", None, None),
    }
    assert violations == []


@pytest.mark.parametrize(
    "kind, raw, sql, params",
    [
        ("number", "0042", "num = ?", [42.0]),
        ("number", "10..20", "(num >= ? AND num <= ?)", [10.0, 20.0]),
        ("number", "10..", "(num >= ?)", [10.0]),
        ("number", "..20", "(num <= ?)", [20.0]),
        ("number", ">2", "num > ?", [2.0]),
        ("number", "abc", "value = ?", ["abc"]),
        ("date", ">=2025-01-01", "date >= ?", ["2025-01-01"]),
        ("date", "2024", "date BETWEEN ? AND ?", ["2024-01-01", "2024-12-31"]),
        ("date", "<=2024-02", "date <= ?", ["2024-02-29"]),
        ("date", ">2024", "date > ?", ["2024-12-31"]),
        ("date", "<2024", "date < ?", ["2024-01-01"]),
        ("date", "2023..2024-06", "(date >= ? AND date <= ?)", ["2023-01-01", "2024-06-30"]),
        ("date", "2024-01-18", "date = ?", ["2024-01-18"]),
        ("boolean", "Yes", "value = ?", ["true"]),
        ("string", "Accepted", "value = ?", ["accepted"]),
        ("string", ">=b", "value = ?", [">=b"]),
        (None, "0042", "(value = ? OR num = ?)", ["0042", 42.0]),
        (None, ">=2024-01-01", "date >= ?", ["2024-01-01"]),
        (None, "Accepted", "value = ?", ["accepted"]),
    ],
)
def test_facet_value_conditions(kind, raw, sql, params):
    assert condition(kind, raw) == (sql, params)


def test_date_spans():
    assert date_span("2024-12") == ("2024-12-01", "2024-12-31")
    assert date_span("2024-13") is None and date_span("soon") is None
