"""Every method's params, generated from its JSON Schema, never answer -32603 (issue 36,
generative test (a)). For each method with a params schema that runs in-process, hypothesis
draws params that are valid by the schema — integer-valued floats (5.0), huge numbers,
unicode digits ("²", "٣"), boundary values, empty strings — and calls them through
connect.invoke (rpc/schemas.py bind_params, the binding the daemon's dispatch uses too) on
a Service over a real SQLite store with a copy of tests/corpora/kb indexed. Any
AutodocError (any code but -32603) is an answer; any other exception is what the daemon
answers -32603, and fails the test; so does a result off its result schema.

The strategy is written here from the subset of JSON Schema the schemas use (type, enum,
const, pattern, min/maxLength, minimum/maximum, properties, required, additionalProperties,
items, min/maxItems, uniqueItems, anyOf/oneOf, $ref); what it cannot aim at (if/then, not,
contains) it leaves to a filter through the method's own validator. AUTODOC_PARAMS_EXAMPLES
sets the examples per method (default 12, for make test's budget)."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autodoc.connect import METHODS, invoke
from autodoc.errors import AutodocError, InternalError
from autodoc.rpc import schemas

CORPORA = Path(__file__).resolve().parents[1] / "corpora"
EXAMPLES = int(os.environ.get("AUTODOC_PARAMS_EXAMPLES", "12"))
NO_MODEL = {"embedding": {"provider": "none"}}

# Strings a parser that trusts str.isdigit() or int() trips on, and other edges.
SPECIAL_STRINGS = [
    "",
    "0",
    "²",
    "٣",
    "٣٤",
    "¹²³",
    "-1",
    "1e3",
    "5.0",
    "NaN",
    " ",
    "a\nb",
    "ß",
    "🙂",
    "日本語",
    "..",
    ".",
    "*",
    '"',
    "x" * 300,
    "9" * 5000,
    # facet values: ranges, dates, and ranges of digits int() may not take
    ">=2025-01-01",
    "<2020-02-30",
    "10..20",
    "1..²",
    "٣..٤",
    "..",
    ">=",
    ">=1e999",
    "2024-13-45",
    "9" * 400 + "..1",
    # queries: facets, phrases, prefixes, FTS5 operators
    "lease",
    "lease recovery",
    "adr:²",
    "adr:٣..٤",
    "tag:sqlite lease",
    "-status:accepted lease",
    "status:",
    '"write ahead',
    "leas*",
    "NEAR(a b)",
    "a OR b AND NOT c",
    "date:>=2024-01-01",
    "adr:" + "9" * 5000,
]
FIELDS = ["tag", "status", "adr", "date", "owner", "type", "title", "aliases", "supersedes", "recoverable"]
KB_PATHS = sorted(
    str(p.relative_to(CORPORA / "kb")) for p in (CORPORA / "kb").rglob("*") if p.is_file() or p.is_symlink()
)
# Roots workspace.add may be given: never / or the home folder (force would take them).
SAFE_ROOTS: list[str] = []  # filled by the fixture (they live in its temp folder)
URLS = ["http://127.0.0.1:9/", "https://127.0.0.1:9/v1/embeddings", "http://[::1]:9", "not a url", "ftp://x"]


def _strings(node: dict) -> st.SearchStrategy[str]:
    lo, hi = node.get("minLength", 0), node.get("maxLength", 10**9)
    pattern = node.get("pattern")

    def fits(s: str) -> bool:
        return lo <= len(s) <= hi and (pattern is None or re.search(pattern, s) is not None)

    special = [s for s in SPECIAL_STRINGS if fits(s)]
    if pattern is not None:
        general = st.from_regex(pattern).filter(fits)
    else:
        general = st.text(min_size=lo, max_size=min(hi, max(lo, 40)))
    return st.one_of(st.sampled_from(special), general) if special else general


def _integers(node: dict) -> st.SearchStrategy[Any]:
    lo, hi = node.get("minimum"), node.get("maximum")
    top = hi if hi is not None else 10**40
    bottom = lo if lo is not None else -(10**40)
    edges = [v for v in {bottom, top, bottom + 1, top - 1, 0, 1, 2**31, 2**53, 2**63 - 1} if bottom <= v <= top]
    ints = st.one_of(st.sampled_from(sorted(edges)), st.integers(bottom, top))

    def as_float(v: int) -> Any:
        f = float(v)
        return f if int(f) == v else v  # 5 → 5.0; a value no double holds stays an int

    floats = ints.map(as_float)
    huge = [st.just(1e300)] if hi is None and (lo is None or lo <= 1e300) else []
    return st.one_of(ints, floats, *huge)


def _numbers(node: dict) -> st.SearchStrategy[Any]:
    lo, hi = node.get("minimum"), node.get("maximum")
    edges = [v for v in (lo, hi, 0, 0.0, -0.0, 5e-324, 1e308, -1e308, 1, 2**63) if v is not None]
    edges = [v for v in edges if (lo is None or v >= lo) and (hi is None or v <= hi)]
    floats = st.floats(min_value=lo, max_value=hi, allow_nan=False, allow_infinity=False)
    return st.one_of(st.sampled_from(edges), floats) if edges else floats


def strategy(node: Any, doc: dict, depth: int = 0, name: str = "") -> st.SearchStrategy[Any]:
    """Values valid (mostly: see the module's docstring) by one subschema."""
    if node is True or node is None:
        return st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8))
    if not isinstance(node, dict) or depth > 8:
        return st.nothing()
    if name == "root":
        return st.sampled_from(SAFE_ROOTS)
    if name == "url":
        return st.sampled_from(URLS)
    ref = node.get("$ref")
    if isinstance(ref, str):
        target, target_doc = schemas._resolve(ref, doc)
        inner = strategy({**target, **{k: v for k, v in node.items() if k != "$ref"}}, target_doc, depth + 1)
        if ref.endswith("/workspaceName"):
            return st.one_of(st.just("kb"), st.just("kb"), inner)
        if ref.endswith("/relpath"):
            return st.one_of(st.sampled_from(KB_PATHS), inner)
        return inner
    if "const" in node:
        return st.just(node["const"])
    if "enum" in node:
        return st.sampled_from(node["enum"])
    for key in ("anyOf", "oneOf"):
        if key in node:
            rest = {k: v for k, v in node.items() if k != key}
            return st.one_of([strategy({**rest, **b}, doc, depth + 1, name) for b in node[key]])
    types = node.get("type")
    if isinstance(types, list):
        return st.one_of([strategy({**node, "type": t}, doc, depth, name) for t in types])
    if types == "string":
        return _strings(node)
    if types == "integer":
        return _integers(node)
    if types == "number":
        return _numbers(node)
    if types == "boolean":
        return st.booleans()
    if types == "null":
        return st.none()
    if types == "array":
        items = strategy(node.get("items", True), doc, depth + 1)
        if name == "facet_counts":
            items = st.one_of(st.sampled_from(FIELDS), items)
        lo = node.get("minItems", 0)
        hi = max(lo, min(node.get("maxItems", 4), 4))
        unique = (lambda v: json.dumps(v, sort_keys=True)) if node.get("uniqueItems") else None
        return st.lists(items, min_size=lo, max_size=hi, unique_by=unique)
    if types == "object" or "properties" in node:
        props = node.get("properties", {})
        required = set(node.get("required", []))
        fixed = {k: strategy(v, doc, depth + 1, k) for k, v in props.items() if k in required}
        optional = {k: strategy(v, doc, depth + 1, k) for k, v in props.items() if k not in required}
        base = st.fixed_dictionaries(fixed, optional=optional)
        extra = node.get("additionalProperties")
        if isinstance(extra, dict):
            keys = _strings({"minLength": 1, **node.get("propertyNames", {}), "maxLength": 16})
            if name == "facets":  # the corpus's own fields, or every draw is "unknown field"
                keys = st.one_of(st.sampled_from(FIELDS), st.sampled_from(FIELDS), keys)
            more = st.dictionaries(keys, strategy(extra, doc, depth + 1), max_size=min(node.get("maxProperties", 3), 3))
            return st.tuples(base, more).map(lambda t: {**t[1], **t[0]})
        return base
    return st.nothing()


