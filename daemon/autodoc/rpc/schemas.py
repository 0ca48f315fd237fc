"""RPC stage, the contract as JSON Schema: load schemas/<method>.{params,result}.json,
bind params (positional or named) to names, and check them.

Input: a method name and the raw ``params`` of a request (array, object or absent).
Output: a dict of named params, or InvalidParams naming the first bad field
("opts.limit: must be ≤ 200", data.field == "opts.limit").

The schemas are package data, ``autodoc/schemas/*.json``, read with
importlib.resources so they are found in a wheel as in a checkout (the
repository's top-level ``schemas/`` is a link to that folder).
Positional params map to names in the order the params schema lists its
``properties``. An optional param given as
null counts as absent; an absent one gets its schema's ``default``. A subschema may carry ``x-message`` to word its own error.
An integer-valued float (5.0) where the schema's type is integer, at any depth, is bound
to the int it names (bind_integers) before the check, so no handler sees a float there.

Checking is two-tier: a validator compiled to Python by fastjsonschema
answers "valid" in tens of microseconds (jsonschema's interpreter took
≈ 0.25 ms for a search with options, half the socket path's budget); only
params it refuses go through jsonschema, which names the field and words the
message, and whose verdict wins. tests/integration/test_schema_fast.py holds the two to
the same verdict over every method's fuzzed params.

Before the schema, every string in the params (keys included) is checked once
for what no method can take: a NUL character (C strings, SQLite FTS and file
names end there) or a lone surrogate (it has no UTF-8 form, so it can be
neither stored nor echoed); no number is NaN or ±Infinity (they pass every
``minimum``/``maximum`` and no JSON answer carries them back); and nesting is capped at ``MAX_PARAM_DEPTH``.
Both answer -32602 naming the field, for the daemon and the in-process
binding alike.

Runs on: any thread (the loaded schemas are cached, read-only).
"""

from __future__ import annotations

import copy
import functools
import importlib.resources
import json
import logging
import math
import re
from collections.abc import Callable, Iterable
from importlib.resources.abc import Traversable
from typing import Any

import fastjsonschema
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match
from referencing import Registry, Resource

from ..api import NOTIFICATIONS  # noqa: F401 (the table's notifications, named here for the contract tests)
from ..errors import InvalidParams

BASE_URI = "https://autodoc.invalid/schemas/"
# Arrays/objects inside one method's params, the params object counting 1.
MAX_PARAM_DEPTH = 32


def schema_dir() -> Traversable:
    """The package's schemas/ folder, wherever the package is installed."""
    return importlib.resources.files("autodoc") / "schemas"


def schema_stem(method: str) -> str:
    """``search.query`` → ``search.query``; ``$/cancelRequest`` → ``$.cancelRequest``."""
    return method.replace("$/", "$.")


@functools.lru_cache(maxsize=1)
def _registry() -> tuple[Registry, dict[str, dict]]:
    folder = schema_dir()
    if not folder.is_dir():
        raise RuntimeError(f"AutoDoc's JSON schemas are missing: no folder {folder} (reinstall the package)")
    docs: dict[str, dict] = {}
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".json") and entry.is_file():
            docs[entry.name] = json.loads(entry.read_text(encoding="utf-8"))
    registry = Registry().with_resources(
        (doc.get("$id", BASE_URI + name), Resource.from_contents(doc)) for name, doc in docs.items()
    )
    return registry, docs


def load_schema(method: str, kind: str) -> dict:
    """The schema document for ``kind`` ("params" or "result") of ``method``."""
    _, docs = _registry()
    name = f"{schema_stem(method)}.{kind}.json"
    try:
        return docs[name]
    except KeyError:
        raise KeyError(f"no schema {name} in {schema_dir()}") from None


def schema_names() -> list[str]:
    return sorted(_registry()[1])


def methods_with_schemas() -> list[str]:
    """Every method that has a params schema (client → server and notifications)."""
    out = []
    for name in schema_names():
        if name.endswith(".params.json"):
            out.append(name[: -len(".params.json")].replace("$.", "$/"))
    return out


@functools.cache
def validator(method: str, kind: str) -> Draft202012Validator:
    registry, _ = _registry()
    return Draft202012Validator(load_schema(method, kind), registry=registry)