def params_of(method: str) -> st.SearchStrategy[Any]:
    """Valid params for ``method``, named (an object) or positional (an array)."""
    schema = schemas.load_schema(method, "params")
    names = schemas.param_names(method)

    def valid(p: dict) -> bool:
        return schemas.first_error(schemas.validator(method, "params"), p) is None

    named = strategy(schema, schema).filter(valid)

    def shaped(args: tuple[dict, bool]) -> Any:
        p, positional = args
        if not positional:
            return p
        last = max((names.index(k) for k in p), default=-1)
        return [p.get(n) for n in names[: last + 1]]

    return st.tuples(named, st.booleans()).map(shaped)


IN_PROCESS = sorted(m for m in schemas.methods_with_schemas() if m in METHODS and METHODS[m].call is not None)


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    import tempfile

    from autodoc.config import Settings
    from autodoc.service import Service

    base = Path(tempfile.mkdtemp(prefix="ad-pp-", dir="/tmp"))
    kb = base / "kb"
    shutil.copytree(CORPORA / "kb", kb, symlinks=True)
    other = base / "other"
    (other / "sub").mkdir(parents=True)
    (other / "a.md").write_text("---\nadr: 7\ntags: [x]\n---\n# A\n\nwords about leases\n")
    (other / "sub" / "b.md").write_text("# B\n\n[[a]] more words\n")
    (base / "file.md").write_text("# not a folder\n")
    SAFE_ROOTS[:] = [str(kb), str(other), str(other / "sub"), str(base / "missing"), str(base / "file.md"), ""]
    svc = Service(Settings.from_env(store=base / "store.db"))
    svc.workspace_add("kb", str(kb), NO_MODEL)
    svc.index("kb")
    try:
        yield svc
    finally:
        svc.close()
        shutil.rmtree(base, ignore_errors=True)