@functools.cache
def fast_validator(method: str, kind: str) -> Callable[[Any], Any] | None:
    """The schema compiled to Python, or None when fastjsonschema cannot take
    it (jsonschema alone then checks). Our schemas use no keyword whose
    meaning differs between draft 7, which fastjsonschema implements, and
    2020-12; the agreement test would catch one that did."""
    _, docs = _registry()
    by_id = {doc.get("$id", BASE_URI + name): doc for name, doc in docs.items()}
    schema = {**load_schema(method, kind), "$schema": "http://json-schema.org/draft-07/schema#"}
    try:
        return fastjsonschema.compile(
            schema,
            handlers={"https": lambda uri: by_id[uri.split("#")[0]]},
            use_default=False,
            use_formats=False,
            detailed_exceptions=False,
        )
    except Exception as e:
        logging.getLogger(__name__).warning(
            "schema %s.%s not compiled (%s); checking it with jsonschema", method, kind, e
        )
        return None


def params_error(method: str, params: dict[str, Any]) -> ValidationError | None:
    """The error naming the first bad field of ``params``, None when they are valid."""
    fast = fast_validator(method, "params")
    if fast is not None:
        try:
            fast(params)
            return None
        except fastjsonschema.JsonSchemaException:
            pass
    return first_error(validator(method, "params"), params)


def param_names(method: str) -> list[str]:
    return list(load_schema(method, "params").get("properties", {}))


@functools.cache
def _binding(method: str) -> tuple[list[str], frozenset[str], dict[str, Any]]:
    """The params schema's names in order, the required ones, and each top-level ``default``."""
    schema = load_schema(method, "params")
    props = schema.get("properties", {})
    defaults = {k: v["default"] for k, v in props.items() if isinstance(v, dict) and "default" in v}
    return list(props), frozenset(schema.get("required", [])), defaults


def bind_params(method: str, params: Any) -> dict[str, Any]:
    """Named, checked params for ``method`` or InvalidParams naming the bad field; a top-level
    param left out (or null) gets its schema's ``default``, the only place a default is written
    (api.py reads ``p["limit"]``). Defaults inside a param (``opts.limit``) are not filled: the
    Service reads those options as given."""
    names, required, defaults = _binding(method)
    if params is None:
        params = {}
    if isinstance(params, list):
        if len(params) > len(names):
            takes = ", ".join(names) if names else "none"
            raise InvalidParams(
                "params", f"too many positional params: {len(params)} given, takes {len(names)} ({takes})"
            )
        params = dict(zip(names, params))
    elif not isinstance(params, dict):
        raise InvalidParams("params", "must be an array or an object")
    else:
        params = dict(params)
    for key in [k for k, v in params.items() if v is None and k in names and k not in required]:
        del params[key]
    check_strings_and_depth(params)
    params = bind_integers(method, params)
    error = params_error(method, params)
    if error is not None:
        field, message = describe(error)
        raise InvalidParams(field, message)
    for key, value in defaults.items():
        if key not in params:
            params[key] = value if isinstance(value, (str, int, float)) else copy.deepcopy(value)
    return params


class _IntPlan:
    """Where a params schema's type is integer (and not number): ``here`` for the value itself,
    ``props`` / ``extra`` / ``items`` for what a dict or list holds. Several subschemas for one
    place (anyOf, $ref) merge: an int is valid wherever an integer-valued float is, so binding one
    more place than strictly needed changes no verdict."""

    __slots__ = ("extra", "here", "items", "props")

    def __init__(self) -> None:
        self.here = False
        self.props: dict[str, _IntPlan] = {}
        self.extra: _IntPlan | None = None
        self.items: _IntPlan | None = None

    def empty(self) -> bool:
        return not (self.here or self.props or self.extra or self.items)


def _resolve(ref: str, doc: dict) -> tuple[dict, dict]:
    """The subschema a ``$ref`` names ("defs.json#/$defs/x" or "#/$defs/x") and its document."""
    name, _, pointer = ref.partition("#")
    if name:
        doc = _registry()[1][name.rsplit("/", 1)[-1]]
    node: Any = doc
    for part in pointer.strip("/").split("/"):
        if part:
            node = node[part.replace("~1", "/").replace("~0", "~")]
    return node, doc


def _plan_into(plan: _IntPlan, node: Any, doc: dict, seen: frozenset[str]) -> None:
    if not isinstance(node, dict):
        return
    types = node.get("type")
    types = types if isinstance(types, list) else [types]
    if "integer" in types and "number" not in types:
        plan.here = True
    ref = node.get("$ref")
    if isinstance(ref, str) and ref not in seen:
        target, target_doc = _resolve(ref, doc)
        _plan_into(plan, target, target_doc, seen | {ref})
    for key, sub in (node.get("properties") or {}).items():
        _plan_into(plan.props.setdefault(key, _IntPlan()), sub, doc, seen)
    if isinstance(node.get("additionalProperties"), dict):
        plan.extra = plan.extra or _IntPlan()
        _plan_into(plan.extra, node["additionalProperties"], doc, seen)
    if isinstance(node.get("items"), dict):
        plan.items = plan.items or _IntPlan()
        _plan_into(plan.items, node["items"], doc, seen)
    for key in ("anyOf", "oneOf", "allOf"):
        for sub in node.get(key) or []:
            _plan_into(plan, sub, doc, seen)


def _prune(plan: _IntPlan | None) -> _IntPlan | None:
    if plan is None:
        return None
    plan.props = {k: p for k, v in plan.props.items() if (p := _prune(v)) is not None}
    plan.extra, plan.items = _prune(plan.extra), _prune(plan.items)
    return None if plan.empty() else plan


@functools.cache
def integer_plan(method: str) -> _IntPlan | None:
    """Every place in ``method``'s params whose schema type is integer, None when there is none."""
    schema = load_schema(method, "params")
    plan = _IntPlan()
    _plan_into(plan, schema, schema, frozenset())
    return _prune(plan)


def bind_integers(method: str, params: dict[str, Any]) -> dict[str, Any]:
    """``params`` with every integer-valued float (5.0, 1e3) at a place whose schema type is
    integer bound to the int it names. JSON Schema counts 5.0 as an integer, so it passes the
    schema; a handler that slices or compares with it must get 5. A fractional float stays, for
    the schema to refuse. New containers only where something changed: the caller's are not edited."""
    plan = integer_plan(method)
    return params if plan is None else _bind(params, plan)


def _bind(value: Any, plan: _IntPlan) -> Any:
    if type(value) is float:
        return int(value) if plan.here and value.is_integer() else value
    if isinstance(value, dict) and (plan.props or plan.extra):
        out = None
        for key, child in value.items():
            sub = plan.props.get(key, plan.extra)
            if sub is None:
                continue
            bound = _bind(child, sub)
            if bound is not child:
                if out is None:
                    out = dict(value)
                out[key] = bound
        return value if out is None else out
    if isinstance(value, list) and plan.items is not None:
        items = [_bind(child, plan.items) for child in value]
        return value if all(a is b for a, b in zip(items, value)) else items
    return value


def check_strings_and_depth(params: dict[str, Any]) -> None:
    """InvalidParams for the first string (value or key) holding a NUL or a
    lone surrogate, the first NaN or ±Infinity (json.loads reads them: the in-process
    path), or the first value nested deeper than MAX_PARAM_DEPTH.
    Iterative, in document order, so the same params always name the same field."""
    stack: list[tuple[Any, list[Any], int]] = [(params, [], 1)]
    while stack:
        value, path, depth = stack.pop()
        if isinstance(value, str):
            problem = _string_problem(value)
            if problem:
                raise InvalidParams(field_name(path), problem)
            continue
        if type(value) is float and not math.isfinite(value):
            raise InvalidParams(field_name(path), "must be a finite number (not NaN or Infinity)")
        if not isinstance(value, (dict, list)):
            continue
        if depth > MAX_PARAM_DEPTH:
            raise InvalidParams(field_name(path), f"is nested deeper than {MAX_PARAM_DEPTH} levels")
        if isinstance(value, dict):
            children = []
            for key, child in value.items():
                problem = _string_problem(key)
                if problem:
                    raise InvalidParams(field_name(path), "a key " + problem)
                children.append((child, path + [key], depth + 1))
        else:
            children = [(child, path + [i], depth + 1) for i, child in enumerate(value)]
        stack.extend(reversed(children))


def _string_problem(text: str) -> str:
    if "\x00" in text:
        return "must not contain a NUL character"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "must be valid Unicode (it holds a lone surrogate)"
    return ""


def result_errors(method: str, result: Any) -> list[str]:
    """Every way ``result`` breaks ``method``'s result schema ("" = valid)."""
    return ["{}: {}".format(*describe(e, root="result")) for e in validator(method, "result").iter_errors(result)]


def error_errors(error: Any) -> list[str]:
    """Every way an error object breaks schemas/error.json."""
    registry, docs = _registry()
    v = Draft202012Validator(docs["error.json"], registry=registry)
    return ["{}: {}".format(*describe(e, root="error")) for e in v.iter_errors(error)]