def _reset(svc) -> None:
    """kb as the fixture made it (a drawn workspace.remove, add or configure may have changed it)."""
    names = svc.workspaces()
    for name in names:
        if name != "kb":
            svc.workspace_remove(name)
    if "kb" not in names:
        svc.workspace_add("kb", SAFE_ROOTS[0], NO_MODEL)
        svc.index("kb")
        return
    with svc.store.read() as db:
        from autodoc.store import workspaces as wsrows

        config = wsrows.get_workspace(db, "kb").config
    if config != NO_MODEL:
        with svc.store.write() as db:
            wsrows.set_config(db, wsrows.get_workspace(db, "kb"), NO_MODEL)
        svc.index("kb")


@pytest.mark.timeout(120 + EXAMPLES)  # a long run (AUTODOC_PARAMS_EXAMPLES=1000): configure re-chunks, ~0.15 s a draw
@pytest.mark.parametrize("method", IN_PROCESS)
def test_schema_valid_params_never_answer_32603(service, method):
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
    )
    @given(params=params_of(method))
    def run(params: Any) -> None:
        _reset(service)
        try:
            result = invoke(service, method, params)
        except InternalError as e:
            pytest.fail(f"{method} {json.dumps(params)[:500]}: -32603 {e}")
        except AutodocError:
            pass  # any other code is an answer
        except Exception as e:
            pytest.fail(f"{method} {json.dumps(params)[:500]}: -32603 {type(e).__name__}: {e}")
        else:  # the daemon run with AUTODOC_CHECK_RESULTS answers a result off its schema as -32603
            if method == "server.info":
                return  # the daemon adds socket and watching to the Service's answer
            problems = schemas.result_errors(method, result)
            assert not problems, f"{method} {json.dumps(params)[:500]}: result off its schema: {problems[:3]}"

    run()


def test_every_method_with_a_schema_is_covered():
    """A new method with a params schema joins this test by itself; this names the ones it skips."""
    daemon_only = {m for m in schemas.methods_with_schemas() if m not in IN_PROCESS}
    assert {"search.query", "document.read", "workspace.configure", "session.append"} <= set(IN_PROCESS)
    assert all(m not in METHODS or METHODS[m].call is None for m in daemon_only), daemon_only