def notification_errors(method: str, params: Any) -> list[str]:
    return ["{}: {}".format(*describe(e, root="params")) for e in validator(method, "params").iter_errors(params)]


def first_error(v: Draft202012Validator, instance: Any) -> ValidationError | None:
    errors = list(v.iter_errors(instance))
    if not errors:
        return None
    # Plain checks before combinators ("stages[0]: must be one of …" says more
    # than "stages: must include …"), then shallowest first, then in document
    # order, so the same bad params always name the same field.
    errors.sort(key=lambda e: (e.validator in _WEAK, len(e.absolute_path), [str(p) for p in e.absolute_path]))
    return errors[0]


_WEAK = frozenset({"contains", "not", "anyOf", "oneOf", "allOf", "if", "then", "else"})


def field_name(path: Iterable[Any], root: str = "params") -> str:
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or root


_ARTICLE = {
    "integer": "an integer",
    "object": "an object",
    "array": "an array",
    "string": "a string",
    "number": "a number",
    "boolean": "a boolean",
    "null": "null",
}


def describe(error: ValidationError, root: str = "params") -> tuple[str, str]:
    """(field, message) for one validation error, worded for people."""
    path = list(error.absolute_path)
    # set on every error iter_errors yields (jsonschema types them "or Unset" for errors built by hand)
    kw: Any = error.validator
    value: Any = error.validator_value
    schema = error.schema if isinstance(error.schema, dict) else {}
    inst = error.instance
    if kw == "required" and isinstance(inst, dict):
        # jsonschema reports each missing property as its own error: "'x' is a required property".
        named = re.match(r"^'(.+)' is a required property$", error.message)
        missing = named.group(1) if named else next((k for k in value if k not in inst), "?")
        return field_name(path + [missing], root), "is required"
    if kw in ("additionalProperties", "unevaluatedProperties") and isinstance(inst, dict):
        known = set(schema.get("properties", {}))
        extra = next((k for k in inst if k not in known), "?")
        return field_name(path + [extra], root), "is not a known field"
    if kw == "propertyNames" and error.context:
        return describe(error.context[0], root)
    field = field_name(path, root)
    if kw in ("anyOf", "oneOf") and error.context:
        # a branch of the value's own type that failed on a bound (an array of 1,001 paths) says
        # what is wrong; the schema's message ("a string or an array of strings") would not
        bound = [e for e in error.context if e.validator not in ("type", "anyOf", "oneOf")]
        if bound:
            return describe(best_match(bound), root)
    if "x-message" in schema and kw != "type":
        return field, schema["x-message"]
    if kw == "type":
        types: list[str] = value if isinstance(value, list) else [value]
        return field, "must be " + " or ".join(_ARTICLE.get(t, t) for t in types)
    if kw == "minimum":
        return field, f"must be ≥ {value}"
    if kw == "maximum":
        return field, f"must be ≤ {value}"
    if kw == "exclusiveMinimum":
        return field, f"must be > {value}"
    if kw == "exclusiveMaximum":
        return field, f"must be < {value}"
    if kw == "minLength":
        return field, "must not be empty" if value == 1 else f"must be at least {value} characters"
    if kw == "maxLength":
        return field, f"must be at most {value} characters"
    if kw == "minItems":
        return field, "must not be empty" if value == 1 else f"must have at least {value} items"
    if kw == "maxItems":
        return field, f"must have at most {value} items"
    if kw == "uniqueItems":
        return field, "must not repeat an item"
    if kw == "enum":
        return field, "must be one of " + ", ".join(json.dumps(v, ensure_ascii=False) for v in value)
    if kw == "const":
        return field, f"must be {json.dumps(value, ensure_ascii=False)}"
    if kw == "pattern":
        return field, f"must match {value}"
    if kw == "minProperties":
        return field, "must not be empty" if value == 1 else f"must have at least {value} fields"
    if kw == "maxProperties":
        return field, f"must have at most {value} fields"
    if kw in ("anyOf", "oneOf") and error.context:
        # e.g. a nullable field: report the most relevant branch's problem.
        return describe(best_match(error.context), root)
    if kw == "false" or value is False:
        return field, "is not allowed"
    # jsonschema's own wording quotes the instance, which may be megabytes long.
    return field, error.message if len(error.message) <= 200 else error.message[:200] + "…"
